"""The agent's door: a shell hook hands its work to the node's agent without starting an interpreter.

The installed hooks are bash scripts (``templates/client.bash``). With the agent up, a hook costs bash's
start (~2 ms, ~3 MiB) and the worker's few milliseconds instead of an interpreter's start (~9 ms, ~8 MiB)
and the same work: bash cannot open a Unix socket, so the agent also listens on a FIFO, its door.

- The door is ``agent.door`` beside the socket ``agent.sock`` (:func:`healthcheck.core.agentpaths.paths_for`), mode 0600 in the
  agent's 0700 directory: only root (or the agent's own user) can write a request into it. The agent
  writes ``PID START`` into ``agent.pid`` beside it (its pid and its start time, field 22 of
  ``/proc/PID/stat``). A hook knocks only when the door and the pid file are root's (``-O``) and the pid
  names a live, not stopped process started at START: a stale pid file whose pid now names another
  process, or a stopped agent behind a full door, costs the hook nothing (its Python client runs at once).
- Request, one line written at once (far below PIPE_BUF: lines from concurrent hooks never interleave)::

      2 PID FD T0_US START SHELL CONTEXT CONFIG [SLURM_CONF]

  PID is the hook's process, START its start time (field 22 of ``/proc/PID/stat``: PID and START name one
  process for the machine's lifetime) and FD a pipe it holds open; T0_US its start on the wall clock in
  microseconds (bash's ``$EPOCHREALTIME``); SHELL the bash it runs in (``$BASH``); CONTEXT, CONFIG and
  SLURM_CONF what the Python client's argv and environment would carry. Hooks of the previous release
  write protocol ``1`` (the same line without START); they are served, bound by uid and shell only.
- The worker acts only for the process that wrote the line (:func:`client_context`): it must run as root
  (every uid of ``/proc/PID/status``; or the agent's own user), have the START the line names, and
  still be that process after its environment, directory and umask were read (read again, compared).
  A pid reused by any other process, a non-root one above all, is refused: nothing is read from it, run
  for it or written to it. The hook's environment is the one it was started with (slurmd's); what reaches
  ``scontrol`` is the safe PATH and locale, and SLURM_CONF only when root owns it and no one else can
  write it (``backend_base.slurm_env``).
- The agent's loop reads the door, drops what it must (a malformed line, one its hook has given up on)
  and hands each line on to the spare workers through a pipe of its own (:func:`hand_over`): one record
  of PIPE_BUF bytes per line, so every write is atomic and every read takes exactly one line, whichever
  of the waiting spares wakes first (:func:`take_handed`). The spare tells the agent, which forks the
  next, as for a request on the socket.
- Answers, lines the worker writes into the hook's pipe, opened through ``/proc/PID/fd/FD``
  (:class:`Reply`). It must be a pipe, and once it is open the process must still be the one that wrote
  the line and run SHELL: a hook that gave up on the door has ``exec``'d its Python client, whose own
  descriptors are never written to. A worker whose ``accepted`` cannot be delivered (the hook is gone)
  runs nothing::

      accepted WAIT_US PGID | budget BUDGET_US | acting RC | log TEXT (one per line of the hook's log) | done RC | refused WHY

  the same messages as the socket's frames (:mod:`healthcheck.hook.client`), with the same deadlines
  and the same fallback: no answer within a second, or ``refused``, and the hook runs the Python client.
  ``acting RC`` comes before the worker asks Slurm to drain the node: should the worker then end without
  its ``done`` (killed, a bug of ours), the hook exits RC (fails closed: a prolog that drained exits 1,
  Slurm requeues the job) instead of 0.
"""
from __future__ import annotations

import os
import stat
import time

from ..hook.run import CONTEXTS

PROTOCOL = "2"
PROTOCOLS = ("1", "2")  # 1: the previous release's hooks (no START)
MAX_LINE = 4096  # a request line; PIPE_BUF is 4096 on Linux
MAX_ENVIRON = 4 * 1024 * 1024  # more than the kernel lets a process start with (ARG_MAX: arguments and environment)
MAX_AGE_S = 10.0  # a request's T0 further back than this (a clock step) counts from now
GIVEN_UP_S = 2.0  # a line older than this is not handed on: its hook waited a second, then ran its client
DOOR_BYTES = 1 << 20  # the door's buffer (the kernel's default pipe-max-size): ~10,000 request lines
RECORD = 4096  # a line handed to the spares: PIPE_BUF bytes, the most a pipe writes at once


class DoorError(Exception):
    """A request at the door that cannot be taken (the hook gets no answer: it runs its Python client)."""


