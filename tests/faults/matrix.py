"""THE fault matrix: one entry per fault class the suite must catch.

Each :class:`Fault` says how the fault is injected (a function building the faulty node's Snapshot
from fixture trees / fake NVML / kernel log, or running the prolog hook), which check must detect it,
with which status, on which component, in which Slurm contexts, and what the default policy does
then. ``tests/faults/test_fault_matrix.py`` proves every row; ``tests/faults/render.py`` turns the
table into ``docs/fault-matrix.md`` (a test keeps the two equal).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pynvml

from healthcheck.model import Finding, Snapshot, Status
from healthcheck.xid_policy import load_xid_policy
from tests.fakes.fake_pynvml import old_gpu
from tests.fixtures.proc_builder import DEFAULT_MOUNTS, GIB
from tests.fixtures.sysfs_builder import SysfsFaults
from tests.faults import node as N
from tests.faults.hung import hung_prolog

# Contexts (the Slurm hooks; `healthcheck check` runs every check too and exits 1 on a FAIL).
EVERY_HOOK = ("prolog", "epilog", "slurm-check")  # checks cheap enough for the prolog
PERIODIC = ("slurm-check",)  # HealthCheckProgram only (not the prolog's tens of ms)
EPILOG = ("epilog",)
PROLOG = ("prolog",)

Injected = Snapshot | list[Finding]  # a snapshot to judge, or the findings of a hook run


@dataclass(frozen=True)
class Fault:
    id: str
    name: str
    how: str  # how it is injected, for the doc
    inject: Callable[[Path], Injected]
    check: str
    status: Status
    component: str | None
    contexts: tuple[str, ...]
    action: str  # default action in those contexts: "drain" (FAIL) or "report" (WARN)
    covers: str  # the fault class of issue 7 this row proves
    co_detectors: tuple[str, ...] = ()  # other checks that rightly FAIL for the same fault
    config: str | None = None  # expectations TOML (a node class would set these); None = defaults
    also_components: tuple[str | None, ...] = ()  # other components the named check rightly FAILs


def _uncorrected(vol: int, agg: int) -> dict:
    unc = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    return {(unc, pynvml.NVML_VOLATILE_ECC): vol, (unc, pynvml.NVML_AGGREGATE_ECC): agg}


def _dbe(root: Path) -> Snapshot:
    n = N.node(root, kernel_log=N.HEALTHY_KERNEL_LOG + N.xid_line(48, 2, "An uncorrectable double bit error "
                                                                       "(DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."))
    n.gpus = N.gpu_edit(2, ecc=_uncorrected(1, 1))(n.gpus)
    return n.snapshot()


def _volta(root: Path, index: int, **changes) -> Snapshot:
    """8x V100-class GPUs (page retirement, no NVLink in NVML's view of this fake, no fabric)."""
    import dataclasses

    n = N.node(root)
    n.gpus = [dataclasses.replace(old_gpu(), pci_bus_id=g.pci_bus_id, uuid=g.uuid, serial=g.serial)
              for g in n.gpus]
    n.gpus = N.gpu_edit(index, **changes)(n.gpus)
    return n.snapshot()


def _xid(number: int, name: str, count: int = 1) -> Callable[[Path], Snapshot]:
    def inject(root: Path) -> Snapshot:
        lines = "".join(N.xid_line(number, 1, name, uptime_s=N.UPTIME_S - 600.0 + i) for i in range(count))
        return N.node(root, kernel_log=N.HEALTHY_KERNEL_LOG + lines).snapshot()
    return inject


def _sysfs(**faults) -> Callable[[Path], Snapshot]:
    return lambda root: N.node(root, sysfs_faults=SysfsFaults(**faults)).snapshot()


def _gpu(index: int, **changes) -> Callable[[Path], Snapshot]:
    return lambda root: N.faulty_gpu_node(root, index, **changes)


def _gpu_missing(root: Path) -> Snapshot:
    n = N.node(root)
    n.gpus.pop(6)  # the PCI bus still shows it (sysfs), the driver no longer does
    return n.snapshot()


def _nvml_hang(root: Path) -> Snapshot:
    n = N.node(root, nvml_hangs=True)
    n.deadlines_s["gpus"] = 0.3
    return n.snapshot()


def _growth(**after) -> Callable[[Path], Snapshot]:
    def inject(root: Path) -> Snapshot:
        before = N.node(root / "prolog").snapshot()
        return N.epilog(root, before, N.node(root / "epilog", **after))
    return inject


def _nvlink_crc(root: Path) -> Snapshot:
    before = N.node(root / "prolog").snapshot()
    after = N.node(root / "epilog")
    errors = {(11, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT): 412, (11, pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA): 9}
    after.gpus = N.gpu_edit(5, nvlink_errors=errors)(after.gpus)
    return N.epilog(root, before, after)


def _stray(root: Path) -> Snapshot:
    before = N.node(root / "prolog").snapshot()
    after = N.node(root / "epilog", extra_processes=[N.FakeProcess(48377, "python3", 51234, ("python3", "train.py"),
                                                                    state="D (disk sleep)", ppid=1)],
                   environ={48377: {"SLURM_JOB_ID": N.JOB_ID, "SLURM_JOB_USER": "alice", "HOME": "/home/alice"}})
    return N.epilog(root, before, after, stray_action="kill")


def _memory_held(root: Path) -> Snapshot:
    before = N.node(root / "prolog").snapshot()
    after = N.node(root / "epilog")
    after.gpus = N.gpu_edit(0, memory_used=30_720 * 1024 * 1024,
                            processes=[(48213, 30_718 * 1024 * 1024, "python3")])(after.gpus)
    return N.epilog(root, before, after)


def _full_disk(root: Path) -> Snapshot:
    n = N.node(root)
    n.figures["/"] = (1787 * GIB, 9 * GIB // 10, 119_013_376, 118_240_011)  # 0.9 GiB free (0.05 %)
    return n.snapshot()


def _ro_root(root: Path) -> Snapshot:
    mounts = [m.replace("/dev/md0 / ext4 rw,", "/dev/md0 / ext4 ro,") for m in DEFAULT_MOUNTS]
    return N.node(root, mounts=mounts).snapshot()


_POLICY = load_xid_policy()
_BRAKE = pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown
_THERMAL = pynvml.nvmlClocksThrottleReasonHwThermalSlowdown | pynvml.nvmlClocksThrottleReasonSwThermalSlowdown
_IB_EXPECTED = ('[defaults]\nib = { ports = 8, rate_gbps = 400, link_layer = "InfiniBand", devices = '
                '["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"] }\n')

FAULTS: list[Fault] = [
    # ------------------------------------------------------------------------------ GPU memory
    Fault("ecc-dbe", "Double-bit ECC error (DBE) in the framebuffer",
          "NVML: gpu2 uncorrected ECC volatile 1 / aggregate 1; kernel log: Xid 48 on gpu2",
          _dbe, "gpu.ecc.uncorrected", Status.FAIL, "gpu2", EVERY_HOOK, "drain", "double-bit ECC",
          co_detectors=("gpu.xid",)),
    Fault("ecc-uncorrected-volatile", "Uncorrected ECC errors since driver load (no Xid logged)",
          "NVML: gpu4 uncorrected ECC volatile 3, aggregate 3",
          _gpu(4, ecc=_uncorrected(3, 3)), "gpu.ecc.uncorrected", Status.FAIL, "gpu4", EVERY_HOOK,
          "drain", "uncorrected volatile ECC"),
    Fault("retirement-pending", "Page retirement pending (pre-Ampere GPU)",
          "NVML on a V100-class node: gpu3 nvmlDeviceGetRetiredPagesPendingStatus = 1",
          lambda root: _volta(root, 3, retired_pending=1), "gpu.retired_pages", Status.FAIL, "gpu3",
          EVERY_HOOK, "drain", "retirement pending"),
    Fault("remap-pending", "Row remap pending (needs a GPU reset)",
          "NVML: gpu5 nvmlDeviceGetRemappedRows = (0 corr, 2 unc, pending, no failure)",
          _gpu(5, remapped_rows=(0, 2, 1, 0)), "gpu.row_remap", Status.FAIL, "gpu5", EVERY_HOOK, "drain",
          "remap pending"),
    Fault("remap-failure", "Row remapping failure (bank out of spare rows: RMA)",
          "NVML: gpu6 nvmlDeviceGetRemappedRows = (0, 3, not pending, failure)",
          _gpu(6, remapped_rows=(0, 3, 0, 1)), "gpu.row_remap", Status.FAIL, "gpu6", EVERY_HOOK, "drain",
          "remap failure"),
    # ------------------------------------------------------------------- GPU presence / driver
    Fault("gpu-lost", "GPU lost (every NVML call answers GPU_IS_LOST)",
          "NVML: gpu3 lost", _gpu(3, lost=True), "gpu.lost", Status.FAIL, "gpu3", EVERY_HOOK, "drain",
          "GPU lost"),
    Fault("gpu-missing", "GPU missing from the driver's count (still on the PCI bus)",
          "NVML lists 7 GPUs; sysfs shows 8 NVIDIA 3D controllers",
          _gpu_missing, "gpu.count", Status.FAIL, None, EVERY_HOOK, "drain", "GPU missing from the count"),
    Fault("gpu-driver-hang", "GPU driver wedged (NVML does not answer)",
          "NVML: nvmlInit blocks; GPU probe deadline 0.3 s",
          _nvml_hang, "gpu.responsive", Status.FAIL, None, EVERY_HOOK, "drain", "hung probe"),
    Fault("fabric-not-initialised", "NVSwitch fabric registration not finished",
          "NVML: gpu0 GpuFabricInfo state IN_PROGRESS",
          _gpu(0, fabric_state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS), "gpu.fabric", Status.FAIL, "gpu0",
          EVERY_HOOK, "drain", "fabric not initialised"),
    Fault("reset-required", "Driver asks for a GPU reset",
          "NVML: gpu7 field GPU_RECOVERY_ACTION = GPU_RESET",
          _gpu(7, recovery_action=pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET), "gpu.reset_required",
          Status.FAIL, "gpu7", EVERY_HOOK, "drain", "reset required"),
    Fault("wrong-driver", "Wrong NVIDIA driver version",
          "NVML and /proc/driver/nvidia/version: 535.161.08; expected driver 550.90.07",
          lambda root: N.node(root, driver="535.161.08").snapshot(), "sw.versions", Status.FAIL, "driver",
          PERIODIC, "drain", "wrong driver version", config='[defaults]\nversions = { driver = "550.90.07" }\n'),
    # ----------------------------------------------------------------------- NVLink and PCIe
    Fault("nvlink-down", "NVLink link down",
          "NVML: gpu3 nvmlDeviceGetNvLinkState(link 5) = inactive",
          _gpu(3, nvlink_states=[1] * 5 + [0] + [1] * 12), "gpu.nvlink.state", Status.FAIL, "gpu3",
          EVERY_HOOK, "drain", "NVLink link down"),
    Fault("nvlink-crc-growth", "NVLink CRC errors grew during a job",
          "epilog: gpu5 link 11 CRC flit +412, data +9 over the prolog's baseline",
          _nvlink_crc, "job.counter_growth", Status.WARN, "gpu5", EPILOG, "report", "NVLink CRC growth"),
    Fault("pcie-width", "GPU PCIe link width downtrained (x8 of x16)",
          "NVML: gpu2 link x8 of x16 (sysfs current_link_width 8 too)",
          lambda root: N.node(root, sysfs_faults=SysfsFaults(gpu_width_x8=frozenset({2})),
                              gpus=N.gpu_edit(2, pcie=(5, 5, 8, 16))(N.h100_node())).snapshot(),
          "gpu.pcie.link", Status.FAIL, "gpu2", EVERY_HOOK, "drain", "PCIe width downtrained"),
    Fault("pcie-gen-under-load", "GPU PCIe link at Gen1 of Gen5 while busy",
          "NVML: gpu6 gen 1 of 5, utilisation 100 % (sysfs 2.5 GT/s too)",
          lambda root: N.node(root, sysfs_faults=SysfsFaults(gpu_speed_gen1=frozenset({6})),
                              gpus=N.gpu_edit(6, pcie=(1, 5, 16, 16), utilization=(100, 61))(N.h100_node())
                              ).snapshot(),
          "gpu.pcie.link", Status.FAIL, "gpu6", EVERY_HOOK, "drain", "PCIe gen downtrained under load"),
    # ----------------------------------------------------------------------- thermal and power
    Fault("thermal-slowdown", "GPU at its slowdown temperature (thermal slowdown active)",
          "NVML: gpu4 90 C (slowdown 89 C, margin -1 C), clock events HW+SW thermal slowdown",
          _gpu(4, temperature=90, margin_temperature=-1, clock_reasons=_THERMAL), "gpu.temperature",
          Status.FAIL, "gpu4", EVERY_HOOK, "drain", "thermal slowdown", co_detectors=("gpu.throttle",)),
    Fault("hw-power-brake", "HW power-brake slowdown (external power brake asserted)",
          "NVML: gpu1 clock event reasons = HW power brake slowdown",
          _gpu(1, clock_reasons=_BRAKE), "gpu.throttle", Status.FAIL, "gpu1", EVERY_HOOK, "drain",
          "HW/power-brake throttle"),
    Fault("sw-thermal-slowdown", "SW thermal slowdown only",
          "NVML: gpu1 clock event reasons = SW thermal slowdown",
          _gpu(1, clock_reasons=pynvml.nvmlClocksThrottleReasonSwThermalSlowdown), "gpu.throttle",
          Status.WARN, "gpu1", EVERY_HOOK, "report", "thermal slowdown"),
    # ---------------------------------------------------------------------------- InfiniBand
    Fault("ib-port-down", "IB port down (disabled)",
          "sysfs: mlx5_3 port 1 state 1: DOWN, phys_state 3: Disabled",
          _sysfs(port_disabled=frozenset({3})), "ib.port.state", Status.FAIL, "mlx5_3:1", EVERY_HOOK,
          "drain", "IB port down", config=_IB_EXPECTED, also_components=(None,)),
    Fault("ib-port-polling", "IB port polling (no link partner: cable or switch port)",
          "sysfs: mlx5_4 port 1 state 1: DOWN, phys_state 2: Polling",
          _sysfs(port_down=frozenset({4})), "ib.port.state", Status.FAIL, "mlx5_4:1", EVERY_HOOK,
          "drain", "IB port polling", config=_IB_EXPECTED, also_components=(None,)),
    Fault("ib-port-down-unconfigured", "IB port down on a node with no IB expectation",
          "sysfs: mlx5_4 port 1 state 1: DOWN, phys_state 2: Polling; no [ib] expectation",
          _sysfs(port_down=frozenset({4})), "ib.port.state", Status.WARN, "mlx5_4:1", EVERY_HOOK,
          "report", "IB port polling"),
    Fault("ib-rate-degraded", "IB port rate degraded (HDR 200 on an NDR 400 fabric)",
          "sysfs: mlx5_1 port 1 rate 200 Gb/sec (4X HDR); expected 400",
          _sysfs(rate_200=frozenset({1})), "ib.port.rate", Status.FAIL, "mlx5_1:1", PERIODIC, "drain",
          "IB rate degraded", config=_IB_EXPECTED),
    Fault("ib-rate-degraded-unconfigured", "IB port slower than its siblings (no expected rate configured)",
          "sysfs: mlx5_1 port 1 rate 200 Gb/sec (4X HDR); the other 7 ports 400",
          _sysfs(rate_200=frozenset({1})), "ib.port.rate", Status.WARN, "mlx5_1:1", PERIODIC, "report",
          "IB rate degraded"),
    Fault("ib-symbol-growth", "IB symbol errors grew during a job",
          "epilog: mlx5_2 port 1 symbol_error 0 -> 7 over the prolog's baseline",
          _growth(sysfs_faults=SysfsFaults(symbol_errors={2: 7})), "job.counter_growth", Status.WARN,
          "mlx5_2:1", EPILOG, "report", "IB symbol-error growth"),
    Fault("hca-missing", "HCA missing (not on the bus / driver did not bind)",
          "sysfs: mlx5_5 absent; expected 8 ports mlx5_0..mlx5_7",
          _sysfs(missing_hca=frozenset({5})), "ib.port.state", Status.FAIL, "mlx5_5", EVERY_HOOK, "drain",
          "HCA missing", config=_IB_EXPECTED, also_components=(None,)),
    # -------------------------------------------------------------------------- after a job
    Fault("stray-process", "Process of the job survives the epilog's SIGKILL",
          "/proc: pid 48377 (D state) carries SLURM_JOB_ID=4242 after the job; stray action kill",
          _stray, "job.stray_processes", Status.FAIL, None, EPILOG, "drain", "stray process after a job"),
    Fault("gpu-memory-held", "GPU memory held after a job",
          "epilog, NVML: gpu0 30 GiB used by pid 48213 python3",
          _memory_held, "gpu.memory_used", Status.WARN, "gpu0", EPILOG, "report",
          "GPU memory held after a job"),
    Fault("gpu-memory-held-strict", "GPU memory held after a job (site drains on it)",
          "as gpu-memory-held; thresholds.\"gpu.memory_used\".fail = true",
          _memory_held, "gpu.memory_used", Status.FAIL, "gpu0", EPILOG, "drain",
          "GPU memory held after a job",
          config='[defaults.thresholds."gpu.memory_used"]\nfail = true\n'),
    # --------------------------------------------------------------------------------- host
    Fault("full-disk", "Root filesystem full",
          "statvfs: / 0.9 GiB free of 1787 GiB", _full_disk, "host.disk", Status.FAIL, "/", EVERY_HOOK,
          "drain", "full disk"),
    Fault("read-only-root", "Root filesystem remounted read-only",
          "/proc/mounts: /dev/md0 / ext4 ro,...", _ro_root, "host.mounts", Status.FAIL, "/", EVERY_HOOK,
          "drain", "read-only mount"),
    Fault("hung-probe", "Hung probe in the prolog (wedged device's sysfs read never returns)",
          "prolog hook run; sysfs vendor file of a GPU is a FIFO; prolog_budget_s = 1",
          hung_prolog, "node.responsive", Status.FAIL, None, PROLOG, "drain", "hung probe"),
]

# Every Xid the packaged policy fails on, one row each (any single event FAILs).
FAULTS += [
    Fault(f"xid-{r.xid}", f"Xid {r.xid}: {r.name}", f"kernel log: one Xid {r.xid} line on gpu1",
          _xid(r.xid, r.name), "gpu.xid", Status.FAIL, "gpu1", EVERY_HOOK, "drain",
          "each fatal Xid class in the policy")
    for r in sorted(_POLICY.rules.values(), key=lambda r: r.xid) if r.action == "fail"
]
# Warn-level Xids that act only as a storm: min_count events inside the window.
FAULTS += [
    Fault(f"xid-{r.xid}-storm", f"Xid {r.xid} storm: {r.name}",
          f"kernel log: {r.min_count} Xid {r.xid} lines on gpu1 within {r.window_s:g} s",
          _xid(r.xid, r.name, r.min_count), "gpu.xid", Status.WARN, "gpu1", EVERY_HOOK, "report",
          "Xid storms of warn-level classes")
    for r in sorted(_POLICY.rules.values(), key=lambda r: r.xid) if r.action == "warn" and r.min_count > 1
]

# The fault classes issue 7 names; the test asserts each is covered by at least one row.
ISSUE_CLASSES = (
    "double-bit ECC", "uncorrected volatile ECC", "retirement pending", "remap pending", "remap failure",
    "each fatal Xid class in the policy", "Xid storms of warn-level classes", "GPU lost",
    "GPU missing from the count", "NVLink link down", "NVLink CRC growth", "PCIe width downtrained",
    "PCIe gen downtrained under load", "thermal slowdown", "HW/power-brake throttle",
    "fabric not initialised", "reset required", "IB port down", "IB port polling", "IB rate degraded",
    "IB symbol-error growth", "HCA missing", "wrong driver version", "stray process after a job",
    "GPU memory held after a job", "full disk", "read-only mount", "hung probe",
)
