"""The shared language of healthcheck: what probes produce and what checks judge.

Plain data (records of str/int/float/bool/list/dict: ``healthcheck.core.struct``, dataclasses to every
caller without the cost of importing ``dataclasses`` on the hot path) that round-trips through JSON. Conventions:
- ``None``: not known / not reported / not supported (a field an older GPU lacks); checks cannot judge it.
- A source that is ``None`` on the Snapshot (``gpus``, ``ib_ports``, ...) was not probed at all;
  an empty list means "probed, found none".
- Units are in field names: ``_c`` degrees Celsius, ``_w`` watts, ``_mib`` MiB, ``_s`` seconds.
"""
from __future__ import annotations

from .struct import asdict as _asdict, field, record


def dataclass(cls=None, /, **options):
    """Records with __slots__: snapshots hold many of them."""
    return record(cls, slots=True, **options)


if False:  # annotations only (strings, never evaluated here); model_codec resolves them
    from typing import Any  # noqa: F401



def from_dict(cls, data):
    """model_codec.from_dict, imported on first use (it needs typing: not on the prolog's path)."""
    from .codec import from_dict

    return from_dict(cls, data)


class _StatusType(type):
    """What ``enum`` gave Status, without importing ``enum`` (it pulls in functools and collections: ~3 ms
    before every job): iteration in definition order, lookup by value (``Status("fail")``) and by name
    (``Status["FAIL"]``), a ValueError for anything else."""

    def __iter__(cls):
        return iter(cls._members)

    def __len__(cls):
        return len(cls._members)

    def __contains__(cls, item):
        return isinstance(item, cls)

    def __call__(cls, value):
        if isinstance(value, cls):
            return value
        try:
            return cls._by_value[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__name__}") from None

    def __getitem__(cls, name):
        return cls._by_name[name]


class Status(str, metaclass=_StatusType):
    """Result of one check on one component. Ordered by severity for the verdict.

    A string (``Status.FAIL == "fail"``, JSON writes it as ``"fail"``) with one instance per value, so
    ``is`` compares, as with the ``enum`` it was."""

    PASS: Status
    SKIP: Status
    WARN: Status
    ERROR: Status
    FAIL: Status
    _members: tuple
    _by_value: dict
    _by_name: dict

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    def __str__(self) -> str:  # "fail", not "Status.FAIL"
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"<Status.{self._name}: {str.__repr__(self)}>"

    def __reduce__(self):
        return Status, (str.__str__(self),)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _status_members() -> None:
    members = []
    for name, value in (("PASS", "pass"), ("SKIP", "skip"), ("WARN", "warn"), ("ERROR", "error"), ("FAIL", "fail")):
        member = str.__new__(Status, value)
        member._name = name
        type.__setattr__(Status, name, member)
        members.append(member)
    type.__setattr__(Status, "_members", tuple(members))
    type.__setattr__(Status, "_by_value", {str.__str__(m): m for m in members})
    type.__setattr__(Status, "_by_name", {m._name: m for m in members})


_status_members()
# Where a verdict is reached: a command (check), the Slurm hooks (prolog, epilog, HealthCheckProgram:
# slurm-check), a burn-in job. Checks declare theirs (checks.registry), policies may vary by them.
CONTEXTS = ("check", "prolog", "epilog", "slurm-check", "burnin")

_SEVERITY = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.ERROR: 2, Status.FAIL: 3}


def worst(statuses) -> Status:
    """The most severe status; PASS when there is nothing to judge, SKIP when everything skipped."""
    statuses = list(statuses)
    if not statuses:
        return Status.PASS
    if all(s is Status.SKIP for s in statuses):
        return Status.SKIP
    return max(statuses, key=lambda s: (s.severity, s is not Status.SKIP))


# --------------------------------------------------------------------------------------------- GPU


