"""The readiness report's Commissioning section: fabric results recorded by `fabric ... --spool` and fault
drill records (drill.NAME, detect_s/drain_s/requeue_s/resume_s/detect_runs), ingested into SQLite and
read both ways (dbsummary.load_summary and load_frames + summarize_frames): equal sections, the latest
fabric result per check with its deviations named, the drills' mean timings and "time to detect"."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from healthcheck.drill.model import DrillResult
from healthcheck.fabric.compare import CheckResult, Deviation, TierSummary
from healthcheck.fabric.runrecord import fabric_record, topology_findings
from healthcheck.core.model import Finding, Status
from healthcheck.report.commissioning import from_frames
from tests.report.history import write_spool

pytest.importorskip("sqlalchemy")

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
SINCE = NOW - timedelta(days=7)


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def drill_record(name: str, node: str, at: datetime, stages: dict, detect_runs: float, status: str = "pass") -> dict:
    metrics = dict(stages, detect_runs=detect_runs, lost_items=0.0)
    return {"kind": "run", "schema_version": 1, "run_id": f"{name}-{at:%d%H%M}", "node": node, "context": "drill",
            "job_id": "12", "started_at": _iso(at), "duration_s": 30.0, "status": status,
            "results": [{"check": f"drill.{name}", "status": status, "message": f"{name}: done", "component": None,
                         "metrics": metrics}], "config_hash": None, "tool_version": "test"}


def history_records() -> list[dict]:
    swapped = CheckResult([Deviation("swapped", "gpu01 mlx5_0 port 1 and gpu02 mlx5_0 port 1 are swapped", "leaf",
                                     "gpu01", "mlx5_0", 1, "leaf-a", 1)],
                          [TierSummary("leaf", 1, expected=8, found=6, misplaced=2)])
    clean = CheckResult([], [TierSummary("leaf", 1, expected=8, found=8)])
    degraded = CheckResult([Deviation("degraded_width", "gpu03 mlx5_1 port 1 trained at 2x, tier leaf is 4x", "leaf",
                                      "gpu03", "mlx5_1", 1, "leaf-b", 3)],
                           [TierSummary("leaf", 1, expected=8, found=8, degraded=1)])
    recs = [fabric_record(topology_findings(swapped), "admin1", _iso(NOW - timedelta(days=3)), 1.0, "fab-1"),
            fabric_record(topology_findings(clean), "admin1", _iso(NOW - timedelta(days=2)), 1.0, "fab-2"),
            fabric_record(topology_findings(degraded), "admin1", _iso(NOW - timedelta(days=1)), 1.0, "fab-3"),
            fabric_record([Finding("fabric.consistency", Status.FAIL, "driver: 535.1 on n2 (majority 550.54.15)",
                                   "driver"),
                           Finding("fabric.consistency", Status.PASS, "cuda: 12.4 on n[0-3]", "cuda")],
                          "admin1", _iso(NOW - timedelta(hours=5)), 0.2, "cons-1"),
            # outside the window: never shown
            fabric_record([Finding("fabric.node.p2p", Status.FAIL, "GPU3 <- GPU5 slow", "GPU3-GPU5")], "gpu07",
                          _iso(SINCE - timedelta(days=1)), 0.1, "old-1")]
    recs += [drill_record("failing-check", "node2", NOW - timedelta(hours=h),
                          {"detect_s": d, "drain_s": d + 0.05, "requeue_s": d + 0.15, "resume_s": 1.6}, 1.0)
             for h, d in ((10, 1.24), (8, 0.81), (6, 1.44))]
    recs += [drill_record("ctld-restart", "node3", NOW - timedelta(hours=4),
                          {"detect_s": 5.15, "drain_s": 6.17, "resume_s": 0.99}, 1.0),
             drill_record("node-death", "node4", NOW - timedelta(hours=3), {"detect_s": 18.5}, 2.0, status="fail")]
    return [dict(r, record_id=f"rec-{r['run_id']}") for r in recs]


@pytest.fixture
def engine(tmp_path):
    from healthcheck.history import migrations
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.ingest import ingest

    eng = make_engine(resolve_url(f"sqlite:///{tmp_path / 'h.sqlite'}", env={}))
    migrations.require_current(eng, create=True)
    report = ingest([write_spool(tmp_path / "spool", history_records())], eng)
    assert report.skipped == []
    yield eng
    eng.dispose()


def both_reports(engine):
    from healthcheck.history.queries import load_frames
    from healthcheck.report.build import build_report
    from healthcheck.report.dbsummary import load_summary
    from healthcheck.report.summary import summarize_frames

    db = build_report(load_summary(engine, SINCE, NOW), SINCE, NOW)
    mem = build_report(summarize_frames(load_frames(engine, since=SINCE), SINCE, NOW), SINCE, NOW)
    return db, mem


def test_both_paths_give_the_same_section_with_deviations_and_drill_means(engine):
    db, mem = both_reports(engine)
    assert db.commissioning == mem.commissioning
    c = db.commissioning
    fabric = {(f.check, f.node): f for f in c.fabric}
    assert ("fabric.node.p2p", "gpu07") not in fabric  # outside the window
    topo = fabric[("fabric.topology", "admin1")]
    assert topo.status == "fail" and topo.started_at == _iso(NOW - timedelta(days=1))  # the latest, not the swap
    assert [(d["component"], d["message"][:14]) for d in topo.deviations] == [("gpu03/mlx5_1/1", "degraded_width")]
    tier = fabric[("fabric.topology.tier", "admin1")]
    assert tier.status == "fail" and "1 degraded" in tier.deviations[0]["message"]
    cons = fabric[("fabric.consistency", "admin1")]
    assert cons.results == 2 and [d["component"] for d in cons.deviations] == ["driver"]
    drills = {d.drill: d for d in c.drills}
    fc = drills["failing-check"]
    assert fc.runs == 3 and fc.failed == 0 and fc.mean_s["detect_s"] == pytest.approx(1.163, abs=1e-3)
    assert fc.mean_s["resume_s"] == 1.6 and fc.reached["drain_s"] == 3
    assert fc.detect_text == "time to detect: 1 prolog"
    assert drills["ctld-restart"].detect_text == "time to detect: 1 HealthCheckProgram run"
    assert "requeue_s" not in drills["ctld-restart"].mean_s
    death = drills["node-death"]
    assert death.failed == 1 and death.detect_text == "time to detect: 2 prologs"


def test_the_section_is_rendered_in_html_markdown_and_json(engine):
    from healthcheck.report.html import render_html
    from healthcheck.report.markdown import render_markdown

    db, _mem = both_reports(engine)
    page = render_html(db, plots=False)
    section = page[page.index('<h2 id="commissioning">'):]
    assert 'href="#commissioning"' in page
    assert "gpu03/mlx5_1/1" in section and "degraded_width" in section and "time to detect: 1 prolog" in section
    assert "1.16" in section and "HealthCheckProgram" in section
    md = render_markdown(db)
    part = md[md.index("## Commissioning"):]
    assert "| failing-check |" in part and "1.16" in part and "driver: 535.1 on n2" in part
    data = db.to_dict()["commissioning"]
    assert data["drills"][0]["detect_text"].startswith("time to detect:")
    assert {f["check"] for f in data["fabric"]} >= {"fabric.topology", "fabric.consistency"}


def test_a_window_without_commissioning_rows_says_so(tmp_path):
    import pandas as pd

    from healthcheck.report.build import build_report
    from healthcheck.report.html import render_html
    from healthcheck.report.summary import empty_frame

    assert from_frames(None, None).empty and from_frames(empty_frame("results"), empty_frame("metrics")).empty
    runs = pd.DataFrame({"run_id": ["r1"], "node": ["n1"], "context": ["prolog"], "job_id": [None],
                         "started_at": [pd.Timestamp(NOW - timedelta(hours=1))], "duration_s": [0.1],
                         "status": ["pass"]})
    rep = build_report({"runs": runs}, SINCE, NOW)
    assert rep.commissioning is not None and rep.commissioning.empty
    assert "No fabric result or fault drill recorded in the window." in render_html(rep, plots=False)


def test_real_drill_result_records_feed_the_section():
    """The drill's own record (DrillResult.to_record), not a hand-made one, through from_frames."""
    import pandas as pd

    rec = DrillResult("hung-gpu", "node1", _iso(NOW), 12.0, "5", {"detect_s": 2.04, "drain_s": 2.07},
                      {"detect_runs": 1.0, "hook_s": 1.52}, expected=("detect_s", "drain_s")).to_record(run_id="r-hung")
    [result] = rec["results"]
    res = pd.DataFrame([{"run_id": "r-hung", "node": "node1", "started_at": pd.Timestamp(NOW),
                         "check": result["check"], "component": None, "status": result["status"],
                         "message": result["message"]}])
    met = pd.DataFrame([{"run_id": "r-hung", "node": "node1", "started_at": pd.Timestamp(NOW),
                         "check": result["check"], "component": None, "name": k, "value": v}
                        for k, v in result["metrics"].items()])
    [d] = from_frames(res, met).drills
    assert d.drill == "hung-gpu" and d.runs == 1 and d.failed == 0
    assert d.mean_s == {"detect_s": 2.04, "drain_s": 2.07} and d.detect_text == "time to detect: 1 prolog"
