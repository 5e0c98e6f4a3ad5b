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
from typing import Any, Callable

import pynvml

from healthcheck.core.model import Finding, Snapshot, Status
from healthcheck.policies.xid import load_xid_policy
from tests.fakes.fake_pynvml import old_gpu
from tests.fixtures.host_counters_builder import add_aer, add_edac, add_pci_function
from tests.fixtures.proc_builder import DEFAULT_MOUNTS, GIB
from tests.fixtures.sysfs_builder import GPU_ADDRS, HCA_ADDRS, SysfsFaults
from tests.faults import node as N
from tests.faults.hung import hung_prolog

# Contexts (the Slurm hooks; `healthcheck check` runs every check too and exits 1 on a FAIL).
EVERY_HOOK = ("prolog", "epilog", "slurm-check")  # checks cheap enough for the prolog
PERIODIC = ("slurm-check",)  # HealthCheckProgram only (not the prolog's tens of ms)
EPILOG = ("epilog",)
PROLOG = ("prolog",)
BURNIN = ("burnin",)  # the burn-in's own judges (findings burnin.*), run on a reserved node

Injected = Snapshot | list[Finding]  # a snapshot to judge, or the findings of a hook run / burn-in judge

# Root-cause classes of the real failure mix (tests/faults/failure_classes.toml, the Llama 3 paper's
# Table 5); every row names one, docs/fault-coverage.md is computed from them.
GPU, HBM, SOFTWARE, CABLE, MAINTENANCE = "faulty GPU", "GPU HBM3", "software bug", "network switch/cable", \
    "host maintenance"
SRAM, GSP, NIC, NCCL, SDC = "GPU SRAM", "GPU system processor", "NIC", "NCCL watchdog timeouts", \
    "silent data corruption"
THERMAL, SSD, PSU, CHASSIS, IO_BOARD = "GPU thermal interface/sensor", "SSD", "power supply", "server chassis", \
    "IO expansion board"
DEPENDENCY, CPU, MEMORY = "dependency", "CPU", "system memory"


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
    failure_class: str = ""  # its root-cause class in the real failure mix (tests/faults/failure_classes.toml)


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


def _windowed(**faults) -> Callable[[Path], Snapshot]:
    """Two hook runs an hour apart, the second with ``faults`` in the sysfs tree: the counters' memory the
    hooks keep (``hook.net_window``) holds what grew between them."""
    def inject(root: Path) -> Snapshot:
        from healthcheck.hook import net_window

        proc = root / "boot"
        (proc / "sys" / "kernel" / "random").mkdir(parents=True)
        (proc / "sys" / "kernel" / "random" / "boot_id").write_text("boot-1\n")
        state, t0 = str(root / "state"), 1_780_000_000.0
        net_window.keep_readings(state, N.node(root / "before").snapshot(), now_s=t0, proc_root=str(proc))
        after = N.node(root / "after", sysfs_faults=SysfsFaults(**faults)).snapshot()
        net_window.keep_readings(state, after, now_s=t0 + 3600.0, proc_root=str(proc))
        return after
    return inject


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


def _klog(*lines: str, start_s: float = N.UPTIME_S - 3000.0) -> Callable[[Path], Snapshot]:
    """The healthy node with ``lines`` appended to its kernel log (raw dmesg stamps, one second apart,
    within the hour before the snapshot)."""
    def inject(root: Path) -> Snapshot:
        text = "".join(f"[{start_s + i:14.6f}] {line}\n" for i, line in enumerate(lines))
        return N.node(root, kernel_log=N.HEALTHY_KERNEL_LOG + text).snapshot()
    return inject


def _drive(device: str, **smart: int) -> Callable[[Path], Snapshot]:
    """The healthy node with one NVMe drive's `nvme smart-log -o json` showing ``smart``."""
    def inject(root: Path) -> Snapshot:
        n = N.node(root)
        n.storage[device] = {f"nvme-smart-log-{device}.json": N.nvme_smart(**smart)}
        return n.snapshot()
    return inject


def _sel(*records: str) -> Callable[[Path], Snapshot]:
    return lambda root: N.node(root, bmc_sel=N.SEL_HEALTHY + "".join(records)).snapshot()


def _sdr(old: str, new: str) -> Callable[[Path], Snapshot]:
    def inject(root: Path) -> Snapshot:
        assert old in N.SDR_HEALTHY
        return N.node(root, bmc_sdr=N.SDR_HEALTHY.replace(old, new)).snapshot()
    return inject


def _stalled(root: Path) -> Snapshot:
    """Three HealthCheckProgram runs five minutes apart: gpu3 at 100 % utilisation and 74 W (idle is
    71 W of 700 W) with job 4242's process on it; the samples kept in a state directory between runs
    as the hook keeps them (healthcheck.hook.gpu_samples), the last run's snapshot returned."""
    from healthcheck.hook.gpu_samples import keep_samples

    snap = None
    for i, when in enumerate(("2026-11-30T23:50:00+00:00", "2026-11-30T23:55:00+00:00", "2026-12-01T00:00:00+00:00")):
        n = N.node(root / f"run{i}", extra_processes=[N.FakeProcess(48213, "python3", 51234, ("python3", "train.py"))],
                   environ={48213: {"SLURM_JOB_ID": N.JOB_ID, "SLURM_JOB_USER": "alice"}})
        n.gpus = N.gpu_edit(3, utilization=(100, 2), power_mw=74_120,
                            processes=[(48213, 61_440 * 1024 * 1024, "python3")])(n.gpus)
        snap = n.snapshot()
        assert keep_samples(str(root / "state"), snap, now_iso=when, proc_root=str(n.proc_root)) is None
    return snap


