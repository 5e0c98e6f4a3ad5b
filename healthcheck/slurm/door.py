"""The agent's door: a shell hook hands its work to the node's agent without starting an interpreter.

The installed hooks are bash scripts (``templates/client.bash``). With the agent up, a hook costs bash's
start (~2 ms, ~3 MiB) and the worker's few milliseconds instead of an interpreter's start (~9 ms, ~8 MiB)
and the same work: bash cannot open a Unix socket, so the agent also listens on a FIFO, its door.

- The door is ``agent.door`` beside the socket ``agent.sock`` (:func:`paths_for`), mode 0600 in the
  agent's 0700 directory: only root (or the agent's own user) can write a request into it. The agent
  writes its pid into ``agent.pid`` beside it; a hook whose pid file names no live process does not knock.
- Request, one line written at once (far below PIPE_BUF: lines from concurrent hooks never interleave)::

      1 PID FD T0_US SHELL CONTEXT CONFIG [SLURM_CONF]

  PID is the hook's process and FD a pipe it holds open; T0_US its start on the wall clock in
  microseconds (bash's ``$EPOCHREALTIME``); SHELL the bash it runs in (``$BASH``); CONTEXT, CONFIG and
  SLURM_CONF what the Python client's argv and environment would carry. The hook's environment,
  working directory and umask are read from ``/proc/PID`` (:func:`client_context`): what the socket's
  client sends of itself.
- The agent's loop reads the door, drops what it must (a malformed line, one its hook has given up on)
  and hands each line on to the spare workers through a pipe of its own (:func:`hand_over`): one record
  of PIPE_BUF bytes per line, so every write is atomic and every read takes exactly one line, whichever
  of the waiting spares wakes first (:func:`take_handed`). The spare tells the agent, which forks the
  next, as for a request on the socket.
- Answers, lines the worker writes into the hook's pipe, opened through ``/proc/PID/fd/FD``
  (:class:`Reply`). It must be a pipe, and once it is open the process must still run SHELL: a hook
  that gave up on the door has ``exec``'d its Python client, whose own descriptors are never written
  to. A worker whose ``accepted`` cannot be delivered (the hook is gone) runs nothing::

      accepted WAIT_US PGID | budget BUDGET_US | log TEXT (one per line of the hook's log) | done RC | refused WHY

  the same messages as the socket's frames (:mod:`healthcheck.slurm.agentclient`), with the same deadlines
  and the same fallback: no answer within a second, or ``refused``, and the hook runs the Python client.
"""
from __future__ import annotations

import os
import stat
import sys
import time

from .hooks import CONTEXTS

PROTOCOL = "1"
MAX_LINE = 4096  # a request line; PIPE_BUF is 4096 on Linux
MAX_ENVIRON = 4 * 1024 * 1024  # more than the kernel lets a process start with (ARG_MAX: arguments and environment)
MAX_AGE_S = 10.0  # a request's T0 further back than this (a clock step) counts from now
GIVEN_UP_S = 2.0  # a line older than this is not handed on: its hook waited a second, then ran its client
DOOR_BYTES = 1 << 20  # the door's buffer (the kernel's default pipe-max-size): ~10,000 request lines
RECORD = 4096  # a line handed to the spares: PIPE_BUF bytes, the most a pipe writes at once


class DoorError(Exception):
    """A request at the door that cannot be taken (the hook gets no answer: it runs its Python client)."""


def paths_for(socket_path: str) -> tuple[str, str]:
    """The door and the pid file of the agent whose socket is ``socket_path``."""
    base = socket_path[:-5] if socket_path.endswith(".sock") else socket_path
    return base + ".door", base + ".pid"


class Request:
    __slots__ = ("pid", "fd", "t0_us", "shell", "context", "config", "slurm_conf")

    def __init__(self, pid: int, fd: int, t0_us: int, shell: str, context: str, config: str,
                 slurm_conf: str | None):
        self.pid, self.fd, self.t0_us, self.shell = pid, fd, t0_us, shell
        self.context, self.config, self.slurm_conf = context, config, slurm_conf


