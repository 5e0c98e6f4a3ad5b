"""Probe the running machine: every probe in its own daemon thread with a deadline, so a hung GPU
driver or NFS mount costs the deadline and becomes data (``probe_errors``), never a hung run.

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

DEFAULT_DEADLINES_S = {
    "gpus": 10.0,
    "kernel_events": 3.0,
    "ib_ports": 3.0,
    "pcie_links": 3.0,
    "host": 5.0,
    "versions": 3.0,
    "storage": 10.0,  # nvme smart-log / smartctl per device, all calls inside it
    "bmc": 20.0,  # ipmitool sel elist + sdr elist: BMCs are slow (HealthCheckProgram only, see below)
    "edac": 2.0,  # sysfs: a few files per memory controller
    "pcie_aer": 3.0,  # sysfs: three files per PCI function
    "mlxlink": 15.0,  # mlxlink -m -c -e per HCA port, concurrently (HealthCheckProgram/check only)
}


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


def short_hostname() -> str:
    return os.uname().nodename.split(".")[0]


# Probes that cannot block in the kernel (a non-blocking /dev/kmsg read with its own deadline, counters
# the kernel keeps in memory): run in the calling thread, one after the other, before the other probes'
# threads start (but for EARLY_PROBES'). Threads that run Python at the same time hand the GIL to each
# other at its switch interval (5 ms): five probe threads took 6.5-17 ms for what takes 4.5 ms one after
# the other (a warm process, this machine), so only what may hang (a GPU, an HCA's firmware, a network
# mount) gets a thread.
INLINE_PROBES = ("kernel_events", "edac", "pcie_aer")
# Probes that share one thread, which a new one takes over from whenever a probe stalls 10 ms
# (``bounded.walk``), rather than a thread each: those that read sysfs and /proc (quick, but an HCA's
# firmware or a network mount can hold a read), then HealthCheckProgram's tools (nvme/smartctl, ipmitool,
# mlxlink: each runs long where there is a device, and the next takes over 10 ms later; where there is
# none, they end at once). The GPU probe takes long by nature and keeps a thread of its own.
WALKED_PROBES = ("ib_ports", "pcie_links", "host", "storage", "bmc", "mlxlink")
# Probes whose thread starts before the inline probes run: the GPUs', which waits in the driver most of
# its time (a GPU node's longest probe, ~31 ms for one H200 where the inline ones take ~6 ms), its calls
# into NVML releasing the GIL. Measured on an H200 node: docs/performance.md.
EARLY_PROBES = ("gpus",)


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
    """Probe this machine. ``sources``: the snapshot sources the checks to run need (None: all); a
    source no check needs is not probed (the prolog reads no versions and no PCIe links). The PCI bus
    is always read: it says whether there are GPUs to probe."""
    from .pcibus import nvidia_gpu_present

    snap = Snapshot(node=opts.node or short_hostname(), taken_at=taken_at, source="live")
    try:
        snap.gpu_pci_devices = nvidia_gpu_present(opts.sysfs_root)
    except OSError as exc:
        snap.probe_errors["gpu_pci_devices"] = ProbeError("error", str(exc))
    has_gpu = bool(snap.gpu_pci_devices)

    jobs: dict[str, Callable[[], Any]] = {
        "ib_ports": lambda: _ib(opts),
        "pcie_links": lambda: _pcie(opts),
        "host": lambda: _host(opts),
    }
    # Slow sources: their checks run in `check` and HealthCheckProgram only, so a hook of another context
    # (the prolog) never asks for them (``sources``); each subprocess ends inside its deadline.
    jobs["storage"] = lambda: _storage(opts)
    jobs["bmc"] = lambda: _bmc(opts)
    jobs["mlxlink"] = lambda: _mlxlink(opts)
    jobs["edac"] = lambda: _edac(opts)
    jobs["pcie_aer"] = lambda: _pcie_aer(opts)
    # the kernel log on every node: NVIDIA events where there are GPUs, host events everywhere
    jobs["kernel_events"] = lambda: _kernel_events(opts, has_gpu)
    if has_gpu:
        jobs["gpus"] = lambda: _gpus(opts, snap)
    if sources is not None:
        jobs = {name: job for name, job in jobs.items() if name in sources}
    _import_probes(jobs)
    # A GPU call that does not return means the driver is wedged: a failure of its own kind.
    run_bounded(jobs, opts.deadlines_s, snap, hang_kinds={"gpus": "hang"}, inline=INLINE_PROBES,
                walked=WALKED_PROBES, early=EARLY_PROBES)
    if sources is None or "versions" in sources:
        versions = {"versions": lambda: _versions(opts, snap)}
        _import_probes(versions)
        run_bounded(versions, opts.deadlines_s, snap)
    return snap


# The module each probe job imports first. Imported here, in the calling thread, before the jobs'
# threads start: five threads importing at once contend for the import locks and the GIL (about 3 ms of
# a healthy prolog's 9 ms of probing, measured); an import cannot hang the way a probe's read can.
PROBE_MODULES = {"ib_ports": "infiniband", "pcie_links": "pcie", "host": "host", "storage": "storage", "bmc": "bmc",
                  "mlxlink": "mlxlink", "edac": "host_counters", "pcie_aer": "host_counters",
                  "kernel_events": "kernel_cache", "gpus": "nvml", "versions": "versions"}


def _import_probes(jobs: dict) -> None:
    for name in jobs:
        module = PROBE_MODULES.get(name)
        if module:
            try:
                __import__(f"{__package__}.{module}")
            except Exception:  # noqa: BLE001 - the job imports it again and its error becomes probe data
                pass


def _gpus(opts: LiveOptions, snap: Snapshot):
    """NVML first; ``nvidia-smi -q -x`` when NVML cannot be used (the fallback records why)."""
    from .nvml import NvmlUnavailable, probe_gpus

    try:
        gpus = probe_gpus(opts.nvml, close=opts.nvml_close)
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


def _kernel_events(opts: LiveOptions, nvidia: bool = True):
    """One read of the kernel log: NVIDIA driver events (where the PCI bus shows NVIDIA GPUs) and host
    events (machine checks, memory, PCIe, storage, HCA, links), in that order."""
    if opts.kernel_cache and opts.kernel_log is None:  # the hooks: parse only when something new may matter
        from .kmsg import read_raw

        try:
            records = read_raw(KMSG, time.monotonic() + 2.5)
        except OSError:
            records = None  # dmesg below (it numbers nothing: no cache)
        if records is not None:
            from .kernel_cache import cached_events

            return cached_events(records, nvidia, opts.kernel_cache, lambda text: _parse_kernel_log(text, nvidia),
                                 _host_event_markers)
    return _parse_kernel_log((opts.kernel_log or read_kernel_log)(), nvidia)


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


def _ib(opts: LiveOptions):
    from .infiniband import probe_ib_ports

    return probe_ib_ports(opts.sysfs_root)


def _pcie(opts: LiveOptions):
    from .pcie import probe_pcie_links

    return probe_pcie_links(opts.sysfs_root)


def _host(opts: LiveOptions):
    from .host import probe_host

    return probe_host(proc_root=opts.proc_root, sys_root=opts.sysfs_root, services=opts.services,
                      statvfs=os.statvfs, hostname=opts.node or short_hostname(), with_processes=opts.processes)


def _versions(opts: LiveOptions, snap: Snapshot):
    from .versions import probe_versions

    return probe_versions(sys_root=opts.sysfs_root, proc_root=opts.proc_root, gpus=snap.gpus)


def _storage(opts: LiveOptions):
    from .storage import probe_storage

    return probe_storage(opts.sysfs_root, opts.dev_root, deadline_s=0.9 * opts.deadlines_s.get("storage", 10.0))


def _bmc(opts: LiveOptions):
    from .bmc import probe_bmc

    return probe_bmc(deadline_s=0.9 * opts.deadlines_s.get("bmc", 20.0), dev_root=opts.dev_root)


def _edac(opts: LiveOptions):
    from .host_counters import probe_edac

    return probe_edac(opts.sysfs_root)


def _pcie_aer(opts: LiveOptions):
    from .host_counters import probe_pcie_aer

    return probe_pcie_aer(opts.sysfs_root)


def _mlxlink(opts: LiveOptions):
    from .mlxlink import probe_mlxlink

    return probe_mlxlink(opts.sysfs_root, deadline_s=0.9 * opts.deadlines_s.get("mlxlink", 15.0))
