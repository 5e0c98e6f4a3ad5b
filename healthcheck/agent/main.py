"""The node's warm hook agent: slurmd's hooks answered in milliseconds, every check still run afresh.

``python -I -m healthcheck.agent.main [--socket PATH] [--config FILE]`` (systemd: the unit
``healthcheck slurm install-hooks`` writes beside the hooks). At start it imports what the prolog, epilog
and HealthCheckProgram run (the hook, its probes, the checks of those contexts, the config from its
cache). Then it keeps ``SPARES`` workers forked ahead, each
waiting in ``accept()`` with its own watchdog child forked ahead too (``watchdog.prepare``), warmed by
one probe-and-judge whose result is thrown away (no GPU call, nothing written). A hook's request comes
through the agent's door (:mod:`healthcheck.agent.door`: the installed hooks are bash scripts, which
write one line into a FIFO; the agent hands it on to the spares through a pipe) or from the Python client on
the socket (:mod:`healthcheck.hook.client`); it is taken by one spare, which runs the hook exactly as the wrapper
would: ``hook.run.guarded_main``, probing live through its prepared child, judging, acting and recording,
with the budgets counted from the wrapper's start, in the wrapper's environment, working directory and
umask. It sends back the exit status and what the hook logged, and exits. The agent forks the next
spare once the hook is answered. Nothing of a run is kept in the agent: what one run probes, caches or
leaks dies with its worker, and a worker stuck on a wedged GPU holds only itself.

Safety:
- the socket lives in a directory of mode 0700 and is 0600; a peer that is not root (or the agent's own
  user) is refused (SO_PEERCRED) before anything it sent is read (requests are ``marshal`` data: read
  only from root); the wrappers check the agent the same way. The door (a FIFO) and the pid file are
  0600 in that directory: only root writes a request line, which is checked before a spare takes it,
  and a worker answers only into a pipe the named process holds;
- a request is read within ``REQUEST_S``; one that is malformed, too large or of another protocol is
  refused (the wrapper then runs the hook itself);
- code under the agent changed (an upgrade: any loaded module or packaged policy file differs from what
  was imported, or the Python it runs): checked every second, the agent then stops its spares, removes
  its socket and exits with 75 (systemd starts the new code); meanwhile the wrappers run their hooks
  themselves. (An upgrade rewrites files for seconds: a hook started in that second may import a mix
  with or without the agent);
- a second agent on a live socket refuses to start.

The job sampler (issue 32.6, docs/job-stalls.md): every ``[slurm] job_sample_interval_s`` (30 s) the
agent forks one child that runs :func:`healthcheck.hook.job_sampler.run_once` and exits (NVML opened and
shut down inside it, only while a Slurm job has a cgroup on the node). Never while a hook runs (it waits
for the next second), never two at once, killed at the interval's end (a wedged GPU holds only that child;
no new one is forked while it lingers).
"""
from __future__ import annotations

import io
import os
import select
import signal
import sys
import time

from ..hook import client as agentclient
from . import door
from ..core.agentpaths import DEFAULT_SOCKET, paths_for
from ..hook.client import PROTOCOL, read_frame, send_frame
from ..hook.run import CONTEXTS
from ..config.slurm_settings import SlurmSettings

REQUEST_S = 1.0  # a client's request must arrive within this
REAP_EVERY_S = 1.0
SPARES = 2  # workers forked ahead, waiting in accept(): a request never waits for a fork
EX_TEMPFAIL = 75  # the exit status for "restart me" (stale code)


class AgentError(Exception):
    """The agent cannot start (socket in use, directory unsafe)."""


