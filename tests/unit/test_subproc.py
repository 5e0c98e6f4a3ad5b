"""The one subprocess seam: no shell, a fixed PATH and environment, a deadline that kills the group."""
from __future__ import annotations

import os
import time

import pytest

from healthcheck import subproc


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
