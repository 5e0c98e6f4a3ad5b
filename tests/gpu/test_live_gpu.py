"""On a machine with a real NVIDIA GPU and driver: the live path end to end. Skipped elsewhere."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from healthcheck.probes.nvml import nvidia_gpu_present

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not nvidia_gpu_present(), reason="no NVIDIA GPU on the PCI bus")]


def test_live_check_sees_every_gpu_on_the_bus(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "check", "--format", "json",
                           "--only", "gpu.*"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    results = {(r["check"], r["component"]): r for r in json.loads(proc.stdout)["results"]}
    assert results[("gpu.responsive", None)]["status"] == "pass", results[("gpu.responsive", None)]
    count = results[("gpu.count", None)]
    assert count["metrics"]["count"] == len(nvidia_gpu_present()), count


def test_collect_then_judge_offline_agrees(tmp_path):
    out = tmp_path / "node.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "collect", "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "check", "--bundle", str(out),
                           "--format", "json", "--only", "gpu.*"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    statuses = {r["check"]: r["status"] for r in json.loads(proc.stdout)["results"]}
    assert statuses["gpu.responsive"] == "pass" and statuses["gpu.count"] == "pass"