@dataclass
class NvLink:
    link: int
    active: bool | None = None
    speed_gbps: float | None = None  # per-link speed as reported (GB/s)
    replay_errors: int | None = None
    recovery_errors: int | None = None
    crc_flit_errors: int | None = None
    crc_data_errors: int | None = None
    # NVLink5 (Blackwell) per-link counters through NVML field values (issue 33), where reported:
    # symbol errors (before FEC), effective errors (left after FEC), their bit error rates decoded
    # (NVML's mantissa << 8 | exponent: mantissa x 10^-exponent)
    symbol_errors: int | None = None
    effective_errors: int | None = None
    symbol_ber: float | None = None
    effective_ber: float | None = None
    # NVLink5 FEC history: NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0..15, the count of corrected symbol errors
    # in each of 16 bins (None where a bin did not answer); read only where asked (bundles), never judged
    fec_history: list[int | None] | None = None


@dataclass
class GpuProcess:
    """A compute process on a GPU."""
    pid: int
    name: str | None = None
    used_memory_mib: float | None = None


@dataclass
class GpuSample:
    """One earlier reading of a GPU by HealthCheckProgram, kept between runs in the state directory
    (``healthcheck.hook.gpu_samples``): what ``gpu.stalled`` judges over consecutive runs."""
    taken_at: str  # ISO 8601 UTC
    utilization_gpu_pct: float | None = None
    power_draw_w: float | None = None
    pids: list[int] = field(default_factory=list)  # compute processes on the GPU
    jobs: list[str] = field(default_factory=list)  # their Slurm job ids (from /proc), where known


@dataclass
class GpuInfo:
    """One GPU as seen by NVML or nvidia-smi. Only ``index`` is always set."""

    index: int
    pci_bus_id: str | None = None  # normalised "0000:07:00.0" (lower-case, 4-digit domain)
    uuid: str | None = None
    serial: str | None = None
    name: str | None = None
    vbios: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    # The GPU could not be queried at all ("Unable to determine the device handle", "GPU is lost").
    lost: bool = False
    error: str | None = None
    # ECC
    ecc_mode_current: bool | None = None
    ecc_mode_pending: bool | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    # Page retirement (pre-Ampere) and row remapping (Ampere and newer)
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remap_correctable: int | None = None
    remap_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    # Thermals
    temperature_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_max_operating_c: float | None = None  # "GPU Max Operating Temp" / NVML GPU_MAX
    mem_temperature_c: float | None = None
    mem_temp_max_c: float | None = None
    # Active clock event (throttle) reasons, canonical names: see THROTTLE_REASONS.
    throttle_reasons: list[str] | None = None
    # Power
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    # PCIe (from the GPU's own view)
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_count: int | None = None
    # NVLink; None when the GPU has no NVLink / not reported
    nvlinks: list[NvLink] | None = None
    persistence_mode: bool | None = None
    processes: list[GpuProcess] | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    # GPU fabric (NVSwitch systems, Hopper and newer): state is one of FABRIC_STATES
    fabric_state: str | None = None
    fabric_status: str | None = None
    # The driver says the GPU needs a reset (NVML GPU recovery action / "Pending" remap needs reset)
    reset_required: bool | None = None
    recovery_action: str | None = None
    # Headroom below the GPU's slowdown limit (Hopper+ "GPU T.Limit Temp", NVML margin temperature):
    # degrees Celsius, <= 0 at or over the limit. Reported where absolute thresholds may not be.
    temp_tlimit_margin_c: float | None = None
    performance_state: str | None = None  # "P0" (max performance) .. "P12"/"P15" (min); None unknown
    utilization_gpu_pct: float | None = None  # % of the last sample period a kernel was running
    # SRAM ECC (Ampere+, driver R550+: nvmlDeviceGetSramEccErrorStatus / nvidia-smi -q "SRAM ..."):
    # uncorrectable SRAM errors (parity + SEC-DED; "SRAM Uncorrectable" where the driver does not split
    # them), the split where reported, and the driver's "SRAM Threshold Exceeded" (the field
    # diagnostic's RMA threshold). sram_sources: aggregate uncorrectable count per unit (l2, sm,
    # microcontroller, pcie, other) where reported.
    sram_uncorrectable_volatile: int | None = None
    sram_uncorrectable_aggregate: int | None = None
    sram_parity_volatile: int | None = None
    sram_parity_aggregate: int | None = None
    sram_secded_volatile: int | None = None
    sram_secded_aggregate: int | None = None
    sram_threshold_exceeded: bool | None = None
    sram_sources: dict[str, int] | None = None
    # HealthCheckProgram only (None elsewhere): this GPU's earlier readings, oldest first, the current
    # one last, and the lowest power it drew with no compute process (its idle power), both kept in the
    # state directory between runs by healthcheck.hook.gpu_samples.
    samples: list[GpuSample] | None = None
    idle_power_w: float | None = None
    # Fields the tool answered with an error instead of a value: field name -> the tool's words
    # ({"ecc_mode_current": "Unknown Error"}); the field itself stays None. Unlike None alone ("not
    # reported / not supported"), a field here is judged: see GPU_FAULT_ERRORS and docs/gpu-errors.md.
    field_errors: dict[str, str] = field(default_factory=dict)
    # GPU fabric detail (issue 33; NVML GpuFabricInfo v2/v3, nvidia-smi -q "Fabric"): the clique id and
    # cluster UUID of the NVLink domain (0 and all zeros outside one), and the health fields that are
    # reported, canonical: FABRIC_HEALTH_FIELDS -> lower snake-case value ("summary": "unhealthy",
    # "bandwidth": "degraded", "route_unhealthy": "true", "incorrect_configuration": "none", ...); a
    # field the driver does not report (N/A, NOT_SUPPORTED) is left out. None: none reported.
    fabric_clique_id: int | None = None
    fabric_cluster_uuid: str | None = None
    fabric_health: dict[str, str] | None = None
    # NVML GpuFabricInfo v4 (driver 615+): the GPU's cliques per type, FABRIC_CLIQUE_TYPES name (or
    # "type<N>" for a type this release does not know) -> ids in NVML's order; fabric_clique_id is then
    # the first unicast pointer clique (the type that takes over v3's cliqueId), 0 where there is none.
    # None: the driver reports no v4.
    fabric_cliques: dict[str, list[int]] | None = None
    # Blackwell memory repair: the driver flags memory it can no longer repair (NVML
    # nvmlDeviceGetUnrepairableMemoryFlag_v1, nvidia-smi -q "Unrepairable Memory"): an RMA
    unrepairable_memory: bool | None = None

    @property
    def component(self) -> str:
        return f"gpu{self.index}"


