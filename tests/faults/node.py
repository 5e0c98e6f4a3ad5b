"""The fixture node the fault matrix injects faults into, and the injection seams it offers.

One HGX H100 node (8x H100 SXM, 8x ConnectX-7 NDR, 4x NVSwitch), built from the project's own test
builders: a sysfs tree (:mod:`tests.fixtures.sysfs_builder`, faults through ``SysfsFaults``), a /proc
tree (:mod:`tests.fixtures.proc_builder`), the fake ``pynvml`` module (:mod:`tests.fakes.fake_pynvml`)
and a kernel log. :meth:`FixtureNode.snapshot` probes it through the LIVE probes
(``snapshot_live``), so a fault travels the real path: fixture file / NVML answer -> probe -> Snapshot.
The host's statvfs figures come from ``make_statvfs`` (never the machine running the tests).
Host error counters the kernel keeps in sysfs (EDAC per memory controller, PCIe AER per function) are
fixture files added to the sysfs tree after it is built (``sysfs_edits``, with
:mod:`tests.fixtures.host_counters_builder`). Storage health, the BMC and mlxlink are tool outputs (``nvme smart-log -o json``, ``ipmitool sel elist`` /
``sdr elist`` texts) read through the functions that turn a bundle's recordings into the snapshot
(``judge_outputs``, ``bmc_from_files``, ``mlxlink_from_bundle``): the probes' own subprocess calls are the one part left out,
and the machine running the tests is never asked (its /dev is not the node's).

Epilog facts (the job's stray processes, counter growth since the prolog's baseline) are computed
with the same functions the epilog hook uses (``find_job_processes``, ``counters_of``, ``growth``).
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from healthcheck.core.model import JobInfo, Snapshot, StorageDevice
from healthcheck.probes.bmc import bmc_from_files
from healthcheck.probes.host import probe_host
from healthcheck.probes.jobprocs import find_job_processes
from healthcheck.probes.live import DEFAULT_DEADLINES_S, LiveOptions, snapshot_live
from healthcheck.probes.mlxlink import mlxlink_from_bundle
from healthcheck.probes.storage import judge_outputs
from healthcheck.slurm.baseline import counters_of, growth
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, h100_node
from tests.fixtures.proc_builder import DEFAULT_FIGURES, FakeProcess, build_proc, build_sys, make_statvfs
from tests.fixtures.sysfs_builder import SysfsFaults, build_sysfs

NODE = "gpu017"
TAKEN_AT = "2026-12-01T00:00:00+00:00"
DRIVER = "550.90.07"
SERVICES = ("slurmd", "munged")
JOB_ID = "4242"
# build_proc's default uptime; kernel-log stamps below are seconds since boot, so "recent" is near it.
UPTIME_S = 1_209_733.52
GPU_PCI = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")  # bus numbers of gpu0..gpu7
HEALTHY_KERNEL_LOG = (
    "[    5.123456] nvidia: loading out-of-tree module taints kernel.\n"
    f"[    6.000001] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Thu Feb 22 01:44:30 UTC 2024\n"
    "[   27.551026] nvidia-fabricmanager: Fabric Manager started\n"
)

# Two healthy NVMe drives (`nvme smart-log -o json`, the fields nvme-cli prints), a BMC event log of a
# normal power-up and healthy power-supply and fan sensors (`ipmitool sel elist`, `sdr elist`).
NVME_HEALTHY = {"critical_warning": 0, "temperature": 309, "avail_spare": 100, "spare_thresh": 10,
                "percent_used": 2, "data_units_read": 48_227_410, "data_units_written": 31_905_112,
                "power_on_hours": 6_204, "unsafe_shutdowns": 11, "media_errors": 0, "num_err_log_entries": 0}
NVME_DEVICES = ("nvme0", "nvme1")
SEL_HEALTHY = (
    "   1 | 11/28/2026 | 08:01:12 | Power Supply PS1 Status | Presence detected | Asserted\n"
    "   2 | 11/28/2026 | 08:01:12 | Power Supply PS2 Status | Presence detected | Asserted\n"
    "   3 | 11/28/2026 | 08:02:40 | System Boot Initiated #0x6f | Initiated by power up | Asserted\n"
    "   4 | 11/28/2026 | 08:04:02 | Processor CPU1 Status | Presence detected | Asserted\n"
)
SDR_HEALTHY = (
    "PS1 Status       | 84h | ok  | 10.1 | Presence detected\n"
    "PS2 Status       | 85h | ok  | 10.2 | Presence detected\n"
    "FAN1             | 41h | ok  | 29.1 | 9400 RPM\n"
    "FAN2             | 42h | ok  | 29.2 | 9300 RPM\n"
    "FAN3             | 43h | ok  | 29.3 | 9500 RPM\n"
    "FAN4             | 44h | ok  | 29.4 | 9400 RPM\n"
    "Inlet Temp       | 04h | ok  |  7.1 | 22 degrees C\n"
)


def sel_line(record: int, sensor: str, event: str, direction: str = "Asserted", detail: str = "") -> str:
    """One `ipmitool sel elist` record, logged after the healthy ones."""
    tail = f" | {detail}" if detail else ""
    return f"{record:4x} | 11/30/2026 | 23:{record % 60:02d}:00 | {sensor} | {event} | {direction}{tail}\n"


def nvme_smart(**changes: int) -> str:
    """A drive's `nvme smart-log -o json` with ``changes`` over the healthy figures."""
    return json.dumps({**NVME_HEALTHY, **changes}, indent=2)


