"""The fixture node the fault matrix injects faults into, and the injection seams it offers.

One HGX H100 node (8x H100 SXM, 8x ConnectX-7 NDR, 4x NVSwitch), built from the project's own test
builders: a sysfs tree (:mod:`tests.fixtures.sysfs_builder`, faults through ``SysfsFaults``), a /proc
tree (:mod:`tests.fixtures.proc_builder`), the fake ``pynvml`` module (:mod:`tests.fakes.fake_pynvml`)
and a kernel log. :meth:`FixtureNode.snapshot` probes it through the LIVE probes
(``snapshot_live``), so a fault travels the real path: fixture file / NVML answer -> probe -> Snapshot.
The host's statvfs figures come from ``make_statvfs`` (never the machine running the tests).

Epilog facts (the job's stray processes, counter growth since the prolog's baseline) are computed
with the same functions the epilog hook uses (``find_job_processes``, ``counters_of``, ``growth``).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from healthcheck.model import JobInfo, Snapshot
from healthcheck.probes.host import probe_host
from healthcheck.probes.jobprocs import find_job_processes
from healthcheck.probes.live import DEFAULT_DEADLINES_S, LiveOptions, snapshot_live
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
    deadlines_s: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DEADLINES_S))

    @property
    def proc_root(self) -> Path:
        return self.root / "proc"

    def build(self) -> LiveOptions:
        sys_root, proc_root = self.root / "sys", self.proc_root
        build_sysfs(sys_root, faults=self.sysfs_faults)
        build_sys(sys_root, hcas={}, cpu_topology=False, nvidia_driver=self.driver)
        build_proc(proc_root, hostname=NODE, nvidia_driver=self.driver, mounts=self.mounts,
                   extra_processes=self.extra_processes)
        for pid, env in self.environ.items():
            (proc_root / str(pid) / "environ").write_bytes(
                b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        nvml_cls = HangingNvml if self.nvml_hangs else FakeNvml
        log = self.kernel_log
        return LiveOptions(str(sys_root), str(proc_root), SERVICES, dict(self.deadlines_s), node=NODE,
                           nvml=nvml_cls(self.gpus, driver=self.driver), kernel_log=lambda: log)

    def snapshot(self) -> Snapshot:
        opts = self.build()
        snap = snapshot_live(opts, TAKEN_AT)
        # Recorded statvfs figures, not the test machine's disks (the live probe used os.statvfs).
        snap.host = probe_host(opts.proc_root, opts.sysfs_root, SERVICES, statvfs=make_statvfs(self.figures),
                               hostname=NODE, statvfs_timeout=None)
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
