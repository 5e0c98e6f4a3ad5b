"""The one subprocess seam: no shell, a fixed PATH and environment, a deadline that kills the group."""
from __future__ import annotations

import os
import time

import pytest

from healthcheck.safeio import subproc


def test_child_environment_is_fixed_not_inherited(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    monkeypatch.setenv("SECRET_TOKEN", "s3cret")
    res = subproc.run(["env"], timeout=10)
    env = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    assert env == subproc.SAFE_ENV


def test_tools_resolve_from_the_fixed_path_only(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi-fake-tool"
    fake.write_text("#!/bin/sh\necho pwned\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    assert subproc.which("nvidia-smi-fake-tool") is None
    with pytest.raises(subproc.ToolNotFound):
        subproc.run(["nvidia-smi-fake-tool"], timeout=5)


def test_arguments_are_never_interpreted_by_a_shell(tmp_path):
    marker = tmp_path / "created"
    res = subproc.run(["echo", f"; touch {marker}", "$(id)"], timeout=5)
    assert res.ok and not marker.exists()
    assert res.stdout.strip() == f"; touch {marker} $(id)"


def test_deadline_kills_the_whole_process_group():
    start = time.monotonic()
    res = subproc.run(["sh", "-c", "sleep 60 & sleep 60; wait"], timeout=0.5)
    assert res.timed_out and res.returncode is None
    assert time.monotonic() - start < 5
    # the background sleep (a grandchild) went with the group
    time.sleep(0.2)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cmd.strip() == "sleep 60" and state not in ("Z", "X"):
            left.append(pid)
    assert left == []


def test_argv_must_be_a_list():
    with pytest.raises(ValueError):
        subproc.run("ls -l", timeout=1)  # type: ignore[arg-type]


# --- a tool that floods or hangs cannot exhaust the node ------------------------------------------------


def _tool(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def _peak_rss_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _alive(needle: str) -> list[str]:
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmd and state not in ("Z", "X"):
            left.append(pid)
    return left


def test_a_tool_printing_forever_is_cut_at_the_output_limit_and_killed(tmp_path):
    scontrol = _tool(tmp_path, "scontrol", 'exec yes "NodeName=node1 State=IDLE Reason=none"')
    before = _peak_rss_bytes()
    res = subproc.run([scontrol, "show", "node", "-o"], timeout=120, max_output=1024 * 1024)
    assert res.truncated and not res.timed_out and not res.ok and res.returncode is None
    assert len(res.stdout) == 1024 * 1024 and res.stdout.startswith("NodeName=node1 State=IDLE")
    assert "output exceeded 1048576 bytes" in res.stderr and "process group killed" in res.stderr
    assert _peak_rss_bytes() - before < 256 * 1024 * 1024
    assert _alive("yes NodeName=node1") == []


def test_the_default_limit_bounds_memory_too(tmp_path):
    flood = _tool(tmp_path, "flood", "exec yes 0123456789abcdef0123456789abcdef")
    before = _peak_rss_bytes()
    res = subproc.run([flood], timeout=300)
    assert res.truncated and len(res.stdout) == subproc.MAX_OUTPUT_BYTES
    # kept output, its bytes copy and its decoded str: a few times the limit, never unbounded
    assert _peak_rss_bytes() - before < 5 * subproc.MAX_OUTPUT_BYTES


def test_stderr_is_bounded_as_well(tmp_path):
    noisy = _tool(tmp_path, "noisy", "exec yes error >&2")
    res = subproc.run([noisy], timeout=120, max_output=4096)
    assert res.truncated and res.stderr.startswith("error\n" * 10) and res.returncode is None


def test_a_hung_tool_that_closed_its_output_is_killed_at_the_deadline(tmp_path):
    hung = _tool(tmp_path, "hung-scontrol", "exec >/dev/null 2>&1 </dev/null\nsleep 607 &\nexec sleep 607")
    start = time.monotonic()
    res = subproc.run([hung], timeout=1.0)
    assert res.timed_out and not res.truncated and res.returncode is None
    assert "no exit within 1 s" in res.stderr
    assert time.monotonic() - start < 30  # generous: the point is that it returns, group killed
    time.sleep(0.2)
    assert _alive("sleep 607") == []


def test_the_callers_deadline_wins_over_a_longer_timeout(tmp_path):
    hung = _tool(tmp_path, "hung", "sleep 608")
    res = subproc.run([hung], timeout=600, deadline=time.monotonic() + 0.5)
    assert res.timed_out and res.returncode is None
    assert res.duration_s < 60
    time.sleep(0.2)
    assert _alive("sleep 608") == []


def test_a_deadline_already_past_starts_nothing(tmp_path):
    marker = tmp_path / "ran"
    tool = _tool(tmp_path, "touching", f"touch {marker}")
    res = subproc.run([tool], timeout=10, deadline=time.monotonic() - 1)
    assert res.timed_out and res.returncode is None and res.duration_s == 0.0 and not marker.exists()
    assert "deadline had passed" in res.stderr


def test_output_within_the_limit_is_whole_and_the_exit_status_kept(tmp_path):
    tool = _tool(tmp_path, "exact", "printf 'abcd'; printf 'warn' >&2; exit 3")
    res = subproc.run([tool], timeout=30, max_output=4)
    assert (res.stdout, res.stderr, res.returncode, res.truncated, res.timed_out) == ("abcd", "warn", 3, False, False)


@pytest.mark.parametrize("bad", [0, -1, 1.5, None])
def test_a_bad_output_limit_is_refused(bad):
    with pytest.raises(ValueError, match="max_output"):
        subproc.run(["true"], timeout=5, max_output=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), None, "5"])
def test_a_bad_timeout_is_refused(bad):
    with pytest.raises(ValueError, match="timeout"):
        subproc.run(["true"], timeout=bad)  # type: ignore[arg-type]


def test_a_chatty_tool_is_cut_at_the_deadline_with_what_it_said_so_far(tmp_path):
    chatty = _tool(tmp_path, "chatty-scontrol", "while :; do echo 'NodeName=node1 State=IDLE'; done")
    res = subproc.run([chatty], timeout=600, deadline=time.monotonic() + 1.0)
    assert res.timed_out and not res.truncated and res.returncode is None
    assert res.stdout.startswith("NodeName=node1 State=IDLE\n") and res.duration_s < 60
    time.sleep(0.2)
    assert _alive("chatty-scontrol") == []