def _gemm(component: str, digest: str, mismatches: int = 0):
    from healthcheck.burnin.gemm import GemmResult

    return GemmResult(device=int(component[3:]), name="NVIDIA H100 80GB HBM3", component=component, backend="torch",
                      dtype="bf16", n=8192, iterations=50, elapsed_s=1.2, tflops=702.0, digest=digest,
                      digest_metric=int(digest[:12], 16), mismatches=mismatches, verified=50,
                      first_mismatch=17 if mismatches else None, reference_error=2e-3, tolerance=1e-2)


def _sdc(root: Path) -> list[Finding]:
    """Burn-in GEMM on 8 GPUs: gpu5's repeated products differ from its first (3 of 50) and its result
    from its siblings' (the burn-in's judge, healthcheck.burnin.judge_compute)."""
    from healthcheck.burnin.judge_compute import judge_gemm

    good = "4be1f0c2a9d377e05c1b2a3f4e5d6c7b"
    results = [_gemm(f"gpu{i}", good) for i in range(8)]
    results[5] = _gemm("gpu5", "9f00aa11bb22cc33dd44ee55ff667788", mismatches=3)
    return judge_gemm(results, None)


def _nccl_hang(root: Path) -> list[Finding]:
    """Burn-in nccl-tests all_reduce across the node that never finished (killed at its deadline, as a
    collective stuck behind a NCCL watchdog is): the burn-in's judge (healthcheck.burnin.judge_nccl)."""
    from healthcheck.burnin.judge_nccl import judge_run
    from healthcheck.burnin.nccl_run import NcclRun
    from healthcheck.parsers import nccl_tests
    from tests.conftest import FIXTURES

    text = (FIXTURES / "nccl-tests" / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt").read_text()
    run = NcclRun("all_reduce", "node", [N.NODE], ["all_reduce_perf", "-g", "8"], result=nccl_tests.parse(text),
                  error="did not finish within 600 s (killed)", timed_out=True)
    return [judge_run(run, None, None, None)]


def _thermal_spread(root: Path) -> list[Finding]:
    """Burn-in telemetry under GEMM load: gpu6 peaks at 87 C where its 7 siblings at similar power peak
    at 61-64 C (the burn-in's judge, healthcheck.burnin.judge_compute.judge_thermal_spread)."""
    from healthcheck.burnin.judge_compute import judge_thermal_spread
    from healthcheck.burnin.telemetry import TelemetrySummary

    temps = [62.0, 61.0, 64.0, 63.0, 62.0, 61.0, 87.0, 63.0]
    summary = {i: TelemetrySummary(index=i, samples=120, temp_max_c=t, power_mean_w=655.0 + i, power_max_w=699.0)
               for i, t in enumerate(temps)}
    return judge_thermal_spread(summary)


def _load_xid(root: Path) -> list[Finding]:
    """Burn-in: the node checks before and after the load phases; the load provoked an Xid 79 on gpu1
    (healthcheck.burnin.judge_recheck.judge_load_errors)."""
    from healthcheck.burnin.judge_recheck import judge_load_errors

    before = N.node(root / "before").snapshot()
    after = N.node(root / "after", kernel_log=N.HEALTHY_KERNEL_LOG + N.xid_line(
        79, 1, "GPU has fallen off the bus.", uptime_s=N.UPTIME_S - 60)).snapshot()
    return judge_load_errors(before, after)


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
          co_detectors=("gpu.xid",), failure_class=HBM),
    Fault("ecc-uncorrected-volatile", "Uncorrected ECC errors since driver load (no Xid logged)",
          "NVML: gpu4 uncorrected ECC volatile 3, aggregate 3",
          _gpu(4, ecc=_uncorrected(3, 3)), "gpu.ecc.uncorrected", Status.FAIL, "gpu4", EVERY_HOOK,
          "drain", "uncorrected volatile ECC", failure_class=HBM),
    Fault("retirement-pending", "Page retirement pending (pre-Ampere GPU)",
          "NVML on a V100-class node: gpu3 nvmlDeviceGetRetiredPagesPendingStatus = 1",
          lambda root: _volta(root, 3, retired_pending=1), "gpu.retired_pages", Status.FAIL, "gpu3",
          EVERY_HOOK, "drain", "retirement pending", failure_class=HBM),
    Fault("remap-pending", "Row remap pending (needs a GPU reset)",
          "NVML: gpu5 nvmlDeviceGetRemappedRows = (0 corr, 2 unc, pending, no failure)",
          _gpu(5, remapped_rows=(0, 2, 1, 0)), "gpu.row_remap", Status.FAIL, "gpu5", EVERY_HOOK, "drain",
          "remap pending", failure_class=HBM),
    Fault("remap-failure", "Row remapping failure (bank out of spare rows: RMA)",
          "NVML: gpu6 nvmlDeviceGetRemappedRows = (0, 3, not pending, failure)",
          _gpu(6, remapped_rows=(0, 3, 0, 1)), "gpu.row_remap", Status.FAIL, "gpu6", EVERY_HOOK, "drain",
          "remap failure", failure_class=HBM),
    # ------------------------------------------------------------------- GPU presence / driver
    Fault("gpu-lost", "GPU lost (every NVML call answers GPU_IS_LOST)",
          "NVML: gpu3 lost", _gpu(3, lost=True), "gpu.lost", Status.FAIL, "gpu3", EVERY_HOOK, "drain",
          "GPU lost", failure_class=GPU),
    Fault("gpu-missing", "GPU missing from the driver's count (still on the PCI bus)",
          "NVML lists 7 GPUs; sysfs shows 8 NVIDIA 3D controllers",
          _gpu_missing, "gpu.count", Status.FAIL, None, EVERY_HOOK, "drain", "GPU missing from the count", failure_class=GPU),
    Fault("gpu-driver-hang", "GPU driver wedged (NVML does not answer)",
          "NVML: nvmlInit blocks; GPU probe deadline 0.3 s",
          _nvml_hang, "gpu.responsive", Status.FAIL, None, EVERY_HOOK, "drain", "hung probe", failure_class=GPU),
    Fault("fabric-not-initialised", "NVSwitch fabric registration not finished",
          "NVML: gpu0 GpuFabricInfo state IN_PROGRESS",
          _gpu(0, fabric_state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS), "gpu.fabric", Status.FAIL, "gpu0",
          EVERY_HOOK, "drain", "fabric not initialised", failure_class=GPU),
    Fault("reset-required", "Driver asks for a GPU reset",
          "NVML: gpu7 field GPU_RECOVERY_ACTION = GPU_RESET",
          _gpu(7, recovery_action=pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET), "gpu.reset_required",
          Status.FAIL, "gpu7", EVERY_HOOK, "drain", "reset required", failure_class=GPU),
    Fault("wrong-driver", "Wrong NVIDIA driver version",
          "NVML and /proc/driver/nvidia/version: 535.161.08; expected driver 550.90.07",
          lambda root: N.node(root, driver="535.161.08").snapshot(), "sw.versions", Status.FAIL, "driver",
          PERIODIC, "drain", "wrong driver version", config='[defaults]\nversions = { driver = "550.90.07" }\n', failure_class=DEPENDENCY),
    # ----------------------------------------------------------------------- NVLink and PCIe
    Fault("nvlink-down", "NVLink link down",
          "NVML: gpu3 nvmlDeviceGetNvLinkState(link 5) = inactive",
          _gpu(3, nvlink_states=[1] * 5 + [0] + [1] * 12), "gpu.nvlink.state", Status.FAIL, "gpu3",
          EVERY_HOOK, "drain", "NVLink link down", failure_class=GPU),
    Fault("nvlink-crc-growth", "NVLink CRC errors grew during a job",
          "epilog: gpu5 link 11 CRC flit +412, data +9 over the prolog's baseline",
          _nvlink_crc, "job.counter_growth", Status.WARN, "gpu5", EPILOG, "report", "NVLink CRC growth", failure_class=GPU),
    Fault("pcie-width", "GPU PCIe link width downtrained (x8 of x16)",
          "NVML: gpu2 link x8 of x16 (sysfs current_link_width 8 too)",
          lambda root: N.node(root, sysfs_faults=SysfsFaults(gpu_width_x8=frozenset({2})),
                              gpus=N.gpu_edit(2, pcie=(5, 5, 8, 16))(N.h100_node())).snapshot(),
          "gpu.pcie.link", Status.FAIL, "gpu2", EVERY_HOOK, "drain", "PCIe width downtrained", failure_class=GPU),
    Fault("pcie-gen-under-load", "GPU PCIe link at Gen1 of Gen5 while busy",
          "NVML: gpu6 gen 1 of 5, utilisation 100 % (sysfs 2.5 GT/s too)",
          lambda root: N.node(root, sysfs_faults=SysfsFaults(gpu_speed_gen1=frozenset({6})),
                              gpus=N.gpu_edit(6, pcie=(1, 5, 16, 16), utilization=(100, 61))(N.h100_node())
                              ).snapshot(),
          "gpu.pcie.link", Status.FAIL, "gpu6", EVERY_HOOK, "drain", "PCIe gen downtrained under load", failure_class=GPU),
    # ----------------------------------------------------------------------- thermal and power
    Fault("thermal-slowdown", "GPU at its slowdown temperature (thermal slowdown active)",
          "NVML: gpu4 90 C (slowdown 89 C, margin -1 C), clock events HW+SW thermal slowdown",
          _gpu(4, temperature=90, margin_temperature=-1, clock_reasons=_THERMAL), "gpu.temperature",
          Status.FAIL, "gpu4", EVERY_HOOK, "drain", "thermal slowdown", co_detectors=("gpu.throttle",), failure_class=THERMAL),
    Fault("hw-power-brake", "HW power-brake slowdown (external power brake asserted)",
          "NVML: gpu1 clock event reasons = HW power brake slowdown",
          _gpu(1, clock_reasons=_BRAKE), "gpu.throttle", Status.FAIL, "gpu1", EVERY_HOOK, "drain",
          "HW/power-brake throttle", failure_class=PSU),
    Fault("sw-thermal-slowdown", "SW thermal slowdown only",
          "NVML: gpu1 clock event reasons = SW thermal slowdown",
          _gpu(1, clock_reasons=pynvml.nvmlClocksThrottleReasonSwThermalSlowdown), "gpu.throttle",
          Status.WARN, "gpu1", EVERY_HOOK, "report", "thermal slowdown", failure_class=THERMAL),
    # ---------------------------------------------------------------------------- InfiniBand
    Fault("ib-port-down", "IB port down (disabled)",
          "sysfs: mlx5_3 port 1 state 1: DOWN, phys_state 3: Disabled",
          _sysfs(port_disabled=frozenset({3})), "ib.port.state", Status.FAIL, "mlx5_3:1", EVERY_HOOK,
          "drain", "IB port down", config=_IB_EXPECTED, also_components=(None,), failure_class=NIC),
    Fault("ib-port-polling", "IB port polling (no link partner: cable or switch port)",
          "sysfs: mlx5_4 port 1 state 1: DOWN, phys_state 2: Polling",
          _sysfs(port_down=frozenset({4})), "ib.port.state", Status.FAIL, "mlx5_4:1", EVERY_HOOK,
          "drain", "IB port polling", config=_IB_EXPECTED, also_components=(None,), failure_class=CABLE),
    Fault("ib-port-down-unconfigured", "IB port down on a node with no IB expectation",
          "sysfs: mlx5_4 port 1 state 1: DOWN, phys_state 2: Polling; no [ib] expectation",
          _sysfs(port_down=frozenset({4})), "ib.port.state", Status.WARN, "mlx5_4:1", EVERY_HOOK,
          "report", "IB port polling", failure_class=CABLE),
    Fault("ib-rate-degraded", "IB port rate degraded (HDR 200 on an NDR 400 fabric)",
          "sysfs: mlx5_1 port 1 rate 200 Gb/sec (4X HDR); expected 400",
          _sysfs(rate_200=frozenset({1})), "ib.port.rate", Status.FAIL, "mlx5_1:1", PERIODIC, "drain",
          "IB rate degraded", config=_IB_EXPECTED, failure_class=CABLE),
    Fault("ib-rate-degraded-unconfigured", "IB port slower than its siblings (no expected rate configured)",
          "sysfs: mlx5_1 port 1 rate 200 Gb/sec (4X HDR); the other 7 ports 400",
          _sysfs(rate_200=frozenset({1})), "ib.port.rate", Status.WARN, "mlx5_1:1", PERIODIC, "report",
          "IB rate degraded", failure_class=CABLE),
    Fault("ib-symbol-growth", "IB symbol errors grew during a job",
          "epilog: mlx5_2 port 1 symbol_error 0 -> 7 over the prolog's baseline",
          _growth(sysfs_faults=SysfsFaults(symbol_errors={2: 7})), "job.counter_growth", Status.WARN,
          "mlx5_2:1", EPILOG, "report", "IB symbol-error growth", failure_class=CABLE),
    Fault("net-link-downs-window", "IB port went down 3 times within the hour (counter strikes)",
          "sysfs: mlx5_4 port 1 link_downed 0 -> 3 between two hook runs an hour apart (FAIL at 3 in 3 h)",
          _windowed(counters={4: {"link_downed": 3}}), "net.link.flaps", Status.FAIL, "mlx5_4:1", EVERY_HOOK,
          "drain", "link flaps", failure_class=CABLE),
    Fault("net-symbol-errors-window", "IB symbol errors growing (a marginal cable or transceiver)",
          "sysfs: mlx5_2 port 1 symbol_error 0 -> 5000 within an hour (FAIL at 400 an hour)",
          _windowed(counters={2: {"symbol_error": 5000}}), "net.errors", Status.FAIL, "mlx5_2:1", EVERY_HOOK,
          "drain", "IB symbol errors", failure_class=CABLE),
    Fault("hca-missing", "HCA missing (not on the bus / driver did not bind)",
          "sysfs: mlx5_5 absent; expected 8 ports mlx5_0..mlx5_7",
          _sysfs(missing_hca=frozenset({5})), "ib.port.state", Status.FAIL, "mlx5_5", EVERY_HOOK, "drain",
          "HCA missing", config=_IB_EXPECTED, also_components=(None,), failure_class=NIC),
    # -------------------------------------------------------------------------- after a job
    Fault("stray-process", "Process of the job survives the epilog's SIGKILL",
          "/proc: pid 48377 (D state) carries SLURM_JOB_ID=4242 after the job; stray action kill",
          _stray, "job.stray_processes", Status.FAIL, None, EPILOG, "drain", "stray process after a job", failure_class=SOFTWARE),
    Fault("gpu-memory-held", "GPU memory held after a job",
          "epilog, NVML: gpu0 30 GiB used by pid 48213 python3",
          _memory_held, "gpu.memory_used", Status.WARN, "gpu0", EPILOG, "report",
          "GPU memory held after a job", failure_class=SOFTWARE),
    Fault("gpu-memory-held-strict", "GPU memory held after a job (site drains on it)",
          "as gpu-memory-held; thresholds.\"gpu.memory_used\".fail = true",
          _memory_held, "gpu.memory_used", Status.FAIL, "gpu0", EPILOG, "drain",
          "GPU memory held after a job",
          config='[defaults.thresholds."gpu.memory_used"]\nfail = true\n', failure_class=SOFTWARE),
    # --------------------------------------------------------------------------------- host
    Fault("full-disk", "Root filesystem full",
          "statvfs: / 0.9 GiB free of 1787 GiB", _full_disk, "host.disk", Status.FAIL, "/", EVERY_HOOK,
          "drain", "full disk", failure_class=SOFTWARE),
    Fault("read-only-root", "Root filesystem remounted read-only",
          "/proc/mounts: /dev/md0 / ext4 ro,...", _ro_root, "host.mounts", Status.FAIL, "/", EVERY_HOOK,
          "drain", "read-only mount", failure_class=SSD),
    Fault("hung-probe", "Hung probe in the prolog (wedged device's sysfs read never returns)",
          "prolog hook run; sysfs vendor file of a GPU is a FIFO; prolog_budget_s = 1",
          hung_prolog, "node.responsive", Status.FAIL, None, PROLOG, "drain", "hung probe", failure_class=GPU),
]

