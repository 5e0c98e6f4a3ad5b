"""Error-counter baselines: the prolog saves them per job, the epilog measures the growth.

``counters_of(snapshot)`` flattens a Snapshot into ``{"<component>.<counter>": float}``:

- per GPU ``gpuN``: ecc_corrected_volatile, ecc_uncorrected_volatile, retired_pages_sbe,
  retired_pages_dbe, remap_correctable, remap_uncorrectable, pcie_replay_count, nvlink_crc (CRC flit +
  data errors summed over links), nvlink_replay, nvlink_recovery (summed over links);
- per InfiniBand/RoCE port ``mlx5_0:1``: every error counter the probe read (the PortCounters error
  set below, mlx5 ``hw_out_of_buffer``/``hw_out_of_sequence``, and any other counter, including the
  driver's ``hw_*`` ones, whose name says err/discard/drop, except the CQE ``*flush*`` counters);
  traffic volumes and ``port_xmit_wait`` (congestion, not an error) are left out;
- per EDAC memory controller ``mc0``: ce_count, ue_count;
- per PCI function with AER counters ``0000:1a:00.0``: aer_dev_fatal, aer_dev_nonfatal,
  aer_dev_correctable (the TOTAL_ERR_* lines);
- node-level ``xid_events``: how many Xid events the kernel log holds.

A field that is ``None`` (not reported by this source or hardware) is omitted, never 0: growth is then
only computed where both ends were measured.

Counters that go DOWN between prolog and epilog are not growth: volatile ECC counts reset when the
driver reloads, IB counters are cleared by ``perfquery -x`` or a port reset, and the kernel ring
buffer forgets old Xid lines. ``growth`` ignores them; ``resets`` lists them (after - before, negative)
so the epilog can report "counter reset during the job" instead of silently losing the evidence. After a
reset the epilog value is a lower bound of what grew during the job.

Storage: ``<state_dir>/baselines/<job_id>.json`` (directory 0700, file 0600, written atomically: temp
file + fsync + rename + fsync of the directory, never through a planted link; as root only in a state
directory of root's alone). ``save`` also prunes: files older than ``MAX_AGE_S`` (jobs whose epilog
never ran) and the oldest beyond ``MAX_FILES``.
"""
from __future__ import annotations

import math
import os
import time
from ..core.strpath import Path  # pathlib's operations without its import cost (the prolog saves here)

from ..core.lazylog import LazyLog
from ..core.jsonwrite import dumps
from ..core.model import GpuInfo, IbPort, Snapshot, aer_total

BASELINE_DIR = "baselines"
MAX_AGE_S = 7 * 24 * 3600
MAX_FILES = 1000
FORMAT_VERSION = 1
# Slurm job ids: "123", array tasks "123_4" (SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID). Nothing else is
# accepted: the id becomes a file name.
_JOB_ID_CHARS = frozenset("0123456789_")  # [0-9][0-9_]{0,63}, checked without re (every prolog)

_GPU_FIELDS = ("ecc_corrected_volatile", "ecc_uncorrected_volatile", "retired_pages_sbe",
               "retired_pages_dbe", "remap_correctable", "remap_uncorrectable", "pcie_replay_count")
# PortCounters error counters (Linux Documentation/infiniband/sysfs.txt, IBTA PortCounters).
IB_ERROR_COUNTERS = frozenset({
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "VL15_dropped", "vl15_dropped",
    # mlx5 hw_counters (probe prefix "hw_"): receive drops for lack of buffers / out-of-order packets
    "hw_out_of_buffer", "hw_out_of_sequence",
})

log = LazyLog(__name__)


# ------------------------------------------------------------------------------------------ pure


def counters_of(snapshot: Snapshot) -> dict[str, float]:
    """Flat error counters of ``snapshot`` (see the module docstring); pure."""
    out: dict[str, float] = {}
    for gpu in snapshot.gpus or []:
        out.update(_gpu_counters(gpu))
    for port in snapshot.ib_ports or []:
        out.update(_ib_counters(port))
    for mc in snapshot.edac or []:
        for name in ("ce_count", "ue_count"):
            value = getattr(mc, name)
            if value is not None:
                out[f"{mc.component}.{name}"] = float(value)
    for dev in snapshot.pcie_aer or []:
        for name in ("fatal", "nonfatal", "correctable"):
            value = aer_total(getattr(dev, name))
            if value is not None:
                out[f"{dev.component}.aer_dev_{name}"] = float(value)
    if snapshot.kernel_events is not None:
        out["xid_events"] = float(sum(1 for e in snapshot.kernel_events if e.kind == "xid"))
    return out


def _gpu_counters(gpu: GpuInfo) -> dict[str, float]:
    prefix = gpu.component
    out = {f"{prefix}.{name}": float(getattr(gpu, name))
           for name in _GPU_FIELDS if getattr(gpu, name) is not None}
    links = gpu.nvlinks or []
    sums = {
        "nvlink_crc": [v for link in links for v in (link.crc_flit_errors, link.crc_data_errors)],
        "nvlink_replay": [link.replay_errors for link in links],
        "nvlink_recovery": [link.recovery_errors for link in links],
    }
    for name, values in sums.items():
        known = [v for v in values if v is not None]
        if known:
            out[f"{prefix}.{name}"] = float(sum(known))
    return out


