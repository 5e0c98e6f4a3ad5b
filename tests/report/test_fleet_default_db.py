"""The planted faults of a simulated fleet (benchmarks/fleet_sim.py: a slowly heating GPU, a node whose GEMM
dropped 5 %, a flapping InfiniBand port, a rack-wide PCIe downgrade) through the database path: the history
written as spool records, stored by the real ingest into SQLite, read back by ``dbsummary.load_summary`` (the
fleet ranking's inputs by SQL) and rendered; the planted nodes are the top of the rendered ranking, and the
ranking and the fleet tables equal those of the same history read the in-memory way."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from healthcheck.history.db import make_engine, resolve_url
from healthcheck.history.queries import load_frames
from healthcheck.report import build_report, render_json, render_markdown
from healthcheck.report.dbsummary import load_summary
from healthcheck.report.summary import summarize_frames

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
NODES = 256  # 8 racks of 32: every planted fault (the rack of x8 links is rack 2), 660,000 metric rows


def _module(name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses resolve their module by name
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _action_records(actions: pd.DataFrame) -> list[dict]:
    out = []
    for a in actions.itertuples(index=False):
        reason = None if not isinstance(a.reason, str) else a.reason
        out.append({"kind": "action", "record_id": a.record_id, "run_id": None, "node": a.node,
                    "time": a.time.isoformat().replace("+00:00", "Z"), "action": a.action, "reason": reason,
                    "job_id": None, "context": a.context, "why": None, "checks": []})
    return out


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    from healthcheck.history import migrations
    from healthcheck.history.ingest import ingest

    sim = _module("fleet_sim").simulate(nodes=NODES, days=90, seed=0)
    records = _module("bench_fleet")._records(sim.frames, sim.since) + _action_records(sim.frames["actions"])
    for rec in records:  # node-level results: no component (the frames hold NaN)
        for r in rec.get("results", []):
            if not isinstance(r["component"], str):
                r["component"] = None
    base = tmp_path_factory.mktemp("fleetdb")
    (base / "spool").mkdir()
    with open(base / "spool" / "records.jsonl", "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    engine = make_engine(resolve_url(f"sqlite:///{base / 'h.sqlite'}", env={}))
    migrations.require_current(engine, create=True)
    done = ingest([base / "spool"], engine)
    assert done.records == len(records)
    yield sim, engine
    engine.dispose()


@pytest.fixture(scope="module")
def from_db(stored):
    sim, engine = stored
    summary = load_summary(engine, sim.since, sim.now)
    assert summary.source == "rollups" and summary.perf_recent is not None
    return build_report(summary, sim.since, sim.now, gpu_model=sim.gpu_model, topology=sim.topology)


def test_the_planted_faults_top_the_rendered_report_from_the_database(stored, from_db):
    sim, _ = stored
    planted = sim.planted
    assert len(planted) == 35
    ranked = [r["node"] for r in json.loads(render_json(from_db))["risks"]]
    assert set(ranked[:len(planted)]) == planted
    scores = [r.score for r in from_db.risks]
    assert all(s < min(scores[:len(planted)]) / 2 for s in scores[len(planted):])
    # the Markdown's ranking table lists them first too, the rack's shared cause as one row
    md = render_markdown(from_db)
    table = md[md.index("## Nodes ranked by risk"):].split("\n")[4:8]
    from healthcheck.report.fold import fold

    assert {row.split(" | ")[1] for row in table} == {
        sim.truth["heating"][0], sim.truth["gemm_drop"][0], sim.truth["flapping_ib"][0],
        f"{fold(sim.truth['pcie_rack'])} (32 nodes, one cause)"}
    # and each is explained by a structured evidence row
    by = {r.node: r for r in from_db.risks}
    heat = by[sim.truth["heating"][0]].why
    assert any(w["kind"] == "floor" and w["metric"] == "temperature_c" and w["limit"] == 89 and w["hits"] >= 3
               for w in heat)
    gemm = by[sim.truth["gemm_drop"][0]].why
    assert any(w["kind"] == "regression" and w["metric"] == "gemm_tflops" and w["peer_median"] > w["value"]
               for w in gemm)


def test_the_database_and_the_frames_give_the_same_ranking_and_tables(stored, from_db):
    from healthcheck.analysis.fleetrank import REGRESSION_WINDOW

    sim, engine = stored
    from tests.report.history import plain

    frames = load_frames(engine, since=sim.since)
    sm = summarize_frames(frames, sim.since, sim.now)
    from healthcheck.history.recent import KEEP

    for n in (None, KEEP - REGRESSION_WINDOW + 1):  # the second asks for more than is kept: rows, whole window
        want = sm if n is None else summarize_frames(frames, sim.since, sim.now, recent=n)
        db = load_summary(engine, sim.since, sim.now, recent=n)
        for name in ("perf_recent", "recent_runs", "mtbf_runs"):
            pd.testing.assert_frame_equal(plain(getattr(db, name)), plain(getattr(want, name)), check_dtype=False,
                                          obj=name)
    mem = build_report(sm, sim.since, sim.now, gpu_model=sim.gpu_model, topology=sim.topology)
    a, b = from_db.to_dict(), mem.to_dict()
    assert [(r["node"], r["score"]) for r in a["risks"]] == [(r["node"], r["score"]) for r in b["risks"]]
    assert a["risks"] == b["risks"] and a["fleet_tables"] == b["fleet_tables"]


def test_the_fleet_tables_from_the_database(stored, from_db):
    sim, _ = stored
    t = from_db.fleet_tables
    regressed = {r["node"] for r in t["regressions"]}
    assert sim.truth["gemm_drop"][0] in regressed
    drop = [r for r in t["regressions"] if r["node"] == sim.truth["gemm_drop"][0]]
    assert all(-8 < r["change_pct"] < -3 and r["text"].startswith("gemm_tflops") and " since 2026-" in r["text"]
               for r in drop)
    assert {r["node"] for r in t["new-nodes"]} == set(sim.new_nodes)
    assert t["mtbf-check"] and all(r["mtbf_h"] > 0 and math.isclose(r["node_hours"] / r["failures"], r["mtbf_h"])
                                   for r in t["mtbf-check"])
    assert t["mtbf-component"] and all(r["key"].isalpha() and r["key"].islower() for r in t["mtbf-component"])
    assert t["versions"] == [] and t["drift"] == []  # the history database holds no versions