_HCA1 = "0000:3c:00.0"  # mlx5_1's PCI address in the fixture tree
_GPU1 = "0000:2a:00.0"
_SWITCH_PORT = "0000:17:02.0"  # a PCIe switch downstream port of the IO board (GPU/HCA behind it)
_SDR_MEM_DIMM = "CPU1_DIMM_B2"

# Issue 21: host, storage, BMC, network and GPU signals of the real failure mix, and the burn-in's.
FAULTS += [
    # ---------------------------------------------------------------------------- kernel log
    Fault("host-mce-fatal", "Fatal machine check (processor context corrupt)",
          "kernel log: 'mce: [Hardware Error]: CPU 14: Machine Check Exception: 5 Bank 0: f200004000000005', "
          "'Machine check: Processor context corrupt' (the previous boot's panic, logged at boot)",
          _klog("mce: [Hardware Error]: CPU 14: Machine Check Exception: 5 Bank 0: f200004000000005",
                "mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff8160e9a5> {native_safe_halt+0x5/0x10}",
                "mce: [Hardware Error]: Machine check: Processor context corrupt"),
          "host.events", Status.FAIL, "cpu14", EVERY_HOOK, "drain", "machine check", failure_class=CPU,
          also_components=("node",)),
    Fault("host-edac-ue", "Uncorrected DIMM error (EDAC UE)",
          "kernel log: 'EDAC MC3: 1 UE memory read error on CPU_SrcID#0_MC#3_Chan#0_DIMM#0 (...)'",
          _klog("EDAC skx MC3: HANDLING MCE MEMORY ERROR",
                "EDAC MC3: 1 UE memory read error on CPU_SrcID#0_MC#3_Chan#0_DIMM#0 (mc:3 channel:0 slot:0 "
                "page:0x41a1f offset:0x0 grain:32 syndrome:0x0)"),
          "host.events", Status.FAIL, "MC3", EVERY_HOOK, "drain", "memory error", failure_class=MEMORY),
    Fault("host-aer-fatal-gpu", "Uncorrected fatal PCIe error on a GPU (AER)",
          f"kernel log: 'nvidia {_GPU1}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer'",
          _klog(f"pcieport 0000:29:00.0: AER: Uncorrected (Fatal) error received: {_GPU1}",
                f"nvidia {_GPU1}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
                "(Receiver ID)",
                f"nvidia {_GPU1}:   device [10de:2330] error status/mask=00000020/00000000"),
          "host.events", Status.FAIL, "gpu1", EVERY_HOOK, "drain", "uncorrected PCIe error", failure_class=GPU),
    Fault("host-aer-fatal-switch", "Uncorrected fatal PCIe error on a PCIe switch port (IO board)",
          f"kernel log: 'pcieport {_SWITCH_PORT}: PCIe Bus Error: severity=Uncorrected (Fatal)', "
          "Surprise Down; 'AER: device recovery failed'",
          _klog(f"pcieport {_SWITCH_PORT}: AER: Uncorrected (Fatal) error received: {_SWITCH_PORT}",
                f"pcieport {_SWITCH_PORT}: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
                "(Receiver ID)",
                f"pcieport {_SWITCH_PORT}:    [ 5] SDES                   (First)",
                f"pcieport {_SWITCH_PORT}: AER: device recovery failed"),
          "host.events", Status.FAIL, _SWITCH_PORT, EVERY_HOOK, "drain", "uncorrected PCIe error",
          failure_class=IO_BOARD),
    Fault("host-nvme-reset", "NVMe controller down and reset",
          "kernel log: 'nvme nvme1: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS read failed (134)'",
          _klog("nvme nvme1: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS read failed (134)",
                "nvme nvme1: Removing after probe failure status: -19"),
          "host.events", Status.FAIL, "nvme1", EVERY_HOOK, "drain", "NVMe controller reset", failure_class=SSD),
    Fault("host-mlx5-health", "HCA health compromised (mlx5 firmware internal error)",
          f"kernel log: 'mlx5_core {_HCA1}: poll_health:801:(pid 0): device's health compromised - reached miss "
          "count', 'Health issue observed, firmware internal error, severity(3) ERROR'",
          _klog(f"mlx5_core {_HCA1}: poll_health:801:(pid 0): device's health compromised - reached miss count",
                f"mlx5_core {_HCA1}: print_health_info:431:(pid 0): Health issue observed, firmware internal "
                "error, severity(3) ERROR:"),
          "host.events", Status.FAIL, _HCA1, EVERY_HOOK, "drain", "HCA health", failure_class=NIC),
    Fault("host-link-flaps", "IB link flapping (3 link-down events in an hour)",
          f"kernel log: 3x 'mlx5_core {_HCA1} ibp60s0: Link down' with 'Link up' between (policy: FAIL at 3 in 3 h)",
          _klog(*[f"mlx5_core {_HCA1} ibp60s0: Link {state}" for _ in range(3) for state in ("down", "up")]),
          "host.events", Status.FAIL, "ibp60s0", EVERY_HOOK, "drain", "link flaps", failure_class=CABLE),
    Fault("host-cable-unplugged", "HCA cable/transceiver unplugged on a port the class expects up",
          f"kernel log: 'mlx5_core {_HCA1}: Port module event: module 1, Cable unplugged'; ib.devices names mlx5_1",
          _klog(f"mlx5_core {_HCA1}: Port module event: module 1, Cable unplugged"),
          "host.events", Status.FAIL, f"{_HCA1} module 1", EVERY_HOOK, "drain", "cable unplugged",
          config=_IB_EXPECTED, failure_class=CABLE),
    Fault("host-hca-tx-timeout", "HCA port stopped transmitting (NIC transmit timeout on an expected port)",
          f"kernel log: 'mlx5_core {_HCA1} ens1np0: TX timeout detected'; ib.devices names mlx5_1",
          _klog(f"mlx5_core {_HCA1} ens1np0: TX timeout detected"),
          "host.events", Status.FAIL, "ens1np0", EVERY_HOOK, "drain", "NIC transmit timeout",
          config=_IB_EXPECTED, failure_class=NIC),
    # -------------------------------------------------------------------------------- storage
    Fault("nvme-media-errors", "NVMe media and data integrity errors",
          "nvme smart-log -o json of nvme1: media_errors 7, num_err_log_entries 62",
          _drive("nvme1", media_errors=7, num_err_log_entries=62), "storage.health", Status.FAIL, "nvme1",
          PERIODIC, "drain", "drive health", failure_class=SSD),
    Fault("nvme-critical-warning", "NVMe critical warning (spare below threshold, read-only)",
          "nvme smart-log -o json of nvme0: critical_warning 0x09, avail_spare 4 (threshold 10)",
          _drive("nvme0", critical_warning=0x09, avail_spare=4), "storage.health", Status.FAIL, "nvme0",
          PERIODIC, "drain", "drive health", failure_class=SSD),
    # ------------------------------------------------------------------------------------ BMC
    Fault("bmc-psu-failure", "Power supply failure in the BMC event log",
          "ipmitool sel elist: 'Power Supply PS2 Status | Failure detected | Asserted'",
          _sel(N.sel_line(0x11, "Power Supply PS2 Status", "Failure detected")), "bmc.sel", Status.FAIL,
          "bmc:Power Supply PS2 Status", PERIODIC, "drain", "power supply", failure_class=PSU),
    Fault("bmc-psu-ac-lost", "Power supply without AC input (sensor)",
          "ipmitool sdr elist: 'PS2 Status | 85h | ok | 10.2 | Presence detected, Power Supply AC lost'",
          _sdr("10.2 | Presence detected", "10.2 | Presence detected, Power Supply AC lost"), "bmc.sdr",
          Status.FAIL, "bmc:PS2 Status", PERIODIC, "drain", "power supply", failure_class=PSU),
    Fault("bmc-fan-critical", "Fan below its critical speed",
          "ipmitool sel elist: 'Fan FAN3 | Lower Critical going low | Asserted'",
          _sel(N.sel_line(0x12, "Fan FAN3", "Lower Critical going low")), "bmc.sel", Status.FAIL,
          "bmc:Fan FAN3", PERIODIC, "drain", "fan", failure_class=CHASSIS),
    Fault("bmc-cpu-ierr", "Processor IERR in the BMC event log",
          "ipmitool sel elist: 'Processor CPU1 Status | IERR | Asserted'",
          _sel(N.sel_line(0x13, "Processor CPU1 Status", "IERR")), "bmc.sel", Status.FAIL,
          "bmc:Processor CPU1 Status", PERIODIC, "drain", "machine check", failure_class=CPU),
    Fault("bmc-memory-ue", "Uncorrectable memory error in the BMC event log",
          f"ipmitool sel elist: 'Memory #0x02 | Uncorrectable ECC | Asserted | {_SDR_MEM_DIMM}'",
          _sel(N.sel_line(0x14, "Memory #0x02", "Uncorrectable ECC", detail=_SDR_MEM_DIMM)), "bmc.sel",
          Status.FAIL, f"bmc:{_SDR_MEM_DIMM}", PERIODIC, "drain", "memory error", failure_class=MEMORY),
    # ------------------------------------------------------------------------------------ GPU
    Fault("sram-threshold", "GPU SRAM error threshold exceeded (RMA flag)",
          "NVML: gpu2 nvmlDeviceGetSramEccErrorStatus: aggregateUncParity 3, aggregateUncSecDed 2, "
          "bThresholdExceeded 1",
          _gpu(2, sram={"aggregateUncParity": 3, "aggregateUncSecDed": 2, "bThresholdExceeded": 1}),
          "gpu.ecc.sram", Status.FAIL, "gpu2", EVERY_HOOK, "drain", "SRAM errors", failure_class=SRAM),
    Fault("gpu-stalled", "GPU stalled in a collective (busy at near-idle power)",
          "3 HealthCheckProgram runs 5 min apart: gpu3 100 % utilisation at 74 W (limit 700 W), job 4242's "
          "process on it; samples kept in the state directory",
          _stalled, "gpu.stalled", Status.WARN, "gpu3", PERIODIC, "report", "stalled collective",
          failure_class=NCCL),
    # -------------------------------------------------------------------------------- burn-in
    Fault("burnin-sdc", "Silent data corruption in GEMM (burn-in)",
          "burn-in GEMM on 8 GPUs: gpu5 3 of 50 repeated products differ from its first, its digest from "
          "its 7 siblings'",
          _sdc, "burnin.gemm.verify", Status.FAIL, "gpu5", BURNIN, "drain", "silent data corruption",
          failure_class=SDC),
    Fault("burnin-nccl-hang", "Collective that never finishes (burn-in nccl-tests)",
          "burn-in all_reduce_perf on the node killed at its 600 s deadline",
          _nccl_hang, "burnin.nccl", Status.FAIL, "all_reduce@node", BURNIN, "drain", "stalled collective",
          failure_class=NCCL),
    Fault("burnin-thermal-spread", "Hottest GPU far above its siblings under load (burn-in)",
          "burn-in telemetry under GEMM: gpu6 max 87 C at 661 W vs its siblings' median 62 C at 655-662 W",
          _thermal_spread, "burnin.thermal.spread", Status.FAIL, "gpu6", BURNIN, "drain", "thermal spread",
          failure_class=THERMAL),
    Fault("burnin-load-xid", "Xid provoked by the burn-in's load",
          "node checks before and after the load phases: a new Xid 79 on gpu1 after",
          _load_xid, "burnin.load_errors", Status.FAIL, "gpu1", BURNIN, "drain", "errors under load",
          failure_class=GPU),
]