# Canonical throttle / clock event reason names (NVML nvmlClocksEventReason* / nvidia-smi XML tags).
THROTTLE_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                    "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                    "display_clocks_setting")

FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")
# NVML_GPU_FABRIC_CLIQUE_TYPE_* by value (nvmlGpuFabricClique_v1_t.type), canonical
FABRIC_CLIQUE_TYPES = ("unicast_pointer", "multicast_pointer", "unicast_logical_endpoint",
                       "multicast_logical_endpoint")
# GpuInfo.fabric_health keys (NVML's health mask fields and summary, nvidia-smi's "Health" lines)
FABRIC_HEALTH_FIELDS = ("summary", "bandwidth", "route_recovery", "route_unhealthy", "access_timeout_recovery",
                        "incorrect_configuration", "partition_assigned", "gfm_state")

# Tool errors (nvidia-smi's words, NVML's nvmlErrorString) that are a fault of the GPU itself, not of
# the reading: a field answered with one of these makes its check FAIL; any other error (Unknown
# Error, Insufficient Permissions, Timeout, ...) makes it ERROR (the checker could not judge).
GPU_FAULT_ERRORS = ("gpu is lost", "gpu requires reset", "corrupted inforom")


def is_gpu_fault_error(text: str | None) -> bool:
    """True when a tool's error text names a GPU fault (lost, needs reset, corrupted InfoROM)."""
    low = (text or "").lower()
    return any(word in low for word in GPU_FAULT_ERRORS)


# -------------------------------------------------------------------------------------- Kernel log


