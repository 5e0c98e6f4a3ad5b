"""HealthCheckProgram's memory of each GPU between runs, for ``gpu.stalled`` (a GPU hung in a collective).

Slurm runs HealthCheckProgram every ``HealthCheckInterval`` without a job id, so one run sees one
instant. :func:`keep_samples` adds this run's reading of every GPU (utilisation, power, the pids of its
compute processes and their Slurm job ids, read from ``/proc/<pid>/cgroup`` or the environment) to the
readings kept in ``<state_dir>/gpu-samples.json``, keeps the last ``keep`` per GPU, learns each GPU's
idle power (the lowest draw seen with no compute process), and puts both on the snapshot's
:class:`~healthcheck.core.model.GpuInfo` (``samples``, ``idle_power_w``) for the pure check to judge.

Rules: a GPU is keyed by UUID (else PCI address, else index), so a replaced board starts afresh; a
history whose newest reading is older than ``max_gap_s`` is dropped (readings must be consecutive);
a file that cannot be read or parsed is replaced (said in the returned note), never trusted in part.
The file is written atomically (0600, in a folder that must be root's alone when root runs it).
Lean imports (os, json, re): the hooks import this.
"""
from __future__ import annotations

import json
import os
import re

from ..core.model import GpuInfo, GpuSample, Snapshot

FILE_NAME = "gpu-samples.json"
FORMAT_VERSION = 1
KEEP = 6  # readings kept per GPU (gpu.stalled's default needs 3)
MAX_GAP_S = 3600.0  # a reading older than this (relative to the newest) breaks the series
MAX_FILE_BYTES = 1 << 20
MAX_GPUS = 64
_JOB_IN_CGROUP = re.compile(r"/job_([0-9][0-9_]{0,63})(?:/|$)", re.MULTILINE)
_JOB_IN_ENV = re.compile(rb"(?:^|\0)SLURM_JOB_ID=([0-9][0-9_]{0,63})(?:\0|$)")


def samples_path(state_dir: str) -> str:
    return os.path.join(state_dir, FILE_NAME)


def gpu_key(gpu: GpuInfo) -> str:
    return gpu.uuid or gpu.pci_bus_id or f"index:{gpu.index}"


_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?")


def _parse_time(text: str) -> float | None:
    """Seconds since the epoch of an ISO 8601 time ("2026-12-03T10:00:00+00:00", "...Z"; no offset: UTC),
    without datetime (the hooks import this module); None when it is not one."""
    match = _ISO.fullmatch(text) if isinstance(text, str) else None
    if not match:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    y = year - (month <= 2)  # days from the civil date (H. Hinnant's algorithm)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    offset = 0
    zone = match.group(7)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return float(days * 86400 + hour * 3600 + minute * 60 + second - offset)


