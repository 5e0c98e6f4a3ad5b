"""Probe the running machine into a :class:`~healthcheck.core.model.Snapshot`, each probe within its
deadline, so a hung GPU driver or NFS mount costs the deadline and becomes data (``probe_errors``),
never a hung run.

**A probe is declared once**, as one :class:`Probe` row of :data:`PROBES` (at the end of the module,
below the readers it names): the snapshot source it fills, its reader, the module the reader imports,
its deadline, where it runs (:data:`FIRST`, :data:`EARLY`, :data:`INLINE`, :data:`WALKED`,
:data:`AFTER`; :data:`ELSEWHERE` for a source no live probe fills) and the text a check skipped for
want of it says. Every table the rest of the package reads is derived from those rows:
:data:`SOURCES` (what a check may need: ``checks.registry``), :data:`DEFAULT_DEADLINES_S`,
:data:`EARLY_PROBES`, :data:`INLINE_PROBES`, :data:`WALKED_PROBES`, :data:`PROBE_MODULES` (imported
ahead of the threads here, and by the agent to warm its workers), :data:`ABSENT` (``pipeline.judge``'s
SKIP message) and :data:`HANG_KINDS`. docs/adding-a-probe.md walks through adding one.

How :func:`snapshot_live` runs them (only those whose source a selected check needs): the PCI bus first
(it says whether there are GPUs to probe); the GPU probe's thread next; the kernel log, EDAC and AER
read in the calling thread; the sysfs/procfs probes and the tools on threads shared through
``bounded.walk`` (a stalled probe keeps its thread, another takes the rest); the versions last (they
read the GPUs found). A GPU probe past its deadline is a ``hang``, any other a ``timeout``.

Heavy modules (pynvml) are imported only when the PCI bus shows an NVIDIA GPU.
"""
from __future__ import annotations

import os
import time
from ..core.struct import record as dataclass, field
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Callable  # noqa: F401

from ..core.model import ProbeError, Snapshot
from .kmsg import KMSG, read_kmsg  # noqa: F401 - read_kmsg re-exported (tests, bundles)

# Where a probe runs (Probe.schedule):
# read before every other probe, in the calling thread, whatever the checks need (the PCI bus says
# whether there are GPUs to probe); no deadline: os calls on sysfs only
FIRST = "first"
# a thread of its own, started before the inline probes run: the GPUs', which waits in the driver most of
# its time (a GPU node's longest probe, ~31 ms for one H200 where the inline ones take ~6 ms), its calls
# into NVML releasing the GIL. Measured on an H200 node: docs/performance.md.
EARLY = "early"
# in the calling thread, one after the other, before the other probes' threads start (but for EARLY's):
# what cannot block in the kernel (a non-blocking /dev/kmsg read with its own deadline, counters the
# kernel keeps in memory). Threads that run Python at the same time hand the GIL to each other at its
# switch interval (5 ms): five probe threads took 6.5-17 ms for what takes 4.5 ms one after the other
# (a warm process, this machine), so only what may hang (a GPU, an HCA's firmware, a network mount)
# gets a thread.
INLINE = "inline"
# one thread shared with the other walked probes, which a new one takes over from whenever a probe stalls
# 10 ms (``bounded.walk``), rather than a thread each: those that read sysfs and /proc (quick, but an
# HCA's firmware or a network mount can hold a read), then HealthCheckProgram's tools (nvme/smartctl,
# ipmitool, mlxlink: each runs long where there is a device, and the next takes over 10 ms later; where
# there is none, they end at once)
WALKED = "walked"
# a thread of its own once the others are done: it reads what they found (the versions: the GPUs')
AFTER = "after"
# no live probe fills it (the job: the epilog's own facts); declared for the checks and the SKIP text
ELSEWHERE = "elsewhere"
SCHEDULES = (FIRST, EARLY, INLINE, WALKED, AFTER, ELSEWHERE)


@dataclass(frozen=True)
class Probe:
    """One snapshot source and the probe that fills it: the one place a probe is declared."""
    source: str  # the Snapshot attribute it fills; its error and duration are recorded under the same name
    read: Callable[[LiveOptions, Snapshot], Any] | None  # read(opts, snap) -> the value; None: ELSEWHERE
    module: str | None  # the module of this package the reader imports (PROBE_MODULES)
    deadline_s: float | None  # its default deadline (LiveOptions.deadlines_s); None: FIRST and ELSEWHERE
    schedule: str  # FIRST, EARLY, INLINE, WALKED, AFTER or ELSEWHERE
    absent: str  # why a check that needs the source was skipped when it is absent (pipeline.judge)
    gpu_only: bool = False  # probed only where the PCI bus shows an NVIDIA GPU
    hang: str = "timeout"  # the ProbeError kind when it does not answer within its deadline