def xid_line(xid: int, gpu: int, text: str, uptime_s: float = UPTIME_S - 600.0, pid: int = 48213) -> str:
    """One Xid line as the driver prints it (dmesg raw stamp, "pid=, name=" of drivers >= 470)."""
    return (f"[{uptime_s:14.6f}] NVRM: Xid (PCI:0000:{GPU_PCI[gpu]}:00): {xid}, pid={pid}, "
            f"name=python3, {text}\n")


class HangingNvml(FakeNvml):
    """A driver that never answers: ``nvmlInit`` blocks (the probe thread is a daemon, left behind)."""

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's name
        time.sleep(30)


@dataclass
class FixtureNode:
    """A healthy node unless a field says otherwise; edit the fields, then call :meth:`snapshot`."""

    root: Path
    gpus: list[FakeGpu] = field(default_factory=h100_node)
    driver: str = DRIVER
    sysfs_faults: SysfsFaults | None = None
    kernel_log: str = HEALTHY_KERNEL_LOG
    mounts: list[str] | None = None  # /proc/mounts lines; None = proc_builder's default table
    figures: dict[str, tuple[int, int, int, int]] = field(default_factory=lambda: dict(DEFAULT_FIGURES))
    extra_processes: list[FakeProcess] = field(default_factory=list)
    environ: dict[int, dict[str, str]] = field(default_factory=dict)  # pid -> environment
    nvml_hangs: bool = False
    # device -> its health tool's output by bundle file name; None: no drive read at all
    storage: dict[str, dict[str, str]] | None = field(default_factory=lambda: {
        d: {f"nvme-smart-log-{d}.json": nvme_smart()} for d in NVME_DEVICES})
    bmc_sel: str | None = SEL_HEALTHY
    bmc_sdr: str | None = SDR_HEALTHY
    # edits of the built sysfs tree (EDAC / AER counter files: tests.fixtures.host_counters_builder)
    sysfs_edits: tuple[Callable[[Path], Any], ...] = ()
    # `mlxlink -m -c -e` outputs by bundle file name (mlxlink-mlx5_0.txt); None: no mlxlink on the node
    mlxlink: dict[str, str] | None = None
    deadlines_s: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DEADLINES_S))

    @property
    def proc_root(self) -> Path:
        return self.root / "proc"

    def build(self) -> LiveOptions:
        sys_root, proc_root = self.root / "sys", self.proc_root
        build_sysfs(sys_root, faults=self.sysfs_faults)
        build_sys(sys_root, hcas={}, cpu_topology=False, nvidia_driver=self.driver)
        for edit in self.sysfs_edits:
            edit(sys_root)
        build_proc(proc_root, hostname=NODE, nvidia_driver=self.driver, mounts=self.mounts,
                   extra_processes=self.extra_processes)
        for pid, env in self.environ.items():
            (proc_root / str(pid) / "environ").write_bytes(
                b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        nvml_cls = HangingNvml if self.nvml_hangs else FakeNvml
        log = self.kernel_log
        dev_root = self.root / "dev"  # empty: the probes find no drive and no BMC device of this machine
        dev_root.mkdir(parents=True, exist_ok=True)
        return LiveOptions(str(sys_root), str(proc_root), SERVICES, dict(self.deadlines_s), node=NODE,
                           nvml=nvml_cls(self.gpus, driver=self.driver), kernel_log=lambda: log,
                           dev_root=str(dev_root))

    def snapshot(self) -> Snapshot:
        opts = self.build()
        snap = snapshot_live(opts, TAKEN_AT)
        # Recorded statvfs figures, not the test machine's disks (the live probe used os.statvfs).
        snap.host = probe_host(opts.proc_root, opts.sysfs_root, SERVICES, statvfs=make_statvfs(self.figures),
                               hostname=NODE, statvfs_timeout=None)
        if self.storage is not None:
            snap.storage = [judge_outputs(StorageDevice(name=name, kind="nvme" if name.startswith("nvme") else "sata",
                                                        model="SAMSUNG MZQL23T8HCLS-00A07"), outputs, None)
                            for name, outputs in self.storage.items()]
        snap.bmc = bmc_from_files(self.bmc_sel, self.bmc_sdr)
        if self.mlxlink is not None:
            outputs = dict(self.mlxlink)
            snap.mlxlink = mlxlink_from_bundle(sorted(outputs), outputs.get)
        return snap


def node(root: Path, **changes: Any) -> FixtureNode:
    return FixtureNode(root, **changes)


def gpu_edit(index: int, **changes: Any) -> Callable[[list[FakeGpu]], list[FakeGpu]]:
    def edit(gpus: list[FakeGpu]) -> list[FakeGpu]:
        gpus[index] = dataclasses.replace(gpus[index], **changes)
        return gpus
    return edit


def faulty_gpu_node(root: Path, index: int, **changes: Any) -> Snapshot:
    """The healthy node with FakeGpu ``index`` answering ``changes``."""
    n = node(root)
    n.gpus = gpu_edit(index, **changes)(n.gpus)
    return n.snapshot()


def epilog(root: Path, before: Snapshot, after: FixtureNode, *, stray_action: str = "kill",
           killed: list[dict] | None = None) -> Snapshot:
    """The epilog's snapshot: ``after`` probed, plus the job's facts as the epilog hook derives them
    (strays: processes carrying SLURM_JOB_ID in /proc/<pid>/environ; growth over ``before``'s
    counters). The hook's kill step is not run here (fixture pids are not real processes): ``killed``
    and ``stray_processes`` describe what was left after it."""
    snap = after.snapshot()
    strays = find_job_processes(JOB_ID, str(after.proc_root), exclude=set(), job_uid=51234)
    snap.job = JobInfo(job_id=JOB_ID, user="alice", uid=51234, stray_processes=strays,
                       killed=list(killed or []), stray_action=stray_action,
                       counter_growth=growth(counters_of(before), counters_of(snap)))
    return snap
