"""The burn-in's progress lines (burnin/node_run.py): a start line per phase with its position and an ETA from
the phase's configured duration (or its bound, or none), an end line with the time it took, its worst finding
and the time since the burn-in began; skipped phases say why; none without a ``progress`` callable."""
from __future__ import annotations

import re

from healthcheck.burnin import node_run
from healthcheck.core.model import Finding, Status
from tests.burnin.test_phase_paths import LOST, _ctx


def _fake_phases(monkeypatch, lose_gpu: bool = False):
    def checks(ctx):
        if lose_gpu:
            ctx.unusable = LOST
            return [Finding("gpu.lost", Status.FAIL, "GPU 3 fell off the bus", "gpu3")]
        return [Finding("gpu.count", Status.PASS, "8 GPUs")]

    monkeypatch.setitem(node_run.PHASES, "checks", checks)
    monkeypatch.setitem(node_run.PHASES, "gemm", lambda ctx: [Finding("burnin.gemm", Status.WARN, "slow", "gpu0"),
                                                              Finding("burnin.gemm", Status.PASS, "ok", "gpu1")])
    for name in ("bandwidth", "dcgm", "nccl", "storage"):
        monkeypatch.setitem(node_run.PHASES, name, lambda ctx: [])


def test_a_start_and_an_end_line_per_phase(tmp_path, monkeypatch):
    _fake_phases(monkeypatch)
    lines: list[str] = []
    ctx = _ctx(tmp_path, phases=["checks", "gemm", "dcgm"], gemm_duration_s=300.0)
    ctx.progress = lines.append
    node_run.run_node(ctx, "2026-01-01T00:00:00+00:00")
    assert len(lines) == 6
    starts, ends = lines[0::2], lines[1::2]
    assert [re.match(r"n1: phase (\w+) (\d)/3: start, ", x).groups() for x in starts] == [
        ("checks", "1"), ("gemm", "2"), ("dcgm", "3")]
    assert starts[0].endswith("no configured duration")
    assert re.search(r"expected 300 s \(ETA \d\d:\d\d:\d\d UTC\)$", starts[1])
    assert re.search(r"at most 1800 s \(by \d\d:\d\d:\d\d UTC\)$", starts[2])  # dcgm: only its timeout
    assert re.match(r"n1: phase checks 1/3: done in \d+\.\d s, worst PASS \(1 finding\(s\)\); 0 min \d+ s since",
                    ends[0])
    assert "worst WARN (2 finding(s))" in ends[1] and "no finding" in ends[2]


def test_skipped_phases_say_why_and_no_callable_means_no_line(tmp_path, monkeypatch):
    _fake_phases(monkeypatch, lose_gpu=True)
    lines: list[str] = []
    ctx = _ctx(tmp_path, phases=["checks", "gemm", "bandwidth"])
    ctx.progress = lines.append
    node_run.run_node(ctx, "2026-01-01T00:00:00+00:00")
    assert lines[1].startswith("n1: phase checks 1/3: done") and "worst FAIL" in lines[1]
    assert lines[2:] == [f"n1: phase gemm 2/3: skipped, node unusable ({LOST})",
                         f"n1: phase bandwidth 3/3: skipped, node unusable ({LOST})"]
    quiet = _ctx(tmp_path, phases=["checks"])
    assert quiet.progress is None
    node_run.run_node(quiet, "2026-01-01T00:00:00+00:00")  # runs without a progress callable


def test_eta_sources():
    from healthcheck.burnin.settings import resolve

    s = resolve({"gemm_duration_s": 60.0, "storage_paths": ["/a", "/b"], "storage_runtime_s": 30.0,
                 "nccl_collectives": ["all_reduce", "all_gather"], "nccl_timeout_s": 100.0}, environ={})
    assert node_run.expected("gemm", s) == (60.0, True)
    assert node_run.expected("storage", s) == (60.0, True)
    assert node_run.expected("nccl", s) == (200.0, False)
    assert node_run.expected("checks", s) is None and node_run.expected("bandwidth", s) is None


def test_burnin_run_prints_phase_lines_when_asked(tmp_path):
    """`healthcheck burnin run --progress`: a start and an end line per phase on stderr, even when stderr
    is not a terminal; without the flag (and no terminal) none."""
    from click.testing import CliRunner

    from healthcheck.cli import cli

    args = ["burnin", "run", "--phases", "checks", "--backend", "numpy", "--results-dir", str(tmp_path / "r"),
            "--spool", str(tmp_path / "spool"), "--node", "nodeP"]
    shown = CliRunner().invoke(cli, args + ["--progress"])
    quiet = CliRunner().invoke(cli, args)
    assert "phase checks 1/1" in shown.output, shown.output  # the progress lines number the phases
    assert "phase checks 1/1" not in quiet.output and quiet.exit_code == shown.exit_code


def test_burnin_run_quiet_and_verbose(tmp_path):
    """-v: the phase lines as --progress, anywhere; -q: no [burnin] line at all, the verdict still printed."""
    from click.testing import CliRunner

    from healthcheck.cli import cli

    args = ["burnin", "run", "--phases", "checks", "--backend", "numpy", "--results-dir", str(tmp_path / "r"),
            "--spool", str(tmp_path / "spool"), "--node", "nodeP"]
    verbose = CliRunner().invoke(cli, args + ["-v"])
    assert "phase checks 1/1" in verbose.output, verbose.output
    normal = CliRunner().invoke(cli, args)
    quiet = CliRunner().invoke(cli, args + ["-q", "--progress"])  # -q wins over --progress
    assert "[burnin]" not in quiet.output and quiet.exit_code == verbose.exit_code, quiet.output
    assert "[burnin] nodeP: phase checks" in normal.output  # what -q leaves out
    assert "nodeP: PASS" in quiet.output
