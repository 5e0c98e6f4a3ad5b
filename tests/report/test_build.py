"""The report model over synthetic history frames with known faults (tests/report/synth.py)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from healthcheck.report import build_report, render_json
from healthcheck.report.actions import counter_metric, low_is_bad, perf_metric, recommend
from healthcheck.slurm.nodestate import NodeState
from tests.report.synth import HOSTILE, NOW, SINCE, make_frames


@pytest.fixture(scope="module")
def report():
    # recent=0: the old ranking (risk.rank_nodes), which these tests pin down; the fleet ranking, now the
    # default, is tested in test_fleet_default_*.py
    from healthcheck.report.summary import summarize_frames

    return build_report(summarize_frames(make_frames(), SINCE, NOW, recent=0), SINCE, NOW)


def test_fleet_summary_counts_each_state(report):
    assert report.fleet.counts == {"ready": 6, "drained_ours": 1, "drained_others": 0, "failing": 1, "unknown": 0}
    assert report.fleet.nodes["drained_ours"] == ["gpu03"]
    assert report.fleet.nodes["failing"] == [HOSTILE]
    assert report.fleet.slurm_known is False
    assert any("Slurm was not asked" in n for n in report.notes)


def test_slurm_states_split_ours_from_others():
    states = {"gpu03": NodeState("gpu03", "IDLE", frozenset({"DRAIN"}), "healthcheck: gpu.row_remap gpu1: x"),
              "gpu04": NodeState("gpu04", "IDLE", frozenset({"DRAIN"}), "bad fan -- admin"),
              "gpu09": NodeState("gpu09", "DOWN", frozenset(), None)}
    rep = build_report(make_frames(), SINCE, NOW, slurm_states=states)
    assert rep.fleet.nodes["drained_ours"] == ["gpu03"]
    assert rep.fleet.nodes["drained_others"] == ["gpu04"]
    assert "gpu09" in rep.fleet.nodes["unknown"]  # known to Slurm, never ran a check
    assert rep.fleet.slurm_known


def test_failing_checks_ranked_with_actions(report):
    names = [c.check for c in report.checks]
    assert names == ["gpu.row_remap", "host.mounts", "ib.port.state"]
    remap = report.checks[0]
    assert (remap.nodes_failing_now, remap.fail_results, remap.nodes) == (1, 1, ["gpu03"])
    assert "nvidia-smi -r" in remap.action
    ib = report.checks[2]
    assert (ib.nodes_failing_now, ib.warn_results) == (0, 1)
    assert ib.action.startswith("reseat/replace the cable or transceiver")


def test_nodes_ranked_by_risk_with_evidence(report):
    """The ranking is healthcheck.analysis.risk.rank_nodes (default weights) over the report's figures."""
    from healthcheck.analysis.risk import DEFAULT_WEIGHTS as W

    order = [r.node for r in report.risks]
    assert order[:2] == ["gpu03", HOSTILE]  # failing now outranks everything else
    assert order[2] == "gpu07"  # then the flapping node
    assert set(order) == {"gpu03", HOSTILE, "gpu05", "gpu06", "gpu07"}  # nothing against the others: not listed
    by = {r.node: r for r in report.risks}
    # gpu03: fails gpu.row_remap now, one failing streak, one drain still open
    assert by["gpu03"].score == W["fail"] + W["failure"] + W["drain"]
    assert by["gpu03"].evidence[0].startswith("FAIL gpu.row_remap [gpu1]: row remap pending")
    assert "drained 1x, 1 h (still drained)" in by["gpu03"].evidence
    assert by[HOSTILE].score == W["fail"] + W["failure"] and by[HOSTILE].state == "failing"
    assert by["gpu07"].score == W["flapping"] + 3 * W["drain"]
    assert by["gpu07"].evidence == ["flapping: 3 drain/resume cycles", "drained 3x, 6 h"]
    assert by["gpu05"].score == 2 * W["outlier"]
    assert any(x.startswith("outlier busbw_gbps: 300 vs peer median") and "z=-" in x for x in by["gpu05"].evidence)
    assert "outlier temperature_c [gpu2]: 92 vs peer median 62 (z=20.23)" in by["gpu05"].evidence
    assert by["gpu06"].score == W["growth"]
    assert any(x.startswith("growth ecc_corrected_volatile [gpu2]: +") for x in by["gpu06"].evidence)
    # the past ib.port.state warn of gpu07 is not a current finding
    assert not any("ib.port.state" in x for r in report.risks for x in r.evidence)


def test_counter_growth_counts_resets(report):
    assert len(report.growth) == 1
    g = report.growth[0]
    # +10 per run for 20 runs (190), reset to 0 at run 20 (counted as growth from zero: 0), +10 x 19 more
    assert (g.node, g.component, g.metric, g.increase, g.last) == ("gpu06", "gpu2", "ecc_corrected_volatile",
                                                                   380.0, 190.0)
    hours = (g.last_at - g.first_at).total_seconds() / 3600
    assert g.rate_per_h == pytest.approx(380 / hours)
    assert report.growth_points is not None and len(report.growth_points) == 40


def test_distributions_mark_outliers_on_the_bad_side(report):
    d = {x.metric: x for x in report.distributions}
    assert set(d) == {"busbw_gbps", "temperature_c"}
    assert d["busbw_gbps"].count == 8 and d["busbw_gbps"].low_is_bad
    assert [(o["node"], o["component"]) for o in d["busbw_gbps"].outliers] == [("gpu05", "")]
    assert [(o["node"], o["component"], o["value"]) for o in d["temperature_c"].outliers] == [("gpu05", "gpu2", 92.0)]
    assert d["temperature_c"].count == 64


