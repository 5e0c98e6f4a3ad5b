"""Transparent huge pages off for one process (core/hugepages.py): taken by the kernel where it has the
call, never an error where it does not."""
from __future__ import annotations

import subprocess
import sys

import pytest

from healthcheck.core import hugepages


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_THP_DISABLE) is Linux's")
def test_the_kernel_takes_it():
    code = ("from healthcheck.core.hugepages import disable_thp\n"
            "print(disable_thp())\n"
            "print(''.join(l for l in open('/proc/self/status') if l.startswith('THP_enabled')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    took, status = out.stdout.split("\n", 1)
    assert took == "True", out.stdout + out.stderr
    if status.strip():  # Linux 5.0+ says so in /proc (older kernels take the call without the field)
        assert status.split() == ["THP_enabled:", "0"]


def test_nothing_changes_and_nothing_fails_where_the_call_does_not_exist(monkeypatch):
    monkeypatch.setattr(hugepages.sys, "platform", "darwin")
    assert hugepages.disable_thp() is False
    monkeypatch.setattr(hugepages.sys, "platform", "linux")
    import ctypes

    def no_libc(*args, **kwargs):
        raise OSError("no libc here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert hugepages.disable_thp() is False