def warm(config_path: str | None = None) -> list[str]:
    """Import what the hooks run, so that each worker starts with it loaded. Returns the modules that
    could not be imported (a probe whose extra is missing: its job reports it, as without the agent)."""
    failed = []
    from ..slurm import actions, baseline, policy
    from . import work as agentwork
    from ..hook import gate
    from ..hook import gatefacts
    from ..hook import gpu_samples
    from ..hook import job_sampler  # noqa: F401 - the sampler child runs it every 30 s
    from ..hook import net_window  # noqa: F401 - every hook keeps the network counters' growth
    from ..output import render  # noqa: F401 - every hook renders its verdict's line
    from ..hook import run as hooks
    from ..hook import watchdog  # noqa: F401
    from ..pipeline import acquire
    from ..pipeline import judge
    from ..core import jsonwrite
    from ..core import model
    from ..spool import entries as records
    from ..spool import store as spool
    from ..spool import append as spoolwrite  # noqa: F401
    from ..checks.registry import index
    from ..probes import live

    names = {f"healthcheck.probes.{m}" for m in live.PROBE_MODULES.values()}
    names |= {f"healthcheck.checks.{entry.module}" for entry in index().values() if entry.contexts & set(CONTEXTS)}
    names |= {"healthcheck.parsers.kernel_log", "healthcheck.parsers.host_events", "healthcheck.probes.jobprocs",
              "healthcheck.parsers.ipmitool", "healthcheck.parsers.mlxlink"}  # HealthCheckProgram's BMC and HCA
    for name in sorted(names):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - recorded; the probe's job fails in the worker as it would anyway
            failed.append(name)
    from ..policies.xid import load_xid_policy
    from ..policies.host_events import default_policy

    load_xid_policy()
    default_policy()
    if not agentwork.warm_nvml():
        failed.append("pynvml")
    if config_path and os.path.exists(config_path):
        node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
        try:  # the workers use it while the file is unchanged; a changed file is read by each run
            agentwork.keep_warm(config_path, node)
        except Exception:  # noqa: BLE001 - the hooks report a config they cannot use, per run
            pass
        records.config_hash(config_path)  # its SHA-256 module imported here, not by each run's record
    return failed


class Fingerprint:
    """What the agent's code is made of: every loaded module file of the package and its data files, with
    their (mtime, size, inode), and the interpreter's executable. Compared before every request."""

    def __init__(self) -> None:
        self.files = self._files()
        self.stamp = {path: self._stat(path) for path in self.files}

    @staticmethod
    def _files() -> list[str]:
        files = [sys.executable]
        for name, module in list(sys.modules.items()):
            if name == "healthcheck" or name.startswith("healthcheck."):
                path = getattr(module, "__file__", None)
                if path:
                    files.append(path)
        data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
        try:
            files += [os.path.join(data, n) for n in sorted(os.listdir(data))]
        except OSError:
            pass
        return files

    @staticmethod
    def _stat(path: str):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def changed(self) -> str | None:
        """The first file that is not what was loaded, else None."""
        for path in self.files:
            if self._stat(path) != self.stamp[path]:
                return path
        return None