class Request:
    __slots__ = ("pid", "fd", "t0_us", "start", "shell", "context", "config", "slurm_conf")

    def __init__(self, pid: int, fd: int, t0_us: int, shell: str, context: str, config: str,
                 slurm_conf: str | None, start: int | None = None):
        self.pid, self.fd, self.t0_us, self.shell = pid, fd, t0_us, shell
        self.context, self.config, self.slurm_conf, self.start = context, config, slurm_conf, start


def _number(text: str, digits: int) -> int | None:
    """``text`` as a number of at most ``digits`` ASCII digits, else None (``"²".isdigit()`` is true)."""
    if 0 < len(text) <= digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def parse_request(line: str) -> Request:
    """One request line (without or with its newline). Raises DoorError for anything else, whatever the
    line holds (it never raises another exception: the agent's loop reads it)."""
    if not isinstance(line, str) or len(line) > MAX_LINE:
        raise DoorError(f"a request of {len(line) if isinstance(line, str) else '?'} characters")
    fields = line.rstrip("\n").split(" ")
    version = fields[0]
    start = None
    if version == "2" and len(fields) in (8, 9):
        _, pid, fd, t0_us, start_text, *paths = fields
        start = _number(start_text, 20)
        if start is None:
            raise DoorError(f"START must be a number: {line[:80]!r}")
    elif version == "1" and len(fields) in (7, 8):
        _, pid, fd, t0_us, *paths = fields
    else:
        raise DoorError(f"not a request of protocol {' or '.join(PROTOCOLS)}: {line[:80]!r}")
    shell, context, config, *rest = paths
    pid_n, fd_n, t0_n = _number(pid, 10), _number(fd, 5), _number(t0_us, 20)
    if pid_n is None or fd_n is None or t0_n is None or pid_n < 2:
        raise DoorError(f"PID, FD and T0_US must be numbers: {line[:80]!r}")
    if context not in CONTEXTS:
        raise DoorError(f"context {context[:40]!r} is not one of {', '.join(CONTEXTS)}")
    paths = [shell, config, *rest]
    if not all(p.startswith("/") and p.isprintable() for p in paths):
        raise DoorError(f"SHELL, CONFIG and SLURM_CONF must be absolute paths: {line[:80]!r}")
    return Request(pid_n, fd_n, t0_n, shell, context, config, rest[0] if rest else None, start)


def given_up(req: Request, wall: float | None = None) -> bool:
    """The line waited in the door longer than its hook waits for an answer (an agent that was stopped
    or frozen, then resumed): handing it on would cost a spare for a hook that already ran itself."""
    age = (time.time() if wall is None else wall) - req.t0_us / 1e6
    return age > GIVEN_UP_S


def start_of(t0_us: int, wall: float | None = None, mono: float | None = None) -> float:
    """The hook's start on this process's monotonic clock, from its wall-clock start (a request older
    than MAX_AGE_S, or from the future, after a clock step: now)."""
    wall = time.time() if wall is None else wall
    mono = time.monotonic() if mono is None else mono
    age = wall - t0_us / 1e6
    return mono - age if 0 <= age <= MAX_AGE_S else mono


def parse_environ(data: bytes) -> dict[str, str]:
    """``/proc/PID/environ`` as ``os.environ`` decodes an environment (entries without ``=`` dropped)."""
    env = {}
    for entry in data.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and key:
            env[os.fsdecode(key)] = os.fsdecode(value)
    return env


def parse_umask(status: str) -> int:
    """The ``Umask:`` of ``/proc/PID/status`` (Linux 4.7 and later); 0o022 where it is not given."""
    for line in status.splitlines():
        if line.startswith("Umask:"):
            try:
                return int(line.split()[1], 8)
            except (IndexError, ValueError):
                break
    return 0o022


def parse_uids(status: str) -> tuple[int, ...]:
    """The four uids (real, effective, saved, filesystem) of ``/proc/PID/status``; () when not given."""
    for line in status.splitlines():
        if line.startswith("Uid:"):
            try:
                return tuple(int(u) for u in line.split()[1:5])
            except ValueError:
                return ()
    return ()


