"""A call in its own thread that the caller waits for up to a deadline, then leaves behind.

Built on ``_thread``, the C module ``threading`` wraps: ``threading`` imports functools and
collections (~2 ms before every job) for features a probe does not use. A task's thread is a daemon
in effect (the interpreter never waits for it at exit), which is what a probe hung in the kernel
needs: it is abandoned, never joined.
"""
from __future__ import annotations

import _thread
import time

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
        start = time.monotonic()
        try:
            self.result = self.fn()
        except BaseException as exc:  # becomes data for the caller
            self.error = exc
        finally:
            self.duration = time.monotonic() - start
            with _count_lock:
                _running[0] -= 1
            self._done.release()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds (at least not at all) for the call to end."""
        if self._done.acquire(True, max(0.0, timeout)):
            self._done.release()

    def is_alive(self) -> bool:
        return self._done.locked()
