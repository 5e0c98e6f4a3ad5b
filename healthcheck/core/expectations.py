"""What a node is expected to look like: the resolved view of the config for one node.

Loaded and validated by :mod:`healthcheck.config`; read (never changed) by the checks. Every field is
optional: a check whose expectation is unset judges only what needs no expectation (uncorrected ECC,
pending remaps, width below the device's own max, ...).
"""
from __future__ import annotations

from .struct import record as dataclass, field
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401


@dataclass(frozen=True)
class XidRule:
    xid: int
    action: str  # "fail" | "warn" | "ignore"
    name: str = ""
    # Count events no older than this many seconds before the snapshot (0 = since boot / whole log).
    window_s: float = 0.0
    # Act only when at least this many events fall in the window (storms of warn-level classes).
    min_count: int = 1
    # NVLink5 Xids (144-150) say in their message whether the error was fatal ("NETIR_LINK_EVT Fatal XC0
    # ...", "RLW_RXPIPE Nonfatal XC0 ..."): the action for each, where set; ``action`` when the message
    # says neither (issue 33).
    fatal_action: str | None = None
    nonfatal_action: str | None = None

    def action_for(self, message: str | None) -> str:
        """The action for one event of this Xid, by the severity word its message carries."""
        if self.fatal_action is None and self.nonfatal_action is None:
            return self.action
        severity = message_severity(message)
        if severity == "fatal" and self.fatal_action is not None:
            return self.fatal_action
        if severity == "nonfatal" and self.nonfatal_action is not None:
            return self.nonfatal_action
        return self.action


def message_severity(message: str | None) -> str | None:
    """"fatal" / "nonfatal" when an Xid message (the text after the Xid number) names its severity the way
    the NVLink5 Xids print it: the word right before ``XC<n>`` ("NETIR_LINK_EVT Fatal XC0 i0 Link 00 (...)",
    "MSE degraded Nonfatal XC0 ..."). No regular expression (the prolog compiles none on a healthy node)."""
    words = (message or "").split(None, 5)[:5]
    for word, after in zip(words, words[1:]):
        if after.startswith("XC"):
            word = word.lower()
            if word == "fatal":
                return "fatal"
            if word in ("nonfatal", "non-fatal"):
                return "nonfatal"
    return None


@dataclass(frozen=True)
class XidPolicy:
    rules: dict[int, XidRule] = field(default_factory=dict)
    # Action for an Xid the policy does not list.
    unknown_action: str = "warn"
    unknown_window_s: float = 0.0
    # NVSwitch SXids (kernel log "nvidia-nvswitchN: SXid (PCI:...): NNNNN, Fatal|Non-fatal, ..."): the
    # action by the severity the line states (issue 33); a line without one gets the non-fatal action.
    sxid_fatal_action: str = "fail"
    sxid_nonfatal_action: str = "warn"

    def rule(self, xid: int) -> XidRule:
        found = self.rules.get(xid)
        if found is not None:
            return found
        return XidRule(xid, self.unknown_action, "unlisted Xid", self.unknown_window_s, 1)


@dataclass(frozen=True)
class PcieExpect:
    gen: int | None = None
    width: int | None = None


@dataclass(frozen=True)
class IbPortExpect:
    """What one HCA port looked like on the node the expectations were recorded from
    (``[class.NAME.ib.per_port] "mlx5_0:1" = { ... }``); unset fields are not judged."""

    ca_type: str | None = None  # "MT4129" (ConnectX-7)
    firmware: str | None = None
    rate_gbps: float | None = None  # recorded for active ports only
    link_layer: str | None = None  # "InfiniBand" | "Ethernet"
    active: bool | None = None  # True: the port must be ACTIVE/LinkUp, whatever its link layer


@dataclass(frozen=True)
class GpuModelExpect:
    """One GPU model group of a node with several models (``[class.NAME.gpu_models]``)."""

    count: int | None = None
    nvlinks: int | None = None  # active NVLinks per GPU of this model


