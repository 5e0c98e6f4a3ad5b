"""What a loaded config is: node classes matched by node-set patterns, per class what the hardware must
look like, thresholds and per-context check lists, and the subsystems' sections.

Matching: the first ``[class.NAME]`` whose ``nodes`` pattern contains the node wins; ``[defaults]``
applies to every node and each class overrides it key by key (tables such as thresholds, versions and
pcie merge one level deep). Errors name the file and line (``ConfigError.__str__`` -> ``"path:12:
message"``). Imports neither the loading nor the schema (they import this); the section registry only
when a section is asked for.
"""
from __future__ import annotations

from ..core.expectations import (Expectations, NvlinkDomainExpect, PcieExpect, gpu_model_expectations,
                                 ib_port_expectations)
from ..core.struct import record as dataclass, field
from .slurm_settings import SlurmSettings
from ..policies.xid import load_xid_policy
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401


class ConfigError(ValueError):
    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        message = with_suggestion(message)
        super().__init__(message)
        self.message, self.path, self.line = message, path, line

    def __str__(self) -> str:
        where = self.path or "<config>"
        return f"{where}:{self.line}: {self.message}" if self.line else f"{where}: {self.message}"


def with_suggestion(message: str) -> str:
    """``message`` with "did you mean 'x'?" where it names an unknown key, section, check or threshold
    and lists what is allowed (``unknown key 'gpus' ... (allowed: gpu, ...)``) and one allowed name is
    close to it. Only error messages pass here (difflib and re are imported then)."""
    if not message.startswith(("unknown", "thresholds for unknown")) or "did you mean" in message:
        return message
    import difflib
    import re

    name = re.search(r"'([^']{1,200})'", message)
    listed = re.search(r"\((?:allowed|expected|known):? ([^()]{1,4000})\)", message)
    if not name:
        return message
    if listed:
        candidates = [c.strip().strip("[]").strip("'\"") for c in listed.group(1).split(",")]
        candidates = [c.split(".")[-1] if c.startswith(("class.", "defaults")) is False and "." in c else c
                      for c in candidates]
    elif "check" in message:
        try:
            from ..checks.registry import index

            candidates = list(index())
        except Exception:  # noqa: BLE001 - a suggestion is a courtesy, never a second error
            return message
    else:
        return message
    word, candidates = name.group(1), [c for c in candidates if c]
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.8)  # a typo: state_dri
    if not close:  # a near name: gpus -> gpu_count, gpu_model, ...
        prefix = max((len(_common_prefix(word, c)) for c in candidates), default=0)
        close = [c for c in candidates if prefix >= 3 and len(_common_prefix(word, c)) == prefix][:3]
    if not close:
        close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    if not close:
        return message
    return f"{message}; did you mean {' or '.join(repr(c) for c in close)}?"


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


@dataclass
class NodeClass:
    name: str
    nodes: str
    settings: dict[str, Any]
    _nodeset: Any = None

    def matches(self, node: str) -> bool:
        if self._nodeset is None:
            from ClusterShell.NodeSet import NodeSet  # lazy: only a file with node classes needs it

            self._nodeset = NodeSet(self.nodes)
        return node in self._nodeset