@dataclass
class LiveOptions:
    sysfs_root: str = "/sys"
    proc_root: str = "/proc"
    services: tuple[str, ...] = ()
    deadlines_s: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DEADLINES_S))
    node: str | None = None
    nvml: Any = None  # a pynvml-like module (tests); None = import pynvml when needed
    kernel_log: Callable[[], str] | None = None  # returns the kernel log text; None = run `dmesg`
    dev_root: str = "/dev"  # where the storage probe finds /dev/nvme0, the BMC probe /dev/ipmi0
    # the process table in HostInfo (bundles, `check`): the hooks leave it out (no check reads it;
    # a scan of /proc costs ~1 ms per 100 processes); services are looked up either way
    processes: bool = True
    # where the hooks keep the last run's kernel-log events (probes.kernel_cache); None: parse every time
    kernel_cache: str | None = None
    # False: NVML's session is left to the process's exit (the hooks' child, which exits once it has
    # answered: ~3.5 ms off its run on an H200); anything longer-lived closes it
    nvml_close: bool = True
    # True: only the Ethernet ports of an RDMA device (RoCE) are read (the prolog and epilog: the job's
    # fabric; a management NIC's counters are HealthCheckProgram's, ~0.3 ms a port saved before every job)
    net_rdma_only: bool = False
    # True: the NVLink5 FEC history bins too (recorded, not judged: bundles; one more NVML call per GPU)
    nvlink_fec: bool = False
    # the NVSwitch fabric manager's log, whose NVSwitch errors of this boot join kernel_events (issue 33,
    # probes.fabricmanager); None: not read (the default, and the prolog and epilog: fabricmanager_log_for)
    fabricmanager_log: str | None = None


# The contexts whose kernel_events take in the fabric manager's log (issue 33): up to 4 MiB of a file read
# and scanned, where a log scan belongs (HealthCheckProgram, `check`); never the hooks on a job's path
FABRICMANAGER_CONTEXTS = ("check", "slurm-check")


def fabricmanager_log_for(context: str) -> str | None:
    """The fabric manager log to read in ``context`` (``LiveOptions.fabricmanager_log``); None: not read."""
    if context not in FABRICMANAGER_CONTEXTS:
        return None
    from .fabricmanager import LOG_PATH

    return LOG_PATH


def short_hostname() -> str:
    return os.uname().nodename.split(".")[0]


def run_bounded(jobs: dict[str, Callable[[], Any]], deadlines: dict[str, float],
                snap: Snapshot, hang_kinds: dict[str, str] | None = None, inline: tuple[str, ...] = (),
                walked: tuple[str, ...] = (), early: tuple[str, ...] = ()) -> None:
    """Run ``jobs``: those named in ``early`` in a thread each, started first; then those named in
    ``inline``, in this thread; then the rest concurrently: those named in ``walked`` on threads shared as
    ``bounded.walk`` shares them, the others in a thread each. Each threaded job has its deadline,
    counted from its start. Store results on ``snap`` by name, failures in ``snap.probe_errors``."""
    from .bounded import Task, walk

    threads = {name: Task(fn) for name, fn in jobs.items() if name not in inline}
    begun: dict[str, float] = {}
    for name in early:
        if name in threads and name not in walked:
            begun[name] = time.monotonic()
            threads[name].start()
    for name in inline:
        if name in jobs:
            _run_here(name, jobs[name], snap)
    start = time.monotonic()
    for name, thread in threads.items():
        if name not in walked and name not in begun:
            thread.start()
    shared = [name for name in threads if name in walked]
    walk([threads[name] for name in shared], [deadlines.get(name, 5.0) for name in shared])
    for name, thread in threads.items():
        since = begun.get(name, start)
        remaining = deadlines.get(name, 5.0) - (time.monotonic() - since)
        thread.join(max(0.0, remaining))
        if thread.is_alive():
            kind = (hang_kinds or {}).get(name, "timeout")
            snap.probe_errors[name] = ProbeError(kind, f"no answer within {deadlines.get(name, 5.0):g} s")
            snap.probe_durations_s[name] = round(time.monotonic() - since, 6)
            continue
        snap.probe_durations_s[name] = round(thread.duration, 6)
        if thread.error is not None:
            snap.probe_errors[name] = ProbeError("error", f"{type(thread.error).__name__}: {thread.error}")
        else:
            setattr(snap, name, thread.result)


