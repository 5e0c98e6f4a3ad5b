"""Policy: the ownership rules, as a table."""
from __future__ import annotations

import pytest

from healthcheck.core.model import Finding, Status, Verdict
from healthcheck.slurm.nodestate import NodeState
from healthcheck.slurm.policy import decide
from healthcheck.slurm.reasons import is_ours, make_reason_multi
from healthcheck.config.slurm_settings import SlurmSettings

FAIL = [Finding("gpu.ecc.uncorrected", Status.FAIL, "uncorrected ECC errors: volatile 2", "gpu3")]
ERROR = [Finding("gpu.xid", Status.ERROR, "cannot judge: kernel_events probe failed")]
OK = [Finding("gpu.count", Status.PASS, "8 GPUs")]
OURS = make_reason_multi([("gpu.ecc.uncorrected", "gpu3", "uncorrected ECC errors: volatile 2")], "run1")


def verdict(findings):
    return Verdict.of("node1", findings, "2026-12-01T00:00:00+00:00", 0.01, "slurm-check")


def state(base="IDLE", flags=(), reason=None):
    return NodeState(name="node1", state=base, flags=frozenset(flags), reason=reason, reason_user=None,
                     reason_time=None)


S = SlurmSettings()


@pytest.mark.parametrize("context, findings, node, action", [
    ("prolog", FAIL, state(), "drain"),
    ("slurm-check", FAIL, state(), "drain"),
    ("epilog", FAIL, state("MIXED"), "drain"),
    ("slurm-check", FAIL, None, "drain"),  # slurmctld unreachable: decided, then queued by the caller
    ("slurm-check", FAIL, state("IDLE", {"DRAIN"}, "RMA ticket 4711"), "none"),  # admin's reason kept
    ("slurm-check", FAIL, state("DOWN", {"NOT_RESPONDING"}, "Not responding"), "none"),
    ("slurm-check", OK, state("IDLE", {"DRAIN"}, "RMA ticket 4711"), "none"),  # never resume an admin drain
    ("slurm-check", OK, state("IDLE", {"DRAIN"}, OURS), "resume"),
    ("slurm-check", OK, state("DOWN", {"DRAIN"}, OURS), "resume"),
    ("slurm-check", ERROR, state("IDLE", {"DRAIN"}, OURS), "none"),  # could not judge: stay drained
    ("prolog", OK, state("IDLE", {"DRAIN"}, OURS), "none"),  # only slurm-check resumes
    ("slurm-check", ERROR, state(), "none"),  # ERROR never drains
    ("slurm-check", OK, state(), "none"),
    ("slurm-check", FAIL, state("IDLE", {"DRAIN"}, OURS.replace("run1", "run1")), "none"),  # same reason
])
def test_ownership_table(context, findings, node, action):
    v = Verdict.of("node1", findings, "2026-12-01T00:00:00+00:00", 0.01, context)
    d = decide(context, v, node, S, "run1")
    assert d.action == action, d.why
    if action == "drain":
        assert is_ours(d.reason) and "gpu.ecc.uncorrected" in d.reason and "gpu3" in d.reason


def test_warn_mode_never_drains():
    settings = SlurmSettings(prolog_on_fail="warn")
    d = decide("prolog", verdict(FAIL), state(), settings, "r")
    assert d.action == "none" and "warn" in d.why


def test_resume_can_be_switched_off():
    d = decide("slurm-check", verdict(OK), state("IDLE", {"DRAIN"}, OURS), SlurmSettings(resume=False), "r")
    assert d.action == "none"
