"""Run a function in a forked child under a hard time budget (the prolog's hang-proof seam).

``run_in_child(fn, budget_s)`` forks; the child becomes the leader of a new process group, runs ``fn``,
sends its result (plain JSON-shaped data) back through a pipe and leaves with ``os._exit`` (it never returns into
the caller's stack, never runs atexit handlers, never flushes the parent's inherited stdio buffers).
The parent waits with ``select()`` until the deadline. Once the whole result has arrived, the child's
group is SIGKILLed and the child is left to finish its exit while the caller goes on (reaped later, as an
abandoned one is). When the deadline passes it SIGKILLs the whole
process group (the child and anything it spawned: ``nvidia-smi``, a ``sleep``, a forked helper) and
reaps the child, waiting for its exit (through a pidfd, woken the moment it dies) for at most what is
left of ``budget_s + REAP_SLACK_S``. A killed child normally dies in microseconds, but on a loaded
machine it may wait tens of milliseconds for a CPU to run its exit; one stuck in uninterruptible sleep
(D state, a wedged GPU driver) cannot be reaped until the kernel lets go. Such a child is abandoned:
reaped by the next call, by ``reap_abandoned()``, or, at the latest, as this process exits (an atexit
handler, registered only once something was abandoned, waits up to ``EXIT_REAP_S`` for them). The
parent therefore returns within about ``budget_s + 0.1`` seconds whatever the child does: ignore
SIGTERM, block in a syscall, fork grandchildren, or write gigabytes.

Wire format (child -> parent): an 8-byte big-endian length, then that many bytes of ``marshal`` data
(built in: neither end imports ``json``, whose ``re``/``enum`` cost the prolog ~3 ms; both ends are this
interpreter, the child forked from the parent), ``{"ok": True, "value": ...}`` or ``{"ok": False,
"error": "..."}``. The value is checked to be what JSON could carry (dicts with string keys, lists,
strings, finite numbers, booleans, None; tuples become lists, as ``json`` would make them), so the
result is the same as when it travelled as JSON. The length prefix means the
parent does not depend on EOF (a grandchild forked by ``fn`` may keep the pipe's write end open).

After a normal completion the child's process group is SIGKILLed as well: whatever ``fn`` left running
in the background belongs to the run and must not outlive it (stray processes on a compute node are
what the epilog hunts for).

Call it from a process with no threads (the Slurm hooks are single-threaded): ``fork()`` copies only
the calling thread, so locks held by other threads would stay locked in the child.
"""
from __future__ import annotations

import errno
import marshal
import os
import select
import _signal as signal  # the C module signal.py wraps (its enums cost ~3 ms)
import sys
import time
from ..core.jsonwrite import json_key
from ..core.struct import record as dataclass
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Callable, Literal  # noqa: F401

MAX_RESULT_BYTES = 64 * 1024 * 1024  # a larger result is refused ("crashed")
REAP_GRACE_S = 0.02  # after SIGKILL: the least time given to the child to die before abandoning it
REAP_SLACK_S = 0.09  # ... and the most: until budget + this (the contract is budget + 0.1 s)
EXIT_REAP_S = 0.25  # at interpreter exit: the most time spent reaping abandoned children
_HEADER = 8
_TRACEBACK_LIMIT = 4000  # characters of traceback sent back with an exception

# Children killed at a deadline that could not be reaped at once (D state); reaped by later calls.
_abandoned: set[int] = set()