# ------------------------------------------------------------------- host error counters (sysfs, mlxlink)


def _edac(**changes) -> Callable[[Path], Any]:
    """Two memory controllers of ten days (mc0, mc1); ``changes`` go to mc1."""
    def edit(sys_root: Path) -> None:
        add_edac(sys_root, 0)
        add_edac(sys_root, 1, **changes)
    return edit


def _aer(addr: str, bridge: bool = False, **counts) -> Callable[[Path], Any]:
    """AER files on ``addr`` (``bridge``: a PCIe switch downstream port added for it first) and clean
    ones on gpu0."""
    def edit(sys_root: Path) -> None:
        if bridge:
            add_pci_function(sys_root, addr, vendor="0x10b5", klass="0x060400", device="0xc030")
        add_aer(sys_root, addr, **counts)
        if addr != GPU_ADDRS[0]:
            add_aer(sys_root, GPU_ADDRS[0])
    return edit


def _counters(*edits: Callable[[Path], Any], **changes) -> Callable[[Path], Snapshot]:
    return lambda root: N.node(root, sysfs_edits=edits, **changes).snapshot()


def _counter_growth(before: tuple, after: tuple, **after_changes) -> Callable[[Path], Snapshot]:
    """The prolog's baseline on a node with the ``before`` sysfs edits, the epilog's reading with
    ``after`` (and ``after_changes``): the growth in between is the job's."""
    def inject(root: Path) -> Snapshot:
        baseline = N.node(root / "prolog", sysfs_edits=before).snapshot()
        return N.epilog(root, baseline, N.node(root / "epilog", sysfs_edits=after, **after_changes))
    return inject


