"""A call in its own thread that the caller waits for up to a deadline, then leaves behind.

Built on ``_thread``, the C module ``threading`` wraps: ``threading`` imports functools and
collections (~2 ms before every job) for features a probe does not use. A task's thread is a daemon
in effect (the interpreter never waits for it at exit), which is what a probe hung in the kernel
needs: it is abandoned, never joined.

:func:`walk` runs many such calls on as few threads as the calls allow: one after the other on one
thread, and another thread takes over the calls still waiting whenever every call under way has run
past a stall limit. Quick calls (sysfs reads, a local disk's statvfs) then cost no thread start and no
handing of the GIL between threads, and a call that hangs still holds up only itself.
"""
from __future__ import annotations

import _thread
import time

# How long a call of :func:`walk` runs before the calls after it get a thread of their own. Above what a
# quick call takes on a loaded node (a sysfs read, a local statvfs: microseconds to a millisecond);
# below anything a job would notice.
STALL_S = 0.01

_count_lock = _thread.allocate_lock()
_running = [0]  # tasks whose call has not returned: the CLI leaves at once rather than wait for them


def running() -> int:
    """How many tasks' calls have not returned (a probe hung in the kernel stays counted)."""
    return _running[0]


class Task:
    """``fn()`` running in a thread from :meth:`start`. After :meth:`join`, ``is_alive()`` says
    whether it is still running; else ``result`` or ``error`` holds what it gave, ``duration`` how
    long it took (seconds)."""

    __slots__ = ("fn", "result", "error", "duration", "_done")

    def __init__(self, fn):
        self.fn, self.result, self.error, self.duration = fn, None, None, 0.0
        self._done = _thread.allocate_lock()
        self._done.acquire()  # released by the thread when fn has returned or raised

    def start(self) -> Task:
        with _count_lock:
            _running[0] += 1
        try:
            _thread.start_new_thread(self._run, ())
        except BaseException:
            with _count_lock:
                _running[0] -= 1
            raise
        return self

    def _run(self) -> None:
        try:
            self._call()
        finally:
            self._finish()

    def _call(self) -> None:
        start = time.monotonic()
        try:
            self.result = self.fn()
        except BaseException as exc:  # becomes data for the caller
            self.error = exc
        finally:
            self.duration = time.monotonic() - start

    def _finish(self) -> None:
        with _count_lock:
            _running[0] -= 1
        self._done.release()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds (at least not at all) for the call to end."""
        if self._done.acquire(True, max(0.0, timeout)):
            self._done.release()

    def is_alive(self) -> bool:
        return self._done.locked()


def walk(tasks: list[Task], deadlines: list[float], stall_s: float = STALL_S) -> None:
    """Run the tasks' calls, waiting for each up to its deadline (seconds from now), as if each had a
    thread of its own started now, on fewer threads: one thread calls them one after the other, and
    whenever calls are waiting while every call under way has run for ``stall_s`` or more, a new thread
    takes the next ones (the stalled call keeps its thread, abandoned if it never returns). A call
    still waiting at its deadline is never begun (``is_alive()`` stays true: it did not answer in
    time); that takes about ``deadline / stall_s`` hung calls before it."""
    if not tasks:
        return
    if len(deadlines) != len(tasks):
        raise ValueError("one deadline per task")
    start = time.monotonic()
    walking = _Walk(tasks)
    walking.add_walker()
    try:
        for task, deadline in zip(tasks, deadlines):
            while True:
                remaining = deadline - (time.monotonic() - start)
                if remaining <= 0:
                    break
                if task._done.acquire(True, min(remaining, stall_s)):
                    task._done.release()  # put back: is_alive() reads it
                    break
                if walking.stalled(stall_s):
                    walking.add_walker()
    finally:
        walking.close()


class _Walk:
    """The shared state of :func:`walk`'s threads: the next task to take, when each thread's current
    call began (None between calls), and whether the caller is done waiting."""

    __slots__ = ("tasks", "next", "lock", "busy_since", "closed")

    def __init__(self, tasks: list[Task]):
        self.tasks, self.next, self.closed = tasks, 0, False
        self.lock = _thread.allocate_lock()
        self.busy_since: list[float | None] = []

    def add_walker(self) -> None:
        with self.lock:
            slot = len(self.busy_since)
            self.busy_since.append(None)
        _thread.start_new_thread(self._walk, (slot,))

    def stalled(self, stall_s: float) -> bool:
        """True when calls are waiting and every thread is in a call begun ``stall_s`` ago or more."""
        now = time.monotonic()
        with self.lock:
            if self.closed or self.next >= len(self.tasks):
                return False
            return all(began is not None and now - began >= stall_s for began in self.busy_since)

    def close(self) -> None:
        with self.lock:
            self.closed = True

    def _walk(self, slot: int) -> None:
        while True:
            with self.lock:
                if self.closed or self.next >= len(self.tasks):
                    self.busy_since[slot] = None
                    return
                task = self.tasks[self.next]
                self.next += 1
                self.busy_since[slot] = time.monotonic()
                with _count_lock:
                    _running[0] += 1
            task._call()
            with self.lock:  # between calls: not stalled (before the caller can see this one done)
                self.busy_since[slot] = None
            task._finish()