@dataclass
class Outcome:
    """What became of one ``run_in_child`` call.

    status: "ok" (``value`` holds fn's result, round-tripped through JSON), "timeout" (the budget
    passed; the process group was killed), "crashed" (fn raised, the child died, or the result could
    not be sent; ``error`` says which).
    """

    status: Literal["ok", "timeout", "crashed"]
    value: Any = None
    error: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_in_child(fn: Callable[[], Any], budget_s: float, started: Callable[[], Any] | None = None) -> Outcome:
    """Run ``fn()`` in a forked child; return its JSON-able result or why there is none. ``started()``:
    called in this process once the child runs, before waiting for it (work to overlap with the child's,
    begun after the fork: a thread started before it would be missing in the child).

    Never raises for anything the child does; raises ``ValueError`` for a budget that is not a
    positive finite number and ``OSError`` only if the pipe or the fork itself cannot be made.
    """
    if not isinstance(budget_s, (int, float)) or not (0 < budget_s < float("inf")):
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
    _reap_abandoned()
    start = time.monotonic()
    deadline = start + budget_s
    for stream in (sys.stdout, sys.stderr):  # so the child cannot print the parent's pending output
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed/odd stream must not stop the run
            pass
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - runs in the child (coverage cannot see it)
        _child(fn, read_fd, write_fd)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # also from the parent: no window where a killpg would miss the child
    except OSError:
        pass  # the child already did it, or already exited
    _started(started)
    return _collect(pid, read_fd, start, deadline)


def _started(started: Callable[[], Any] | None) -> None:
    """Call the caller's ``started``: its errors are its own (it must report them) and never leave the
    child uncollected."""
    if started is not None:
        try:
            started()
        except Exception:  # noqa: BLE001 - see the docstring
            pass


def _collect(pid: int, read_fd: int, start: float, deadline: float, linger: bool = False) -> Outcome:
    """Wait for the child's result until ``deadline``; never leave it running; close ``read_fd``.
    ``linger``: a child that sent its whole result is left waiting (a prepared one: ended by its
    ``release``), not killed now."""
    reaped = False
    try:
        outcome, reaped = _wait_for_child(pid, read_fd, deadline, linger)
    finally:
        os.close(read_fd)
        if not reaped:  # timeout, error or KeyboardInterrupt in the parent: never leave it running
            _kill_group(pid)
            grace = max(REAP_GRACE_S, deadline + REAP_SLACK_S - time.monotonic())
            reaped = _reap(pid, grace) is not None
            if not reaped:
                _abandon(pid)
    outcome.duration_s = time.monotonic() - start
    return outcome


