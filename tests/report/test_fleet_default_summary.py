"""The fleet ranking's inputs read from the database (``dbsummary.load_summary``: ROW_NUMBER / LEAD over the
window) equal the in-memory ones (``summarize_frames``), on SQLite and PostgreSQL, over every window of the
synthetic history (cut series, samples after the window, ties, nothing), also while an ingest is half merged;
the fleet ranking is the default of both, and the ``[fleet]`` settings reach it."""
from __future__ import annotations

import pandas as pd
import pytest

from healthcheck.analysis.fleetsettings import FleetSettings
from healthcheck.history.queries import load_frames
from healthcheck.report import build_report
from healthcheck.report.dbsummary import load_summary
from healthcheck.report.summary import summarize_frames
from tests.report import history as hist
from tests.report.test_dbsummary import engine, interrupted  # noqa: F401 - the fixtures

RECENT = ("perf_recent", "recent_runs", "mtbf_runs")


def _check_equal(eng, window: str, recent=None) -> tuple:
    since, now = hist.WINDOWS[window]
    db = load_summary(eng, since, now, recent=recent)
    frames = load_frames(eng, since=since)
    frames["runs"] = load_frames(eng, tables=("runs",))["runs"]  # every run: first seen in the whole history
    mem = summarize_frames(frames, since, now, recent=recent)
    for name in RECENT:
        pd.testing.assert_frame_equal(hist.plain(getattr(db, name)), hist.plain(getattr(mem, name)), check_dtype=False,
                                      obj=name)
    return db, mem


@pytest.mark.parametrize("window", sorted(hist.WINDOWS))
def test_the_ranking_inputs_from_sql_equal_the_in_memory_ones(engine, window):
    db, mem = _check_equal(engine, window)
    if window != "empty":
        assert len(db.perf_recent) and len(db.recent_runs) == 5 * len(hist.NODES)
        # the last 5 runs of each node, and no more than the last 25 samples of any series
        assert db.recent_runs.groupby("node").size().max() == 5
        assert db.perf_recent.groupby(["node", "check", "name"], dropna=False).size().max() <= 25 * 4
    a = build_report(db, *hist.WINDOWS[window])
    b = build_report(mem, *hist.WINDOWS[window])
    assert a.to_dict() == b.to_dict()


@pytest.mark.parametrize("window", ["30d", "middle"])
def test_other_n_and_a_half_merged_ingest(interrupted, window):
    db, _ = _check_equal(interrupted, window, recent=3)
    assert db.recent_runs.groupby("node").size().max() == 3


def test_recent_zero_keeps_the_old_ranking_and_bad_n_is_refused(engine):
    since, now = hist.WINDOWS["30d"]
    old = load_summary(engine, since, now, recent=0)
    assert old.perf_recent is None and old.mtbf_runs is None
    rep = build_report(old, since, now)
    assert rep.fleet_tables == {} and all(r.why == [] for r in rep.risks)
    for bad in (-1, 2.5, True, "5"):
        with pytest.raises(ValueError, match="recent must be an integer"):
            load_summary(engine, since, now, recent=bad)
        with pytest.raises(ValueError, match="recent must be an integer"):
            summarize_frames({}, since, now, recent=bad)


def test_the_fleet_ranking_is_the_default_and_its_settings_apply(engine):
    since, now = hist.WINDOWS["30d"]
    s = load_summary(engine, since, now)
    rep = build_report(s, since, now)
    assert rep.risks and all(r.why for r in rep.risks) and set(rep.fleet_tables) == {
        "regressions", "new-nodes", "mtbf-check", "mtbf-component", "versions", "drift"}
    by = {r.node: r for r in rep.risks}
    hot = [w for w in by["n05"].why if w["kind"] == "outlier" and w["metric"] == "temperature_c"]
    assert hot and hot[0]["component"] == "gpu2" and hot[0]["value"] > hot[0]["peer_median"] and hot[0]["runs"] == 5
    # weights: outliers weigh nothing -> n05's outlier rows score 0
    light = build_report(s, since, now, fleet=FleetSettings(weights={"outlier": 0.0}))
    assert all(w["points"] == 0 for w in {r.node: r for r in light.risks}.get("n05", by["n05"]).why
               if w["kind"] == "outlier")
    # k = n = 1: one outlier round is already persistent
    strict = build_report(s, since, now, fleet=FleetSettings(persist_k=1, persist_n=1))
    assert {r.node: r for r in strict.risks}["n05"].why[0]["runs"] == 1


def test_the_cli_takes_the_fleet_section_of_its_config(engine, tmp_path, monkeypatch):
    """``healthcheck report --config``: [fleet] persist_n sets the runs read per node and judged; a bad
    section is a usage error (exit 2) naming the key."""
    import json

    from click.testing import CliRunner

    from healthcheck.cli import report as cli_report

    if engine.dialect.name != "sqlite":
        pytest.skip("the CLI part needs only one backend")
    since, now = hist.WINDOWS["30d"]
    monkeypatch.setattr(cli_report, "datetime", type("D", (), {"now": staticmethod(lambda tz=None: now)}))
    seen = {}
    real = load_summary

    def spy(eng, s, n, recent=None):
        seen["recent"] = recent
        return real(eng, s, n, recent=recent)

    monkeypatch.setattr("healthcheck.report.dbsummary.load_summary", spy)
    cfg = tmp_path / "hc.toml"
    cfg.write_text("[fleet]\npersist_k = 1\npersist_n = 2\n")
    url = str(engine.url)
    res = CliRunner().invoke(cli_report.report, ["--db", url, "--config", str(cfg), "--since", since.isoformat(),
                                                 "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert seen["recent"] == 2
    risks = json.loads(res.stdout)["risks"]
    assert risks and max(w["runs"] or 0 for r in risks for w in r["why"]) == 2
    cfg.write_text("[fleet]\npersist_k = 4\npersist_n = 2\n")
    res = CliRunner().invoke(cli_report.report, ["--db", url, "--config", str(cfg), "--format", "json"])
    assert res.exit_code == 2 and "persist_k" in res.output


def test_report_progress_lines_when_asked_off_a_terminal(engine, monkeypatch):
    from click.testing import CliRunner

    from healthcheck.cli import report as cli_report

    if engine.dialect.name != "sqlite":
        pytest.skip("the CLI part needs only one backend")
    since, now = hist.WINDOWS["30d"]
    monkeypatch.setattr(cli_report, "datetime", type("D", (), {"now": staticmethod(lambda tz=None: now)}))
    args = ["--db", str(engine.url), "--since", since.isoformat(), "--format", "json"]
    res = CliRunner().invoke(cli_report.report, args + ["--progress"], catch_exceptions=False)
    assert res.exit_code == 0
    steps = [x for x in res.stderr.splitlines() if x.startswith("report: ")]
    total = len(cli_report.STEPS)
    assert steps[0] == f"report: 1/{total} load" and steps[-1] == f"report: {total}/{total} render"
    assert [int(x.split()[1].split("/")[0]) for x in steps] == list(range(1, total + 1))
    quiet = CliRunner().invoke(cli_report.report, args, catch_exceptions=False)
    assert quiet.exit_code == 0 and "report: " not in quiet.stderr and quiet.stdout.startswith("{")