def _run_here(name: str, fn: Callable[[], Any], snap: Snapshot) -> None:
    start = time.monotonic()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - becomes data, as a probe thread's error does
        snap.probe_errors[name] = ProbeError("error", f"{type(exc).__name__}: {exc}")
    else:
        setattr(snap, name, result)
    snap.probe_durations_s[name] = round(time.monotonic() - start, 6)


def snapshot_live(opts: LiveOptions, taken_at: str, sources: frozenset[str] | None = None) -> Snapshot:
    """Probe this machine, as :data:`PROBES` declares. ``sources``: the snapshot sources the checks to
    run need (None: all); a source no check needs is not probed (the prolog reads no versions and no
    PCIe links). The FIRST probe (the PCI bus) is always read: it says whether there are GPUs to probe."""
    snap = Snapshot(node=opts.node or short_hostname(), taken_at=taken_at, source="live")
    for probe in PROBES:
        if probe.schedule == FIRST:
            try:
                setattr(snap, probe.source, probe.read(opts, snap))
            except OSError as exc:
                snap.probe_errors[probe.source] = ProbeError("error", str(exc))
    jobs = _jobs(opts, snap, sources, (EARLY, INLINE, WALKED))
    _import_probes(jobs)
    # A GPU call that does not return means the driver is wedged: a failure of its own kind (HANG_KINDS).
    run_bounded(jobs, opts.deadlines_s, snap, hang_kinds=HANG_KINDS, inline=INLINE_PROBES,
                walked=WALKED_PROBES, early=EARLY_PROBES)
    later = _jobs(opts, snap, sources, (AFTER,))
    if later:
        _import_probes(later)
        run_bounded(later, opts.deadlines_s, snap, hang_kinds=HANG_KINDS)
    return snap


def _jobs(opts: LiveOptions, snap: Snapshot, sources: frozenset[str] | None,
          schedules: tuple[str, ...]) -> dict[str, Callable[[], Any]]:
    """The jobs of the probes of ``schedules`` that are to run, in the order PROBES declares them."""
    has_gpu = bool(snap.gpu_pci_devices)
    return {probe.source: (lambda read=probe.read: read(opts, snap)) for probe in PROBES
            if probe.schedule in schedules and (has_gpu or not probe.gpu_only)
            and (sources is None or probe.source in sources)}


def _import_probes(jobs: dict) -> None:
    """Import each job's module (PROBE_MODULES) here, in the calling thread, before the jobs' threads
    start: five threads importing at once contend for the import locks and the GIL (about 3 ms of a
    healthy prolog's 9 ms of probing, measured); an import cannot hang the way a probe's read can."""
    for name in jobs:
        module = PROBE_MODULES.get(name)
        if module:
            try:
                __import__(f"{__package__}.{module}")
            except Exception:  # noqa: BLE001 - the job imports it again and its error becomes probe data
                pass


# ------------------------------------------------------------------------ the readers: read(opts, snap)


def _pci_bus(opts: LiveOptions, snap: Snapshot):
    from .pcibus import nvidia_gpu_present

    return nvidia_gpu_present(opts.sysfs_root)


def _gpus(opts: LiveOptions, snap: Snapshot):
    """NVML first; ``nvidia-smi -q -x`` when NVML cannot be used (the fallback records why)."""
    from .nvml import NvmlUnavailable, probe_gpus

    try:
        gpus = probe_gpus(opts.nvml, close=opts.nvml_close, nvlink_fec=opts.nvlink_fec)
        snap.gpu_source = "nvml"
        return gpus
    except (NvmlUnavailable, ImportError) as nvml_exc:
        try:
            # inside the gpus deadline, so the tool is killed before the probe is called hung
            result = _nvidia_smi_xml(max(0.1, opts.deadlines_s.get("gpus", 10.0) * 0.9))
        except Exception as smi_exc:
            raise NvmlUnavailable(f"NVML: {nvml_exc}; nvidia-smi: {smi_exc}") from smi_exc
        snap.gpu_source = "nvidia-smi-xml"
        return result.gpus


