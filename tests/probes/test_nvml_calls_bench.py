"""benchmarks/nvml_calls.py --live runs on a GPU node only (scripts/gpu-tier.sh), rarely: here it runs over
the fake pynvml, so that it cannot rot between two GPU sessions."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pynvml

from tests.fakes.fake_pynvml import FakeNvml, h100_node

ROOT = Path(__file__).resolve().parents[2]


def test_live_mode_times_each_function_and_reads_the_nvlink_counters_both_ways(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import nvml_calls

    gpus = h100_node(2)
    gpus[1].nvlink_errors[(3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY)] = 7
    fake = FakeNvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(nvml_calls.shutil, "which", lambda name: None)  # no nvidia-smi here
    nvml_calls.live(2)
    out = capsys.readouterr().out
    calls = int(re.search(r"one probe: (\d+) NVML calls", out).group(1))
    # the probe's calls for 2 GPUs of 18 links, as nvml_calls.py counts them (issue 33: + the unrepairable-memory
    # flag, one call a GPU; the fabric stays one call on a driver that knows the v3 struct; + the v4 fabric call
    # a GPU, which a driver before 615 answers FUNCTION_NOT_FOUND from pynvml's symbol lookup, no driver call)
    assert calls == 267
    assert re.search(r"\| 144 \| \d+ \| [\d.]+ \| `nvmlDeviceGetNvLinkErrorCounter` \|", out)
    assert "| 3 | replay_errors | 7 |" in out  # GPU 1, link 3, read by call
    # the fresh interpreters import the real pynvml: without a driver its library cannot load, said so
    assert re.search(r"import pynvml, a fresh interpreter: [\d.]+ ms median of 5", out)
    assert "loading libnvidia-ml (no session), a fresh interpreter: " in out
    assert "warm session (NVML held open)" in out and "candidate fields in one nvmlDeviceGetFieldValues" in out
    assert fake.sessions == 0  # every session it opened, it closed