def listen(socket_path: str):
    """A listening Unix socket at ``socket_path`` (its directory made 0700 if new and checked to be
    root's or ours and not writable by others). Raises AgentError when another agent answers there."""
    import socket
    import stat

    directory = os.path.dirname(os.path.abspath(socket_path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.stat(directory)
    if st.st_uid not in (0, os.getuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise AgentError(f"{directory}: must belong to root (or this user) and not be writable by others")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(socket_path)
    except FileNotFoundError:
        pass
    except OSError:  # a socket file no agent answers on: left by a dead agent
        os.unlink(socket_path)
    else:
        raise AgentError(f"{socket_path}: another agent answers there")
    finally:
        probe.close()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(socket_path)
    finally:
        os.umask(old)
    os.chmod(socket_path, 0o600)
    server.listen(64)
    return server


def serve(server, fingerprint: Fingerprint, spares: int = SPARES, log=None, warm_for: tuple[str, str] | None = None,
          door_fd: int | None = None, sampler: tuple[float, object] | None = None) -> int:
    """Keep ``spares`` workers forked and waiting in ``accept()``; each takes one request, says so on a
    pipe (the agent forks the next spare) and exits when it is answered. ``door_fd``: the door's FIFO
    (:mod:`door`), whose request lines are handed to the spares through a pipe. Returns EX_TEMPFAIL
    once the code under the agent changed (checked every REAP_EVERY_S: the spares are stopped, the socket
    goes, busy workers finish their hooks; requests meanwhile find no agent and run in their wrappers).
    ``sampler``: (interval in seconds, a function run in a forked child): the job sampler, see above."""
    log = log or _log
    lines = door.Lines()
    notify_r, notify_w = os.pipe()
    # the lifeline: only the agent holds its write end, so a spare sees EOF once the agent is gone
    # (whatever killed it) and leaves instead of answering on a socket no agent owns
    life_r, life_w = os.pipe()
    # a worker's exit wakes the agent (SIGCHLD through a wake-up pipe), which forks its replacement then,
    # once the hook is answered, not while it runs
    wake_r, wake_w = os.pipe()
    # the door's lines go on to the spares through this pipe, one record each (door.hand_over)
    hand_r, hand_w = door.hand_over_pipe() if door_fd is not None else (None, None)
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, _child_exited)
    previous_wakeup = signal.set_wakeup_fd(wake_w)
    server.setblocking(False)  # spares wait in select(): the one that loses the race for a connection waits on
    idle: set[int] = set()
    busy: set[int] = set()
    sampling = Sampling(*sampler, first_at=time.monotonic() + sampler[0]) if sampler else None

    def spawn() -> None:
        try:
            pid = os.fork()
        except OSError as exc:  # no spare now: the next request waits for one, or its wrapper runs it
            log(f"no spare worker: {exc}")
            return
        if pid == 0:  # pragma: no cover - the spare worker (coverage cannot see a forked child)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (notify_r, life_w, wake_r, wake_w, *([door_fd, hand_w] if door_fd is not None else [])):
                os.close(fd)
            _spare(server, notify_w, life_r, log, warm_for, hand_r)
        idle.add(pid)

    try:
        for _ in range(spares):
            spawn()
        next_check = time.monotonic() + REAP_EVERY_S
        not_before = 0.0  # no spare forked before this (set when one died idle)
        while True:
            ready, _, _ = select.select([notify_r, wake_r, *([door_fd] if door_fd is not None else [])], [], [],
                                        REAP_EVERY_S)
            if door_fd is not None and door_fd in ready:
                try:
                    data = os.read(door_fd, 65536)
                except BlockingIOError:
                    data = b""
                stale = 0
                for line in lines.feed(data):
                    try:  # checked here too: a malformed line never costs a spare (a fork and a warm-up)
                        req = door.parse_request(line)
                    except Exception as exc:  # noqa: BLE001 - no line, however malformed, stops the agent
                        log(f"a request at the door refused: {exc}")
                        continue
                    if door.given_up(req):
                        stale += 1
                        continue
                    try:  # a line naming no root process that knocked costs no spare (the worker checks again)
                        door.check_process(req.pid, req.start)
                    except door.DoorError as exc:
                        log(f"a request at the door refused: {exc}")
                        continue
                    _hand_over(hand_w, line, log)
                if stale:
                    log(f"{stale} request(s) at the door dropped: older than {door.GIVEN_UP_S:g} s (the agent "
                        "was held up; their hooks ran their Python client)")
            if wake_r in ready:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    pass
            if notify_r in ready:
                data = os.read(notify_r, 4 * 64)
                for i in range(0, len(data) - 3, 4):
                    pid = int.from_bytes(data[i:i + 4], "big")
                    if pid in idle:
                        idle.discard(pid)
                        busy.add(pid)
                if not idle and time.monotonic() >= not_before:  # the next request must not wait for a fork
                    spawn()
            for pid, status in _reaped():
                if sampling is not None and sampling.reaped(pid):
                    continue
                if pid in idle:  # a spare that died without a request: do not fork them in a loop
                    idle.discard(pid)
                    not_before = time.monotonic() + REAP_EVERY_S
                    log(f"a spare worker ended before any request ({_ended(status)}); the next in a second")
                busy.discard(pid)
            if time.monotonic() < next_check:
                changed = None
            else:  # once a second, not before every request (~0.7 ms of stats)
                changed, next_check = fingerprint.changed(), time.monotonic() + REAP_EVERY_S
            if changed:
                log(f"{changed} changed since start: exiting for a restart with the new code")
                return EX_TEMPFAIL  # the spares are stopped below; busy workers finish their hooks
            if sampling is not None and not busy:  # a sample never takes the CPU from a hook
                sampling.tick(time.monotonic(), log, close=(notify_r, notify_w, life_r, life_w, wake_r, wake_w,
                                                            *([door_fd, hand_r, hand_w] if door_fd is not None else []),
                                                            server.fileno()))
            # spares are replaced once no hook runs (a new spare's fork and warming would take CPU from it)
            while not busy and len(idle) < spares and time.monotonic() >= not_before:
                before = len(idle)
                spawn()
                if len(idle) == before:
                    break
    finally:
        try:  # spares that took a request since the last read are workers now: never stopped here
            os.set_blocking(notify_r, False)
            data = os.read(notify_r, 4 * 1024)
            idle.difference_update(int.from_bytes(data[i:i + 4], "big") for i in range(0, len(data) - 3, 4))
        except OSError:
            pass
        for spare in idle:
            _kill(spare)
        signal.set_wakeup_fd(previous_wakeup)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (notify_r, notify_w, life_r, life_w, wake_r, wake_w, hand_r, hand_w):
            if fd is not None:
                os.close(fd)


class Sampling:
    """The job sampler's schedule in the agent: one child per ``interval_s``, never two, killed once it
    has run for ``interval_s`` (SIGKILL; a child stuck in the driver is not replaced while it lingers)."""

    def __init__(self, interval_s: float, run, first_at: float = 0.0) -> None:
        self.interval_s, self.run = float(interval_s), run
        self.pid: int | None = None
        self.started = 0.0
        self.next_at = first_at  # the agent's first sample comes one interval after it starts (its spares first)
        self.killed = False

    def reaped(self, pid: int) -> bool:
        if pid != self.pid:
            return False
        self.pid, self.killed = None, False
        return True

    def tick(self, now: float, log, close=()) -> None:
        if self.pid is not None:
            if now - self.started >= self.interval_s and not self.killed:
                log(f"the job sampler has run for {now - self.started:.0f} s: killed (a GPU that does not answer?)")
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.killed = True
            return
        if now < self.next_at:
            return
        self.next_at = now + self.interval_s
        try:
            pid = os.fork()
        except OSError as exc:
            log(f"no job sample: {exc}")
            return
        if pid == 0:  # pragma: no cover - the sampler child (coverage cannot see a forked child)
            code = 0
            try:
                signal.set_wakeup_fd(-1)
                for sig in (signal.SIGCHLD, signal.SIGTERM):
                    signal.signal(sig, signal.SIG_DFL)
                for fd in close:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self.run()
            except BaseException:  # noqa: BLE001 - nothing escapes into the agent's loop
                code = 70
            finally:
                os._exit(code)
        self.pid, self.started = pid, now


def _hand_over(fd: int, line: str, log) -> None:
    """Hand a door's request line to the spares (one takes it). Never waits: with the hand-over pipe full
    the line is dropped (its hook gets no answer within a second and runs its Python client)."""
    try:
        door.hand_over(fd, line)
    except BlockingIOError:
        log("a request at the door not handed on: the hand-over pipe is full (no spare has taken a line for a while)")
    except (OSError, ValueError) as exc:
        log(f"a request at the door not handed on: {exc}")


def _spare(server, notify_w: int, life_r: int, log, warm_for, hand_r: int | None = None) -> None:  # pragma: no cover
    """A spare worker: prepare the child that will probe and judge (forked and warmed now, while idle),
    wait for one request (a connection on the socket, or a door line the agent hands on through
    ``hand_r``), tell the agent, answer it, exit. Never returns."""
    code = 0
    prepared = None
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from . import work as agentwork
        from ..hook import watchdog

        def warm() -> None:
            if warm_for:
                agentwork.warm_run(*warm_for)

        try:
            keep_out = (server.fileno(), notify_w, life_r, *([hand_r] if hand_r is not None else []))
            prepared = watchdog.prepare(agentwork.run_task, warm, close=keep_out)
        except OSError as exc:  # no prepared child: the hook forks its own, as without the agent
            log(f"no prepared child: {exc}")
        conn = line = None
        while conn is None and line is None:
            ready, _, _ = select.select([server, life_r, *([hand_r] if hand_r is not None else [])], [], [])
            if life_r in ready:  # the agent is gone
                os._exit(0)
            if hand_r is not None and hand_r in ready:
                line = _handed(hand_r, log)  # None: another spare took it, or its hook has given up
                continue
            try:
                conn, _ = server.accept()
            except (BlockingIOError, InterruptedError):  # another spare took it
                continue
        # a worker now: the agent's SIGTERM to its spares (its stop, before it has read this notice) must
        # not cut a hook short, nor the record written after its answer (SIGKILL still ends it: its budget)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(notify_w, os.getpid().to_bytes(4, "big"))
        server.close()  # the agent's socket is not the worker's to hold
        for fd in (notify_w, life_r, *([hand_r] if hand_r is not None else [])):
            os.close(fd)
        if conn is not None:
            conn.setblocking(True)
            code = _take(conn, log, prepared)
        else:
            code = _take_door(line, log, prepared)
    except BaseException:  # noqa: BLE001 - nothing may escape into the agent's loop
        code = 70
    finally:
        if prepared is not None:
            prepared.discard()  # unused (a refused request) or already used: it exits on its own
        os._exit(code)


def _handed(hand_r: int, log) -> str | None:  # pragma: no cover - runs in a spare worker
    """A door line from the hand-over pipe for this spare to take; None when another spare took it, or
    when it waited here past its hook's patience (every spare was busy: its hook ran its Python client)."""
    line = door.take_handed(hand_r)
    if line is None:
        return None
    try:
        if not door.given_up(door.parse_request(line)):
            return line
    except Exception:  # noqa: BLE001 - checked by the agent already
        return None
    log(f"a request at the door dropped: it waited over {door.GIVEN_UP_S:g} s for a spare (its hook ran "
        "its Python client)")
    return None


def _take_door(line: str, log, prepared=None) -> int:  # pragma: no cover - runs in a spare worker
    """Answer a hook at the door: its context from /proc, its answers into its pipe."""
    try:
        request, reply = door.request_of(line)
    except door.DoorError as exc:
        log(f"a request at the door not taken: {exc}")
        return 0
    return _run(reply, request, request["pid"], log, prepared)


def _take(conn, log, prepared=None) -> int:  # pragma: no cover - runs in a spare worker
    """Answer one connection: refused, or the hook run here."""
    import socket

    creds = agentclient.peer_creds(conn, socket)
    if creds is None or creds[1] not in (0, os.getuid()):
        _answer(conn, {"kind": "refused", "why": "the agent answers root only"})
        return 0
    conn.settimeout(REQUEST_S)
    try:
        request = read_frame(conn)
    except (OSError, ValueError, EOFError) as exc:
        log(f"a request could not be read: {exc}")
        return 0
    return _run(conn, request, creds[0], log, prepared)


def _run(conn, request: dict, hook_pid: int, log, prepared=None) -> int:  # pragma: no cover - a spare
    """Run a request taken from the socket (``conn``) or the door (``conn``: its :class:`door.Reply`)."""
    why = _invalid(request)
    if why:
        _answer(conn, {"kind": "refused", "why": why})
        return 0
    from ..core.clock import utc_now_iso

    started = utc_now_iso()
    # the pid: the worker's process group from here on (it calls setsid first), which the wrapper kills
    # should the hook outlive its budget
    default_budget = SlurmSettings().budget(request["argv"][0])
    if not _answer(conn, {"kind": "accepted", "wait_s": default_budget, "pid": os.getpid()}):
        log(f"{request['argv'][0]}: its hook gave up waiting before it was taken; not run here")
        return 0
    if not isinstance(conn, door.Reply):
        conn.settimeout(None)
    _worker(conn, request, default_budget, prepared, hook_pid, started)
    return 0


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass


def _invalid(request: dict) -> str | None:
    if request.get("v") != PROTOCOL:
        return f"protocol {request.get('v')!r}, this agent speaks {PROTOCOL}"
    argv, env = request.get("argv"), request.get("env")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv) or argv[0] not in CONTEXTS:
        return "argv must start with one of " + ", ".join(CONTEXTS)
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return "env must map strings to strings"
    if not isinstance(request.get("t0"), float) or not isinstance(request.get("umask"), int):
        return "t0 and umask are required"
    if not isinstance(request.get("cwd"), str):
        return "cwd is required"
    return None


def _answer(conn, message: dict) -> bool:
    """Send ``message``; False when the client is gone (its hook ran in its own process, or ended)."""
    try:
        if isinstance(conn, door.Reply):
            conn.send(message)
        else:
            send_frame(conn, message)
    except OSError:
        return False
    return True


def _worker(conn, request: dict, default_budget: float, prepared=None,  # pragma: no cover - a spare
            hook_pid: int | None = None, started: str | None = None) -> None:
    """Run the hook as the wrapper would, in its environment; send the status and the log.
    ``default_budget``: the wait "accepted" told the wrapper (a different budget in the config is sent)."""
    os.setsid()  # its own session and group: the client may kill the group past the deadline
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):  # SIGPIPE stays ignored, as in any hook
        signal.signal(sig, signal.SIG_DFL)
    from .work import adopt
    from ..hook.run import Handoff, guarded_main

    adopt(request["env"], request["cwd"], request["umask"])
    sys.argv = ["-c", *request["argv"]]
    agent_stderr, captured = sys.stderr, io.StringIO()
    sys.stderr = captured

    def on_budget(budget_s: float) -> None:  # only when the config's differs from the one "accepted" gave
        if budget_s != default_budget:
            _answer(conn, {"kind": "budget", "budget_s": float(budget_s)})

    answered: list[tuple[int, int, float]] = []  # (exit status, log characters sent, ms)

    def on_acting(code: int) -> None:  # a drain is asked of Slurm next: the wrapper fails closed from now on
        _answer(conn, {"kind": "acting", "rc": code})

    def on_decided(code: int) -> None:  # the job waits no longer: baseline and record follow here
        text = captured.getvalue()
        _answer(conn, {"kind": "done", "rc": code, "log": text})
        answered.append((code, len(text), (time.monotonic() - request["t0"]) * 1000))

    try:
        rc = guarded_main(request["argv"], Handoff(t0=request["t0"], started=started, hook_pid=hook_pid,
                                                   prepared=prepared, on_budget=on_budget, on_acting=on_acting,
                                                   on_decided=on_decided))
    except SystemExit as exc:  # a usage error, as the interpreter would print it
        rc = exc.code if isinstance(exc.code, int) else 1
        if exc.code is not None and not isinstance(exc.code, int):
            captured.write(f"{exc.code}\n")
    rc = rc if isinstance(rc, int) else 0
    if not answered:  # it ended before a verdict (the fast prolog, a config it cannot use, a bug of ours)
        _answer(conn, {"kind": "done", "rc": rc, "log": captured.getvalue()})
    sys.stderr = agent_stderr
    # the agent's log (the journal): what the hook logged after its answer, and one line per hook
    after = captured.getvalue()[answered[0][1]:] if answered else ""
    if after:
        _log(f"after the answer: {after.strip()}")
    env = request["env"]
    took = (time.monotonic() - request["t0"]) * 1000
    _log(f"{request['argv'][0]} on {env.get('SLURMD_NODENAME') or os.uname().nodename.split('.')[0]}"
         + (f" for job {env['SLURM_JOB_ID']}" if env.get("SLURM_JOB_ID") else "")
         + f": exit {answered[0][0] if answered else rc}"
         + (f" after {answered[0][2]:.1f} ms (recorded after {took:.1f} ms)" if answered else f" after {took:.1f} ms")
         + (", at the door" if isinstance(conn, door.Reply) else ", on the socket"))


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def _reaped() -> list[tuple[int, int]]:
    """(pid, wait status) of the workers that have exited."""
    out = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status))