@dataclass
class Config:
    path: str | None
    defaults: dict[str, Any] = field(default_factory=dict)
    classes: list[NodeClass] = field(default_factory=list)
    xid: dict[str, dict[str, Any]] = field(default_factory=dict)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    # name -> what its validator returned, for the sections of the file (config.sections.SECTIONS)
    sections: dict[str, Any] = field(default_factory=dict)
    # name -> the raw table of a section not validated yet (the hooks' load: see Config.section)
    deferred: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> Any:
        """The settings of section ``name`` (``"fleet"``, ``"fabric.counters"``, ...): what its
        validator returns for the file's table, or for an empty table when the file has none. A table
        the hooks' load left raw is validated now (a bad one: ConfigError naming the file)."""
        from .sections import SECTION_ERRORS, SECTIONS, section_message  # lazy: the hooks' cached load never asks

        entry = SECTIONS.get(name)
        if entry is None:
            raise KeyError(f"no config section {name!r} (known: {', '.join(SECTIONS)})")
        if name == "slurm":
            return self.slurm
        if name in self.sections:
            return self.sections[name]
        try:
            return entry.validator()(self.deferred.get(name, {}))
        except SECTION_ERRORS as exc:
            raise ConfigError(section_message(name, exc), self.path) from None

    def _set(self, name: str, value: Any) -> None:
        self.sections[name] = value
        self.deferred.pop(name, None)

    # the sections older than the registry, under their old names
    history_db_url = property(lambda self: self.section("history"),
                              lambda self, value: self._set("history", value), doc="[history] db_url")
    burnin = property(lambda self: self.section("burnin"), lambda self, value: self._set("burnin", value),
                      doc="[burnin], validated (burnin/settings.py): the table burnin.settings.resolve takes")
    sweep = property(lambda self: self.section("sweep"), lambda self, value: self._set("sweep", value),
                     doc="[sweep], validated (sweep/settings.py)")
    topology = property(lambda self: self.section("topology"), lambda self, value: self._set("topology", value),
                        doc="[topology.LEVEL] GROUP = nodeset (topology.py)")

    def node_class(self, node: str) -> NodeClass | None:
        return next((c for c in self.classes if c.matches(node)), None)

    def effective(self, node: str) -> tuple[str | None, dict[str, Any]]:
        """The merged settings for ``node`` (defaults overlaid by its class)."""
        cls = self.node_class(node)
        merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.defaults.items()}
        if cls is not None:
            for key, value in cls.settings.items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = {**merged[key], **value}
                else:
                    merged[key] = value
        return (cls.name if cls else None), merged

    def expectations_for(self, node: str) -> Expectations:
        name, s = self.effective(node)
        try:
            policy = load_xid_policy(overrides=self.xid or None)
        except ValueError as exc:
            raise ConfigError(f"[xid]: {exc}", self.path) from exc
        return build_expectations(name, s, policy)


def build_expectations(name: str | None, s: dict[str, Any], policy) -> Expectations:
    ib = s.get("ib", {})
    cpu = s.get("cpu", {})
    pcie = s.get("pcie", {})
    by_kind = {k: PcieExpect(v.get("gen"), v.get("width")) for k, v in pcie.items() if ":" not in k}
    by_addr = {k.lower(): PcieExpect(v.get("gen"), v.get("width")) for k, v in pcie.items() if ":" in k}
    return Expectations(
        node_class=name,
        gpu_count=s.get("gpu_count"),
        gpu_model=s.get("gpu_model"),
        gpu_models=gpu_model_expectations(s.get("gpu_models")),
        nvlinks_per_gpu=s.get("nvlinks_per_gpu"),
        nvme_count=s.get("nvme_count"),
        pcie_by_kind=by_kind,
        pcie_by_address=by_addr,
        ib_port_count=ib.get("ports"),
        ib_rate_gbps=ib.get("rate_gbps"),
        ib_link_layer=ib.get("link_layer"),
        ib_devices=tuple(ib["devices"]) if "devices" in ib else None,
        hca_firmware=ib.get("firmware"),
        ib_per_port=ib_port_expectations(ib.get("per_port")),
        versions={k: str(v) for k, v in s.get("versions", {}).items()},
        services=tuple(s.get("services", ())),
        mounts=tuple(s.get("mounts", ())),
        ro_mounts=tuple(s.get("ro_mounts", ())),
        cpu_sockets=cpu.get("sockets"),
        cpu_cores=cpu.get("cores"),
        cpu_threads=cpu.get("threads"),
        mem_total_gib=s.get("mem_total_gib"),
        gpudirect=s.get("gpudirect"),
        nvlink_domain=(NvlinkDomainExpect(s["nvlink_domain"].get("size"), s["nvlink_domain"].get("name"))
                       if isinstance(s.get("nvlink_domain"), dict) else None),
        thresholds={k: dict(v) for k, v in s.get("thresholds", {}).items()},
        bundle=s.get("bundle"),
        sysfs_root=s.get("sysfs_root", "/sys"),
        proc_root=s.get("proc_root", "/proc"),
        checks={k: tuple(v) for k, v in s.get("checks", {}).items()},
        xid_policy=policy,
    )


def default_expectations() -> Expectations:
    """What a node is judged against without any config file."""
    return build_expectations(None, {}, load_xid_policy())


def overlapping_classes(cfg: Config, limit: int | None = None) -> list[tuple[str, str, str]]:
    """Pairs of classes whose node sets intersect (the first one in the file wins): (a, b, sample), in
    file order of a then b; sample is the folded node set both name. At most ``limit`` pairs (default
    MAX_OVERLAPS: a longer list means the file has more to fix); linear in the nodes the classes name
    (:mod:`healthcheck.config.overlap`)."""
    from .overlap import MAX_OVERLAPS, overlapping

    return overlapping([(c.name, c.nodes) for c in cfg.classes], MAX_OVERLAPS if limit is None else limit)
