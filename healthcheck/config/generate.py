"""`healthcheck config generate`: the expectations of a known-good node, written as TOML.

Like NHC's nhc-genconf: record what a good node looks like, review it, then deploy it for the class.
Only facts that identify a healthy node of the class are written (counts, models, link widths, rates,
versions, required services and network mounts) — never momentary values (temperatures, load).
"""
from __future__ import annotations

import json
import re
import textwrap
from collections import Counter, defaultdict

from ..core.model import Snapshot

# Network / parallel filesystems worth requiring on every node of a class.
SHARED_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "ceph", "fuse.weka", "wekafs", "glusterfs")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def _toml_key(key) -> str:
    key = str(key)
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _most_common(values):
    values = [v for v in values if v is not None]
    return Counter(values).most_common(1)[0][0] if values else None


def _only(values):
    """The one value all of ``values`` share (None when they differ or none is known)."""
    known = {v for v in values if v is not None}
    return known.pop() if len(known) == 1 and None not in values else None


def _gpus(gpus: list, s: dict, thresholds: dict) -> None:
    """GPU count and model, per model group when the node has several models."""
    s["gpu_count"] = len(gpus)
    groups: dict[str, list] = defaultdict(list)
    for g in gpus:
        groups[g.name or "?"].append(g)
    min_links = {}
    for model, members in groups.items():
        links = [sum(1 for link in g.nvlinks if link.active) for g in members if g.nvlinks is not None]
        if links:
            min_links[model] = min(links)
    if len(groups) == 1:
        model = next(iter(groups))
        if model != "?":
            s["gpu_model"] = model
    else:  # several models: one model name would fail the others (gpu.count judges a substring)
        s["gpu_models"] = {model: {k: v for k, v in (("count", len(members)), ("nvlinks", min_links.get(model)))
                                   if v is not None}
                           for model, members in sorted(groups.items())}
    if min_links and (len(set(min_links.values())) == 1 or len(groups) == 1):
        s["nvlinks_per_gpu"] = min(min_links.values())
    if any(g.fabric_cluster_uuid and g.fabric_cluster_uuid.replace("-", "").strip("0") for g in gpus):
        # the node is in a multi-node NVLink domain (a cluster UUID set): gpu.fabric holds the class to it and
        # nvlink.imex runs; the domain's size is not seen from one node (set it: 72 for an NVL72 rack)
        s["nvlink_domain"] = {"name": "nvlink"}
    if all(g.persistence_mode is True for g in gpus):
        thresholds["gpu.persistence"] = {"require": True}
    limit = _only([g.power_limit_w for g in gpus])
    if limit and len(groups) == 1:  # thresholds are per check, not per model: one model only
        thresholds["gpu.power"] = {"expected_limit_w": limit, "low_limit_action": "fail"}


def _pcie(links: list) -> dict:
    """Per device kind when every device of the kind trained the same; otherwise per PCI address, so
    that mixed cards (a Gen4 NIC beside Gen5 HCAs) are each held to their own link."""
    pcie: dict = {}
    for kind in ("gpu", "hca", "nvswitch"):
        of_kind = [p for p in links if p.kind == kind]
        facts = {(p.gen_max, p.width_max) for p in of_kind}
        if len(facts) == 1:
            gen, width = facts.pop()
            spec = {k: v for k, v in (("gen", gen), ("width", width)) if v}
            if spec:
                pcie[kind] = spec
            continue
        for p in sorted(of_kind, key=lambda p: p.pci_bus_id):
            spec = {k: v for k, v in (("gen", p.gen_max), ("width", p.width_max)) if v}
            if spec:
                pcie[p.pci_bus_id] = spec
    return pcie