def _nvidia_smi_xml(timeout: float):
    from ..safeio import subproc
    from ..parsers.nvidia_smi import parse_nvidia_smi

    res = subproc.run(["nvidia-smi", "-q", "-x"], timeout=timeout)
    if res.timed_out:
        raise TimeoutError("nvidia-smi -q -x did not finish")
    if not res.stdout.strip():
        raise RuntimeError(res.stderr.strip() or f"nvidia-smi exited {res.returncode}")
    return parse_nvidia_smi(res.stdout)


def read_kernel_log(timeout: float = 2.5) -> str:
    """The kernel log as ``dmesg`` prints it (``[   12.345678] message`` lines). Read straight from
    /dev/kmsg (no process started: the prolog pays for every fork), else from ``dmesg``."""
    try:
        return read_kmsg(KMSG, time.monotonic() + timeout)
    except OSError:
        pass  # no /dev/kmsg, or not readable (dmesg_restrict without privilege): dmesg may still be
    from ..safeio import subproc

    res = subproc.run(["dmesg"], timeout=timeout)
    if not res.ok:
        raise RuntimeError(f"dmesg failed: {res.stderr.strip() or res.returncode}")
    return res.stdout


def _kernel_events(opts: LiveOptions, snap: Snapshot):
    """One read of the kernel log: NVIDIA driver events (where the PCI bus shows NVIDIA GPUs) and host
    events (machine checks, memory, PCIe, storage, HCA, links), in that order; then, where asked
    (``opts.fabricmanager_log``) and the PCI bus shows NVIDIA GPUs, the fabric manager's NVSwitch errors."""
    nvidia = bool(snap.gpu_pci_devices)
    events = None
    if opts.kernel_cache and opts.kernel_log is None:  # the hooks: parse only when something new may matter
        from .kmsg import read_raw

        try:
            records = read_raw(KMSG, time.monotonic() + 2.5)
        except OSError:
            records = None  # dmesg below (it numbers nothing: no cache)
        if records is not None:
            from .kernel_cache import cached_events

            events = _devices_of(opts, cached_events(records, nvidia, opts.kernel_cache,
                                                     lambda text: _parse_kernel_log(text, nvidia), _host_event_markers))
    if events is None:
        events = _devices_of(opts, _parse_kernel_log((opts.kernel_log or read_kernel_log)(), nvidia))
    if nvidia and opts.fabricmanager_log:
        events = _with_fabricmanager(opts, snap, events)
    return events


# where a fabric manager log that exists but cannot be read is said (gpu.xid: ERROR, the kernel's events kept)
FABRICMANAGER_ERROR = "kernel_events.fabricmanager"


def _with_fabricmanager(opts: LiveOptions, snap: Snapshot, events: list) -> list:
    """``events`` and after them the NVSwitch errors the fabric manager logged in this boot (a new list: the
    kernel cache's stays as it was). No log: ``events``, nothing said."""
    from .fabricmanager import probe_fabricmanager

    try:
        found = probe_fabricmanager(opts.fabricmanager_log, opts.proc_root)
    except (OSError, ValueError) as exc:  # refused, unreadable, or not text the parser scans (ParseError)
        snap.probe_errors[FABRICMANAGER_ERROR] = ProbeError("error", f"{type(exc).__name__}: {exc}")
        return events
    return events + found if found else events


def _devices_of(opts: LiveOptions, events: list) -> list:
    """What the block devices the host events name are (in use, optical, virtual media, ...): read only
    when such an event was logged, and afresh every run (a disk is mounted or not now)."""
    if any(ev.kind == "host" and ev.device and ev.device_info is None for ev in events):
        from ..policies.host_events import load_host_event_policy

        block = frozenset(r.event_class for r in load_host_event_policy().rules.values() if r.device == "block")
        if any(ev.event_class in block for ev in events):
            from .blockdevs import annotate_block_events

            annotate_block_events(events, block, opts.sysfs_root, opts.proc_root, opts.dev_root)
    return events


def _parse_kernel_log(text: str, nvidia: bool):
    from ..parsers.host_events import parse_host_events

    events = []
    if nvidia:
        from ..parsers.kernel_log import parse_kernel_log

        events = parse_kernel_log(text)
    return events + parse_host_events(text)


def _host_event_markers():
    from ..parsers.host_events import literals

    return literals()


def _ib(opts: LiveOptions, snap: Snapshot):
    from .infiniband import probe_ib_ports

    return probe_ib_ports(opts.sysfs_root)


def _pcie(opts: LiveOptions, snap: Snapshot):
    from .pcie import probe_pcie_links

    return probe_pcie_links(opts.sysfs_root)


