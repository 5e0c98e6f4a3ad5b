"""The processes a Slurm job left behind: those whose environment still carries its SLURM_JOB_ID.

Reading /proc/PID/environ needs root (the epilog runs as root). Slurm's own daemons and the calling
process tree are never reported or killed.
"""
from __future__ import annotations

import os
import signal
import time

MAX_ENVIRON_BYTES = 256 * 1024
NEVER = frozenset({"slurmstepd", "slurmd", "slurmctld", "munged"})


def _comm(proc_root: str, pid: str) -> str | None:
    try:
        with open(os.path.join(proc_root, pid, "comm"), "rb") as fh:
            return fh.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _uid(proc_root: str, pid: str) -> int | None:
    try:
        return os.stat(os.path.join(proc_root, pid)).st_uid
    except OSError:
        return None


def find_job_processes(job_id: str, proc_root: str = "/proc", exclude: set[int] | None = None,
                       max_processes: int = 100_000) -> list[dict]:
    """[{"pid", "comm", "uid"}] of processes with SLURM_JOB_ID=<job_id> in their environment."""
    needle = f"SLURM_JOB_ID={job_id}".encode()
    exclude = set(exclude or ()) | {os.getpid(), os.getppid()}
    found = []
    try:
        entries = [e for e in os.listdir(proc_root) if e.isdigit()][:max_processes]
    except OSError:
        return found
    for pid in entries:
        if int(pid) in exclude:
            continue
        try:
            with open(os.path.join(proc_root, pid, "environ"), "rb") as fh:
                environ = fh.read(MAX_ENVIRON_BYTES)
        except OSError:
            continue  # gone, or a kernel thread
        if needle not in environ.split(b"\0"):
            continue
        comm = _comm(proc_root, pid)
        if comm in NEVER:
            continue
        found.append({"pid": int(pid), "comm": comm, "uid": _uid(proc_root, pid)})
    return found


def kill_all(processes: list[dict], settle_s: float = 0.5) -> list[dict]:
    """SIGKILL each process; return those that were signalled. Waits up to ``settle_s`` for them to go."""
    killed = []
    for proc in processes:
        try:
            os.kill(proc["pid"], signal.SIGKILL)
            killed.append(proc)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + settle_s
    while killed and time.monotonic() < deadline:
        if not any(_alive(p["pid"]) for p in killed):
            break
        time.sleep(0.02)
    return killed


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read(512).rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return False
