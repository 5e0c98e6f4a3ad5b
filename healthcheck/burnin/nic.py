"""The NIC phase of the burn-in (I/O; judged in judge_nic.py): traffic through every rail of one node,
so that the sweep's one-node burn-in exercises the HCAs and the GPU<->NIC path that otherwise carry
traffic only in a multi-node job.

1. **Loopback per HCA port** (``burnin.nic.loopback``): ``ib_write_bw -d HCA -i PORT`` as server and as
   client (``127.0.0.1``) on this node, through the one subprocess seam (the pair runner of
   :mod:`healthcheck.burnin.rdma`), for ``nic_duration_s``. From the memory of the GPU nearest the HCA
   on the PCI tree (``--use_cuda_bus_id=ADDR``, or ``--use_cuda=INDEX`` with CUDA_DEVICE_ORDER=PCI_BUS_ID)
   where ``ib_write_bw --help`` shows the build has CUDA (:mod:`healthcheck.parsers.perftest_help`),
   else from host memory; the result says which and why. Only ACTIVE ports are measured.
2. **NIC-only all_reduce** (``burnin.nic.nccl``): ``all_reduce_perf -g <GPUs>`` with
   NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1, NCCL_NVLS_ENABLE=0 (no NVLink, no host memory, no NVLink
   SHARP), NCCL_IB_DISABLE=0 and NCCL_NET=IB (the IB transport or a clear failure, never a silent fall
   back to sockets).

Each part is SKIPped with its reason where the node has no HCA (or no active port), no perftest, fewer
than two GPUs, or no nccl-tests. The floors are data (``healthcheck/data/nic_loopback.toml``).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

from ..core.model import Finding, Status
from .judge_nic import (CHECK_LOOPBACK, CHECK_NCCL, LineRate, LoopbackRun, judge_loopback, judge_nccl_nic)

TOOL = "ib_write_bw"
NCCL_NIC_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0",
                "NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"}


@dataclass(frozen=True)
class NicReferences:
    loopback_fraction: float
    loopback_source: str
    nccl_fraction: float
    nccl_source: str
    large_bytes: int
    message_bytes: int
    qps: int
    base_port: int
    server_start_s: float
    connect_retries: int
    nccl_max_bytes: int
    nccl_iters: int


def references() -> NicReferences:
    """The packaged floors and run settings (``healthcheck/data/nic_loopback.toml``)."""
    doc = tomllib.loads(resources.files("healthcheck.data").joinpath("nic_loopback.toml").read_text())
    lo, nc, run = doc["loopback"], doc["nccl"], doc["run"]
    return NicReferences(float(lo["fraction"]), lo["source"], float(nc["fraction"]), nc["source"],
                         int(nc["large_bytes"]), int(run["message_bytes"]), int(run["qps"]), int(run["base_port"]),
                         float(run["server_start_s"]), int(run["connect_retries"]), int(run["nccl_max_bytes"]),
                         int(run["nccl_iters"]))


# ------------------------------------------------------------------------------------------ facts

def line_rate(device: str, port: int, reported: float | None, exp: Any) -> LineRate | None:
    """The rail's line rate: the class's per-port rate, else its ``ib.rate_gbps``, else what the port
    reports (pure)."""
    per_port = getattr(exp, "ib_per_port", None) or {}
    want = per_port.get(f"{device}:{port}")
    if want is not None and want.rate_gbps:
        return LineRate(float(want.rate_gbps), "class ib.per_port")
    if exp is not None and getattr(exp, "ib_rate_gbps", None):
        return LineRate(float(exp.ib_rate_gbps), "class ib.rate_gbps")
    if reported:
        return LineRate(float(reported), "port rate")
    return None


def perftest_features(tool: str = TOOL, timeout_s: float = 10.0, run=None):
    """(PerftestFeatures, None) from ``tool --help``; (None, why) when the tool is absent or prints
    no help."""
    from ..parsers import ParseError
    from ..parsers.perftest_help import parse_help
    from .tools_run import run_tool

    res = (run or run_tool)("perftest", [tool, "--help"], timeout_s)
    if res.missing:
        return None, f"{tool} not installed (perftest)"
    text = res.stdout + "\n" + res.stderr
    if not text.strip():
        return None, f"{tool} --help printed nothing ({res.error or f'exit status {res.returncode}'})"
    try:
        return parse_help(text), None
    except ParseError as exc:
        return None, f"{tool} --help: {exc}"


def nearest_gpus(sysfs_root: str, hcas: dict[str, str | None], gpus: list[str]) -> dict[str, str | None]:
    """HCA name -> the PCI address of the GPU nearest it on the PCI tree (None: no GPU, or the HCA's
    address unknown)."""
    from ..probes.gpudirect import common_depth, pci_chain

    chains = {g: pci_chain(sysfs_root, g) for g in gpus}
    chains = {g: c for g, c in chains.items() if c}
    out: dict[str, str | None] = {}
    for name, address in hcas.items():
        chain = pci_chain(sysfs_root, address) if address else []
        best, depth = None, -1
        for gpu in sorted(chains) if chain else ():
            d = common_depth(chain, chains[gpu])
            if d > depth:
                best, depth = gpu, d
        out[name] = best
    return out


def loopback_argv(device: str, port: int, tcp_port: int, duration_s: float, refs: NicReferences,
                  gpu: str | None, gpu_index: int | None, features) -> tuple[list[str], list[str], str | None, str]:
    """(server argv, client argv, the GPU used or None, the note on the memory) of one loopback (pure)."""
    from .rdma import RdmaSettings, perftest_args

    s = RdmaSettings(duration_s=max(1, int(round(duration_s))), message_bytes=refs.message_bytes, qps=refs.qps)
    args = perftest_args(TOOL, device, tcp_port, s) + ["-i", str(port)]
    used, note = None, ""
    if gpu is None:
        note = "no GPU on this node" if gpu_index is None else "no GPU found on the HCA's PCI tree"
    elif features is None or not (features.cuda or features.cuda_bus_id):
        note = "perftest built without CUDA"
    elif features.cuda_bus_id:
        args.append(f"--use_cuda_bus_id={gpu}")
        used = gpu
    elif gpu_index is not None:
        args.append(f"--use_cuda={gpu_index}")
        used = gpu
    return args, args + ["127.0.0.1"], used, note


# ------------------------------------------------------------------------------------------ the phase

Runner = Callable[[Any], Any]   # rdma.PairCommand -> rdma.PairOutput


def run_loopbacks(ports: list[dict], gpus: list[str], nearest: dict[str, str | None], features,
                  memory: str, duration_s: float, timeout_s: float, refs: NicReferences,
                  runner: Runner | None = None) -> list[LoopbackRun]:
    """One loopback per port of ``ports`` (``{"device", "port", "state", "rate_gbps"}``), one after the
    other (each HCA alone on its PCIe link)."""
    from ..parsers.perftest import parse_perftest
    from ..safeio import subproc
    from .judge_rdma import pair_value
    from .rdma import PairCommand, SubprocPairRunner

    if runner is None:
        env = subproc.node_env()
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # --use_cuda=INDEX counts GPUs in PCI order, as `gpus` is sorted
        runner = SubprocPairRunner(refs.server_start_s, refs.connect_retries, env)
    ordered = sorted(gpus)
    out = []
    for i, p in enumerate(ports):
        run = LoopbackRun(p["device"], int(p["port"]))
        if str(p.get("state") or "").upper() != "ACTIVE":
            run.skipped = f"port {p.get('state') or 'state unknown'}: not measured (ib.port judges the link)"
            out.append(run)
            continue
        gpu = nearest.get(p["device"]) if memory == "auto" else None
        index = ordered.index(gpu) if gpu in ordered else (None if not ordered else -1)  # -1: GPUs, none near
        server, client, run.gpu_memory, run.memory_note = loopback_argv(
            run.device, run.port, refs.base_port + i, duration_s, refs, gpu, index, features)
        if memory == "host":
            run.memory_note = "nic_gpu_memory = \"host\""
        run.argv = client
        cmd = PairCommand(i, run.device, TOOL, "localhost", "localhost", refs.base_port + i, server, client, timeout_s)
        try:
            res = runner(cmd)
        except Exception as exc:  # noqa: BLE001 - a runner's failure is the port's result, never the phase's
            run.error = f"runner failed: {type(exc).__name__}: {exc}"
            out.append(run)
            continue
        sides = [parse_perftest(t) if t and t.strip() else None for t in (res.client_text, res.server_text)]
        run.value_gbps, run.error, run.warnings = pair_value(*sides)
        if res.error:
            run.error = res.error if run.value_gbps is None else f"{res.error} (after a result)"
        run.duration_s = res.duration_s
        out.append(run)
    return out


def run_nccl(nccl_dir: str, gpus: int, timeout_s: float, node: str, refs: NicReferences, environ=None):
    """``all_reduce_perf -g GPUS`` with the NICs as the only path (NCCL_NIC_ENV)."""
    from ..safeio import subproc
    from .nccl_run import Sweep, run_on_node

    env = subproc.node_env(environ)
    env.update(NCCL_NIC_ENV)
    sweep = Sweep(max_bytes=refs.nccl_max_bytes, iters=refs.nccl_iters)
    return run_on_node(nccl_dir, "all_reduce", gpus, sweep, timeout_s, node, env=env)


def phase(ctx, runner: Runner | None = None, help_run=None, sysfs_root: str | None = None) -> list[Finding]:
    """The node phase ``nic`` (a :class:`healthcheck.burnin.node_run.NodeContext`)."""
    s = ctx.settings
    refs = references()
    root = sysfs_root or getattr(ctx, "sysfs_root", "/sys")
    snap, exp = ctx.before, getattr(ctx, "expectations", None)
    ports = _ports(snap, root)
    gpus = _gpus(snap, root)
    loop_fraction = s.nic_loopback_fraction or refs.loopback_fraction
    nccl_fraction = s.nic_nccl_fraction or refs.nccl_fraction
    record: dict[str, Any] = {"gpus": gpus, "ports": ports, "loopback_fraction": loop_fraction,
                              "nccl_fraction": nccl_fraction}
    ctx.extra["nic"] = record
    if not ports:
        why = "no RDMA device (HCA) on this node"
        return [Finding(CHECK_LOOPBACK, Status.SKIP, why), Finding(CHECK_NCCL, Status.SKIP, f"{why}: nothing to "
                        "send through")]
    findings: list[Finding] = []
    features, why = perftest_features(run=help_run)
    record["perftest"] = features.to_dict() if features else why
    if features is None:
        findings.append(Finding(CHECK_LOOPBACK, Status.SKIP, why or "perftest not usable"))
    else:
        hcas = {p["device"]: p.get("pci_bus_id") for p in ports}
        nearest = nearest_gpus(root, hcas, gpus) if gpus else {}
        runs = run_loopbacks(ports, gpus, nearest, features, s.nic_gpu_memory, s.nic_duration_s, s.nic_timeout_s,
                             refs, runner)
        record["loopback"] = [r.to_dict() for r in runs]
        for r, p in zip(runs, ports):
            findings.append(judge_loopback(r, line_rate(r.device, r.port, p.get("rate_gbps"), exp), loop_fraction,
                                           refs.loopback_source))
    active = [p for p in ports if str(p.get("state") or "").upper() == "ACTIVE"]
    if len(gpus) < 2:
        findings.append(Finding(CHECK_NCCL, Status.SKIP, f"{len(gpus)} GPU(s): no ring to send through the NICs"))
    elif not active:
        findings.append(Finding(CHECK_NCCL, Status.SKIP, "no active HCA port: nothing to send through"))
    else:
        run = run_nccl(s.nccl_dir, len(gpus), s.nccl_timeout_s, ctx.node, refs)
        record["nccl"] = {"argv": run.argv, "env": dict(NCCL_NIC_ENV), "error": run.error,
                          "result": run.result.to_dict() if run.result else None}
        rates = [line_rate(p["device"], int(p["port"]), p.get("rate_gbps"), exp) for p in active]
        rates = [r for r in rates if r is not None]
        slowest = min(rates, key=lambda r: r.gbps) if rates else None
        findings.append(judge_nccl_nic(run, slowest, nccl_fraction, len({p["device"] for p in active}), len(gpus),
                                       refs.large_bytes))
    return findings


def _ports(snap, sysfs_root: str) -> list[dict]:
    """The node's HCA ports: the checks phase's snapshot, else sysfs (without the counters)."""
    ib = getattr(snap, "ib_ports", None) if snap is not None else None
    if ib is None:
        from ..probes.infiniband import probe_ib_ports

        try:
            ib = probe_ib_ports(sysfs_root, counters=False)
        except OSError:
            ib = []
    return [{"device": p.device, "port": p.port, "state": p.state, "rate_gbps": p.rate_gbps,
             "link_layer": p.link_layer, "pci_bus_id": p.pci_bus_id} for p in ib]


def _gpus(snap, sysfs_root: str) -> list[str]:
    """The GPUs' PCI addresses, sorted: the snapshot's, else the PCI bus."""
    if snap is not None and getattr(snap, "gpu_pci_devices", None):
        return sorted(snap.gpu_pci_devices)
    if snap is not None and getattr(snap, "gpus", None):
        found = sorted(g.pci_bus_id for g in snap.gpus if g.pci_bus_id)
        if found:
            return found
    from ..probes.pcibus import nvidia_gpu_present

    return nvidia_gpu_present(sysfs_root)


__all__ = ["phase", "references", "line_rate", "perftest_features", "nearest_gpus", "loopback_argv",
           "run_loopbacks", "run_nccl", "NCCL_NIC_ENV", "NicReferences"]