def _log(message: str) -> None:
    from ..output.render import clean

    try:
        sys.stderr.write(f"healthcheck agent: {clean(message)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # no log to write to: the agent serves on
        pass


def _sampler(config_path: str | None, node: str) -> tuple[float, object] | None:
    """The job sampler's (interval, child's work) from the config's [slurm] job_sample_interval_s; None: off."""
    from ..hook import job_sampler

    try:
        interval = job_sampler.settings_for(config_path, node)[3]
    except Exception as exc:  # noqa: BLE001 - a config the hooks cannot use: they say so, per run
        _log(f"job sampler at its default interval: {exc}")
        interval = job_sampler.INTERVAL_S
    if interval <= 0:
        return None
    return interval, lambda: job_sampler.run_once(config_path, node, _log)


def _child_exited(_signum, _frame) -> None:
    """SIGCHLD: nothing to do here; the wake-up pipe has woken the agent's loop, which reaps."""


def _stop(_signum, _frame):
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m healthcheck.agent.main",
                                     description="The node's warm hook agent (see healthcheck/agent/main.py).")
    parser.add_argument("--socket", default=DEFAULT_SOCKET, help="Unix socket the hooks connect to")
    parser.add_argument("--config", default=os.environ.get("HEALTHCHECK_CONFIG"),
                        help="the hooks' config, loaded at start to warm its cache (each run reads it afresh)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    failed = warm(args.config)
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
    warm_for = (args.config, node) if args.config and os.path.exists(args.config) else None
    fingerprint = Fingerprint()
    signal.signal(signal.SIGTERM, _stop)  # systemd's stop: the spares are stopped, the socket and door removed
    try:
        server = listen(args.socket)
    except (AgentError, OSError) as exc:
        _log(f"not started: {exc}")
        return 1
    door_path, pid_path = paths_for(args.socket)
    door_fd = None
    try:
        try:
            door_fd = door.open_door(door_path, pid_path)
        except OSError as exc:  # the hooks then use the socket (their Python client)
            _log(f"no door at {door_path}: {exc}")
        _log(f"listening on {args.socket}; warm in {time.monotonic() - start:.2f} s"
             + (f"; not importable: {', '.join(failed)}" if failed else ""))
        return serve(server, fingerprint, warm_for=warm_for, door_fd=door_fd,
                     sampler=_sampler(args.config, node))
    finally:
        if door_fd is not None:
            door.close_door(door_fd, door_path, pid_path)
        server.close()
        try:
            os.unlink(args.socket)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
