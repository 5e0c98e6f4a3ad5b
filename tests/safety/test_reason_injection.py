"""Drain reasons and log lines cannot inject control characters or Slurm syntax, end to end: tool output
carrying hostile text (an nccl-tests failure line with a crafted hostname, a dcgmi message with a
newline, ANSI/OSC escapes, ``Reason=evil State=RESUME NodeName=...``) is parsed and judged by the burn-in,
the burn-in allocation step and the sweep decide to drain, and ``ScontrolBackend.drain`` runs scontrol
through a fake ``run`` seam that records the argv. The argv must be exactly ``scontrol update
NodeName=<node> State=DRAIN Reason=<text>``: one Reason element, printable ASCII, bounded, no newline,
no extra ``Key=`` element; the log lines and the sweep's text output carry no raw control character.
"""
from __future__ import annotations

import json
import re

import pytest

from healthcheck.burnin import allocation
from healthcheck.burnin.judge_nccl import judge_run
from healthcheck.burnin.judge_tools import judge_dcgm
from healthcheck.burnin.nccl_run import NcclRun
from healthcheck.burnin.settings import BurninSettings
from healthcheck.burnin.tools_run import ToolRun
from healthcheck.config import Config
from healthcheck.core.model import Finding, Status
from healthcheck.parsers import dcgmi, nccl_tests
from healthcheck.slurm.backend import ScontrolBackend
from healthcheck.slurm.reasons import MAX_REASON, REASON_PREFIX
from healthcheck.config.slurm_settings import SlurmSettings
from healthcheck.safeio.subproc import Result
from healthcheck.sweep.decide import NodeResult, decide
from healthcheck.sweep.run import Sweeper
from healthcheck.sweep.settings import SweepSettings
from tests.conftest import FIXTURES

EVIL = "x\n\r\x1b[31mRED\x1b[0m \x1b]0;owned\x07 Reason=evil State=RESUME NodeName=gpu999 \"q' \\ \x00\u202e" + "A" * 500
IDLE = (FIXTURES / "slurm" / "scontrol-show-node-o-22.05-idle.txt").read_text()
RAW_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
KEY = re.compile(r"^[A-Za-z]+=")