def _mlxlink(name: str, device: str) -> Callable[[Path], Snapshot]:
    from tests.conftest import FIXTURES

    text = (FIXTURES / "mlxlink" / name).read_text()
    healthy = (FIXTURES / "mlxlink" / "ndr-healthy.txt").read_text()
    outputs = {f"mlxlink-mlx5_{i}.txt": healthy for i in range(8)}
    outputs[f"mlxlink-{device}.txt"] = text
    return lambda root: N.node(root, mlxlink=outputs).snapshot()


_HCA3 = HCA_ADDRS[3]  # mlx5_3
_DAYS = N.UPTIME_S / 86400.0  # the fixture node's uptime in days (IB counters are judged per 24 h of it)

FAULTS += [
    Fault("edac-ue-counter", "Uncorrected memory error counted by EDAC (sysfs, no log line)",
          "sysfs: devices/system/edac/mc/mc1/ue_count 1 (dimm0 CPU_SrcID#0_MC#1_Chan#2_DIMM#0), ten days since reset",
          _counters(_edac(ue=1, ce=3, dimms={"CPU_SrcID#0_MC#1_Chan#2_DIMM#0": (3, 1)})), "host.edac", Status.FAIL,
          "mc1", EVERY_HOOK, "drain", "memory error", failure_class=MEMORY),
    Fault("edac-ce-rate-counter", "Corrected memory errors past the socket rate (EDAC sysfs)",
          "sysfs: mc1 ce_count 2500 over 5 days since reset (500 per 24 h; FAIL at 100)",
          _counters(_edac(ce=2500, seconds=86400 * 5)), "host.edac", Status.FAIL, "mc1", EVERY_HOOK, "drain",
          "memory error", failure_class=MEMORY),
    Fault("aer-counter-fatal-gpu", "Uncorrectable fatal PCIe errors counted on a GPU (AER sysfs)",
          f"sysfs: {GPU_ADDRS[1]} (gpu1) aer_dev_fatal SDES 1 (surprise down), TOTAL_ERR_FATAL 1",
          _counters(_aer(GPU_ADDRS[1], fatal={"SDES": 1})), "pcie.aer", Status.FAIL, GPU_ADDRS[1],
          ("epilog", "slurm-check"), "drain", "uncorrected PCIe error", failure_class=GPU),
    Fault("aer-counter-nonfatal-switch", "Uncorrectable non-fatal PCIe errors on a PCIe switch port (IO board)",
          f"sysfs: PCIe switch downstream port {_SWITCH_PORT} aer_dev_nonfatal CmpltTO 2",
          _counters(_aer(_SWITCH_PORT, bridge=True, nonfatal={"CmpltTO": 2})), "pcie.aer", Status.FAIL,
          _SWITCH_PORT, ("epilog", "slurm-check"), "drain", "uncorrected PCIe error", failure_class=IO_BOARD),
    Fault("aer-counter-fatal-hca", "Uncorrectable fatal PCIe errors counted on an HCA (AER sysfs)",
          f"sysfs: {_HCA3} (mlx5_3) aer_dev_fatal DLP 1",
          _counters(_aer(_HCA3, fatal={"DLP": 1})), "pcie.aer", Status.FAIL, _HCA3, ("epilog", "slurm-check"),
          "drain", "uncorrected PCIe error", failure_class=NIC),
    Fault("ib-link-downed-rate", "IB link went down 6 times a day (port counter)",
          f"sysfs: mlx5_6 port 1 counters/link_downed {round(6 * _DAYS)} over {_DAYS:.1f} days of uptime "
          "(FAIL at 5 per 24 h)",
          _sysfs(counters={6: {"link_downed": round(6 * _DAYS)}}), "ib.port.errors", Status.FAIL, "mlx5_6:1",
          PERIODIC, "drain", "link flaps", failure_class=CABLE),
    Fault("ib-symbol-errors-rate", "IB symbol errors past their daily rate (port counter)",
          f"sysfs: mlx5_2 port 1 counters/symbol_error {round(20000 * _DAYS)} (20,000 per 24 h; FAIL at 10,000)",
          _sysfs(counters={2: {"symbol_error": round(20000 * _DAYS)}}), "ib.port.errors", Status.FAIL, "mlx5_2:1",
          PERIODIC, "drain", "IB symbol errors", failure_class=CABLE),
    Fault("link-downed-growth", "IB link went down during a job (epilog growth)",
          "epilog: mlx5_4 port 1 link_downed 0 -> 1 over the prolog's baseline (FAIL at +1)",
          _growth(sysfs_faults=SysfsFaults(counters={4: {"link_downed": 1}})), "job.counter_growth", Status.FAIL,
          "mlx5_4:1", EPILOG, "drain", "counter growth during a job", failure_class=CABLE),
    Fault("edac-ue-growth", "Uncorrected memory error during a job (epilog growth)",
          "epilog: mc1 ue_count 0 -> 1 over the prolog's baseline (host.edac FAILs the level too)",
          _counter_growth((_edac(),), (_edac(ue=1),)), "job.counter_growth", Status.FAIL, "mc1", EPILOG, "drain",
          "counter growth during a job", co_detectors=("host.edac",), failure_class=MEMORY),
    Fault("aer-fatal-growth", "Uncorrectable fatal PCIe error on a GPU during a job (epilog growth)",
          f"epilog: {GPU_ADDRS[5]} (gpu5) aer_dev_fatal 0 -> 1 over the prolog's baseline (pcie.aer FAILs the "
          "level too)",
          _counter_growth((_aer(GPU_ADDRS[5]),), (_aer(GPU_ADDRS[5], fatal={"SDES": 1}),)),
          "job.counter_growth", Status.FAIL, GPU_ADDRS[5], EPILOG, "drain", "counter growth during a job",
          co_detectors=("pcie.aer",), failure_class=GPU),
    Fault("mlxlink-high-ber", "IB link with a high post-FEC BER and a hot module (mlxlink)",
          "mlxlink -d mlx5_3 -m -c -e: effective BER 4E-11 (FAIL at 1E-12), raw BER 2E-5, module 77 C over 75 C",
          _mlxlink("ndr-high-ber-hot-module.txt", "mlx5_3"), "ib.mlxlink", Status.FAIL, "mlx5_3:1", PERIODIC,
          "drain", "high BER", failure_class=CABLE),
]