class Prepared:
    """A child forked ahead of its task (:func:`prepare`): it has warmed itself and waits for the task.

    ``run(task, budget_s, started)`` hands it the task (plain data) and waits as :func:`run_in_child` does, with
    the same outcome, and the same kill and reaping when it does not answer in time. A child that
    answered waits for ``release()`` before it exits (its exit then costs its caller nothing);
    ``discard()`` lets it go, used or not."""

    __slots__ = ("pid", "task_fd", "result_fd", "ready_fd", "warm")

    def __init__(self, pid: int, task_fd: int, result_fd: int, ready_fd: int):
        self.pid, self.task_fd, self.result_fd, self.ready_fd = pid, task_fd, result_fd, ready_fd
        self.warm = False  # its "warm" byte was read (end of file alone means it is gone)

    def run(self, task: Any, budget_s: float, started: Callable[[], Any] | None = None) -> Outcome:
        if not isinstance(budget_s, (int, float)) or not (0 < budget_s < float("inf")):
            raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
        if self.task_fd < 0 or self.result_fd < 0:
            raise ValueError("this prepared child was already used or discarded")
        start = time.monotonic()
        payload = marshal.dumps(task)
        try:  # within the budget: a task larger than the pipe must not hold the caller past it
            if not _write_within(self.task_fd, len(payload).to_bytes(_HEADER, "big") + payload, start + budget_s):
                os.close(self.task_fd)  # it never got its task: _collect finds the deadline passed and kills it
                self.task_fd = -1
        except OSError:  # the child is gone: _collect reports how it ended
            os.close(self.task_fd)
            self.task_fd = -1
        if self.ready_fd >= 0:
            os.close(self.ready_fd)
            self.ready_fd = -1
        result_fd, self.result_fd = self.result_fd, -1
        _started(started)
        # The task pipe stays open: once its result is sent, the child waits for its end of file before
        # exiting, so that its exit (unmapping the pages it shares) does not take a CPU from the caller's
        # answer to its wrapper. release() ends it.
        return _collect(self.pid, result_fd, start, start + budget_s, linger=self.task_fd >= 0)

    def release(self) -> None:
        """End a child that was used: it exits, its group is killed (anything it left running), and it
        is reaped now or later (never waited for)."""
        if self.task_fd >= 0 and self.result_fd < 0:
            os.close(self.task_fd)
            self.task_fd = -1
            _kill_group(self.pid)
            _abandon(self.pid, wait_at_exit=False)
            _reap_abandoned()

    def alive(self, wait_s: float = 0.0) -> bool:
        """Not yet used, done warming (waiting up to ``wait_s`` for that) and waiting for its task. The
        hooks use only such a child: one still warming (a slow mount, a slow HCA) or gone is discarded
        and the run forks its own, so a slow warm-up never eats into a run's budget."""
        if self.task_fd < 0 or self.ready_fd < 0 or self.result_fd < 0:
            return False
        try:
            if not self.warm:
                ready, _, _ = select.select([self.ready_fd], [], [], max(wait_s, 0.0))
                self.warm = bool(ready) and os.read(self.ready_fd, 1) == b"1"
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except (ChildProcessError, OSError, ValueError):
            return False
        return self.warm and not done

    def discard(self) -> None:
        """Let it go, used or not: an unused child exits on the closed pipe, a used one is released."""
        if self.ready_fd >= 0:
            os.close(self.ready_fd)
            self.ready_fd = -1
        if self.task_fd >= 0 and self.result_fd < 0:
            self.release()
        elif self.task_fd >= 0:
            os.close(self.task_fd)
            os.close(self.result_fd)
            self.task_fd = self.result_fd = -1
            _kill_group(self.pid)
            _abandon(self.pid, wait_at_exit=False)