def _host(opts: LiveOptions, snap: Snapshot):
    from .host import probe_host

    return probe_host(proc_root=opts.proc_root, sys_root=opts.sysfs_root, services=opts.services,
                      statvfs=os.statvfs, hostname=opts.node or short_hostname(), with_processes=opts.processes)


def _versions(opts: LiveOptions, snap: Snapshot):
    from .versions import probe_versions

    return probe_versions(sys_root=opts.sysfs_root, proc_root=opts.proc_root, gpus=snap.gpus)


def _storage(opts: LiveOptions, snap: Snapshot):
    from .storage import probe_storage

    return probe_storage(opts.sysfs_root, opts.dev_root, deadline_s=0.9 * opts.deadlines_s.get("storage", 10.0))


def _bmc(opts: LiveOptions, snap: Snapshot):
    from .bmc import probe_bmc

    return probe_bmc(deadline_s=0.9 * opts.deadlines_s.get("bmc", 20.0), dev_root=opts.dev_root)


def _edac(opts: LiveOptions, snap: Snapshot):
    from .host_counters import probe_edac

    return probe_edac(opts.sysfs_root)


def _pcie_aer(opts: LiveOptions, snap: Snapshot):
    from .host_counters import probe_pcie_aer

    return probe_pcie_aer(opts.sysfs_root)


def _mlxlink(opts: LiveOptions, snap: Snapshot):
    from .mlxlink import probe_mlxlink

    return probe_mlxlink(opts.sysfs_root, deadline_s=0.9 * opts.deadlines_s.get("mlxlink", 15.0))


def _gpudirect(opts: LiveOptions, snap: Snapshot):
    from .gpudirect import probe_gpudirect

    return probe_gpudirect(opts.sysfs_root, opts.proc_root, gpus=snap.gpu_pci_devices)


def _net_ports(opts: LiveOptions, snap: Snapshot):
    from .netdev import probe_net_ports

    return probe_net_ports(opts.sysfs_root, rdma_only=opts.net_rdma_only)


def _net_ethtool(opts: LiveOptions, snap: Snapshot):
    from .ethtool import probe_ethtool

    return probe_ethtool(opts.sysfs_root, deadline_s=0.9 * opts.deadlines_s.get("net_ethtool", 10.0))


def _imex(opts: LiveOptions, snap: Snapshot):
    from .imex import read_imex

    return read_imex(deadline_s=0.9 * opts.deadlines_s.get("imex", 10.0))[0]


# ------------------------------------------------------------------------------ the one declaration