@dataclass(frozen=True)
class NvlinkDomainExpect:
    """The class's GPUs sit in a multi-node NVLink domain (GB200/GB300 NVL72 and the like:
    ``nvlink_domain = { size = 72, name = "block" }``): the fabric's clique and cluster UUID are judged
    (gpu.fabric) and IMEX runs (nvlink.imex). Either key may be left out: the table's presence declares it."""

    size: int | None = None  # GPUs in one domain (72 for an NVL72 rack)
    name: str | None = None  # what the site calls one domain ("block": a Slurm topology block, "rack")


def ib_port_expectations(raw: dict[str, Any] | None) -> dict[str, IbPortExpect]:
    """``{"mlx5_0:1": {ca_type, firmware, rate_gbps, link_layer, active}}`` (validated) -> expectations."""
    return {key: IbPortExpect(v.get("ca_type"), v.get("firmware"),
                              float(v["rate_gbps"]) if v.get("rate_gbps") is not None else None,
                              v.get("link_layer"), v.get("active"))
            for key, v in (raw or {}).items()}


def gpu_model_expectations(raw: dict[str, Any] | None) -> dict[str, GpuModelExpect]:
    return {name: GpuModelExpect(v.get("count"), v.get("nvlinks")) for name, v in (raw or {}).items()}


@dataclass(frozen=True)
class Expectations:
    node_class: str | None = None
    gpu_count: int | None = None
    gpu_model: str | None = None  # substring match against the GPU name ("H100 80GB HBM3")
    # Nodes with several GPU models: full GPU name -> count (and NVLinks) of that model group.
    gpu_models: dict[str, GpuModelExpect] = field(default_factory=dict)
    nvlinks_per_gpu: int | None = None
    nvme_count: int | None = None  # NVMe controllers the node must show (storage.count)
    # PCIe expectations per device kind ("gpu", "hca", "nvswitch") and per PCI address.
    pcie_by_kind: dict[str, PcieExpect] = field(default_factory=dict)
    pcie_by_address: dict[str, PcieExpect] = field(default_factory=dict)
    ib_port_count: int | None = None
    ib_rate_gbps: float | None = None
    ib_link_layer: str | None = None
    ib_devices: tuple[str, ...] | None = None  # exact device names expected (mlx5_0, ...)
    hca_firmware: str | None = None
    # Per HCA port ("mlx5_0:1"): CA type, firmware, rate, link layer, whether it must be active.
    # Wins over the node-wide ib_* values above for the ports it names.
    ib_per_port: dict[str, IbPortExpect] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # driver, cuda, nccl, ofed, rdma_core, kernel, vbios
    services: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()  # mount points that must be present (and rw unless listed in ro_mounts)
    ro_mounts: tuple[str, ...] = ()
    cpu_sockets: int | None = None
    cpu_cores: int | None = None
    cpu_threads: int | None = None
    mem_total_gib: float | None = None
    # The class sends GPU memory over RDMA (GPUDirect): the gpudirect.* checks FAIL where it is not ready
    gpudirect: bool | None = None
    # The class's GPUs form a multi-node NVLink domain (issue 33); None: not declared (single-node NVLink,
    # HGX B200/H100: clique 0 and an all-zero cluster UUID are normal there, nvlink.imex skips)
    nvlink_domain: NvlinkDomainExpect | None = None
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)  # check -> key -> value
    checks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # context -> check globs
    xid_policy: XidPolicy = field(default_factory=XidPolicy)
    # Read the node's hardware from this bundle ("{node}" is replaced) instead of probing it live:
    # for tests, demos and offline triage of a whole cluster's recordings.
    bundle: str | None = None
    # Where the host's /sys and /proc are (a container mounts them elsewhere).
    sysfs_root: str = "/sys"
    proc_root: str = "/proc"

    def bundle_for(self, node: str) -> str | None:
        return self.bundle.replace("{node}", node) if self.bundle else None

    def thresholds_for(self, check: str, defaults: dict[str, Any]) -> dict[str, Any]:
        merged = dict(defaults)
        merged.update(self.thresholds.get(check, {}))
        return merged