class FakeScontrol:
    """The ``run`` seam of ScontrolBackend: records every argv; ``show node`` answers an idle node."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv, timeout=None, env=None) -> Result:
        self.calls.append(list(argv))
        out = ""
        if argv[1:4] == ["-o", "show", "node"]:
            out = IDLE.replace("NodeName=node1", f"NodeName={argv[4]}") if len(argv) > 4 else IDLE
        return Result(list(argv), 0, out, "", 0.01)

    @property
    def drains(self) -> list[list[str]]:
        return [a for a in self.calls if a[1:2] == ["update"]]


def assert_one_clean_reason(argv: list[str], node: str) -> str:
    assert argv[1:4] == ["update", f"NodeName={node}", "State=DRAIN"], argv
    assert len(argv) == 5, argv
    assert [a.split("=", 1)[0] for a in argv[1:] if KEY.match(a)] == ["NodeName", "State", "Reason"]
    reason = argv[4]
    assert reason.startswith(f"Reason={REASON_PREFIX} "), reason
    text = reason[len("Reason="):]
    assert len(text) <= MAX_REASON
    assert all(" " <= c <= "~" for c in text), repr(text)  # printable ASCII: no newline, escape, NUL, RTL
    assert not any(c in text for c in "\"'\\")
    return text


def assert_clean_lines(lines: list[str]) -> None:
    for line in lines:
        assert not RAW_CONTROL.search(line), repr(line)


# ------------------------------------------------------------------- hostile tool outputs, judged


def nccl_finding() -> Finding:
    """An nccl-tests failure line naming a crafted host (what a rank prints, hostname first)."""
    output = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
              f"#  Rank  0 Group  0 Pid  1 on {EVIL[:40].replace(' ', '_').replace(chr(10), '_')} device  0 [0x07] X\n"
              f"evil{EVIL[:60]}host: Test NCCL failure common.cu:1 'internal error' {EVIL[60:]}\n"
              f" .. evil\x1b[2Jhost pid 1: Test failure common.cu:2\n")
    result = nccl_tests.parse(output)
    assert result.errors
    run = NcclRun("all_reduce", "node", ["gpu017"], ["all_reduce_perf"], result=result, returncode=1)
    finding = judge_run(run, None, None, None)
    assert finding.status is Status.FAIL and "Reason=evil" in finding.message
    return finding


def dcgmi_findings() -> list[Finding]:
    """A dcgmi -j document whose test name and warning carry newlines, escapes and Slurm syntax."""
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{
        "name": f"Memory{EVIL[:30]}",
        "results": [{"gpu_ids": "0", "status": "Fail", "warnings": [{"warning": EVIL}]}]}]}]}}
    diag = dcgmi.parse_diag(json.dumps(doc))
    findings = judge_dcgm(ToolRun("dcgmi", ["dcgmi", "diag"], returncode=226), diag, None)
    assert any(f.status is Status.FAIL and "State=RESUME" in f.message for f in findings)
    return findings


def hostile_findings() -> list[Finding]:
    return [nccl_finding(), *dcgmi_findings(),
            Finding(f"burnin.evil\n{EVIL[:20]}", Status.FAIL, EVIL, f"gpu0 {EVIL[:30]}")]


# --------------------------------------------------------------------------------- the burn-in


def test_burnin_allocation_drains_with_one_clean_reason(tmp_path):
    node = "gpu017"
    findings = hostile_findings()
    (tmp_path / f"{node}.json").write_text(json.dumps({"results": [f.to_dict() for f in findings]}))
    settings = BurninSettings(results_dir=str(tmp_path), phases=("checks",), max_drain_fraction=1.0)
    outcome = allocation.run_allocation([node], settings, refs=None, job_id="42")
    assert outcome.drain == [node]
    fake, lines = FakeScontrol(), []
    backend = ScontrolBackend("/usr/bin/scontrol", run=fake, retries=0)
    allocation.apply_drains(outcome, SlurmSettings(), backend, "run-1234abcd-evil\n", lines.append)
    assert len(fake.drains) == 1
    text = assert_one_clean_reason(fake.drains[0], node)
    assert "(+" in text and "more)" in text  # several failures, the first named
    assert [a["action"] for a in outcome.actions] == ["drain"]
    assert_clean_lines(lines)
    assert_clean_lines([json.dumps(outcome.to_dict())])  # JSON escapes what it carries


@pytest.mark.parametrize("index", range(3), ids=["nccl", "dcgmi", "crafted-record"])
def test_each_hostile_finding_alone_gives_one_clean_reason(index):
    finding = hostile_findings()[index]
    fake = FakeScontrol()
    backend = ScontrolBackend("/usr/bin/scontrol", run=fake, retries=0)
    from healthcheck.slurm.reasons import make_reason

    backend.drain("gpu017", make_reason(finding.check, finding.component, finding.message, "r1"))
    backend.drain("gpu017", finding.message)  # even a caller that forgets make_reason
    assert_one_clean_reason(fake.drains[0], "gpu017")
    raw = fake.drains[1]
    assert len(raw) == 5 and raw[4].startswith("Reason=") and all(" " <= c <= "~" for c in raw[4])


# ------------------------------------------------------------------------------------ the sweep


def test_sweep_drains_with_one_clean_reason_and_clean_log_and_text(tmp_path):
    from healthcheck.sweep.run import SweepOutcome
    from healthcheck.sweep.plan import Plan
    from healthcheck.sweep.text import render

    findings = hostile_findings()
    results = {"gpu017": NodeResult("gpu017", Status.FAIL, findings),
               "gpu018": NodeResult("gpu018", Status.FAIL, findings[:1], ours_before=True,
                                    prior_reason=f"{REASON_PREFIX} burnin.nccl: old {EVIL[:40]}")}
    decisions = decide(results, {}, total_nodes=100, settings=SweepSettings(), run_id="sweep-evil\x1b[31m")
    assert [a.action for a in decisions.actions] == ["drain", "drain"]
    fake, lines = FakeScontrol(), []
    config = Config(None, slurm=SlurmSettings(state_dir=str(tmp_path / "state"), spool_dir=str(tmp_path / "spool")))
    sweeper = Sweeper(config, SweepSettings(), ScontrolBackend("/usr/bin/scontrol", run=fake, retries=0),
                      log=lines.append)
    applied = [sweeper._apply(action) for action in decisions.actions]
    assert all(entry["applied"] for entry in applied), applied
    assert len(fake.drains) == 2
    for argv, node in zip(fake.drains, ["gpu017", "gpu018"]):
        assert_one_clean_reason(argv, node)
    assert_clean_lines(lines)
    outcome = SweepOutcome("s1", Plan(), results={n: "fail" for n in results}, decisions=decisions, applied=applied)
    assert_clean_lines(render(outcome).splitlines())


def test_a_foreign_reason_with_escapes_is_left_and_shown_escaped(tmp_path):
    """An admin's reason (read back from Slurm) is never overwritten, and is quoted when reported."""
    foreign = IDLE.replace("State=IDLE", "State=IDLE+DRAIN").replace(
        "BootTime=", "Reason=maintenance\x1b[31m by admin [root@2026-12-01T10:00:00] BootTime=")

    class Foreign(FakeScontrol):
        def __call__(self, argv, timeout=None, env=None):
            res = super().__call__(argv, timeout, env)
            return Result(res.argv, 0, foreign.replace("NodeName=node1", "NodeName=gpu017") if res.stdout else "", "",
                          0.01)

    fake, lines = Foreign(), []
    config = Config(None, slurm=SlurmSettings(state_dir=str(tmp_path / "state"), spool_dir=str(tmp_path / "spool")))
    sweeper = Sweeper(config, SweepSettings(), ScontrolBackend("/usr/bin/scontrol", run=fake, retries=0),
                      log=lines.append)
    decisions = decide({"gpu017": NodeResult("gpu017", Status.FAIL, hostile_findings())}, {}, 100, SweepSettings(), "r")
    entry = sweeper._apply(decisions.actions[0])
    assert entry["applied"] is False and not fake.drains
    assert "\x1b" not in entry["why"] and "\\x1b" in entry["why"]
    assert_clean_lines(lines)


def test_burnin_summaries_escape_every_field_of_a_node_record():
    from healthcheck.burnin.summary import allocation_text, node_text

    finding = {"check": "burnin.x\x1b[2J", "component": "gpu0\nFAKE: PASS", "status": "fail", "message": EVIL}
    record = {"node": "gpu017\x1b[31m", "status": "fail", "burnin": {"gpu_name": "H100\x1b]0;t\x07"},
              "results": [finding]}
    data = {"job_id": "1", "status": "fail", "nodes": ["gpu017"], "collective": [finding], "actions": [],
            "per_node": {"gpu017": {"status": "fail", "findings": [finding]}}}
    assert_clean_lines(node_text(record).splitlines() + allocation_text(data).splitlines())
