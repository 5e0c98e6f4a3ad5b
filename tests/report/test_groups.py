"""``groups.finding_groups``: a floor judged by a check joins that check's group when other nodes fail the
check with the same status and action (one cause, one row); otherwise it keeps its own row."""
from __future__ import annotations

from types import SimpleNamespace

from healthcheck.report.groups import finding_groups
from healthcheck.report.model import Finding

RESEAT = "reseat the GPU or its riser/cable"


def _f(kind, node, subject, status="fail", action=RESEAT, weight=0.0, check=""):
    return Finding(kind, node, subject, "gpu0", status, f"{subject} on {node}", None, action, weight, check)


def test_a_floor_of_a_failing_check_joins_its_row_with_the_worst_example():
    report = SimpleNamespace(findings=[
        _f("check", "n1", "gpu.pcie.link", weight=3.0), _f("check", "n2", "gpu.pcie.link", weight=3.0),
        _f("floor", "n3", "pcie_width", weight=50.0, check="gpu.pcie.link")])
    groups = finding_groups(report)
    assert len(groups) == 1
    g = groups[0]
    assert g["kind"] == "check+floor" and g["subject"] == "gpu.pcie.link (pcie_width)"
    assert g["nodes"] == {"n1", "n2", "n3"} and g["count"] == 3 and g["example"].startswith("n3")


def test_a_floor_stays_apart_without_the_check_or_with_another_status_or_action():
    report = SimpleNamespace(findings=[
        _f("check", "n1", "gpu.pcie.link"),
        _f("floor", "n2", "pcie_width", status="warn", check="gpu.pcie.link"),
        _f("floor", "n3", "pcie_width", action="something else", check="gpu.pcie.link"),
        _f("floor", "n4", "gemm_tflops", check="burnin.gemm"),
        _f("floor", "n5", "pcie_width")])
    groups = finding_groups(report)
    kinds = sorted((g["kind"], g["subject"], tuple(sorted(g["nodes"]))) for g in groups)
    assert kinds == [("check", "gpu.pcie.link", ("n1",)), ("floor", "gemm_tflops", ("n4",)),
                     ("floor", "pcie_width", ("n2",)), ("floor", "pcie_width", ("n3",)),
                     ("floor", "pcie_width", ("n5",))]
    assert groups[0]["kind"] == "check"  # fail, check first: the sort reads the kind before its '+'