def parse_start(stat: bytes) -> int | None:
    """The start time (field 22, clock ticks after boot) of ``/proc/PID/stat``; the command before it
    may hold spaces and parentheses, so the fields are counted after its last ``)``."""
    fields = stat.rpartition(b")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def identity(pid: int, proc: str = "/proc") -> tuple[int, tuple[int, ...], str]:
    """(start time, uids, /proc/PID/status text) of process ``pid``. DoorError when it is gone."""
    from ..probes.jobprocs import read_proc

    stat = read_proc(proc, str(pid), "stat", 4096)
    status = read_proc(proc, str(pid), "status", 8192)
    if stat is None or status is None:
        raise DoorError(f"process {pid}: gone, or its /proc entries unreadable")
    text, start = status.decode("ascii", "replace"), parse_start(stat)
    if start is None:
        raise DoorError(f"process {pid}: no start time in its /proc/{pid}/stat")
    return start, parse_uids(text), text


def trusted_uids() -> tuple[int, ...]:
    """The uids a hook's process may run as: root, and the agent's own user (an agent run by hand)."""
    return (0, os.getuid())


def check_process(pid: int, start: int | None, proc: str = "/proc") -> tuple[int, str]:
    """(start time, /proc/PID/status text) of the process that wrote the request: DoorError unless it
    runs as root (or the agent's user) in every uid and, ``start`` given, started at ``start``."""
    began, uids, status = identity(pid, proc)
    if len(uids) != 4 or any(u not in trusted_uids() for u in uids):
        raise DoorError(f"process {pid} runs as uid {'/'.join(map(str, uids)) or '?'}, not root: refused")
    if start is not None and began != start:
        raise DoorError(f"process {pid} is not the hook that knocked (started at {began}, the request "
                        f"names {start}): refused")
    return began, status


def client_context(pid: int, proc: str = "/proc", start: int | None = None) -> tuple[dict[str, str], str, int]:
    """The hook process's environment (as it was started), working directory and umask, read only when
    the process is root's and (``start`` given) the one that knocked, and still that one afterwards."""
    from ..probes.jobprocs import read_proc

    began, status = check_process(pid, start, proc)
    environ = read_proc(proc, str(pid), "environ", MAX_ENVIRON + 1)
    if environ is None:
        raise DoorError(f"process {pid}: gone, or its /proc entries unreadable")
    if len(environ) > MAX_ENVIRON:
        raise DoorError(f"process {pid}: an environment over {MAX_ENVIRON} bytes")
    try:
        cwd = os.readlink(f"{proc}/{pid}/cwd")
    except OSError:
        cwd = "/"
    check_process(pid, began, proc)  # still the same process, still root's: else what was read is not its
    return parse_environ(environ), cwd, parse_umask(status)


def request_of(line: str, proc: str = "/proc") -> tuple[dict, Reply]:
    """The socket client's request for a door line (with the hook's ``pid``), and the hook's pipe to answer on."""
    req = parse_request(line)
    env, cwd, umask = client_context(req.pid, proc, req.start)
    if req.slurm_conf:
        env["SLURM_CONF"] = req.slurm_conf  # what the Python client sets before it sends its environment
    reply = Reply(req.pid, req.fd, proc, req.shell, req.start)
    from ..hook.client import PROTOCOL as SOCKET_PROTOCOL

    return {"v": SOCKET_PROTOCOL, "argv": [req.context, "--config", req.config], "env": env, "cwd": cwd,
            "umask": umask, "t0": start_of(req.t0_us), "pid": req.pid}, reply


def encode(message: dict) -> bytes:
    """A socket frame's message as the door's lines."""
    kind = message.get("kind")
    if kind == "accepted":
        text = f"accepted {_us(message.get('wait_s'))} {int(message.get('pid') or 0)}\n"
    elif kind == "budget":
        text = f"budget {_us(message.get('budget_s'))}\n"
    elif kind == "acting":
        rc = message.get("rc")
        text = f"acting {rc if isinstance(rc, int) and 0 <= rc < 256 else 1}\n"
    elif kind == "done":
        rc = message.get("rc")
        rc = rc if isinstance(rc, int) and 0 <= rc < 256 else 0
        lines = str(message.get("log") or "").replace("\0", "").splitlines()
        text = "".join(f"log {line}\n" for line in lines if line.strip()) + f"done {rc}\n"
    elif kind == "refused":
        text = "refused " + " ".join(str(message.get("why") or "").split()) + "\n"
    else:
        raise ValueError(f"no door line for a message of kind {kind!r}")
    return text.encode("utf-8", "replace")


def _us(seconds) -> int:
    try:
        return max(0, int(float(seconds) * 1_000_000))
    except (TypeError, ValueError):
        return 0


class Reply:
    """The hook's pipe, opened through ``/proc/PID/fd/FD``. It must be a pipe, and once it is open the
    process must still run ``shell`` (when given): a hook that gave up waiting has ``exec``'d its Python
    client, and a descriptor of that one (its watchdog's pipe, say) is never written to. A pid reused, or
    a descriptor closed, is refused alike; so is a process that is no longer root's or (``start`` given)
    no longer the one that knocked. Write-only, never inherited by what the worker runs."""

    def __init__(self, pid: int, fd: int, proc: str = "/proc", shell: str | None = None,
                 start: int | None = None):
        path = f"{proc}/{pid}/fd/{fd}"
        try:  # non-blocking: a pipe with no reader left fails at once (ENXIO) instead of waiting for one
            self.fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise DoorError(f"{path}: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISFIFO(os.fstat(self.fd).st_mode):
                raise DoorError(f"{path}: not a pipe")
            if shell is not None and not _same_file(f"{proc}/{pid}/exe", shell):  # checked after the open
                raise DoorError(f"process {pid} no longer runs {shell}")
            if shell is not None:  # (a test's own pipe passes no shell and no start)
                check_process(pid, start, proc)
        except BaseException:
            os.close(self.fd)
            raise
        os.set_blocking(self.fd, True)

    def send(self, message: dict) -> None:
        """Write the message's lines; OSError when the hook is gone (EPIPE: SIGPIPE is ignored)."""
        data = memoryview(encode(message))
        while data:
            data = data[os.write(self.fd, data):]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def open_door(door_path: str, pid_path: str) -> int:
    """Create the door (a FIFO, 0600; any stale one replaced) and the pid file; return the door's
    descriptor, open for reading and writing (so it never reads end-of-file while no hook holds it)
    and non-blocking."""
    for path in (door_path, pid_path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    old = os.umask(0o177)
    try:
        os.mkfifo(door_path, 0o600)
        fd = os.open(door_path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:  # a hook's write into a full door would block it (bash has no timeout for a write)
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, DOOR_BYTES)
        except (OSError, AttributeError):  # a lower pipe-max-size: the default 64 KiB (~650 lines)
            pass
        partial = f"{pid_path}.{os.getpid()}.partial"
        start, _uids, _status = identity(os.getpid())
        with open(partial, "w", encoding="ascii") as fh:  # PID START: a pid reused later is told apart
            fh.write(f"{os.getpid()} {start}\n")
        os.replace(partial, pid_path)
    finally:
        os.umask(old)
    return fd


def close_door(fd: int, door_path: str, pid_path: str) -> None:
    """Remove the pid file first (hooks stop knocking), then the door, if they are still this agent's."""
    try:
        with open(pid_path, encoding="ascii") as fh:
            ours = fh.read(64).split()[:1] == [str(os.getpid())]
    except OSError:
        ours = False
    if ours:
        for path in (pid_path, door_path):
            try:
                os.unlink(path)
            except OSError:
                pass
    try:
        os.close(fd)
    except OSError:
        pass


class Lines:
    """Complete request lines from the door's non-blocking reads (an overlong line is dropped)."""

    def __init__(self) -> None:
        self.partial = b""

    def feed(self, data: bytes) -> list[str]:
        *lines, self.partial = (self.partial + data).split(b"\n")
        if len(self.partial) > MAX_LINE:
            self.partial = b""
        return [line.decode("utf-8", "replace") for line in lines if line]


def hand_over_pipe() -> tuple[int, int]:
    """The pipe the agent hands door lines to its spares through: (read end, write end), both
    non-blocking (the spares that lose the race for a record read nothing; a full pipe drops the line
    instead of holding the agent's loop), with room for 256 lines waiting for a spare."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    try:
        import fcntl

        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, DOOR_BYTES)
    except (OSError, AttributeError):  # the default 64 KiB: 16 lines
        pass
    return r, w


def hand_over(fd: int, line: str) -> None:
    """Write ``line`` into the hand-over pipe as one record (atomic: RECORD is PIPE_BUF). ValueError for
    a line that does not fit a record, BlockingIOError when the pipe is full (no spare has taken a line
    for a while: the hook gets no answer and runs its Python client)."""
    data = line.rstrip("\n").encode("utf-8", "replace")
    if len(data) > RECORD or b"\0" in data:
        raise ValueError(f"a request of {len(data)} bytes does not fit a record of {RECORD}")
    os.write(fd, data.ljust(RECORD, b"\0"))


def take_handed(fd: int) -> str | None:
    """One line from the hand-over pipe, or None when another spare took it first (or none is there)."""
    try:
        data = os.read(fd, RECORD)
    except BlockingIOError:
        return None
    return data.rstrip(b"\0").decode("utf-8", "replace") if data else None