def parse_request(line: str) -> Request:
    """One request line (without or with its newline). Raises DoorError for anything else."""
    if len(line) > MAX_LINE:
        raise DoorError(f"a request of {len(line)} characters")
    fields = line.rstrip("\n").split(" ")
    if len(fields) not in (7, 8) or fields[0] != PROTOCOL:
        raise DoorError(f"not a request of protocol {PROTOCOL}: {line[:80]!r}")
    _, pid, fd, t0_us, shell, context, config, *rest = fields
    if not (pid.isdigit() and fd.isdigit() and t0_us.isdigit()) or int(pid) < 2:
        raise DoorError(f"PID, FD and T0_US must be numbers: {line[:80]!r}")
    if context not in CONTEXTS:
        raise DoorError(f"context {context!r} is not one of {', '.join(CONTEXTS)}")
    paths = [shell, config, *rest]
    if not all(p.startswith("/") and p.isprintable() for p in paths):
        raise DoorError(f"SHELL, CONFIG and SLURM_CONF must be absolute paths: {line[:80]!r}")
    return Request(int(pid), int(fd), int(t0_us), shell, context, config, rest[0] if rest else None)


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


def client_context(pid: int, proc: str = "/proc") -> tuple[dict[str, str], str, int]:
    """The hook process's environment (as it was started), working directory and umask."""
    from ..probes.jobprocs import read_proc

    environ = read_proc(proc, str(pid), "environ", MAX_ENVIRON + 1)
    status = read_proc(proc, str(pid), "status", 8192)
    if environ is None or status is None:
        raise DoorError(f"process {pid}: gone, or its /proc entries unreadable")
    if len(environ) > MAX_ENVIRON:
        raise DoorError(f"process {pid}: an environment over {MAX_ENVIRON} bytes")
    try:
        cwd = os.readlink(f"{proc}/{pid}/cwd")
    except OSError:
        cwd = "/"
    return parse_environ(environ), cwd, parse_umask(status.decode("ascii", "replace"))


def request_of(line: str, proc: str = "/proc") -> tuple[dict, Reply]:
    """The socket client's request for a door line (with the hook's ``pid``), and the hook's pipe to answer on."""
    req = parse_request(line)
    env, cwd, umask = client_context(req.pid, proc)
    if req.slurm_conf:
        env["SLURM_CONF"] = req.slurm_conf  # what the Python client sets before it sends its environment
    reply = Reply(req.pid, req.fd, proc, req.shell)
    from .agentclient import PROTOCOL as SOCKET_PROTOCOL

    return {"v": SOCKET_PROTOCOL, "argv": [req.context, "--config", req.config], "env": env, "cwd": cwd,
            "umask": umask, "t0": start_of(req.t0_us), "pid": req.pid}, reply


def rehearse() -> None:
    """What a spare does for a hook at the door, done on itself while it waits (a pipe of its own, its own
    /proc entries): in a fresh fork the first pass costs ~0.6 ms of first touches, a later one ~0.04 ms."""
    r, w = os.pipe()
    try:
        line = f"{PROTOCOL} {os.getpid()} {r} {int(time.time() * 1e6)} {sys.executable} prolog /"
        _request, reply = request_of(line)
        reply.send({"kind": "done", "rc": 0, "log": ""})
        reply.close()
        os.read(r, 64)
    finally:
        os.close(r)
        os.close(w)


def encode(message: dict) -> bytes:
    """A socket frame's message as the door's lines."""
    kind = message.get("kind")
    if kind == "accepted":
        text = f"accepted {_us(message.get('wait_s'))} {int(message.get('pid') or 0)}\n"
    elif kind == "budget":
        text = f"budget {_us(message.get('budget_s'))}\n"
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
    a descriptor closed, is refused alike. Write-only, never inherited by what the worker runs."""

    def __init__(self, pid: int, fd: int, proc: str = "/proc", shell: str | None = None):
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
        with open(partial, "w", encoding="ascii") as fh:
            fh.write(f"{os.getpid()}\n")
        os.replace(partial, pid_path)
    finally:
        os.umask(old)
    return fd


def close_door(fd: int, door_path: str, pid_path: str) -> None:
    """Remove the pid file first (hooks stop knocking), then the door, if they are still this agent's."""
    try:
        with open(pid_path, encoding="ascii") as fh:
            ours = fh.read(32).strip() == str(os.getpid())
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