@dataclass
class KernelEvent:
    """One kernel-log event: an NVIDIA driver event or a host event.

    kind: "xid", "fallen_off_bus", "rm_init_failed" (NVIDIA driver); "host" (machine check, memory,
    PCIe, storage, filesystem, HCA/NIC, link: ``event_class`` names the class of
    ``healthcheck/data/host_events.toml``, ``device`` the disk/interface/controller/module it names,
    ``count`` what the line reports, e.g. "4 CE").
    timestamp: seconds since boot (dmesg raw) -> ``uptime_s``; wall clock -> ``time`` (ISO 8601, naive
    local or with offset as printed). Either may be None.
    """

    kind: str
    pci_bus_id: str | None = None  # normalised like GpuInfo.pci_bus_id when the log names it
    xid: int | None = None
    pid: int | None = None
    process: str | None = None
    message: str = ""
    uptime_s: float | None = None
    time: str | None = None
    line: str = ""
    event_class: str | None = None  # host events: the policy class ("edac_ue", "aer_fatal", ...)
    device: str | None = None  # host events: "sda", "eth1", "MC3", "nvme0", "module 0", a CPU number
    count: int = 1  # host events: how many errors the line reports ("EDAC MC0: 4 CE ...")
    # host events on a block device: what the node's readings say about it (probes.blockdevs): "disk" (the
    # disk a partition is on), "present", "vendor_model", "removable", "used_by" (mountpoints, "swap");
    # None where not read (a recorded log): the device's name alone then decides
    device_info: dict[str, Any] | None = None


# ----------------------------------------------------------------------------------- InfiniBand


@dataclass
class IbPort:
    device: str  # mlx5_0
    port: int
    state: str | None = None  # ACTIVE, DOWN, INIT, ARMED (upper-case, no numeric prefix)
    phys_state: str | None = None  # LinkUp, Polling, Disabled, ...
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand | Ethernet
    firmware: str | None = None
    hca_type: str | None = None
    pci_bus_id: str | None = None
    counters: dict[str, int] = field(default_factory=dict)
    board_id: str | None = None  # PSID, e.g. "MT_0000000838" (sysfs board_id; ibstat does not print it)

    @property
    def component(self) -> str:
        return f"{self.device}:{self.port}"


# ------------------------------------------------------------------------------------------ PCIe


@dataclass
class PcieLink:
    """A PCIe device's link as the kernel sees it (sysfs)."""

    pci_bus_id: str
    kind: str  # "gpu" | "hca" | "nvswitch"
    vendor: str | None = None  # "0x10de"
    device: str | None = None
    speed_current_gts: float | None = None
    speed_max_gts: float | None = None
    width_current: int | None = None
    width_max: int | None = None
    name: str | None = None  # mlx5_0 for HCAs when known

    @property
    def gen_current(self) -> int | None:
        return gts_to_gen(self.speed_current_gts)

    @property
    def gen_max(self) -> int | None:
        return gts_to_gen(self.speed_max_gts)


_GEN_BY_GTS = ((2.5, 1), (5.0, 2), (8.0, 3), (16.0, 4), (32.0, 5), (64.0, 6), (128.0, 7))


def gts_to_gen(gts: float | None) -> int | None:
    if gts is None:
        return None
    for speed, gen in _GEN_BY_GTS:
        if abs(gts - speed) < 0.01:
            return gen
    return None


# ------------------------------------------------------------------------------------------ Host


@dataclass
class Mount:
    device: str
    mountpoint: str
    fstype: str
    options: list[str] = field(default_factory=list)
    # statvfs figures where they were read (None for pseudo filesystems or when not read)
    size_bytes: int | None = None
    free_bytes: int | None = None
    inodes_total: int | None = None
    inodes_free: int | None = None

    @property
    def read_only(self) -> bool:
        return "ro" in self.options


@dataclass
class HostInfo:
    hostname: str | None = None
    cpu_sockets: int | None = None
    cpu_cores: int | None = None  # physical cores
    cpu_threads: int | None = None  # logical CPUs online
    cpu_model: str | None = None
    mem_total_kib: int | None = None
    mem_available_kib: int | None = None
    swap_total_kib: int | None = None
    swap_free_kib: int | None = None
    load_1m: float | None = None
    load_5m: float | None = None
    load_15m: float | None = None
    uptime_s: float | None = None
    mounts: list[Mount] | None = None
    services: dict[str, bool] | None = None  # name -> running
    processes: list[dict[str, Any]] | None = None  # {"pid", "user", "uid", "comm"}


# ------------------------------------------------------------------------------------------- Job


