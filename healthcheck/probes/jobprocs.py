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
- it is not a kernel thread. On a large node most of ``/proc`` is per-CPU kernel workers: they are known
  from one read (kthreadd's children) and never opened one by one; where the kernel does not list
  children, the flags in ``/proc/PID/stat``, read first, tell;
- it is not a zombie (dead already: nothing to kill; its parent, if the job's, is found and killed);
- it is not a Slurm or munge daemon, told by what it is, never by its name (a job's process may call
  itself ``slurmd``, through ``exec -a``/``prctl`` or a binary named ``munged`` in its home). A daemon
  runs with real uid 0 and its executable (``/proc/PID/exe``) is a daemon's binary that only root could
  have put there: a root-owned file nobody else may write, in folders up to ``/`` that are root's and
  writable by nobody else (a sticky ``/tmp`` does not count), whose name, or a name in the same folder
  that leads to it (Debian's ``/usr/sbin/slurmd`` -> ``/etc/alternatives`` -> ``slurmd-wlm``), is the
  daemon's. So a process with the job's (non-root) uid is never a daemon, even one running the real
  ``/usr/sbin/slurmd``: a user's copy of a daemon is the job's. In the job's cgroup the one daemon is
  the job's own slurmstepd (cgroup v2: ``.../job_<id>/step_<n>/slurm``; v1: ``.../job_<id>/step_<n>``):
  there only a slurmstepd binary is spared, and never one in a task's cgroup (v2 ``.../user/task_<n>``,
  v1 ``.../task_<n>``), where slurmstepd does not live. Outside the job's cgroup a root process carrying
  the job (a root job's, the only uid that can match there) is spared when its binary is any of the
  daemons': where proctrack does not use cgroups a job's processes sit in ``slurmd.service``'s own
  cgroup, so the unit's cgroup proves nothing and is not read. The executable is looked at only for
  root processes that already matched the job: the common scan reads no more files than before.

It reads ``/proc`` directly (every probe takes its root, so tests point it at a fixture tree).
Reading other users' ``/proc/PID/environ`` needs root, as the epilog runs. ``kill_all`` signals
through a pidfd after checking that the pid still names the process that was found (same start time),
so a pid reused in between is never killed.
"""
from __future__ import annotations

import os
import signal
import time
from stat import S_ISREG

MAX_ENVIRON_BYTES = 256 * 1024
MAX_CGROUP_BYTES = 16 * 1024
DAEMONS = frozenset({"slurmstepd", "slurmd", "slurmctld", "slurmdbd", "munged"})  # their binaries' names
STEPD = frozenset({"slurmstepd"})
DELETED = " (deleted)"  # what the kernel appends to /proc/PID/exe once the binary was replaced (an upgrade)


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


def in_task_cgroup(cgroup_text: str, job_id: str) -> bool:
    """True when a line of /proc/PID/cgroup puts the process in one of the job's task cgroups (cgroup v2
    ``job_<id>/step_<n>/user/task_<n>``, v1 ``job_<id>/step_<n>/task_<n>``): a task, never slurmstepd,
    which sits in ``step_<n>/slurm`` (v2) or ``step_<n>`` itself (v1)."""
    component = f"job_{job_id}"
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)[-1].split("/")
        if component in parts:
            if any(p == "user" or p.startswith("task_") for p in parts[parts.index(component) + 1:]):
                return True
    return False


def _root_only(info: os.stat_result) -> bool:
    """Owned by root and writable by nobody else (group and others: no write bit, sticky or not)."""
    return info.st_uid == 0 and not info.st_mode & 0o022


def daemon_binary(proc_root: str, pid: str, names: frozenset[str] = DAEMONS) -> str | None:
    """The daemon of ``names`` whose binary process ``pid`` runs, or None. Its executable must be one
    only root could have put in place: a regular file owned by root that nobody else may write, in
    folders up to ``/`` owned by root that nobody else may write; and named as the daemon, by its own
    name or by a name in the same folder that leads to it (``/usr/sbin/slurmd`` -> ``slurmd-wlm``
    through ``/etc/alternatives``). A binary the kernel says was replaced since (an upgrade, ``(deleted)``)
    is judged by the file it runs and the folder it was in. A few stat calls: read only for root
    processes that already matched the job."""
    link = f"{proc_root}/{pid}/exe"
    try:
        path = os.readlink(link)  # the kernel's path, resolved; in a fixture tree, a link to follow
        info = os.stat(link)  # the very file it runs, even one replaced since
    except OSError:
        return None
    replaced = path.endswith(DELETED)
    path = path[:-len(DELETED)] if replaced else os.path.realpath(path)
    if not path.startswith("/") or not S_ISREG(info.st_mode) or not _root_only(info):
        return None
    try:
        if not replaced:
            here = os.stat(path)
            if (here.st_dev, here.st_ino) != (info.st_dev, info.st_ino):
                return None  # the path names another file here (another mount namespace, a race)
        folder = os.path.dirname(path)
        while True:
            if not _root_only(os.stat(folder)):
                return None
            if folder == "/":
                break
            folder = os.path.dirname(folder)
    except OSError:
        return None
    folder, name = os.path.split(path)
    if name in names:
        return name
    for daemon in sorted(names):
        if os.path.realpath(os.path.join(folder, daemon)) == path:
            return daemon
    return None


def _spared_daemon(proc_root: str, pid: str, job_cgroup: str | None, job_id: str) -> bool:
    """For a root process that matched the job: True when it is a daemon. In the job's cgroup
    (``job_cgroup``, its /proc/PID/cgroup) only the job's slurmstepd, never in a task's cgroup;
    elsewhere (a root job's environment) any of the daemons."""
    if job_cgroup is not None:
        return not in_task_cgroup(job_cgroup, job_id) and daemon_binary(proc_root, pid, STEPD) is not None
    return daemon_binary(proc_root, pid) is not None


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
        if stat is None:
            stat = _stat_fields(read_proc(proc_root, pid, "stat", 1024))
        if stat[:1] == [b"Z"]:
            continue  # a zombie: already dead (its parent reaps it), nothing to kill; no exe to tell it by
        if uid == 0 and _spared_daemon(proc_root, pid, cgroup if in_cgroup else None, job_id):
            continue  # a daemon, told by what it is (never by its comm): see the module docstring
        comm = _comm(proc_root, pid)
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