def _natural(port) -> tuple:
    """mlx5_2 before mlx5_10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", port.device)], port.port


def _ib(ports: list) -> dict:
    """Every port as it is (CA type, firmware, link layer, active, rate when active), plus the
    node-wide count, layer and devices of the main layer's active ports (and its rate and firmware
    when they are the same on all of them)."""
    from ..checks.infiniband import is_active, port_layer

    ib: dict = {}
    active = [p for p in ports if is_active(p)]
    if active:
        layer = _most_common(port_layer(p) for p in active)
        same = [p for p in active if port_layer(p) == layer]
        ib = {"ports": len(same), "link_layer": layer, "rate_gbps": _only([p.rate_gbps for p in same]),
              "devices": sorted({p.device for p in same}), "firmware": _only([p.firmware for p in same])}
    per_port = {}
    for p in sorted(ports, key=_natural):
        up = is_active(p)
        facts = (("ca_type", p.hca_type), ("firmware", p.firmware), ("link_layer", port_layer(p)),
                 ("active", up), ("rate_gbps", p.rate_gbps if up else None))
        per_port[p.component] = {k: v for k, v in facts if v is not None}
    if per_port:
        ib["per_port"] = per_port
    return {k: v for k, v in ib.items() if v is not None}


# Checks that are informational until configured, and the generated key that makes each one real.
MADE_REAL_BY = {"host.cpu": "cpu", "host.memory": "mem_total_gib", "host.services": "services",
                "sw.versions": "versions", "ib.port.state": "ib", "ib.port.rate": "ib", "ib.hca.firmware": "ib",
                "host.swap": "thresholds.host.swap", "gpu.persistence": "thresholds.gpu.persistence",
                "gpu.power": "thresholds.gpu.power", "storage.count": "nvme_count", "nvlink.imex": "nvlink_domain"}


def expectations_of(snap: Snapshot) -> dict:
    """The class settings (same keys as a [class.NAME] table) a healthy ``snap`` implies."""
    s: dict = {}
    thresholds: dict = {}
    gpus = [g for g in (snap.gpus or []) if not g.lost]
    if gpus:
        _gpus(gpus, s, thresholds)
    host = snap.host
    if host:
        cpu = {k: v for k, v in (("sockets", host.cpu_sockets), ("cores", host.cpu_cores),
                                  ("threads", host.cpu_threads)) if v}
        if cpu:
            s["cpu"] = cpu
        if host.mem_total_kib:
            s["mem_total_gib"] = round(host.mem_total_kib / 1024 / 1024, 1)
        if host.services:
            s["services"] = sorted(name for name, running in host.services.items() if running)
        if host.mounts:
            s["mounts"] = sorted({m.mountpoint for m in host.mounts if m.fstype in SHARED_FS})
        if host.swap_total_kib == 0:  # no swap on the good node: swap on a sibling is a deviation
            thresholds["host.swap"] = {"forbid": True}
    pcie = _pcie(snap.pcie_links or [])
    if pcie:
        s["pcie"] = pcie
    ib = _ib(snap.ib_ports or [])
    if ib:
        s["ib"] = ib
    nvme = [d for d in snap.storage or [] if d.kind == "nvme"]
    if nvme:  # a node class without NVMe writes nothing: storage.count stays informational
        s["nvme_count"] = len(nvme)
    if snap.versions:
        wanted = ("driver", "cuda", "nccl", "ofed", "rdma_core", "kernel", "vbios")
        s["versions"] = {k: snap.versions[k] for k in wanted if k in snap.versions and "," not in snap.versions[k]}
    if thresholds:
        s["thresholds"] = thresholds
    return {k: v for k, v in s.items() if v not in (None, [], {})}


def still_informational(settings: dict) -> list[str]:
    """Checks that stay informational (never FAIL) with ``settings``: their FAIL needs a site's policy
    (a threshold), not a fact of the recorded node."""
    from ..checks.catalog_doc import fail_mode
    from ..checks.registry import load_all

    def written(key: str) -> bool:
        if key.startswith("thresholds."):
            return key[len("thresholds."):] in settings.get("thresholds", {})
        return key in settings

    return [name for name, spec in load_all().items()
            if not fail_mode(spec)[0] and not (name in MADE_REAL_BY and written(MADE_REAL_BY[name]))]


def _emit(lines: list[str], path: str, table: dict) -> None:
    """``[path]`` with its plain keys, then its sub-tables: a table of tables is written one inline
    table a line (``"mlx5_0:1" = { ... }``)."""
    lines += ["", f"[{path}]"]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
    for key, sub in table.items():
        if not isinstance(sub, dict):
            continue
        if sub and all(isinstance(v, dict) for v in sub.values()):
            lines += ["", f"[{path}.{_toml_key(key)}]"]
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in sub.items()]
        else:
            _emit(lines, f"{path}.{_toml_key(key)}", sub)


def generate_toml(snap: Snapshot, class_name: str, nodes: str) -> str:
    settings = expectations_of(snap)
    path = f"class.{_toml_key(class_name)}"
    lines = [
        f"# Expectations generated by `healthcheck config generate` from {snap.node} at {snap.taken_at}.",
        "# Review before deploying: this records what that node looked like, healthy or not.",
        "# Every HCA port and GPU model group is recorded on its own, so the node passes its own file",
        "# and a node that differs from it in any recorded fact fails.",
        "",
        f"[{path}]",
        f"nodes = {_toml_value(nodes)}",
    ]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in settings.items() if not isinstance(v, dict)]
    for key, table in settings.items():
        if isinstance(table, dict):
            if all(isinstance(v, dict) for v in table.values()):
                lines += ["", f"[{path}.{_toml_key(key)}]"]
                lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
            else:
                _emit(lines, f"{path}.{_toml_key(key)}", table)
    informational = still_informational(settings)
    if informational:
        lines += ["", "# Still informational (they never FAIL) until configured; `healthcheck checks` says how:"]
        lines += textwrap.wrap(", ".join(informational), 96, initial_indent="#   ", subsequent_indent="#   ",
                               break_on_hyphens=False)
    return "\n".join(lines) + "\n"