@dataclass
class JobInfo:
    """The job a prolog/epilog runs for (from Slurm's environment), and what the epilog found."""

    job_id: str
    user: str | None = None
    uid: int | None = None
    # epilog: processes still carrying this job's SLURM_JOB_ID ({"pid", "comm", "uid"}), after the
    # configured stray action ("kill" | "drain" | "warn") was applied; ``killed`` lists what was killed
    stray_processes: list[dict[str, Any]] | None = None
    killed: list[dict[str, Any]] = field(default_factory=list)
    stray_action: str = "kill"
    # epilog: error-counter growth since the prolog's baseline ("gpu3.nvlink_crc" -> +12);
    # None when no baseline was found (the prolog did not run or its baseline was lost)
    counter_growth: dict[str, float] | None = None
    # where the baseline came from when not from this job's own prolog (the fast prolog reuses the
    # last health check's counters: "health check <run> at <time>"); None for the prolog's own
    baseline_source: str | None = None


# --------------------------------------------------------------------------------- Storage, BMC


@dataclass
class StorageDevice:
    """One NVMe controller or SATA/SAS disk: listed from sysfs, its health read by ``nvme smart-log``
    or ``smartctl`` (``source``; None = health not read, ``unread`` says why). NVMe health figures
    follow the NVMe SMART / Health log; ATA figures come from smartctl's attribute table."""

    name: str  # nvme0, sda
    kind: str = "nvme"  # "nvme" | "sata" (any sd* disk: SATA or SAS) | what smartctl says
    model: str | None = None
    serial: str | None = None
    state: str | None = None  # NVMe controller state from sysfs: live, resetting, dead, ...
    source: str | None = None  # "nvme-smart-log", "smartctl-json", "smartctl-text", "nvme-smart-log-text"
    unread: str | None = None  # why the health could not be read (tool absent, failed, timed out)
    smart_passed: bool | None = None  # smartctl's overall-health self-assessment
    critical_warning: int | None = None  # NVMe critical warning bit field
    media_errors: int | None = None
    num_err_log_entries: int | None = None
    percentage_used: int | None = None
    available_spare_pct: int | None = None
    available_spare_threshold_pct: int | None = None
    temperature_c: float | None = None
    failing_attributes: list[str] | None = None  # ATA attributes smartctl reports failing now
    reallocated_sectors: int | None = None
    pending_sectors: int | None = None

    @property
    def component(self) -> str:
        return self.name


@dataclass
class BmcEvent:
    """One System Event Log record (``ipmitool sel elist``/``sel list``, FreeIPMI ``ipmi-sel``)."""

    record_id: str
    sensor: str  # as printed: "Power Supply PS2 Status", "Memory", "Processor #0x01"
    sensor_type: str | None = None  # IPMI sensor type: "Power Supply", "Memory", ... (None unknown)
    description: str = ""  # "Power Supply AC lost", "Correctable ECC"
    direction: str | None = None  # "Asserted" | "Deasserted" | None (not printed)
    detail: str | None = None  # ipmitool's extra column ("CPU 0 DIMM 8")
    severity: str | None = None  # FreeIPMI's state column ("Critical", "Warning", "Nominal")
    date: str | None = None
    time: str | None = None
    line: str = ""


@dataclass
class BmcSensor:
    """One sensor of ``ipmitool sdr elist``/``sdr list``: name, status code (ok, ns, nc, cr, nr, lnc, unc,
    lcr, ucr, lnr, unr) and the reading as printed (discrete sensors list their asserted states)."""

    name: str
    status: str
    reading: str = ""
    sensor_id: str | None = None  # "30h" (elist)
    entity: str | None = None  # "7.1" (elist)


@dataclass
class BmcInfo:
    """What the BMC said. ``unavailable``: no BMC or no tool (checks SKIP with it); ``events``/``sensors``
    None when that part was not read, with ``sel_error``/``sdr_error`` saying why."""

    events: list[BmcEvent] | None = None
    sensors: list[BmcSensor] | None = None
    unavailable: str | None = None
    sel_error: str | None = None
    sdr_error: str | None = None


# ------------------------------------------------------------------ Host error counters (sysfs)


@dataclass
class EdacDimm:
    """One DIMM (``dimmN``) or rank (``rankN``) of an EDAC memory controller."""
    name: str  # dimm0, rank3
    label: str | None = None  # dimm_label: "CPU_SrcID#0_MC#0_Chan#2_DIMM#0" (BIOS/DMI naming)
    ce_count: int | None = None
    ue_count: int | None = None