def test_drains_and_flapping(report):
    by = {d.node: d for d in report.drains}
    assert (by["gpu07"].drains, by["gpu07"].drained_hours, by["gpu07"].flapping, by["gpu07"].open) == (3, 6.0, True,
                                                                                                       False)
    assert (by["gpu03"].drains, by["gpu03"].open, by["gpu03"].drained_hours) == (1, True, 1.0)
    assert len(report.intervals) == 4


def test_findings_have_an_action_each(report):
    kinds = {(f.kind, f.node, f.subject) for f in report.findings}
    assert ("check", "gpu03", "gpu.row_remap") in kinds
    assert ("growth", "gpu06", "ecc_corrected_volatile") in kinds
    assert ("outlier", "gpu05", "temperature_c") in kinds
    assert all(f.action for f in report.findings)
    assert report.findings[0].status == "fail"


def test_json_is_plain_and_strict(report):
    data = json.loads(render_json(report))
    assert data["fleet"]["counts"]["failing"] == 1
    assert data["checks"][0]["check"] == "gpu.row_remap"
    assert data["checks"][0]["last_seen"].endswith("Z")
    assert data["drain_intervals"][0]["node"] in ("gpu03", "gpu07")
    assert "points" not in data["distributions"][0]


def test_window_excludes_older_rows():
    rep = build_report(make_frames(), NOW - pd.Timedelta(hours=47), NOW)
    assert rep.counts["runs"] == 8 * 8
    assert not any(d.node == "gpu07" for d in rep.drains)  # its drains were 3-5 days ago
    assert [c.check for c in rep.checks] == ["gpu.row_remap", "host.mounts"]


def test_node_classes_are_peer_groups():
    frames = make_frames()
    rep = build_report(frames, SINCE, NOW, node_class=lambda n: "fast" if n == "gpu05" else "std")
    d = {x.metric: x for x in rep.distributions}
    assert d["busbw_gbps"].outliers == []  # gpu05 alone in its class: not judged


def test_empty_history_gives_a_no_data_report():
    rep = build_report({}, SINCE, NOW)
    assert rep.empty and rep.fleet.total == 0
    assert rep.notes[0].startswith("No data")
    assert json.loads(render_json(rep))["empty"] is True


def test_missing_column_is_a_clear_error():
    frames = make_frames()
    frames["runs"] = frames["runs"].drop(columns=["status"])
    with pytest.raises(ValueError, match="runs frame lacks columns"):
        build_report(frames, SINCE, NOW)


@pytest.mark.parametrize("check,message,expected", [
    ("gpu.row_remap", "row remap pending, GPU reset required", "reset the GPU"),
    ("gpu.row_remap", "row remapping failure occurred (RMA)", "RMA the GPU"),
    ("ib.port.state", "port Down (InfiniBand)", "reseat/replace the cable or transceiver"),
    ("no.such.check", "x", "investigate"),
])
def test_recommendations(check, message, expected):
    assert recommend(check, message).startswith(expected)


def test_metric_classes():
    assert perf_metric("busbw_gbps") and low_is_bad("busbw_gbps")
    assert perf_metric("gemm_tflops") and low_is_bad("gemm_tflops")
    assert perf_metric("temperature_c") and not low_is_bad("temperature_c")
    assert not perf_metric("temp_tlimit_margin_c")
    assert counter_metric("ecc_corrected_volatile") and counter_metric("nvlink_crc_errors")
    assert counter_metric("symbol_error") and not counter_metric("temperature_c")


def test_figures_come_from_healthcheck_analysis(report):
    from healthcheck.report import render_html, render_markdown

    assert report.source == "healthcheck.analysis"
    assert "analyses: healthcheck.analysis" in render_html(report)
    assert "healthcheck.analysis" in render_markdown(report)
    assert json.loads(render_json(report))["source"] == "healthcheck.analysis"


def test_shared_heat_in_a_rack_is_one_facility_finding_and_drift_lines_are_findings():
    frames = make_frames()
    res = frames["results"]
    latest = res["started_at"].max()
    hot = pd.DataFrame([{**res.iloc[0].to_dict(), "run_id": f"hot{i}", "seq": 99, "node": node, "started_at": latest,
                         "check": "gpu.throttle", "component": "gpu2", "status": "fail",
                         "message": "hw_thermal_slowdown active"} for i, node in enumerate(("gpu01", "gpu02", "gpu03"))])
    frames = {**frames, "results": pd.concat([res, hot], ignore_index=True)}
    topology = {"rack": {"r01": "gpu[01-04]", "r02": "gpu[05-08]"}}
    rep = build_report(frames, SINCE, NOW, topology=topology, drift=["h100: driver 550.54.15 on 7 of 8 nodes; "
                                                                     "gpu05 runs 535.129.03"])
    facility = [f for f in rep.findings if f.kind == "facility"]
    assert len(facility) == 1 and facility[0].node == "rack r01" and facility[0].status == "fail"
    assert "3 of 4 nodes" in facility[0].detail and "cooling" in facility[0].action
    assert rep.findings[0].kind == "facility"  # first: it explains the node faults below it
    (drift,) = [f for f in rep.findings if f.kind == "drift"]
    assert "gpu05 runs 535.129.03" in drift.detail
    assert not [f for f in build_report(frames, SINCE, NOW).findings if f.kind in ("facility", "drift")]
    json.loads(render_json(rep))
