"""The processes a Slurm job left behind, found by the epilog and killed at its choice.

A process is the job's only when all of these hold:

- it carries the job: ``SLURM_JOB_ID=<id>`` in its environment, or a ``job_<id>`` component in its
  cgroup path (Slurm's proctrack/task cgroup plugins: ``.../job_<id>/step_<n>/...``);
- it belongs to the job: its real uid is the job's uid, or it sits in the job's cgroup. A process of
  another user that merely inherited the job's environment (root running a site epilog chain that calls
  our hook, ``timeout``, a shell wrapper) is not the job's; with the job's uid unknown, only the cgroup
  counts;
- it is not this process nor one of its ancestors (the watchdog's child, the hook, the wrapper that
  called it, slurmd): killing our caller would end the site's epilog with 137 and Slurm would drain
  the node "Epilog error";
- it is not a Slurm or munge daemon, nor a kernel thread. On a large node most of ``/proc`` is per-CPU
  kernel workers: they are known from one read (kthreadd's children) and never opened one by one; where
  the kernel does not list children, the flags in ``/proc/PID/stat``, read first, tell.

It reads ``/proc`` directly (every probe takes its root, so tests point it at a fixture tree).
Reading other users' ``/proc/PID/environ`` needs root, as the epilog runs. ``kill_all`` signals
through a pidfd after checking that the pid still names the process that was found (same start time),
so a pid reused in between is never killed.
"""
from __future__ import annotations

import os
import signal
import time

MAX_ENVIRON_BYTES = 256 * 1024
MAX_CGROUP_BYTES = 16 * 1024
NEVER = frozenset({"slurmstepd", "slurmd", "slurmctld", "slurmdbd", "munged"})