@dataclass
class EdacController:
    """An EDAC memory controller, ``/sys/devices/system/edac/mc/mcN``: error counts since the driver
    loaded or the counters were reset (``seconds_since_reset`` ago)."""
    name: str  # mc0
    mc_name: str | None = None  # "Skylake Socket#0 IMC#0"
    ce_count: int | None = None  # corrected errors (those without a location included)
    ue_count: int | None = None  # uncorrected errors
    ce_noinfo_count: int | None = None
    ue_noinfo_count: int | None = None
    seconds_since_reset: int | None = None
    dimms: list[EdacDimm] = field(default_factory=list)

    @property
    def component(self) -> str:
        return self.name


def aer_total(counts: dict[str, int] | None) -> int | None:
    """The ``TOTAL_ERR_*`` line of one ``aer_dev_*`` file, else the sum of its per-type counts; None
    when not read."""
    if counts is None:
        return None
    for key, value in counts.items():
        if key.startswith("TOTAL_ERR"):
            return value
    return sum(counts.values())


@dataclass
class PciBridgeAcs:
    """A PCI bridge on the path between a GPU and its NIC: its PCI Express port type and its ACS
    control bits (config space; ``acs_ctl`` None: not readable, {}: no ACS capability)."""
    pci_bus_id: str
    port_type: str | None = None  # "root_port" | "upstream" | "downstream" | ...
    acs_ctl: dict[str, bool] | None = None  # lspci's names: SrcValid, ReqRedir, CmpltRedir, ...


@dataclass
class GpuNicPath:
    """A GPU and the HCA nearest it on the PCI tree, with the bridges between them below their
    common ancestor (``common`` None: they meet only at the root complex)."""
    gpu: str  # PCI address
    hca: str  # mlx5_0
    hca_pci: str | None = None
    common: str | None = None  # the lowest bridge both sit under
    bridges: list[PciBridgeAcs] = field(default_factory=list)


@dataclass
class GpuDirectInfo:
    """What GPUDirect RDMA needs of the host (probes/gpudirect.py: sysfs and procfs)."""
    peermem_module: str | None = None  # "nvidia_peermem" (or legacy "nv_peer_mem") when loaded
    nvidia_driver: str | None = None  # /sys/module/nvidia/version
    nvidia_open: bool | None = None  # /proc/driver/nvidia/version names the open kernel module
    kernel: str | None = None  # /proc/sys/kernel/osrelease
    cmdline_iommu: list[str] = field(default_factory=list)  # iommu tokens of /proc/cmdline
    iommu_units: int | None = None  # entries of /sys/class/iommu (0: no IOMMU enabled)
    iommu_group_types: dict[str, str] = field(default_factory=dict)  # GPU/HCA address -> "identity" | "DMA" | ...
    paths: list[GpuNicPath] = field(default_factory=list)


@dataclass
class PcieAer:
    """A PCI function's AER counters since boot (``aer_dev_fatal``/``aer_dev_nonfatal``/
    ``aer_dev_correctable``: per error type, ``TOTAL_ERR_*`` the sum) and what the function is."""
    pci_bus_id: str
    vendor: str | None = None  # "0x10de"
    device: str | None = None
    pci_class: str | None = None  # "0x030200"
    kind: str | None = None  # gpu, hca, nic, nvme, storage, nvswitch, bridge, ... (from the class)
    name: str | None = None  # mlx5_0, nvme0 where sysfs names it
    fatal: dict[str, int] | None = None
    nonfatal: dict[str, int] | None = None
    correctable: dict[str, int] | None = None

    @property
    def component(self) -> str:
        return self.pci_bus_id


