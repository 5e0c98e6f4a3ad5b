"""A GPU that stops answering never hangs the burn-in: the GEMM and bandwidth phases run under a
deadline; past it the phase FAILs, the later GPU phases are skipped as on an unusable node, the rest
runs, and the command records the verdict and exits without waiting for the stuck thread."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from healthcheck.burnin import node_run
from healthcheck.policies import references
from healthcheck.burnin.node_run import NodeContext, run_node
from healthcheck.burnin.settings import resolve
from healthcheck.core.model import Status

ROOT = Path(__file__).resolve().parents[2]


def test_a_hung_gemm_fails_skips_the_later_gpu_phases_and_returns(tmp_path, monkeypatch):
    release = threading.Event()

    def stuck(ctx):
        release.wait(30)  # a CUDA call that never returns
        return []

    monkeypatch.setitem(node_run.PHASES, "gemm", stuck)
    monkeypatch.setattr(node_run, "deadline", lambda name, s: 0.3 if name in ("gemm", "bandwidth") else None)
    ctx = NodeContext("n1", resolve({"backend": "numpy", "phases": ["gemm", "bandwidth", "nccl", "storage"],
                                     "nccl_dir": str(tmp_path / "none")}), references.load())
    t0 = time.monotonic()
    try:
        verdict = run_node(ctx, "2026-12-02T00:00:00+00:00")
    finally:
        release.set()
    assert time.monotonic() - t0 < 10
    by_check = {f.check: f for f in verdict.findings}
    assert by_check["burnin.gemm"].status is Status.FAIL
    assert by_check["burnin.gemm"].message.startswith("did not finish within 0 s: a GPU stopped answering")
    for later in ("burnin.bandwidth", "burnin.nccl"):
        assert by_check[later].status is Status.SKIP and "node unusable (burnin.gemm hung)" in by_check[later].message
    assert by_check["burnin.storage"].status is Status.SKIP  # not a GPU phase: it ran
    assert ctx.extra["hung"] == "gemm" and verdict.status is Status.FAIL


def test_deadlines_scale_with_the_work_and_leave_tool_phases_to_their_own():
    s = resolve({"gemm_duration_s": 30.0, "bandwidth_repeats": 10, "bandwidth_bytes": 1 << 30})
    assert node_run.deadline("gemm", s) == 660
    assert 600 < node_run.deadline("bandwidth", s) < 700
    assert all(node_run.deadline(p, s) is None for p in ("checks", "dcgm", "nccl", "storage"))


def test_the_command_records_the_hung_node_and_exits(tmp_path):
    code = (
        "import sys, threading\n"
        "from healthcheck.burnin import node_run\n"
        "node_run.PHASES['gemm'] = lambda ctx: threading.Event().wait()\n"
        "node_run.deadline = lambda name, s: 0.5 if name == 'gemm' else None\n"
        "from healthcheck.cli import main\n"
        f"main(['burnin', 'run', '--backend', 'numpy', '--phases', 'gemm', '--node', 'n1', "
        f"'--spool', {str(tmp_path / 'spool')!r}, '--format', 'json'])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stderr
    record = json.loads((tmp_path / "spool" / "records.jsonl").read_text().splitlines()[-1])
    (gemm,) = [r for r in record["results"] if r["check"] == "burnin.gemm"]
    assert gemm["status"] == "fail" and "a GPU stopped answering" in gemm["message"]