# The root-cause class of each Xid the policy acts on (a test requires every fail and storm Xid here):
# memory (48 DBE, 64 remap failure, 95 uncontained, 140 ECC unrecovered, 156 resource retirement) ->
# HBM; GSP and micro-controller (62, 119, 120) -> GSP; 54 (auxiliary power not connected) -> power
# supply; the storms NVIDIA's catalog files under RESTART_APP (application faults) -> software bug.
XID_CLASS = {
    46: GPU, 48: HBM, 54: PSU, 62: GSP, 64: HBM, 74: GPU, 79: GPU, 95: HBM, 109: GPU, 110: GPU, 119: GSP,
    120: GSP, 136: GPU, 140: HBM, 143: GPU, 155: GPU, 156: HBM, 158: GPU,
    8: SOFTWARE, 13: SOFTWARE, 31: SOFTWARE, 32: SOFTWARE, 38: GPU, 39: SOFTWARE, 40: SOFTWARE, 41: SOFTWARE,
    43: SOFTWARE, 44: SOFTWARE, 45: SOFTWARE, 68: SOFTWARE, 69: SOFTWARE, 80: GPU, 121: GPU, 137: GPU, 159: GPU,
    # issue 33 (catalog through 172): 149 NVLink5 NETIR (Link Fatal), 167 PCIe fatal timeout -> GPU; 168 reduced
    # memory capacity, 171 uncorrectable DRAM -> HBM; 172 uncorrectable SRAM -> SRAM; 169 SEC2 micro-controller
    # halt -> GSP; the DLA and channel-retirement storms (152, 153, 160) -> GPU
    149: GPU, 167: GPU, 168: HBM, 169: GSP, 171: HBM, 172: SRAM, 152: GPU, 153: GPU, 160: GPU,
}

