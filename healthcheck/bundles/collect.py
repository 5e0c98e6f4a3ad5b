"""`healthcheck collect`: probe this node live and record what was read as a bundle."""
from __future__ import annotations

import time
from pathlib import Path

from ..safeio import subproc
from .archive import write_bundle
from ..checks.registry import SOURCES
from ..probes import fabricmanager as fm_probe
from ..probes.live import DEFAULT_DEADLINES_S, LiveOptions, read_kernel_log, snapshot_live
from ..core.clock import utc_now_iso

# Raw tool outputs recorded when the tool exists: bundle file name -> (argv, timeout seconds).
TOOLS = {
    "nvidia-smi-q-x.xml": (["nvidia-smi", "-q", "-x"], 20.0),
    "nvidia-smi-q.txt": (["nvidia-smi", "-q"], 20.0),
    "nvidia-smi-nvlink-status.txt": (["nvidia-smi", "nvlink", "--status"], 20.0),
    "nvidia-smi-nvlink-e.txt": (["nvidia-smi", "nvlink", "-e"], 20.0),
    "ibstat.txt": (["ibstat"], 10.0),
}


def collect_bundle(output: str, sysfs_root: str = "/sys", proc_root: str = "/proc",
                   services: tuple[str, ...] = (), options: LiveOptions | None = None) -> tuple[Path, list[str]]:
    """Write the bundle; return its path and notes about what could not be recorded.

    ``options`` replaces the live probing options (tests pass a fake NVML and kernel log)."""
    opts = options or LiveOptions(sysfs_root, proc_root, services, nvlink_fec=True)
    # storage and BMC are read below, every tool's output kept (the live probe stops at the first)
    every = frozenset(SOURCES) | frozenset(DEFAULT_DEADLINES_S)
    snap = snapshot_live(opts, utc_now_iso(), every - {"storage", "bmc", "mlxlink", "imex"})
    raw: dict[str, str] = {}
    notes: list[str] = []
    meta_extra = {"collected_by": "healthcheck collect"}
    _storage(snap, opts, raw, notes)
    _bmc(snap, opts, raw, notes, meta_extra)
    _mlxlink(snap, opts, raw, notes)
    _imex(snap, raw, notes)
    _fabricmanager_log(raw, notes)
    for name, (argv, timeout) in TOOLS.items():
        if subproc.which(argv[0]) is None:
            continue
        try:
            res = subproc.run(argv, timeout=timeout)
        except OSError as exc:
            notes.append(f"{' '.join(argv)}: {exc}")
            continue
        if res.timed_out:
            notes.append(f"{' '.join(argv)}: no answer within {timeout:g} s")
        if res.stdout:
            raw[name] = res.stdout
    if snap.gpu_pci_devices:
        try:
            raw["dmesg.txt"] = opts.kernel_log() if opts.kernel_log else read_kernel_log(timeout=10.0)
        except (OSError, RuntimeError) as exc:
            notes.append(f"kernel log: {exc}")
    for source, err in snap.probe_errors.items():
        notes.append(f"{source}: {err.kind}: {err.message}")
    path = write_bundle(snap, output, raw, opts.sysfs_root, opts.proc_root,
                        meta_extra=meta_extra)
    return path, notes


STORAGE_TIMEOUT_S = 60.0  # all devices, both tools each
BMC_TIMEOUT_S = 60.0  # `sel elist` of a full log on a slow BMC


def _storage(snap, opts: LiveOptions, raw: dict[str, str], notes: list[str]) -> None:
    """Every health tool's output for every NVMe/SATA device (nvme-smart-log-<dev>.json,
    smartctl-<dev>.json) and the device list (storage-devices.json)."""
    from ..probes.storage import LISTING, judge_outputs, list_devices, listing_text, read_outputs

    deadline = time.monotonic() + STORAGE_TIMEOUT_S
    try:
        devices = list_devices(opts.sysfs_root)
    except OSError as exc:
        notes.append(f"storage: {exc}")
        return
    judged = []
    for dev in devices:
        outputs, why = read_outputs(dev, deadline, opts.dev_root, every_tool=True)
        raw.update(outputs)
        seen = judge_outputs(dev, outputs, why)
        if seen.unread or why:
            notes.append(f"storage {dev.name}: {seen.unread or why}")
        judged.append(seen)
    for dev, seen in zip(devices, judged):
        dev.unread = seen.unread
    raw[LISTING] = listing_text(devices)
    snap.storage = judged


def _bmc(snap, opts: LiveOptions, raw: dict[str, str], notes: list[str], meta_extra: dict) -> None:
    """ipmitool-sel.txt and ipmitool-sdr.txt; without a BMC or ipmitool, the reason in meta.json."""
    from ..probes.bmc import read_bmc

    info, outputs = read_bmc(BMC_TIMEOUT_S, opts.dev_root)
    raw.update(outputs)
    snap.bmc = info
    if info.unavailable:
        meta_extra["bmc_unavailable"] = info.unavailable
        notes.append(f"bmc: {info.unavailable}")
    for err in (info.sel_error, info.sdr_error):
        if err:
            notes.append(f"bmc: {err}")


MLXLINK_TIMEOUT_S = 60.0  # every HCA port, concurrently


def _mlxlink(snap, opts: LiveOptions, raw: dict[str, str], notes: list[str]) -> None:
    """mlxlink-<dev>.txt per HCA port where mlxlink is installed (what ib.mlxlink judges)."""
    from ..probes.mlxlink import read_mlxlink

    ports, outputs = read_mlxlink(opts.sysfs_root, MLXLINK_TIMEOUT_S)
    raw.update(outputs)
    snap.mlxlink = ports
    for port in ports or []:
        if port.error:
            notes.append(f"mlxlink {port.component}: {port.error}")


IMEX_TIMEOUT_S = 20.0  # both nvidia-imex-ctl calls


def _imex(snap, raw: dict[str, str], notes: list[str]) -> None:
    """nvidia-imex-ctl-q.txt and nvidia-imex-ctl-N.json where nvidia-imex-ctl is installed (nvlink.imex)."""
    from ..probes.imex import read_imex

    info, outputs = read_imex(IMEX_TIMEOUT_S)
    raw.update(outputs)
    snap.imex = info
    if info is not None and info.error:
        notes.append(f"imex: {info.error}")


FABRICMANAGER_LOG_PATH = fm_probe.LOG_PATH
FABRICMANAGER_LOG_TAIL = fm_probe.TAIL_BYTES  # its last 4 MiB: the recent NVSwitch errors (the live probe's too)


def _fabricmanager_log(raw: dict[str, str], notes: list[str], path: str = FABRICMANAGER_LOG_PATH) -> None:
    """fabricmanager.log: the tail of the fabric manager's log where there is one (NVSwitch systems), read
    as the live probe reads it (``probes.fabricmanager.read_tail``: bounded, a regular file, root's as root)."""
    from .archive import FABRICMANAGER_LOG

    try:
        data = fm_probe.read_tail(path, FABRICMANAGER_LOG_TAIL)
    except OSError as exc:
        notes.append(f"fabric manager log: {exc}")
        return
    if data is not None:
        raw[FABRICMANAGER_LOG] = data.decode("utf-8", "replace")