@dataclass
class MlxlinkPort:
    """What ``mlxlink -d DEV -m -c -e`` says of one HCA port: link, FEC, BER counters, module.
    ``error``: why it could not be read (then the other fields are None)."""
    device: str  # mlx5_0
    port: int = 1
    error: str | None = None
    state: str | None = None
    physical_state: str | None = None
    speed: str | None = None
    width: str | None = None
    fec: str | None = None
    status_opcode: int | None = None
    recommendation: str | None = None
    time_since_clear_min: float | None = None
    effective_errors: int | None = None
    effective_ber: float | None = None
    symbol_errors: int | None = None
    symbol_ber: float | None = None
    raw_errors_per_lane: list[int] | None = None
    raw_ber: float | None = None
    link_down: int | None = None
    link_error_recovery: int | None = None
    module_identifier: str | None = None
    cable_type: str | None = None
    module_part: str | None = None
    module_temperature_c: float | None = None
    module_temp_low_c: float | None = None  # the module's own alarm range, where printed
    module_temp_high_c: float | None = None

    @property
    def component(self) -> str:
        return f"{self.device}:{self.port}"


# ------------------------------------------------------------------------- Ethernet / RoCE network


@dataclass
class NetPort:
    """A physical Ethernet port (``/sys/class/net/<name>``, issue 32): its kernel statistics
    (``statistics/*``, ``carrier_down_count``) and, for a RoCE port, the RDMA port on the same PCI
    function (``rdma``, "mlx5_0:1")."""
    name: str  # eth0, ens4np0
    driver: str | None = None  # mlx5_core, bnxt_en, ice, ...
    pci_bus_id: str | None = None
    rdma: str | None = None  # "mlx5_0:1": the RDMA port of this netdev (RoCE), where sysfs names one
    operstate: str | None = None  # up, down, lowerlayerdown, ...
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def component(self) -> str:
        return self.name


@dataclass
class NetEthtool:
    """``ethtool -S <name>``'s counters that the driver keeps only there (mlx5: ``*_phy``, pause storms),
    filtered to those the network checks know; ``error``: why they could not be read."""
    name: str
    counters: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass
class NetGrowth:
    """How much each counter of one port grew between two readings: the earlier taken at ``from_s``, the
    later at ``at_s`` (seconds since the epoch). The growth happened somewhere in between."""
    from_s: float
    at_s: float
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class NetSeries:
    """One port's kept growth (``hook.net_window``): the increments since ``since_s`` (the first
    reading the growth is known from: the first ever, or the last reset/reboot/new device)."""
    component: str  # "mlx5_0:1" (RDMA port) or "eth0" (netdev)
    since_s: float
    growth: list[NetGrowth] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # "counters reset (reboot or driver reload)", ...
    saturated: list[str] = field(default_factory=list)  # counters stuck at their width's maximum


@dataclass
class NetWindow:
    """The network counters' growth over the last hours, kept between hook runs (``hook.net_window``):
    what ``net.errors``, ``net.ethtool`` and ``net.link.flaps`` judge. ``now_s``: this reading's time."""
    now_s: float
    series: list[NetSeries] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -------------------------------------------------------------------------------------- Snapshot


@dataclass
class ProbeError:
    """A probe that could not deliver. kind: "error" (raised / unreadable), "timeout" (deadline
    passed), "hang" (a GPU/driver call did not return: the driver is wedged)."""

    kind: str
    message: str


@dataclass
class Snapshot:
    node: str
    taken_at: str  # ISO 8601 UTC
    source: str = "live"  # "live" or "bundle:<path>"
    gpus: list[GpuInfo] | None = None
    gpu_source: str | None = None  # "nvml", "nvidia-smi-xml", "nvidia-smi-text"
    # NVIDIA GPUs the PCI bus shows (sysfs), independent of the driver: catches GPUs NVML lost.
    gpu_pci_devices: list[str] | None = None
    kernel_events: list[KernelEvent] | None = None
    ib_ports: list[IbPort] | None = None
    pcie_links: list[PcieLink] | None = None
    host: HostInfo | None = None
    versions: dict[str, str] | None = None
    job: JobInfo | None = None
    # NVMe/SATA devices and their SMART health; the BMC's event log and sensors (None: not probed)
    storage: list[StorageDevice] | None = None
    bmc: BmcInfo | None = None
    # EDAC memory controllers, PCIe AER counters (sysfs, since boot), mlxlink's view of the HCA ports
    edac: list[EdacController] | None = None
    pcie_aer: list[PcieAer] | None = None
    mlxlink: list[MlxlinkPort] | None = None
    # GPUDirect RDMA readiness: peer memory or dma-buf, IOMMU mode, ACS between each GPU and its NIC
    gpudirect: GpuDirectInfo | None = None
    # Ethernet/RoCE ports (sysfs), their ethtool-only counters, and the growth kept between hook runs
    net_ports: list[NetPort] | None = None
    net_ethtool: list[NetEthtool] | None = None
    net_window: NetWindow | None = None
    # The boot the kernel events belong to (/proc/sys/kernel/random/boot_id) and the keys of events the
    # node's hooks already acted on (a drain that has ended since): gpu.xid passes over those.
    boot_id: str | None = None
    acknowledged_events: list[str] | None = None
    probe_errors: dict[str, ProbeError] = field(default_factory=dict)
    probe_durations_s: dict[str, float] = field(default_factory=dict)
    # The IMEX daemon and its domain (multi-node NVLink; issue 33): HealthCheckProgram, check, burn-in
    imex: ImexInfo | None = None

    def to_dict(self) -> dict[str, Any]:
        return _asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Snapshot":
        return from_dict(cls, data)


