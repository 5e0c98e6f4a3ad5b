"""run_in_child: results, crashes and hangs, with real forks, real process groups and real signals."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from healthcheck.hook import watchdog
from healthcheck.hook.watchdog import Outcome, run_in_child

# The contract is budget + 0.1 s; on a loaded 2-core machine the parent itself may wait its turn for a
# CPU, so the tests assert only that a hang is cut (it would otherwise last forever), with room to spare.
SLACK_S = 2.0


def _live_members(pgid: int) -> list[tuple[int, str]]:
    """Processes of group ``pgid`` that are not zombies, from /proc.

    Orphaned grandchildren are reparented to PID 1; in some containers PID 1 never reaps them, so a
    killed grandchild can linger as a zombie (dead, holding no resources). Dead is what we assert."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            alive.append((int(entry.name), state))
    return alive


def _assert_group_gone(pgid: int, wait_s: float = 1.0) -> None:
    end = time.monotonic() + wait_s
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if not _live_members(pgid):
            return
        if time.monotonic() > end:
            pytest.fail(f"process group {pgid} still has live members: {_live_members(pgid)}")
        time.sleep(0.02)


def _assert_no_zombie_children() -> None:
    """Every child the watchdog made is reaped: at once, or (one it killed that had not yet died when the
    call returned: on a loaded machine a killed process can wait tens of ms for a CPU to run its exit)
    by ``reap_abandoned``. Then no child of this process is left unreaped, whoever made it."""
    assert watchdog.reap_abandoned(wait_s=30) == set()
    try:
        assert os.waitpid(-1, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        pass


def _pid_file(tmp_path: Path) -> Path:
    return tmp_path / "pid"


def test_fast_function_returns_its_value():
    out = run_in_child(lambda: {"gpus": 8, "names": ["H100"] * 2, "ok": True}, 5.0)
    assert out == Outcome("ok", {"gpus": 8, "names": ["H100", "H100"], "ok": True}, None, out.duration_s)
    assert out.ok and out.duration_s < 5.0
    _assert_no_zombie_children()


def test_child_runs_in_its_own_process_group():
    out = run_in_child(lambda: [os.getpid(), os.getpgrp()], 5.0)
    assert out.status == "ok"
    pid, pgrp = out.value
    assert pid == pgrp and pid != os.getpid()
    _assert_no_zombie_children()


def test_hang_forever_times_out_within_budget_and_group_is_killed(tmp_path):
    pid_file = _pid_file(tmp_path)

    def hang():
        pid_file.write_text(str(os.getpid()))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a child deaf to SIGTERM changes nothing
        while True:
            time.sleep(100)

    budget = 0.5
    start = time.monotonic()
    out = run_in_child(hang, budget)
    elapsed = time.monotonic() - start
    assert out.status == "timeout" and out.value is None
    assert "budget" in out.error
    assert elapsed <= budget + SLACK_S
    assert budget <= out.duration_s <= budget + SLACK_S
    _assert_group_gone(int(pid_file.read_text()))
    _assert_no_zombie_children()


def test_grandchild_spawned_by_subprocess_dies_with_the_group(tmp_path):
    pid_file = _pid_file(tmp_path)

    def spawn_and_hang():
        proc = subprocess.Popen(["sleep", "1000"])
        pid_file.write_text(f"{os.getpid()} {proc.pid}")
        proc.wait()

    out = run_in_child(spawn_and_hang, 0.8)
    assert out.status == "timeout"
    child, grandchild = map(int, pid_file.read_text().split())
    _assert_group_gone(child)
    state = Path(f"/proc/{grandchild}/stat")
    if state.exists():  # only as an unreaped zombie (see _live_members)
        assert state.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    _assert_no_zombie_children()


def test_background_grandchild_is_killed_after_a_normal_return(tmp_path):
    def leave_a_daemon():
        proc = subprocess.Popen(["sleep", "1000"])
        return [os.getpid(), proc.pid]

    out = run_in_child(leave_a_daemon, 5.0)
    assert out.status == "ok"
    _assert_group_gone(out.value[0])
    _assert_no_zombie_children()


def test_forked_grandchild_holding_the_pipe_does_not_delay_the_result():
    def fork_holder():
        if os.fork() == 0:  # keeps the pipe's write end open; the length prefix makes that harmless
            time.sleep(1000)
            os._exit(0)
        return "done"

    start = time.monotonic()
    out = run_in_child(fork_holder, 3.0)
    assert out.status == "ok" and out.value == "done"
    assert time.monotonic() - start < 1.5
    _assert_no_zombie_children()


def test_exception_is_reported_as_crashed_with_its_text():
    def boom():
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST on gpu3")

    out = run_in_child(boom, 5.0)
    assert out.status == "crashed" and out.value is None
    assert out.error.startswith("RuntimeError: NVML_ERROR_GPU_IS_LOST on gpu3")
    assert "Traceback" in out.error and "boom" in out.error
    _assert_no_zombie_children()


def test_os_exit_without_output_is_crashed_with_the_status():
    out = run_in_child(lambda: os._exit(3), 5.0)
    assert out.status == "crashed"
    assert "exited with status 3" in out.error and "without a result" in out.error
    _assert_no_zombie_children()


def test_killed_by_a_signal_is_crashed_with_the_signal():
    out = run_in_child(lambda: os.kill(os.getpid(), signal.SIGKILL), 5.0)
    assert out.status == "crashed"
    assert "signal 9 (SIGKILL)" in out.error
    _assert_no_zombie_children()


def test_large_result_arrives_whole():
    big = "x" * (10 * 1024 * 1024)
    out = run_in_child(lambda: {"blob": big, "n": 1}, 20.0)
    assert out.status == "ok"
    assert len(out.value["blob"]) == len(big) and out.value["n"] == 1
    _assert_no_zombie_children()


def test_result_over_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(watchdog, "MAX_RESULT_BYTES", 1000)
    out = run_in_child(lambda: "y" * 5000, 5.0)
    assert out.status == "crashed" and "exceeds the limit" in out.error
    _assert_no_zombie_children()


def test_non_json_result_is_crashed_with_a_clear_message():
    out = run_in_child(lambda: {"handle": object()}, 5.0)
    assert out.status == "crashed"
    assert "not JSON-serialisable" in out.error and "dict" in out.error
    out = run_in_child(lambda: float("nan"), 5.0)
    assert out.status == "crashed" and "not JSON-serialisable" in out.error
    _assert_no_zombie_children()


def test_child_never_returns_into_the_callers_stack(tmp_path):
    marker = tmp_path / "after"

    def script():  # if the child returned, it would run the caller's code below a second time
        return 1

    out = run_in_child(script, 5.0)
    with open(marker, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    assert out.value == 1
    assert marker.read_text().split() == [str(os.getpid())]


def test_atexit_handlers_do_not_run_in_the_child(tmp_path):
    code = (
        "import atexit, sys\n"
        "from healthcheck.hook.watchdog import run_in_child\n"
        "atexit.register(lambda: print('ATEXIT', flush=True))\n"
        "print(run_in_child(lambda: 41 + 1, 5.0).value, flush=True)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["42", "ATEXIT"]


def test_child_blocked_in_a_syscall_with_sigterm_ignored(tmp_path):
    def block():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        read_end, _ = os.pipe()
        os.read(read_end, 1)  # blocks forever in read(2)

    out = run_in_child(block, 0.3)
    assert out.status == "timeout" and out.duration_s <= 0.3 + SLACK_S
    _assert_no_zombie_children()


def test_repeated_runs_leave_nothing_behind():
    for i in range(20):
        out = run_in_child(lambda i=i: i * i, 5.0)
        assert out.value == i * i
    for _ in range(3):
        assert run_in_child(lambda: time.sleep(10), 0.1).status == "timeout"
    _assert_no_zombie_children()


@pytest.mark.parametrize("budget", [0, -1, float("inf"), float("nan"), "5"])
def test_bad_budget_is_refused(budget):
    with pytest.raises(ValueError):
        run_in_child(lambda: 1, budget)


def test_a_killed_child_not_yet_dead_is_reaped_before_the_process_exits(tmp_path):
    """The child is killed at the deadline but has not died when the call returns (forced here; a loaded
    machine does it by itself): it is abandoned, and reaped as the interpreter exits, not left a zombie."""
    script = tmp_path / "abandon.py"
    script.write_text(
        "import atexit, os, sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from healthcheck.hook import watchdog\n"
        "def after_reaping():  # registered first, so it runs after the watchdog's own exit handler\n"
        "    try:\n"
        "        left = os.waitpid(-1, os.WNOHANG)\n"
        "    except ChildProcessError:\n"
        "        left = None\n"
        "    print('left', sorted(watchdog._abandoned), left, flush=True)\n"
        "atexit.register(after_reaping)\n"
        "real = watchdog._reap\n"
        "watchdog._reap = lambda pid, wait_s: None  # the killed child is not reaped in time\n"
        "out = watchdog.run_in_child(lambda: time.sleep(100), 0.2)\n"
        "watchdog._reap = real\n"
        "print('status', out.status, 'abandoned', len(watchdog._abandoned), flush=True)\n")
    proc = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "status timeout abandoned 1" in proc.stdout
    assert "left [] None" in proc.stdout, proc.stdout


def test_an_abandoned_child_is_reaped_by_the_next_call(monkeypatch):
    real = watchdog._reap
    monkeypatch.setattr(watchdog, "_reap", lambda pid, wait_s: None)
    assert run_in_child(lambda: time.sleep(100), 0.1).status == "timeout"
    (abandoned,) = watchdog._abandoned
    monkeypatch.setattr(watchdog, "_reap", real)
    deadline = time.monotonic() + 30
    while abandoned in watchdog._abandoned and time.monotonic() < deadline:
        assert run_in_child(lambda: 1, 5.0).value == 1  # each call reaps what earlier ones abandoned
        time.sleep(0.01)
    assert abandoned not in watchdog._abandoned
    with pytest.raises(ChildProcessError):
        os.waitpid(abandoned, os.WNOHANG)
    _assert_no_zombie_children()


def test_the_result_is_what_json_would_carry():
    """The child's result travels as marshal data, checked and shaped as JSON would carry it."""
    import json

    value = {"a": (1, 2.5, "x", None, True), 3: [False, {"n": -0.0}], 1.5: "f", None: 1, True: 2,
             "nested": [[[]]], "big": 10 ** 30}
    out = run_in_child(lambda: value, 5.0)
    assert out.status == "ok" and out.value == json.loads(json.dumps(value))
    for bad in ({"k": float("inf")}, [float("-inf")], {(1, 2): "tuple key"}, {"s": {1, 2}}, b"bytes"):
        out = run_in_child(lambda bad=bad: bad, 5.0)
        assert out.status == "crashed" and "not JSON-serialisable" in out.error, bad
    _assert_no_zombie_children()


def _wait_for(path: Path) -> str:
    """In the child: wait (at most 30 s) for ``path``, which the parent's ``started`` writes."""
    for _ in range(3000):
        if path.exists():
            return "seen"
        time.sleep(0.01)
    return "never"


@pytest.mark.parametrize("prepared", [False, True])
def test_started_is_called_while_the_child_runs(tmp_path, prepared):
    """``started()`` runs in the parent once the child has its work and before waiting for it: the child
    here waits for a file only ``started`` writes (called after the child's end, it would never see it)."""
    flag = tmp_path / "started"

    def started():
        flag.write_text("")

    if prepared:
        child = watchdog.prepare(lambda task: _wait_for(Path(task)))
        try:
            outcome = child.run(str(flag), 60, started=started)
        finally:
            child.release()
    else:
        outcome = run_in_child(lambda: _wait_for(flag), 60, started=started)
    assert (outcome.status, outcome.value) == ("ok", "seen")


def test_a_started_that_raises_never_leaves_the_child_uncollected():
    def started():
        raise RuntimeError("can't start new thread")

    outcome = run_in_child(lambda: 42, 30, started=started)
    assert (outcome.status, outcome.value) == ("ok", 42)