def read_proc(proc_root: str, pid: str, name: str, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``proc_root/pid/name``; None when it cannot be read (gone, a kernel
    thread's file, not ours to read). Plain ``os`` calls: the epilog reads two or three files of every
    process on the node, and ``open()``'s buffered file object costs as much again as the read."""
    try:
        fd = os.open(f"{proc_root}/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if name == "stat":  # one line the kernel writes whole in one read (well under the limit)
            return os.read(fd, limit)
        chunks, size = [], 0
        while size < limit:
            want = min(limit - size, 1 << 16)  # a large limit never allocates its whole size up front
            chunk = os.read(fd, want)
            chunks.append(chunk)
            size += len(chunk)
            if len(chunk) < want:  # short: the end (a /proc file fills a read up to its end)
                break
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


PF_KTHREAD = 0x00200000  # in /proc/PID/stat's flags (field 9): the task is a kernel thread


def _stat_fields(raw: bytes | None) -> list[bytes]:
    """/proc/PID/stat's fields after the comm (field 3 first); the comm may hold spaces and parentheses."""
    return (raw or b"").rsplit(b")", 1)[-1].split()


def kernel_threads(proc_root: str = "/proc") -> frozenset[str] | None:
    """The pids of the kernel threads, from one read: kthreadd (pid 2) and its children, which are the
    kernel threads and the kernel's user-mode helpers (never a job's either: the root cgroup, the
    kernel's environment). None where the kernel lists no children (CONFIG_PROC_CHILDREN unset, a
    fixture tree): each process's stat flags then tell."""
    raw = read_proc(proc_root, "2", "task/2/children", 1 << 20)
    if not raw or _comm(proc_root, "2") != "kthreadd":
        return None
    return frozenset(raw.decode("ascii", "replace").split()) | {"2"}


def _kernel_thread(fields: list[bytes]) -> bool:
    """True for a kernel thread: never a job's (it carries no environment, cannot be killed, and sits
    in the root cgroup), and most of /proc on a large node (per-CPU workers)."""
    return len(fields) > 6 and fields[6].isdigit() and bool(int(fields[6]) & PF_KTHREAD)


def _comm(proc_root: str, pid: str) -> str | None:
    raw = read_proc(proc_root, pid, "comm", 64)
    return None if raw is None else raw.decode("utf-8", "replace").strip()


def _status_fields(proc_root: str, pid: str) -> dict[str, str]:
    raw = read_proc(proc_root, pid, "status", 8192)
    fields = {}
    for line in (raw or b"").decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("Uid", "PPid"):
            fields[key] = value.strip()
    return fields


def _real_uid(status: dict[str, str]) -> int | None:
    first = status.get("Uid", "").split()[:1]
    return int(first[0]) if first and first[0].isdigit() else None


def _ppid(proc_root: str, pid: str) -> int | None:
    """Parent pid from /proc/PID/stat (field 4; the comm before it may hold spaces and parentheses)."""
    raw = read_proc(proc_root, pid, "stat", 1024)
    if raw is not None:
        rest = _stat_fields(raw)
        if len(rest) > 1 and rest[1].isdigit():
            return int(rest[1])
    ppid = _status_fields(proc_root, pid).get("PPid", "")
    return int(ppid) if ppid.isdigit() else None


def _start_time(proc_root: str, pid: str) -> int | None:
    """Start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, names one process."""
    return _start_of(_stat_fields(read_proc(proc_root, pid, "stat", 1024)))


def _start_of(fields: list[bytes]) -> int | None:
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def ancestors(proc_root: str = "/proc", pid: int | None = None, limit: int = 4096) -> set[int]:
    """``pid`` (default: this process) and every process above it up to init (pid 1 included)."""
    current = os.getpid() if pid is None else pid
    seen: set[int] = set()
    while current and current not in seen and len(seen) < limit:
        seen.add(current)
        parent = _ppid(proc_root, str(current))
        if parent is None:
            break
        current = parent
    return seen


def in_job_cgroup(cgroup_text: str, job_id: str) -> bool:
    """True when a line of /proc/PID/cgroup has ``job_<job_id>`` as a path component."""
    component = f"job_{job_id}"
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1]
        if component in path.split("/"):
            return True
    return False


def find_job_processes(job_id: str, proc_root: str = "/proc", exclude: set[int] | None = None,
                       max_processes: int = 100_000, job_uid: int | None = None) -> list[dict]:
    """[{"pid", "comm", "uid", "start"}] of the job's processes (see the module docstring for the rule).

    ``job_uid``: the job's uid (SLURM_JOB_UID); None = unknown, only processes in the job's cgroup
    count. ``exclude``: more pids never reported (this process and its ancestors always are).
    """
    job_id = str(job_id)
    if not job_id or not job_id.replace("_", "").isalnum():
        raise ValueError(f"not a Slurm job id: {job_id!r}")
    needle = f"SLURM_JOB_ID={job_id}".encode()
    never = set(exclude or ()) | ancestors(proc_root) | {os.getpid()}
    found = []
    try:
        entries = [e for e in os.listdir(proc_root) if e.isdigit()][:max_processes]
    except OSError:
        return found
    kernel = kernel_threads(proc_root)
    for pid in entries:
        if int(pid) in never or (kernel is not None and pid in kernel):
            continue
        stat = None
        if kernel is None:  # the flags first: a kernel thread is skipped for one read
            stat = _stat_fields(read_proc(proc_root, pid, "stat", 1024))
            if _kernel_thread(stat):
                continue
        cgroup = (read_proc(proc_root, pid, "cgroup", MAX_CGROUP_BYTES) or b"").decode("utf-8", "replace")
        in_cgroup = in_job_cgroup(cgroup, job_id)
        if not in_cgroup:
            environ = read_proc(proc_root, pid, "environ", MAX_ENVIRON_BYTES)
            if environ is None or needle not in environ.split(b"\0"):
                continue
        uid = _real_uid(_status_fields(proc_root, pid))
        if not in_cgroup and (job_uid is None or uid != job_uid):
            continue  # carries the job's environment, but is not the job's (root's wrapper, another user)
        comm = _comm(proc_root, pid)
        if comm in NEVER:
            continue
        if stat is None:
            stat = _stat_fields(read_proc(proc_root, pid, "stat", 1024))
        found.append({"pid": int(pid), "comm": comm, "uid": uid, "start": _start_of(stat)})
    return found


def kill_all(processes: list[dict], settle_s: float = 0.5, proc_root: str = "/proc") -> list[dict]:
    """SIGKILL each process that is still the one found; return those signalled. Waits up to
    ``settle_s`` for them to go."""
    killed = []
    for proc in processes:
        if _signal_same(proc, proc_root):
            killed.append(proc)
    deadline = time.monotonic() + settle_s
    while killed and time.monotonic() < deadline:
        if not any(_alive(p["pid"], proc_root) for p in killed):
            break
        time.sleep(0.02)
    return killed


def _signal_same(proc: dict, proc_root: str) -> bool:
    pid = proc["pid"]
    try:
        fd = os.pidfd_open(pid)
    except (ProcessLookupError, PermissionError):
        return False
    except (AttributeError, OSError):  # no pidfd (old kernel): plain kill after the same check
        fd = None
    try:
        if proc.get("start") is not None and _start_time(proc_root, str(pid)) != proc["start"]:
            return False  # the pid now names another process
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if fd is not None:
            os.close(fd)


def _alive(pid: int, proc_root: str = "/proc") -> bool:
    raw = read_proc(proc_root, str(pid), "stat", 512)
    try:
        state = (raw or b"").rsplit(b")", 1)[-1].split()[0]
    except IndexError:
        return False
    return state not in (b"Z", b"X")
