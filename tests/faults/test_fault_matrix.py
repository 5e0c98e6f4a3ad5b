"""The fault matrix, proven: every row of tests/faults/matrix.py is injected and judged; the healthy
side (every healthy fixture and healthy real output) gives no FAIL; docs/fault-matrix.md is the table."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from healthcheck.bundles.archive import snapshot_from_bundle
from healthcheck.config import default_expectations, loads
from healthcheck.core.model import Finding, Snapshot, Status, Verdict
from healthcheck.parsers.ibstat import parse_ibstat
from healthcheck.parsers.kernel_log import parse_kernel_log
from healthcheck.pipeline.judge import judge
from healthcheck.slurm.policy import decide
from healthcheck.config.slurm_settings import SlurmSettings
from healthcheck.policies.xid import load_xid_policy
from tests.checks import gpu_builders
from tests.conftest import CORPUS, FIXTURES, ROOT, corpus_params
from tests.faults import node as N
from tests.faults.matrix import FAULTS, ISSUE_CLASSES, Fault
from tests.faults.render import markdown

ALL_CONTEXTS = ("check", "prolog", "epilog", "slurm-check", "burnin")


def _exp(fault: Fault):
    return loads(fault.config, "matrix.toml").expectations_for(N.NODE) if fault.config else default_expectations()


def _findings(injected, fault: Fault, context: str) -> list[Finding]:
    if isinstance(injected, list):  # a hook run: its own context's verdict
        return injected
    assert isinstance(injected, Snapshot)
    return judge(injected, _exp(fault), context).findings


def _failing(findings: list[Finding]) -> set[tuple[str, str | None]]:
    return {(f.check, f.component) for f in findings if f.status is Status.FAIL}


# --------------------------------------------------------------------------------- the faults


@pytest.mark.parametrize("fault", [pytest.param(f, id=f.id) for f in FAULTS])
def test_fault_is_detected_by_its_check_alone(fault, tmp_path):
    injected = fault.inject(tmp_path)
    if isinstance(injected, Snapshot):
        assert not injected.probe_errors or fault.check == "gpu.responsive", injected.probe_errors
    for context in fault.contexts:
        findings = _findings(injected, fault, context)
        named = [f for f in findings if f.check == fault.check and f.component == fault.component]
        assert named, (context, fault.check, fault.component, [(f.check, f.component) for f in findings])
        assert [f.status for f in named] == [fault.status], (context, [(f.status, f.message) for f in named])
        assert named[0].message
        # nothing else FAILs for this single fault, except the listed co-detectors
        allowed = {(fault.check, c) for c in (fault.component, *fault.also_components)}
        others = {(c, comp) for c, comp in _failing(findings) if (c, comp) not in allowed}
        assert {c for c, _ in others} == set(fault.co_detectors), (context, sorted(others, key=str))
        for component in fault.also_components:
            assert (fault.check, component) in _failing(findings), (context, component)
        if fault.status is Status.FAIL:
            verdict = Verdict.of(N.NODE, findings, N.TAKEN_AT, 0.0, context)
            assert verdict.status is Status.FAIL


@pytest.mark.parametrize("fault", [pytest.param(f, id=f.id) for f in FAULTS])
def test_default_action_is_what_the_policy_does(fault):
    finding = Finding(fault.check, fault.status, fault.name, fault.component)
    for context in fault.contexts:
        decision = decide(context, Verdict.of(N.NODE, [finding], N.TAKEN_AT, 0.0, context), None,
                          SlurmSettings(), "0123456789abcdef")
        action = decision.action if decision.action != "none" else "report"
        assert action == fault.action, (context, decision)


def test_every_issue_class_is_covered_and_ids_are_unique():
    covered = {f.covers for f in FAULTS}
    assert set(ISSUE_CLASSES) <= covered, sorted(set(ISSUE_CLASSES) - covered)
    assert covered <= set(ISSUE_CLASSES), sorted(covered - set(ISSUE_CLASSES))
    ids = [f.id for f in FAULTS]
    assert len(ids) == len(set(ids))
    assert len(set(ISSUE_CLASSES)) >= 25


def test_every_fatal_and_storm_xid_of_the_policy_has_a_row():
    policy = load_xid_policy()
    fatal = {r.xid for r in policy.rules.values() if r.action == "fail"}
    storms = {r.xid for r in policy.rules.values() if r.action == "warn" and r.min_count > 1}
    assert fatal and storms
    assert {f"xid-{x}" for x in fatal} | {f"xid-{x}-storm" for x in storms} <= {f.id for f in FAULTS}


@pytest.mark.parametrize("xid", sorted(r.xid for r in load_xid_policy().rules.values()
                                       if r.action == "warn" and r.min_count > 1))
def test_a_storm_one_event_short_is_not_reported(xid, tmp_path):
    """The storm rows are storms: min_count - 1 events in the window stay PASS."""
    rule = load_xid_policy().rule(xid)
    lines = "".join(N.xid_line(xid, 1, rule.name, uptime_s=N.UPTIME_S - 600 + i) for i in range(rule.min_count - 1))
    snap = N.node(tmp_path, kernel_log=N.HEALTHY_KERNEL_LOG + lines).snapshot()
    found = {f.component: f.status for f in judge(snap, default_expectations(), "slurm-check").findings
             if f.check == "gpu.xid"}
    assert Status.WARN not in found.values() and Status.FAIL not in found.values(), found


def test_doc_is_generated_from_the_table():
    doc = ROOT / "docs" / "fault-matrix.md"
    assert doc.read_text("utf-8") == markdown(), \
        "docs/fault-matrix.md is stale: .venv/bin/python -m tests.faults.render > docs/fault-matrix.md"
    for fault in FAULTS:
        assert f"(`{fault.id}`)" in doc.read_text("utf-8")


# ------------------------------------------------------------------------------ the healthy side


def _no_fail(snap: Snapshot, exp=None, contexts=ALL_CONTEXTS) -> None:
    exp = exp or default_expectations()
    for context in contexts:
        failing = [(f.check, f.component, f.message) for f in judge(snap, exp, context).findings
                   if f.status is Status.FAIL]
        assert failing == [], (context, failing)


def test_builders_healthy_node_has_no_failure():
    _no_fail(gpu_builders.snapshot())


def test_fixture_node_has_no_failure(tmp_path):
    snap = N.node(tmp_path).snapshot()
    assert not snap.probe_errors and len(snap.gpus) == 8 and len(snap.ib_ports) == 8
    _no_fail(snap)


def test_fixture_node_epilog_after_a_clean_job_has_no_failure(tmp_path):
    before = N.node(tmp_path / "prolog").snapshot()
    snap = N.epilog(tmp_path, before, N.node(tmp_path / "epilog"))
    assert snap.job.counter_growth == {} and snap.job.stray_processes == []
    _no_fail(snap, contexts=("epilog",))


@pytest.mark.parametrize("path", sorted((FIXTURES / "nvidia-smi").glob("q-*healthy*")), ids=lambda p: p.name)
def test_healthy_nvidia_smi_fixtures_have_no_failure(path, tmp_path):
    bundle = tmp_path / "gpu017"
    bundle.mkdir()
    shutil.copy(path, bundle / ("nvidia-smi-q-x.xml" if path.suffix == ".xml" else "nvidia-smi-q.txt"))
    snap = snapshot_from_bundle(bundle)
    assert len(snap.gpus) == 8 and not snap.probe_errors
    _no_fail(snap)


def _ib_snapshot(text: str) -> Snapshot:
    return Snapshot(node="gpu017", taken_at=N.TAKEN_AT, ib_ports=list(parse_ibstat(text)))


@pytest.mark.parametrize("path", sorted((FIXTURES / "ibstat").glob("*healthy*")), ids=lambda p: p.name)
def test_healthy_ibstat_fixtures_have_no_failure(path):
    snap = _ib_snapshot(path.read_text())
    assert snap.ib_ports and all(p.state == "ACTIVE" for p in snap.ib_ports)
    _no_fail(snap)


def test_healthy_kernel_log_has_no_failure():
    events = parse_kernel_log(N.HEALTHY_KERNEL_LOG)
    snap = Snapshot(node="gpu017", taken_at=N.TAKEN_AT, kernel_events=events)
    _no_fail(snap)


def _sources() -> dict[str, str]:
    """corpus file (relative path) -> its SOURCES.md line."""
    path = CORPUS / "SOURCES.md"
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text("utf-8").splitlines():
        found = re.match(r"\|\s*([\w.+-]+/[\w.+-]+)\s*\|", line)
        if found:
            out[found.group(1)] = line
    return out


# Lines that name no FAULT but describe a state our policy judges a failure on purpose.
NOT_HEALTHY = {
    "nvidia-smi/q-text-h800-525.105.17-gpu0-fabric-completed.txt":
        ("gpu.ecc.mode", "ECC disabled on a datacenter GPU (H800): gpu.ecc.mode FAILs by design"),
    "nvidia-smi/q-x-geforce-gtx1070-384.66-mining-pcie-x1-of-x16-2of6gpus.xml":
        ("gpu.pcie.link", "mining risers: x1 of x16 is a downtrained width (tests/bundles CORPUS_FAULTS)"),
    "kernel-xid/journal-xid45-after-nvlink-xid149-xid145-ogkm1150-excerpt.log":
        ("gpu.xid", "issue 33: 'caused by previous Xid 149' names an NVLink5 NETIR error, Link Fatal in every row "
                    "of NVIDIA's decode sheet (blackwell/SOURCES-blackwell.tsv names the same lines a FAULT)"),
}


def _corpus_snapshot(path: Path, tmp_path: Path) -> Snapshot:
    family = path.parent.name
    if family == "nvidia-smi":
        bundle = tmp_path / "node"
        bundle.mkdir()
        shutil.copy(path, bundle / ("nvidia-smi-q-x.xml" if path.suffix == ".xml" else "nvidia-smi-q.txt"))
        return snapshot_from_bundle(bundle)
    if family == "infiniband":
        return _ib_snapshot(path.read_text("utf-8", "replace"))
    return Snapshot(node="node", taken_at=N.TAKEN_AT, kernel_events=parse_kernel_log(path.read_bytes()))


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*") + corpus_params("infiniband", "ibstat-*")
                         + corpus_params("kernel-xid"))
def test_healthy_corpus_outputs_have_no_failure(path, tmp_path):
    rel = f"{path.parent.name}/{path.name}"
    line = _sources().get(rel)
    if line is None:
        pytest.skip(f"{rel} has no SOURCES.md line")
    if "FAULT" in line:
        pytest.skip("SOURCES.md names a fault in it (judged by the check tests)")
    snap = _corpus_snapshot(path, tmp_path)
    if rel in NOT_HEALTHY:
        check, why = NOT_HEALTHY[rel]
        failing = {c for c, _ in _failing(judge(snap, default_expectations(), "check").findings)}
        assert failing == {check}, (why, failing)
        return
    _no_fail(snap)