def prepare(fn: Callable[..., Any], warm: Callable[[], Any] | None = None, close: tuple[int, ...] = ()) -> Prepared:
    """Fork now a child that runs ``warm()`` (its errors ignored: the pages and caches a run touches are
    then its own), then waits for a task and returns ``fn(task)`` as :func:`run_in_child` returns ``fn()``.
    ``close``: descriptors of the caller the child must not hold (a listening socket). The agent's spare
    workers prepare theirs while idle, so a job pays neither the fork nor the first run's page faults."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    task_r, task_w = os.pipe()
    result_r, result_w = os.pipe()
    ready_r, ready_w = os.pipe()  # a byte once warm
    try:
        pid = os.fork()
    except BaseException:
        for fd in (task_r, task_w, result_r, result_w, ready_r, ready_w):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(task_w)
            os.close(result_r)
            os.close(ready_r)
            for fd in close:
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
            if warm is not None:
                try:
                    warm()
                except BaseException:  # noqa: BLE001 - warming is best effort
                    pass
            try:
                os.write(ready_w, b"1")
            except OSError:
                pass  # nobody asks any more (the task came already, or the parent is gone)
            os.close(ready_w)
            task = _read_task(task_r)
            if task is _NO_TASK:
                os._exit(0)  # discarded, or the parent is gone
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            payload = _run_and_encode(lambda: fn(task))
            _write_all(result_w, len(payload).to_bytes(_HEADER, "big") + payload)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001
                    pass
            while os.read(task_r, 4096):  # until its release (or the parent's end) closes the pipe
                pass
        except BaseException:  # noqa: BLE001 - nothing may escape into the caller's stack
            os._exit(70)
        os._exit(0)
    os.close(task_r)
    os.close(result_w)
    os.close(ready_w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    return Prepared(pid, task_w, result_r, ready_r)


_NO_TASK = object()


def _read_task(fd: int) -> Any:  # pragma: no cover - runs in a prepared child
    """One framed task, read to its last byte and not one more (the pipe stays open after it: its end
    of file is the child's release), or _NO_TASK at end of file."""
    buf = bytearray()
    size = None
    while size is None or len(buf) < _HEADER + size:
        want = _HEADER - len(buf) if size is None else _HEADER + size - len(buf)
        chunk = os.read(fd, min(want, 1 << 20))
        if not chunk:
            return _NO_TASK
        buf += chunk
        if size is None and len(buf) >= _HEADER:
            size = int.from_bytes(buf[:_HEADER], "big")
    return marshal.loads(bytes(buf[_HEADER:_HEADER + size]))


# --------------------------------------------------------------------------------------- parent


def _wait_for_child(pid: int, read_fd: int, deadline: float, linger: bool = False) -> tuple[Outcome, bool]:
    """Read the framed result until complete, EOF or the deadline. Returns (outcome, reaped)."""
    buf = bytearray()
    expected: int | None = None
    while True:
        if expected is not None and len(buf) >= _HEADER + expected:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Outcome("timeout", error="budget exceeded; process group killed"), False
        try:
            ready, _, _ = select.select([read_fd], [], [], remaining)
        except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
            continue
        if not ready:
            continue  # the loop re-checks the deadline
        chunk = os.read(read_fd, 1 << 20)
        if not chunk:  # EOF: the child closed the pipe (exited) before a complete result
            break
        buf += chunk
        if expected is None and len(buf) >= _HEADER:
            expected = int.from_bytes(buf[:_HEADER], "big")
            if expected > MAX_RESULT_BYTES:
                return Outcome("crashed", error=f"result of {expected} bytes exceeds the limit of "
                                                f"{MAX_RESULT_BYTES} bytes"), False
    # The child is done (or gone): kill stragglers of its group, then reap it within the deadline.
    complete = expected is not None and len(buf) >= _HEADER + expected
    if complete and linger:
        reaped = True  # it waits for its release (Prepared.release kills its group and reaps it)
    elif complete:
        _kill_group(pid)
        # Its whole result is here: it is not waited for. Its exit (unmapping what the fork shared, about
        # 2 ms for a hook) overlaps the caller's next steps; reaped by the next call, reap_abandoned(),
        # or at exit (by then long dead).
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if not done:
            _abandon(pid, wait_at_exit=False)  # SIGKILLed and exiting: nothing to wait for at exit
        reaped = True
    else:
        _kill_group(pid)
        status = _reap(pid, max(deadline - time.monotonic(), REAP_GRACE_S))
        reaped = status is not None
    if not complete:
        got = max(len(buf) - _HEADER, 0)
        how = _describe_status(status) if status is not None else "did not exit"
        detail = "without a result" if not buf else f"after sending {got} of {expected} result bytes"
        return Outcome("crashed", error=f"child {how} {detail}"), reaped
    try:
        message = marshal.loads(bytes(buf[_HEADER:_HEADER + expected]))
    except (ValueError, EOFError, TypeError) as exc:
        return Outcome("crashed", error=f"child sent an unreadable result: {exc}"), reaped
    if not isinstance(message, dict) or "ok" not in message:
        return Outcome("crashed", error="child sent a malformed result"), reaped
    if message["ok"]:
        return Outcome("ok", value=message.get("value")), reaped
    return Outcome("crashed", error=str(message.get("error"))), reaped


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already empty (or the id was never ours)


def _reap(pid: int, wait_s: float) -> int | None:
    """Wait at most ``wait_s`` for ``pid`` to exit and reap it; the wait status, or None if not reaped.
    Sleeps on a pidfd (readable once the process has exited) where the kernel has them, else polls."""
    end = time.monotonic() + wait_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            select.select([pidfd], [], [], max(wait_s, 0))
        except (OSError, ValueError):
            pass
        finally:
            os.close(pidfd)
    delay = 0.0005
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0  # already reaped elsewhere
        if done:
            return status
        if time.monotonic() >= end:
            return None
        time.sleep(min(delay, max(end - time.monotonic(), 0)))
        delay = min(delay * 2, 0.005)


def _abandon(pid: int, wait_at_exit: bool = True) -> None:
    if wait_at_exit:
        import atexit  # only once a child was abandoned at a deadline: the hooks' usual path pays nothing

        atexit.unregister(_reap_at_exit)
        atexit.register(_reap_at_exit)
    _abandoned.add(pid)


def _reap_abandoned() -> None:
    for pid in list(_abandoned):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _abandoned.discard(pid)


def reap_abandoned(wait_s: float = 0.0) -> set[int]:
    """Reap the children abandoned at a deadline, waiting up to ``wait_s`` in all; the pids still left."""
    end = time.monotonic() + wait_s
    for pid in list(_abandoned):
        if _reap(pid, max(end - time.monotonic(), 0)) is not None:
            _abandoned.discard(pid)
    return set(_abandoned)


def _reap_at_exit() -> None:
    reap_abandoned(EXIT_REAP_S)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import signal as named  # a crash report only: here the enums are worth their import

            name = named.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"was killed by signal {sig} ({name})"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"ended with wait status {status}"


# ---------------------------------------------------------------------------------------- child


def _child(fn: Callable[[], Any], read_fd: int, write_fd: int) -> None:  # pragma: no cover
    """Body of the forked child. Never returns."""
    code = 0
    try:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        os.close(read_fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C on the terminal: die, do not unwind
        payload = _run_and_encode(fn)
        _write_all(write_fd, len(payload).to_bytes(_HEADER, "big") + payload)
    except BaseException:  # noqa: BLE001 - nothing may escape into the caller's stack
        code = 70  # EX_SOFTWARE: the result could not be sent
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()  # what fn printed itself
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _run_and_encode(fn: Callable[[], Any]) -> bytes:
    try:
        value = fn()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as "crashed"
        import traceback  # only on this path: a few ms the prolog need not pay

        text = "".join(traceback.format_exception(exc))[-_TRACEBACK_LIMIT:]
        return marshal.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}\n{text}"})
    try:
        return marshal.dumps({"ok": True, "value": _json_shaped(value, 0)})
    except (TypeError, ValueError, RecursionError) as exc:
        return marshal.dumps({"ok": False,
                              "error": f"result is not JSON-serialisable "
                                       f"({type(value).__name__}): {exc}"})


_MAX_DEPTH = 200


def _json_shaped(value: Any, depth: int) -> Any:
    """``value`` as ``json.loads(json.dumps(value, allow_nan=False))`` would give it back, or the
    TypeError/ValueError json would raise (an object, NaN or infinity, a key that is not a scalar)."""
    if value is None or value is True or value is False or type(value) is str or type(value) is int:
        return value
    if depth > _MAX_DEPTH:
        raise RecursionError("nested too deeply")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):  # bool is handled above; int subclasses (IntEnum) as their number
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_json_shaped(item, depth + 1) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out[json_key(key)] = _json_shaped(item, depth + 1)
        return out
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _write_within(fd: int, data: bytes, deadline: float) -> bool:
    """Write ``data`` whole into a pipe by ``deadline``; False when the time ran out first (its reader
    busy or stuck). OSError (EPIPE) when the reader is gone."""
    view = memoryview(data)
    os.set_blocking(fd, False)
    try:
        while view:
            try:
                view = view[os.write(fd, view):]
            except (BlockingIOError, InterruptedError):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                select.select([], [fd], [], remaining)
    finally:
        os.set_blocking(fd, True)
    return True


def _write_all(fd: int, data: bytes) -> None:  # pragma: no cover - child side
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                return  # the parent gave up on us
            raise
        view = view[written:]