# Every Xid the packaged policy fails on, one row each (any single event FAILs).
FAULTS += [
    Fault(f"xid-{r.xid}", f"Xid {r.xid}: {r.name}", f"kernel log: one Xid {r.xid} line on gpu1",
          _xid(r.xid, r.name), "gpu.xid", Status.FAIL, "gpu1", EVERY_HOOK, "drain",
          "each fatal Xid class in the policy", failure_class=XID_CLASS.get(r.xid, ""))
    for r in sorted(_POLICY.rules.values(), key=lambda r: r.xid) if r.action == "fail"
]
# Warn-level Xids that act only as a storm: min_count events inside the window.
FAULTS += [
    Fault(f"xid-{r.xid}-storm", f"Xid {r.xid} storm: {r.name}",
          f"kernel log: {r.min_count} Xid {r.xid} lines on gpu1 within {r.window_s:g} s",
          _xid(r.xid, r.name, r.min_count), "gpu.xid", Status.WARN, "gpu1", EVERY_HOOK, "report",
          "Xid storms of warn-level classes", failure_class=XID_CLASS.get(r.xid, ""))
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
    # issue 21
    "machine check", "memory error", "uncorrected PCIe error", "NVMe controller reset", "HCA health",
    "link flaps", "cable unplugged", "NIC transmit timeout", "drive health", "power supply", "fan", "SRAM errors", "stalled collective",
    "silent data corruption", "thermal spread", "errors under load",
    # issue 21, point 2: counters from sysfs and mlxlink
    "IB symbol errors", "counter growth during a job", "high BER",
)
