"""The installed wrappers' entry: hand the hook to the node's warm agent, else run it here.

``run([CONTEXT, "--config", FILE, "--agent", SOCKET])`` in the Python the installed hooks run (``<venv
python> -IS -c``) when the agent did not take the hook at its door (:mod:`healthcheck.agent.door`: an
agent of an older version has none); ``python -I -c 'from healthcheck.hook.client import run;
run()' prolog --config FILE --agent SOCKET`` does the same.

With the agent (:mod:`healthcheck.agent.main`) listening on SOCKET, the hook's work is done by one of its
spare workers, forked ahead with modules imported, config and policies loaded and the checks' child
warmed, so a healthy prolog costs the interpreter's start-up and a few milliseconds. The agent must be
root's (or this user's): SO_PEERCRED is checked, so a socket put there by anyone else is not used.
This process only connects, sends its arguments,
environment, working directory, umask and start time, waits, writes what the hook logged to stderr
(slurmd's log) and exits with the hook's status. It imports nothing but this module (``_socket`` and
``marshal`` and ``posix`` are built into the interpreter's distribution): a test holds it to that.

No agent (none installed, or one restarting with upgraded code), or one that does not answer within
``ACCEPT_S``: the hook runs in this process exactly as without an agent (:func:`hooks.run`), its budget
counted from this process's start. Once the agent has taken the request, the hook's own budget applies:
no answer by then (a bug of ours) is logged and the hook exits 0 without judging, as any internal error
does: a job never waits on us beyond the budget, and our failure never drains a node.

Wire format, both ways: an 8-byte big-endian length, then that many bytes of ``marshal`` data (a dict).
Request: ``{"v", "argv", "env", "cwd", "umask", "t0"}``. Answers: ``{"kind": "accepted", "wait_s",
"pid"}`` (a spare worker, whose process group is ``pid``, took it; the hook ends within ``wait_s``, the
context's default budget), ``{"kind": "budget", "budget_s"}`` only when the config's budget for this
context differs, ``{"kind": "acting", "rc"}`` right before the worker asks Slurm to drain the node (should
the worker then end without its verdict, this process exits ``rc``: it fails closed, never 0 on a node
we drained), then ``{"kind": "done", "rc", "log"}``; or ``{"kind": "refused", "why"}`` (nothing ran: the
hook runs here).

``t0_us`` (the installed hooks pass bash's ``$EPOCHREALTIME`` in microseconds): the hook's start, from
which its budget counts; the second a hook may have waited at the agent's door is then inside it.
"""

import marshal
import posix  # os without its import (~1 ms under -S: os, stat, posixpath, _collections_abc); built in
import sys
import time

PROTOCOL = 1
HEADER = 8
ACCEPT_S = 1.0  # the agent's answer to a request (a warm agent answers in about a millisecond)
ANSWER_MARGIN_S = 0.5  # after the hook's budget: the worker's own exit, the last frame
MAX_FRAME = 16 * 1024 * 1024


class AgentGone(Exception):
    """The agent did not take the request: run the hook here."""