def _read_limited(path: str, limit: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def job_of(pid: int, proc_root: str = "/proc") -> str | None:
    """The Slurm job id a process runs for: ``job_<id>`` in its cgroup path (Slurm's cgroup plugins),
    else ``SLURM_JOB_ID`` in its environment (root reads it); None when neither says."""
    raw = _read_limited(os.path.join(proc_root, str(pid), "cgroup"), 16 * 1024)
    if raw:
        match = _JOB_IN_CGROUP.search(raw.decode("utf-8", "replace"))
        if match:
            return match.group(1)
    env = _read_limited(os.path.join(proc_root, str(pid), "environ"), 256 * 1024)
    match = _JOB_IN_ENV.search(env or b"")
    return match.group(1).decode("ascii") if match else None


def _sample_of(data: object) -> GpuSample | None:
    """A stored reading, validated; None for anything malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("taken_at"), str):
        return None

    def num(key: str) -> float | None:
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e9:
            return float(value)
        return None

    pids = [p for p in data.get("pids") or [] if isinstance(p, int) and not isinstance(p, bool) and p > 0][:64]
    jobs = [j for j in data.get("jobs") or [] if isinstance(j, str) and re.fullmatch(r"[0-9][0-9_]{0,63}", j)][:64]
    return GpuSample(taken_at=data["taken_at"][:64], utilization_gpu_pct=num("utilization_gpu_pct"),
                     power_draw_w=num("power_draw_w"), pids=pids, jobs=jobs)


def load(state_dir: str) -> tuple[dict[str, dict], str | None]:
    """The kept histories by GPU key ({"idle_power_w", "samples": [GpuSample]}), and a note when the file
    existed but could not be used (it is then ignored and rewritten)."""
    path = samples_path(state_dir)
    raw = _read_limited(path, MAX_FILE_BYTES + 1)
    if raw is None:
        return {}, None
    if len(raw) > MAX_FILE_BYTES:
        return {}, f"{path}: over {MAX_FILE_BYTES} bytes, started afresh"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return {}, f"{path}: not readable JSON ({exc}), started afresh"
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION or not isinstance(data.get("gpus"), dict):
        return {}, f"{path}: not a version {FORMAT_VERSION} samples file, started afresh"
    out: dict[str, dict] = {}
    for key, entry in list(data["gpus"].items())[:MAX_GPUS]:
        if not isinstance(key, str) or not isinstance(entry, dict):
            continue
        samples = [s for s in (_sample_of(x) for x in entry.get("samples") or []) if s is not None]
        idle = entry.get("idle_power_w")
        idle = float(idle) if isinstance(idle, (int, float)) and not isinstance(idle, bool) and 0 <= idle < 1e6 else None
        out[key] = {"idle_power_w": idle, "samples": samples}
    return out, None


def _consecutive(samples: list[GpuSample], now_s: float, max_gap_s: float) -> list[GpuSample]:
    """The newest run of readings with no gap over ``max_gap_s`` between them nor before now."""
    kept: list[GpuSample] = []
    newer = now_s
    for sample in reversed(samples):
        when = _parse_time(sample.taken_at)
        if when is None or when > newer or newer - when > max_gap_s:
            break
        kept.append(sample)
        newer = when
    return list(reversed(kept))


def keep_samples(state_dir: str, snap: Snapshot, now_iso: str | None = None, keep: int = KEEP,
                 max_gap_s: float = MAX_GAP_S, proc_root: str = "/proc") -> str | None:
    """Add this run's reading of each GPU of ``snap`` to the kept ones, fill ``GpuInfo.samples`` (the
    current reading last) and ``GpuInfo.idle_power_w``, and write the file back. Returns None, or a
    note to log (a file that was unusable, or could not be written): it never raises for I/O."""
    if not snap.gpus:
        return None
    now_iso = now_iso or snap.taken_at
    now_s = _parse_time(now_iso)
    if now_s is None:
        return f"gpu samples not kept: bad time {now_iso!r}"
    kept, note = load(state_dir)
    fresh: dict[str, dict] = {}
    jobs_by_pid: dict[int, str | None] = {}
    for gpu in snap.gpus:
        if gpu.lost:
            continue
        pids = sorted({p.pid for p in gpu.processes or []})
        for pid in pids:
            if pid not in jobs_by_pid:
                jobs_by_pid[pid] = job_of(pid, proc_root)
        jobs = sorted({jobs_by_pid[p] for p in pids if jobs_by_pid[p]})
        current = GpuSample(taken_at=now_iso, utilization_gpu_pct=gpu.utilization_gpu_pct,
                            power_draw_w=gpu.power_draw_w, pids=pids, jobs=jobs)
        entry = kept.get(gpu_key(gpu)) or {"idle_power_w": None, "samples": []}
        history = _consecutive(entry["samples"], now_s, max_gap_s) + [current]
        history = history[-max(1, keep):]
        idle = entry["idle_power_w"]
        if gpu.processes == [] and gpu.power_draw_w is not None and gpu.power_draw_w >= 0:
            idle = gpu.power_draw_w if idle is None else min(idle, gpu.power_draw_w)
        gpu.samples, gpu.idle_power_w = history, idle
        fresh[gpu_key(gpu)] = {"idle_power_w": idle, "samples": [_as_dict(s) for s in history]}
    try:
        from ..safeio.atomic import atomic_write, make_dirs

        make_dirs(state_dir, 0o700)
        atomic_write(samples_path(state_dir), json.dumps({"version": FORMAT_VERSION, "gpus": fresh}, allow_nan=False),
                     0o600, private_dir=True)
    except (OSError, ValueError) as exc:
        problem = f"gpu samples not written to {samples_path(state_dir)}: {exc}"
        return f"{note}; {problem}" if note else problem
    return note


def _as_dict(sample: GpuSample) -> dict:
    return {"taken_at": sample.taken_at, "utilization_gpu_pct": sample.utilization_gpu_pct,
            "power_draw_w": sample.power_draw_w, "pids": list(sample.pids), "jobs": list(sample.jobs)}