# Every snapshot source, one row each. Within a schedule, the rows' order is the order they run in (the
# inline ones one after the other, the walked ones along their shared thread); the threaded ones are
# waited for in the rows' order. storage, bmc and mlxlink are for `check` and HealthCheckProgram only:
# no check of another context (the prolog) needs them, so the hooks never ask for them (``sources``);
# each of their subprocesses ends inside the deadline.
PROBES: tuple[Probe, ...] = (
    Probe("gpu_pci_devices", _pci_bus, "pcibus", None, FIRST, "no PCI device data"),
    # the kernel log on every node: NVIDIA events where there are GPUs, host events everywhere
    Probe("kernel_events", _kernel_events, "kernel_cache", 3.0, INLINE,
          "no kernel log (none recorded in the bundle, or not read in this context)"),
    Probe("edac", _edac, "host_counters", 2.0, INLINE,  # sysfs: a few files per memory controller
          "no EDAC memory-controller data (EDAC driver not loaded, or none recorded in the bundle)"),
    Probe("pcie_aer", _pcie_aer, "host_counters", 3.0, INLINE,  # sysfs: three files per PCI function
          "no PCIe AER data (not probed, or none recorded in the bundle)"),
    Probe("ib_ports", _ib, "infiniband", 3.0, WALKED, "no InfiniBand/RoCE data"),
    Probe("pcie_links", _pcie, "pcie", 3.0, WALKED, "no PCIe link data"),
    Probe("host", _host, "host", 5.0, WALKED, "no host data"),
    # nvme smart-log / smartctl per device, all calls inside it
    Probe("storage", _storage, "storage", 10.0, WALKED,
          "no storage data (not probed in this context, or none recorded in the bundle)"),
    # ipmitool sel elist + sdr elist: BMCs are slow
    Probe("bmc", _bmc, "bmc", 20.0, WALKED,
          "no BMC data (not probed in this context, or none recorded in the bundle)"),
    # GPUDirect RDMA readiness: sysfs/procfs, a few files, the config space of each bridge GPU-NIC
    Probe("gpudirect", _gpudirect, "gpudirect", 3.0, WALKED,
          "no GPUDirect data (not probed, or none recorded in the bundle)"),
    # Ethernet/RoCE ports: ~10 sysfs files a port (prolog and epilog too: net.errors, net.link.flaps)
    Probe("net_ports", _net_ports, "netdev", 3.0, WALKED,
          "no Ethernet/RoCE port data (not probed, or none recorded in the bundle)"),
    # ethtool -S per mlx5 port, for the counters kept only there: HealthCheckProgram, check, burn-in
    Probe("net_ethtool", _net_ethtool, "ethtool", 10.0, WALKED,
          "no ethtool counters (ethtool not installed, not probed in this context, or none recorded)"),
    # mlxlink -m -c -e per HCA port, concurrently
    Probe("mlxlink", _mlxlink, "mlxlink", 15.0, WALKED,
          "no mlxlink data (not probed in this context, or none recorded in the bundle)"),
    # nvidia-imex-ctl -q and -N -j (multi-node NVLink, issue 33): HealthCheckProgram, check, burn-in
    Probe("imex", _imex, "imex", 10.0, WALKED,
          "no IMEX data (nvidia-imex-ctl not installed, not probed in this context, or none recorded in the bundle)",
          gpu_only=True),
    # EARLY: its thread starts first whatever its row; the row's place is where it is waited for (after the
    # walked ones, as it always was: each is judged against its own deadline at its turn)
    Probe("gpus", _gpus, "nvml", 10.0, EARLY,
          "no NVIDIA GPU data (no NVIDIA GPU on the PCI bus, or none recorded in the bundle)",
          gpu_only=True, hang="hang"),
    Probe("versions", _versions, "versions", 3.0, AFTER, "no version data"),
    # the epilog's facts about the job (hook.run), not a probe of this module
    Probe("job", None, None, None, ELSEWHERE, "no job (runs in the epilog of a Slurm job)"),
    # the network counters' growth kept between the hooks' runs (hook.net_window), not a probe
    Probe("net_window", None, None, None, ELSEWHERE,
          "no network counter memory (the hooks keep one between their runs; a terminal's check or a bundle "
          "has none)"),
)


def derive(probes: tuple[Probe, ...]) -> tuple:
    """The tables read elsewhere, from the declarations: (SOURCES, DEFAULT_DEADLINES_S, EARLY_PROBES,
    INLINE_PROBES, WALKED_PROBES, PROBE_MODULES, ABSENT, HANG_KINDS). Raises ValueError on a row that
    could not be run as declared."""
    seen: set[str] = set()
    for p in probes:
        problem = ("declared twice" if p.source in seen else
                   f"unknown schedule {p.schedule!r}" if p.schedule not in SCHEDULES else
                   "no reader" if p.read is None and p.schedule != ELSEWHERE else
                   "no deadline" if p.deadline_s is None and p.schedule not in (FIRST, ELSEWHERE) else
                   "no absence text" if not p.absent else None)
        if problem:
            raise ValueError(f"probe {p.source}: {problem}")
        seen.add(p.source)

    def named(schedule: str) -> tuple[str, ...]:
        return tuple(p.source for p in probes if p.schedule == schedule)

    jobs = [p for p in probes if p.schedule not in (FIRST, ELSEWHERE)]  # what run_bounded runs
    return (tuple(p.source for p in probes),
            {p.source: p.deadline_s for p in jobs},
            named(EARLY), named(INLINE), named(WALKED),
            {p.source: p.module for p in jobs if p.module},
            {p.source: p.absent for p in probes},
            {p.source: p.hang for p in jobs if p.hang != "timeout"})


# SOURCES: what a check may need (checks.registry). DEFAULT_DEADLINES_S: each job's deadline.
# EARLY_PROBES, INLINE_PROBES, WALKED_PROBES: the schedule (a job in none of them, AFTER's, gets a thread
# of its own). PROBE_MODULES: the module each job imports first (imported before the threads start; the
# agent warms them). ABSENT: why a check was skipped, by missing source (pipeline.judge). HANG_KINDS: the
# ProbeError kind of a job past its deadline, where not "timeout".
(SOURCES, DEFAULT_DEADLINES_S, EARLY_PROBES, INLINE_PROBES, WALKED_PROBES, PROBE_MODULES, ABSENT,
 HANG_KINDS) = derive(PROBES)