def split_agent(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``--agent SOCKET``, and SOCKET (None when not given or given empty)."""
    if "--agent" not in argv:
        return argv, None
    i = argv.index("--agent")
    socket_path = argv[i + 1] if i + 1 < len(argv) else None
    return argv[:i] + argv[i + 2:], socket_path or None


MAX_AGE_S = 10.0  # a t0_us further back than this (a clock step), or from the future: counted from now


def started_at(t0_us, wall: float | None = None, mono: float | None = None) -> float:
    """The hook's start on this process's monotonic clock, given its start on the wall clock in
    microseconds (as text or a number); now when it is missing, malformed, older than MAX_AGE_S or in
    the future."""
    wall = time.time() if wall is None else wall
    mono = time.monotonic() if mono is None else mono
    try:
        text = str(t0_us)
        age = wall - int(text) / 1e6 if 0 < len(text) <= 20 and text.isascii() and text.isdigit() else -1.0
    except ValueError:
        age = -1.0
    return mono - age if 0 <= age <= MAX_AGE_S else mono


def run(argv: list[str] | None = None, t0_us: str | None = None) -> None:
    """The hook with ``argv`` (the installed scripts pass theirs; else the command line's), then exit.
    ``t0_us``: the hook's start on the wall clock in microseconds (its budget counts from there)."""
    t0 = started_at(t0_us) if t0_us is not None else time.monotonic()
    argv, socket_path = split_agent(list(sys.argv[1:] if argv is None else argv))
    if socket_path:
        try:
            code = via_agent(socket_path, argv, t0)
        except AgentGone as exc:
            if exc.args and exc.args[0]:
                _log(f"agent not used, the hook runs here: {exc.args[0]}")
        except Exception as exc:  # noqa: BLE001 - before the agent took it: the hook runs here
            _log(f"agent not used, the hook runs here: {type(exc).__name__}: {exc}")
        else:
            _leave(code)
    _site()
    from .run import Handoff, guarded_main, leave

    leave(guarded_main(argv, Handoff(t0=t0)))


def via_agent(socket_path: str, argv: list[str], t0: float) -> int:
    """The hook's exit status as the agent's worker gave it. Raises AgentGone (with why, or empty when
    there is simply no agent) before the agent has taken the request."""
    import _socket

    request = _request(argv, t0)  # ready before the connection: the agent's worker reads it at once
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(ACCEPT_S)
        try:
            sock.connect(socket_path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise AgentGone("") from None  # no agent: the usual case where none is installed
        except OSError as exc:
            raise AgentGone(f"{socket_path}: {exc}") from None
        owner = peer_uid(sock, _socket)
        if owner not in (0, posix.getuid()):
            raise AgentGone(f"{socket_path}: answered by uid {owner}, not root: not used")
        try:
            send_frame(sock, request)
            first = read_frame(sock)
        except (OSError, ValueError, EOFError) as exc:
            raise AgentGone(f"no answer from the agent: {exc}") from None
        kind = first.get("kind")
        if kind == "refused":
            raise AgentGone(f"agent refused: {first.get('why')}")
        if kind != "accepted":
            raise AgentGone(f"unexpected answer from the agent: {kind!r}")
        try:
            wait_s = float(first.get("wait_s") or 0)
        except (TypeError, ValueError):
            raise AgentGone(f"unexpected answer from the agent: wait_s {first.get('wait_s')!r}") from None
        try:
            return _await_worker(sock, t0, wait_s, first.get("pid"))
        except AgentGone:
            raise
        except Exception as exc:  # noqa: BLE001 - taken by the agent: a bug of ours never drains a node
            _log(f"the agent's answer could not be read ({type(exc).__name__}: {exc}); nothing judged")
            return 0
    finally:
        sock.close()


def peer_creds(sock, socket_module) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket (SO_PEERCRED: pid, uid, gid as C ints)."""
    try:
        creds = sock.getsockopt(socket_module.SOL_SOCKET, socket_module.SO_PEERCRED, 12)
    except OSError:
        return None
    return (int.from_bytes(creds[0:4], sys.byteorder, signed=True),
            int.from_bytes(creds[4:8], sys.byteorder, signed=True))


def peer_uid(sock, socket_module) -> int | None:
    """The uid of the process at the other end of a Unix socket."""
    creds = peer_creds(sock, socket_module)
    return None if creds is None else creds[1]


def _site() -> None:
    """The interpreter's usual site set-up (sys.path from the venv and its .pth files), when the hook
    started without it (``-S``, the installed scripts) and is about to run here: it then imports what it
    would have (pynvml from the venv, an editable install's path)."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def process_context() -> tuple[dict, str, int]:
    """This process's environment, working directory and umask: what a worker takes from its wrapper.
    The environment is ``os.environ`` once ``os`` is loaded (it may have been changed: a wrapper that
    sets SLURM_CONF, the agent's workers); before that, the one this process started with, decoded as
    ``os.environ`` decodes it."""
    umask = posix.umask(0o022)
    posix.umask(umask)
    try:
        cwd = posix.getcwd()
    except OSError:
        cwd = "/"
    os_module = sys.modules.get("os")
    if os_module is not None:
        return dict(os_module.environ), cwd, umask
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    return {k.decode(encoding, errors): v.decode(encoding, errors) for k, v in posix.environ.items()}, cwd, umask


def _request(argv: list[str], t0: float) -> dict:
    env, cwd, umask = process_context()
    return {"v": PROTOCOL, "argv": list(argv), "env": env, "cwd": cwd, "umask": umask, "t0": t0}


def _await_worker(sock, t0: float, wait_s: float, pid) -> int:
    """The worker's frames until ``done``; past its deadline the worker's group is killed and the hook exits 0."""
    deadline = t0 + wait_s + ANSWER_MARGIN_S
    acting = 0  # the status to exit with should the worker end without its verdict
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            frame = read_frame(sock)
        except (OSError, ValueError, EOFError) as exc:
            if isinstance(exc, TimeoutError) and isinstance(pid, int) and pid > 1:
                try:
                    posix.killpg(pid, 9)  # SIGKILL: it is past its budget (a bug of ours)
                except OSError:
                    pass
            if acting:
                _log(f"the agent's worker gave no verdict ({exc}) after it began to drain the node; exit {acting}")
                return acting
            _log(f"the agent's worker gave no verdict ({exc}); nothing judged")
            return 0
        kind = frame.get("kind")
        if kind == "refused":  # no worker could be started: nothing ran yet
            raise AgentGone(f"agent refused: {frame.get('why')}")
        if kind == "budget":
            deadline = t0 + float(frame["budget_s"]) + ANSWER_MARGIN_S
        elif kind == "acting":
            rc = frame.get("rc")
            acting = rc if isinstance(rc, int) and 0 < rc < 256 else 1
        elif kind == "done":
            text = frame.get("log") or ""
            if text:
                try:
                    sys.stderr.write(text)
                except OSError:
                    pass
            rc = frame.get("rc")
            return rc if isinstance(rc, int) and 0 <= rc < 256 else 0


def send_frame(sock, message: dict) -> None:
    data = marshal.dumps(message)
    sock.sendall(len(data).to_bytes(HEADER, "big") + data)


def read_frame(sock) -> dict:
    """One framed message; EOFError when the peer closed, ValueError for a malformed one, the socket's
    timeout as OSError ("timed out")."""
    header = _read_exactly(sock, HEADER)
    size = int.from_bytes(header, "big")
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes exceeds {MAX_FRAME}")
    try:
        message = marshal.loads(_read_exactly(sock, size))
    except (EOFError, TypeError) as exc:
        raise ValueError(f"unreadable frame: {exc}") from None
    if not isinstance(message, dict):
        raise ValueError("a frame that is not a dict")
    return message


def _read_exactly(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the agent closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _log(message: str) -> None:
    from .run import log

    log(message)


def _leave(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - slurmd gone: exit anyway
            pass
    posix._exit(code)