# ------------------------------------------------------------------------------------------ IMEX


@dataclass
class ImexPeer:
    """One node of an IMEX domain as ``nvidia-imex-ctl -N`` shows it (issue 33)."""
    index: int
    host: str | None = None  # the address the domain knows it by (nodes_config.cfg)
    hostname: str | None = None  # where the tool printed one (-H)
    status: str | None = None  # READY, UNAVAILABLE, ...
    # its connection to each peer, by the peer's index: CONNECTED, NEVER_CONNECTED, RECOVERING,
    # DISCONNECTED, AUTHENTICATING, INVALID
    connections: dict[str, str] = field(default_factory=dict)


@dataclass
class ImexInfo:
    """The node's IMEX daemon and its domain (``nvidia-imex-ctl -q`` and ``-N -j``); None on the
    Snapshot: not probed or not installed."""
    daemon_status: str | None = None  # -q: READY, WAITING_FOR_PEERS, INITIALIZING, UNAVAILABLE, ...
    domain_status: str | None = None  # -N: UP, DOWN, DEGRADED
    peers: list[ImexPeer] | None = None
    error: str | None = None  # the tool did not answer, or answered something unparsable


# ------------------------------------------------------------------------------- Findings, verdict


@dataclass
class Finding:
    check: str
    status: Status
    message: str
    component: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status.value,
            "message": self.message,
            "component": self.component,
            "metrics": dict(self.metrics),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        """The finding :meth:`to_dict` wrote (across the watchdog's pipe, from a spool record); lean: no
        codec, no typing (the hook's path)."""
        return cls(data["check"], Status(data["status"]), data.get("message", ""), data.get("component"),
                   dict(data.get("metrics") or {}))


@dataclass
class Verdict:
    node: str
    status: Status
    findings: list[Finding]
    started_at: str
    duration_s: float
    context: str = "check"

    @classmethod
    def of(cls, node: str, findings: list[Finding], started_at: str, duration_s: float,
           context: str = "check") -> "Verdict":
        return cls(node, worst(f.status for f in findings), findings, started_at, duration_s, context)

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if f.status is Status.FAIL]

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "status": self.status.value,
            "context": self.context,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "results": [f.to_dict() for f in self.findings],
        }


def parse_iso_utc(text: str | None):
    """ISO 8601 -> an aware datetime (a time without offset is taken as UTC); None when unparsable.
    For the checks that age events against the snapshot's time (datetime imported on first use)."""
    if not text:
        return None
    from datetime import datetime, timezone

    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def normalize_pci_bus_id(bus_id: str | None) -> str | None:
    """'00000000:07:00.0' (NVML), '0000:07:00.0' (sysfs), '07:00.0' (lspci/kernel) -> '0000:07:00.0'."""
    if not bus_id:
        return None
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 2:  # bus:dev.fn
        parts = ["0000"] + parts
    if len(parts) != 3:
        return text
    domain, bus, devfn = parts
    domain = domain[-4:].rjust(4, "0")
    if "." not in devfn:
        devfn = devfn + ".0"
    return f"{domain}:{bus.rjust(2, '0')}:{devfn}"
