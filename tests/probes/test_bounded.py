"""bounded.walk: calls run one after the other on one thread; a call that stalls is left its thread
and another takes the calls after it; a call not begun by its deadline is never begun."""
from __future__ import annotations

import _thread
import time

import pytest

from healthcheck.probes.bounded import Task, walk


def _blocked():
    lock = _thread.allocate_lock()
    lock.acquire()
    return lock


def test_quick_calls_share_one_thread_and_give_their_results_and_errors():
    here, seen = _thread.get_ident(), []

    def ok(i):
        seen.append(_thread.get_ident())
        return i * i

    def broken():
        seen.append(_thread.get_ident())
        raise OSError("read error")

    tasks = [Task(lambda i=i: ok(i)) for i in range(5)] + [Task(broken), Task(lambda: ok(7))]
    walk(tasks, [5.0] * len(tasks), stall_s=60)  # no call can stall that long, even on a loaded machine
    assert [t.result for t in tasks[:5]] == [0, 1, 4, 9, 16] and tasks[6].result == 49
    assert isinstance(tasks[5].error, OSError) and not any(t.is_alive() for t in tasks)
    assert len(set(seen)) == 1 and here not in seen  # one thread, not the caller's


def test_a_stalled_call_keeps_its_thread_and_another_takes_the_rest():
    release, threads = _blocked(), {}

    def hang():
        threads["hang"] = _thread.get_ident()
        release.acquire(True, 30)
        return "late"

    def quick(name):
        threads[name] = _thread.get_ident()
        return name

    tasks = [Task(lambda: quick("a")), Task(hang), Task(lambda: quick("b")), Task(lambda: quick("c"))]
    start = time.monotonic()
    try:
        walk(tasks, [5.0, 0.5, 5.0, 5.0], stall_s=0.01)
        assert time.monotonic() - start < 20  # the hung call costs its deadline (0.5 s), not its 30 s
        assert tasks[1].is_alive()  # still in the call, abandoned
        assert [t.result for t in (tasks[0], tasks[2], tasks[3])] == ["a", "b", "c"]
        assert threads["hang"] not in (threads["b"], threads["c"])  # (a busy machine may stall "a" or "b" too)
    finally:
        release.release()
    tasks[1].join(10)
    assert tasks[1].result == "late"


def test_a_call_not_begun_by_its_deadline_is_never_begun():
    """No takeover within the deadlines (a stall limit longer than them): the call behind the hung one
    did not answer in time, and it is not run once the hung one returns."""
    release, called = _blocked(), []
    tasks = [Task(lambda: release.acquire(True, 30)), Task(lambda: called.append(1))]
    walk(tasks, [0.2, 0.3], stall_s=60)
    assert tasks[0].is_alive() and tasks[1].is_alive() and tasks[1].duration == 0.0
    release.release()
    tasks[0].join(10)
    time.sleep(0.2)  # the walker, back from the hung call, finds the walk closed
    assert called == [] and tasks[1].is_alive()


def test_nothing_to_walk_and_a_deadline_missing():
    walk([], [])
    with pytest.raises(ValueError, match="one deadline per task"):
        walk([Task(lambda: None)], [])


COUNT = """
import _thread, sys, time
sys.path.insert(0, {root!r})
from healthcheck.probes import bounded
first, second = _thread.allocate_lock(), _thread.allocate_lock()
first.acquire(); second.acquire()
tasks = [bounded.Task(lambda: first.acquire(True, 30)), bounded.Task(lambda: 1), bounded.Task(lambda: 2)]
bounded.walk(tasks, [0.3, 5.0, 5.0], stall_s=0.01)
during = bounded.running()
first.release(); tasks[0].join(10)
never = [bounded.Task(lambda: second.acquire(True, 30)), bounded.Task(lambda: 3)]
bounded.walk(never, [0.2, 0.2], stall_s=60)
closed = bounded.running()
second.release(); never[0].join(10); time.sleep(0.2)
print(during, closed, bounded.running())
"""


def test_running_counts_the_calls_under_way_and_never_one_not_begun():
    """``running()`` (the CLI leaves at once while a probe is stuck) counts a stalled call until it returns,
    and never a call that was not begun. In a process of its own: other tests' abandoned probes count."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", COUNT.format(root=root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "0"]
