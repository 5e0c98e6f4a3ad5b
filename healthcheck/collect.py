"""`healthcheck collect`: probe this node live and record what was read as a bundle."""
from __future__ import annotations

from pathlib import Path

from . import subproc
from .bundle import write_bundle
from .probes.live import LiveOptions, read_kernel_log, snapshot_live
from .runner import utc_now_iso

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
    opts = options or LiveOptions(sysfs_root, proc_root, services)
    snap = snapshot_live(opts, utc_now_iso())
    raw: dict[str, str] = {}
    notes: list[str] = []
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
                        meta_extra={"collected_by": "healthcheck collect"})
    return path, notes