def is_ib_error_counter(name: str) -> bool:
    """True for the PortCounters error set and any counter whose name says err / discard / drop
    (except the CQE flush counters, which count normal teardown)."""
    if name in IB_ERROR_COUNTERS:
        return True
    low = name.lower()  # (no re: every prolog on an InfiniBand node asks this of each hw counter)
    return ("err" in low or "discard" in low or "drop" in low) and "flush" not in low


def _ib_counters(port: IbPort) -> dict[str, float]:
    return {f"{port.component}.{name}": float(value)
            for name, value in sorted(port.counters.items())
            if value is not None and is_ib_error_counter(name)}


def growth(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Positive deltas of the counters present in both; unchanged and decreased ones are left out."""
    return {key: after[key] - before[key] for key in sorted(before.keys() & after.keys())
            if _finite(before[key]) and _finite(after[key]) and after[key] > before[key]}


def resets(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Counters that went down (reset during the job): key -> after - before (negative)."""
    return {key: after[key] - before[key] for key in sorted(before.keys() & after.keys())
            if _finite(before[key]) and _finite(after[key]) and after[key] < before[key]}


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_job_id(job_id: str) -> str:
    """The job id if it is digits (and underscores for array tasks: "123_4"); ValueError otherwise."""
    if (not isinstance(job_id, str) or not 0 < len(job_id) <= 64 or job_id[0] not in "0123456789"
            or not _JOB_ID_CHARS.issuperset(job_id)):
        raise ValueError(f"invalid Slurm job id {job_id!r}: expected digits, or digits_digits")
    return job_id


# ------------------------------------------------------------------------------------------- I/O


def baseline_path(state_dir: str | os.PathLike[str], job_id: str) -> Path:
    return Path(state_dir) / BASELINE_DIR / f"{validate_job_id(job_id)}.json"


def save(state_dir: str | os.PathLike[str], job_id: str, counters: dict[str, float],
         now: float | None = None) -> Path:
    """Write the job's baseline atomically (0600) and prune old ones; return its path.

    ValueError for a bad job id or non-numeric counters; OSError from the filesystem is left to the
    caller (the prolog logs it: a missing baseline only means no growth check in the epilog).
    """
    path = baseline_path(state_dir, job_id)
    clean = {}
    for key, value in counters.items():
        if not isinstance(key, str) or not _finite(value):
            raise ValueError(f"baseline counter {key!r}={value!r}: expected str -> finite number")
        clean[key] = float(value)
    now = time.time() if now is None else now
    directory = path.parent
    if not directory.is_dir():
        from ..safeio.trust import make_private

        make_private(str(directory))
    data = dumps({"version": FORMAT_VERSION, "job_id": job_id, "saved_at": now, "counters": clean},
                 sort_keys=True).encode()
    from ..safeio.atomic import atomic_write

    # as root: refused unless the state dir is root's alone. Not fsync'ed: written before every job,
    # and a baseline lost in a crash only means no growth judgement for that job (the node rebooted).
    atomic_write(path, data, 0o600, private_dir=True, durable=False)
    prune(state_dir, now=now, keep=path)
    return path


def source_of(state_dir: str | os.PathLike[str], job_id: str) -> str | None:
    """The baseline's "source" when it is not the job's own prolog (the fast prolog writes one)."""
    import json  # reading is the epilog's: the prolog only writes (jsonwrite)

    try:
        data = json.loads(baseline_path(state_dir, job_id).read_bytes())
    except (OSError, ValueError):
        return None
    source = data.get("source") if isinstance(data, dict) else None
    return source[:120] if isinstance(source, str) else None


def load(state_dir: str | os.PathLike[str], job_id: str) -> dict[str, float] | None:
    """The job's saved counters; None when there is none or it cannot be read (logged)."""
    import json

    path = baseline_path(state_dir, job_id)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("baseline %s unreadable: %s", path, exc)
        return None
    counters = data.get("counters") if isinstance(data, dict) else None
    if (not isinstance(counters, dict) or data.get("job_id") != job_id
            or not all(isinstance(k, str) and _finite(v) for k, v in counters.items())):
        log.warning("baseline %s malformed; ignored", path)
        return None
    return {k: float(v) for k, v in counters.items()}


def discard(state_dir: str | os.PathLike[str], job_id: str) -> None:
    """Remove the job's baseline (missing is fine)."""
    baseline_path(state_dir, job_id).unlink(missing_ok=True)


def prune(state_dir: str | os.PathLike[str], now: float | None = None, max_age_s: float = MAX_AGE_S,
          max_files: int = MAX_FILES, keep: Path | None = None) -> list[Path]:
    """Delete baselines (and stale temp files) older than ``max_age_s``, then the oldest beyond
    ``max_files``; never ``keep``. Returns what was removed; errors on single files are ignored."""
    directory = Path(state_dir) / BASELINE_DIR
    now = time.time() if now is None else now
    try:
        entries = [(e.stat().st_mtime, Path(e.path)) for e in os.scandir(directory)
                   if e.is_file(follow_symlinks=False) and (e.name.endswith(".json")
                                                            or e.name.endswith(".tmp"))]
    except OSError:
        return []
    entries.sort()
    removed = []
    young = []
    for mtime, path in entries:
        if path != keep and now - mtime > max_age_s:
            removed.append(path)
        elif path != keep:
            young.append(path)
    excess = len(young) + (1 if keep is not None else 0) - max_files
    if excess > 0:
        removed.extend(young[:excess])
    for path in removed:
        try:
            path.unlink()
        except OSError:
            pass
    return removed
