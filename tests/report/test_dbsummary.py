"""The report read from the database through its rollups (``dbsummary.load_summary``) against the report
built the in-memory way (every row through ``load_frames``, then pandas): equal summaries, field by field,
and equal reports, section by section, over windows that cut series, hold samples after their end, or
hold nothing; on SQLite and on a real PostgreSQL server."""
from __future__ import annotations

import json
import os
import time

import pandas as pd
import pytest
from sqlalchemy import text

from healthcheck.history.db import make_engine, resolve_url
from healthcheck.history.queries import load_frames
from healthcheck.report import build_report, render_html, render_json, render_markdown
from healthcheck.report.dbsummary import RollupsUnavailable, load_summary
from healthcheck.report.summary import by_time, summarize_frames
from tests.report import history as hist

FIELDS = ("latest_runs", "reliability", "flagged_results", "latest_results", "counter_samples", "perf_latest",
          "actions", "node_days")


def _engine(request, base):
    if request.param == "sqlite":
        return make_engine(resolve_url(f"sqlite:///{base / 'h.sqlite'}", env={}))
    server = request.getfixturevalue("postgres_server")
    name = f"rep{os.getpid()}_{time.monotonic_ns() % 10**9}"
    server.admin(f"CREATE DATABASE {name}")
    return make_engine(resolve_url(server.url(name), env={"HEALTHCHECK_DB_PASSWORD": server.password}))


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("dbsummary")
    eng = _engine(request, base)
    hist.store(eng, base / "spool", batch_rows=2_000)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module", params=BACKENDS)
def interrupted(request, tmp_path_factory):
    """A history whose ingest was killed part-way: the runs of its last batches are stored, their metrics
    not merged into the rollups yet (rollup_pending); earlier ones were merged (a flush every ~2,000 rows)."""
    from healthcheck.history import ingest

    base = tmp_path_factory.mktemp("interrupted")
    eng = _engine(request, base)

    def kill(report):
        if report.batches == 14:
            raise RuntimeError("killed")

    with pytest.MonkeyPatch.context() as mp, pytest.raises(RuntimeError):
        mp.setattr(ingest, "FLUSH_METRIC_ROWS", 2_000)
        hist.store(eng, base / "spool", batch_rows=500, shuffle=5, on_batch=kill)
    yield eng
    eng.dispose()


def _both(engine, window: str):
    since, now = hist.WINDOWS[window]
    db = load_summary(engine, since, now)
    frames = load_frames(engine, since=since)
    # every run, before the window too: "first seen" is the whole history's (new nodes), as the database says
    frames["runs"] = load_frames(engine, tables=("runs",))["runs"]
    mem = summarize_frames(frames, since, now)
    return db, mem


@pytest.mark.parametrize("window", sorted(hist.WINDOWS))
def test_summary_from_rollups_equals_the_in_memory_one(engine, window):
    db, mem = _both(engine, window)
    assert (db.source, mem.source) == ("rollups", "frames")
    assert db.counts == mem.counts
    for name in FIELDS:
        pd.testing.assert_frame_equal(hist.plain(getattr(db, name)), hist.plain(getattr(mem, name)), check_dtype=False,
                                      obj=name)


@pytest.mark.parametrize("window", sorted(hist.WINDOWS))
def test_mtbf_runs_from_the_database_are_the_window_runs_pandas_keeps(engine, window):
    """The MTBF table's runs (PostgreSQL: index seeks per flagged run and per node; SQLite: window
    functions) equal ``summary.mtbf_runs`` over the window's runs and results: the flagged runs, the run of
    the same node and context before each, each node's first run."""
    from healthcheck.report.summary import mtbf_runs

    since, now = hist.WINDOWS[window]
    db = load_summary(engine, since, now)
    frames = load_frames(engine, since=since)
    runs = frames["runs"][frames["runs"]["started_at"] <= pd.Timestamp(now)]
    res = frames["results"][frames["results"]["started_at"] <= pd.Timestamp(now)]
    truth = mtbf_runs(by_time(runs), res)
    assert len(db.mtbf_runs) == len(truth) and (len(truth) > len(set(truth["node"])) or window == "empty")
    pd.testing.assert_frame_equal(hist.plain(db.mtbf_runs), hist.plain(truth), check_dtype=False)


@pytest.mark.parametrize("window", sorted(hist.WINDOWS))
def test_report_sections_are_the_same_either_way(engine, window):
    since, now = hist.WINDOWS[window]
    db, mem = _both(engine, window)
    a = build_report(db, since, now, node_class=lambda n: "odd" if int(n[1:]) % 2 else "even")
    b = build_report(mem, since, now, node_class=lambda n: "odd" if int(n[1:]) % 2 else "even")
    da, dbb = a.to_dict(), b.to_dict()
    assert da.keys() == dbb.keys()
    for section in da:
        assert da[section] == dbb[section], section
    for x, y in zip(a.distributions, b.distributions):
        pd.testing.assert_frame_equal(hist.plain(x.points), hist.plain(y.points), check_dtype=False)
    pd.testing.assert_frame_equal(hist.plain(a.growth_points), hist.plain(b.growth_points), check_dtype=False)
    assert render_markdown(a) == render_markdown(b)
    assert render_html(a, plots=False) == render_html(b, plots=False)
    assert render_json(a) == render_json(b)


@pytest.mark.parametrize("window", sorted(hist.WINDOWS))
def test_runs_not_merged_into_the_rollups_yet_are_counted_exactly(interrupted, window):
    from healthcheck.history import rollups

    with interrupted.connect() as conn:
        assert rollups.has_pending(conn) and conn.execute(text("SELECT COUNT(*) FROM metric_series")).scalar()
    db, mem = _both(interrupted, window)
    assert db.counts == mem.counts
    for name in FIELDS:
        pd.testing.assert_frame_equal(hist.plain(getattr(db, name)), hist.plain(getattr(mem, name)), check_dtype=False,
                                      obj=name)


def test_the_report_from_the_database_finds_the_faults(engine):
    since, now = hist.WINDOWS["30d"]
    rep = build_report(load_summary(engine, since, now), since, now)
    runs = len(hist.NODES) * hist.RUNS
    assert rep.counts["runs"] == runs and rep.counts["actions"] == 9
    assert rep.counts["metrics"] > 10 * runs
    assert rep.fleet.nodes["drained_ours"] == ["n01"]
    assert [c.check for c in rep.checks][:2] == ["gpu.row_remap", "host.mounts"]
    growth = {(g.node, g.component, g.metric): g for g in rep.growth}
    assert growth[("n06", "gpu2", "ecc_corrected_volatile")].increase == 460.0  # 19 x 10 + 27 x 10, reset to 0
    assert growth[("n03", "gpu0", "ecc_corrected_volatile")].last == 100.0
    assert ("n08", "mlx5_0/1", "symbol_error") in growth
    assert ("n07", "gpu1", "ecc_corrected_volatile") in growth  # 0 -> 5 -> 0 -> 0: grew by 5
    assert ("n02", "gpu3", "ecc_corrected_volatile") not in growth  # its 7 comes after the window
    dist = {d.metric: d for d in rep.distributions}
    assert [o["node"] for o in dist["busbw_gbps"].outliers] == ["n05"]
    assert [(o["node"], o["component"]) for o in dist["temperature_c"].outliers] == [("n05", "gpu2")]
    assert dist["gemm_tflops"].count == len(hist.NODES)  # None and "" are one (node-level) component
    by = {r.node: r for r in rep.risks}
    assert "failed 1x (failing streaks of runs)" in by["n08"].evidence  # the fleet ranking: heaviest first
    assert any(x.startswith("ERROR gpu.xid") for x in by["n04"].evidence)


def test_windows_that_end_before_the_data_do(engine):
    since, now = hist.WINDOWS["middle"]
    s = load_summary(engine, since, now)
    assert s.perf_latest["started_at"].max() <= now  # not the series' later samples from the rollup
    assert set(s.counter_samples["node"]) == {"n06", "n07", "n08"}  # n03 is constant by then
    future = load_summary(engine, *hist.WINDOWS["with-future"])
    assert "n02" in set(future.counter_samples["node"])  # its counter moved after NOW
    empty = load_summary(engine, *hist.WINDOWS["empty"])
    assert empty.counts == {"runs": 0, "results": 0, "metrics": 0, "actions": 0}


def test_the_reduced_inputs_give_what_the_full_frames_give(engine):
    """The summary's reductions against the analyses run the old way, over every row."""
    from healthcheck.analysis import availability
    from healthcheck.report import inputs

    since, now = hist.WINDOWS["30d"]
    frames = {k: f[f[t] <= now] for (k, f), t in zip(load_frames(engine, since=since).items(),
                                                     ("started_at", "started_at", "started_at", "time"))}
    s = load_summary(engine, since, now)
    full = inputs.growth(frames["metrics"])
    moved = full[(full["increase"] > 0) | (full["resets"] > 0)]
    pd.testing.assert_frame_equal(hist.plain(inputs.growth(s.counter_samples)), hist.plain(moved), check_dtype=False)
    peer = lambda n: "all"  # noqa: E731
    pd.testing.assert_frame_equal(hist.plain(inputs.perf_outliers(s.perf_latest, peer)),
                                  hist.plain(inputs.perf_outliers(frames["metrics"], peer)), check_dtype=False)
    pd.testing.assert_frame_equal(hist.plain(s.reliability),
                                  hist.plain(availability.reliability(frames["runs"], now=now)), check_dtype=False)


def test_without_rollups_the_cli_reads_every_row_and_says_so(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from sqlalchemy import delete

    from healthcheck.cli import report as cli_report
    from healthcheck.history.schema import rollup_state

    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    eng = make_engine(resolve_url(url, env={}))
    hist.store(eng, tmp_path / "spool")
    with eng.begin() as conn:
        conn.execute(delete(rollup_state))
    since, now = hist.WINDOWS["47h"]
    with pytest.raises(RollupsUnavailable, match="rebuild-rollups"):
        load_summary(eng, since, now)
    res = CliRunner().invoke(cli_report.report, ["--db", url, "--since", "2026-05-29T13:00:00Z", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert any("healthcheck db rebuild-rollups" in n for n in data["notes"])
    assert data["fleet"]["nodes"]["drained_ours"] == ["n01"]
    eng.dispose()


def test_a_summary_of_another_window_is_refused(engine):
    since, now = hist.WINDOWS["47h"]
    with pytest.raises(ValueError, match="the summary covers"):
        build_report(load_summary(engine, since, now), since - pd.Timedelta(hours=1), now)


def test_a_database_of_another_schema_is_refused(tmp_path):
    from click.testing import CliRunner

    from healthcheck.cli import report as cli_report

    res = CliRunner().invoke(cli_report.report, ["--db", f"sqlite:///{tmp_path / 'none.sqlite'}"])
    # exit 6: the history is unavailable until it is upgraded
    assert res.exit_code == 6 and "healthcheck db upgrade" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("window", sorted(hist.WINDOWS))
def test_first_seen_is_the_whole_historys_either_way(engine, window):
    """"New node" means first seen in the whole history, not first seen in the report's window: the database
    and the frames (holding every run) give each node's first run ever, before the window too."""
    since, now = hist.WINDOWS[window]
    db, mem = _both(engine, window)
    runs = load_frames(engine, tables=("runs",))["runs"]
    runs = runs[runs["started_at"] <= now]
    truth = runs.groupby(runs["node"].astype(str))["started_at"].min().sort_index()
    assert list(db.first_seen.index) == list(truth.index) == list(mem.first_seen.index)
    assert [t.value for t in pd.to_datetime(db.first_seen, utc=True).dt.as_unit("us")] == \
        [t.value for t in truth.dt.as_unit("us")] == [t.value for t in mem.first_seen.dt.as_unit("us")]


def test_postgres_reads_the_recent_samples_meanwhile_in_the_same_snapshot(engine, monkeypatch):
    """PostgreSQL: the recent samples are read on a second connection in the first one's exported snapshot
    (report/dbsummary.py ``_read_ahead``): a run stored after the report's transaction began is seen by
    neither connection, and the summary equals the one read in line (no second connection)."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite reads in line: one connection")
    from datetime import timedelta

    from healthcheck.history.ingest import ingest
    from healthcheck.report import dbsummary

    since, now = hist.WINDOWS["30d"]
    late = dict(hist.run_records()[-1], record_id="late-run", run_id="late".ljust(32, "0"),
                started_at=hist._iso(now - timedelta(minutes=1)))
    late["results"] = [dict(r, metrics={"temperature_c": 99.0}) for r in late["results"][:1]]
    import threading

    started, committed = [], threading.Event()
    real, real_read = dbsummary._Reader._read_ahead, dbsummary._Reader._recent_rows

    def ahead_then_ingest(self):
        got = real(self)  # the snapshot is exported; now another ingest commits a new run of n08
        if not started:
            started.append(True)
            ingest([hist.write_spool(_late_dir(), [late])], engine)
        committed.set()
        return got

    def read_after_the_commit(self, names, long_, n):
        assert committed.wait(60)
        return real_read(self, names, long_, n)

    monkeypatch.setattr(dbsummary._Reader, "_read_ahead", ahead_then_ingest)
    monkeypatch.setattr(dbsummary._Reader, "_recent_rows", read_after_the_commit)
    meanwhile = load_summary(engine, since, now)
    assert started and not (meanwhile.perf_recent["value"] == 99.0).any()
    assert (load_summary(engine, since, now).perf_recent["value"] == 99.0).any()  # a new snapshot sees it
    monkeypatch.setattr(dbsummary._Reader, "_read_ahead", lambda self: {})
    with engine.begin() as conn:  # back to the history the other tests share
        conn.execute(text("DELETE FROM runs WHERE run_id = :r"), {"r": late["run_id"]})
    from healthcheck.history import rollups

    rollups.rebuild(engine)  # rows deleted by hand: the rollups are rebuilt (history/rollups.py)
    in_line = load_summary(engine, since, now)
    for name in ("perf_recent", "recent_runs"):
        pd.testing.assert_frame_equal(hist.plain(getattr(meanwhile, name)), hist.plain(getattr(in_line, name)),
                                      check_dtype=False, obj=name)


def _late_dir():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="late-spool-"))


def test_a_server_that_shares_no_snapshot_reads_in_line(engine, monkeypatch):
    """PostgreSQL: where the snapshot cannot be exported (a standby in recovery, a pooler), the recent
    samples are read on the report's own connection: the refusal, behind a savepoint, does not abort the
    report's transaction, and the summary is the same."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite reads in line: one connection")
    from healthcheck.report import dbsummary

    since, now = hist.WINDOWS["30d"]
    shared = load_summary(engine, since, now)
    monkeypatch.setattr(dbsummary, "EXPORT_SNAPSHOT", "SELECT no_such_function_here()")
    alone = load_summary(engine, since, now)
    for name in ("perf_recent", "recent_runs", "latest_results"):
        pd.testing.assert_frame_equal(hist.plain(getattr(alone, name)), hist.plain(getattr(shared, name)),
                                      check_dtype=False, obj=name)


def _in_line(engine, monkeypatch, since, now):
    """The summary read on one connection (no read-ahead), every field read before it returns."""
    from healthcheck.report import dbsummary

    with monkeypatch.context() as mp:
        mp.setattr(dbsummary._Reader, "_read_ahead", lambda self: {})
        summary = load_summary(engine, since, now)
    assert not summary.pending
    return summary


def test_the_fields_the_report_needs_last_are_read_while_it_is_built(engine, monkeypatch):
    """PostgreSQL: the fleet ranking's inputs, the fleet-state days, the MTBF runs and first seen
    (``summary.DEFERRABLE``) are still being read on the second connection when ``load_summary`` returns, so
    they overlap the report's build; read then, in the snapshot the report's transaction exported even though
    that transaction has ended (a run of a new node committed meanwhile is in none of them), and equal to the
    same fields read in line."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite reads in line: one connection")
    import threading
    from datetime import timedelta

    from healthcheck.history import rollups
    from healthcheck.history.ingest import ingest
    from healthcheck.report import dbsummary

    since, now = hist.WINDOWS["30d"]
    in_line = _in_line(engine, monkeypatch, since, now)
    release, where = threading.Event(), []
    real_days = dbsummary._Reader._node_days

    def days_when_released(self):
        where.append(threading.current_thread().name)
        assert release.wait(60)
        return real_days(self)

    monkeypatch.setattr(dbsummary._Reader, "_node_days", days_when_released)
    summary = load_summary(engine, since, now)  # returns while the days wait to be released
    # each node's last runs are read on the report's connection: only the samples are still being read
    assert summary.pending == {"perf_recent", "node_days", "mtbf_runs", "first_seen"}
    late = dict(hist.run_records()[-1], record_id="late-node-run", run_id="latenode".ljust(32, "0"),
                node="late-node", started_at=hist._iso(now - timedelta(minutes=1)))
    ingest([hist.write_spool(_late_dir(), [late])], engine)  # committed after the report's transaction ended
    try:
        release.set()
        fields = ("perf_recent", "recent_runs", "node_days", "mtbf_runs", "first_seen")
        got = {name: getattr(summary, name) for name in fields}
        assert where == ["report-read-ahead"] and not summary.pending
        assert "late-node" not in set(got["perf_recent"]["node"].astype(str)) | set(got["recent_runs"]["node"])
        for name in ("perf_recent", "recent_runs"):
            pd.testing.assert_frame_equal(hist.plain(got[name]), hist.plain(getattr(in_line, name)), check_dtype=False)
        assert "late-node" in set(_in_line(engine, monkeypatch, since, now).node_days["node"])  # it is stored
        pd.testing.assert_frame_equal(hist.plain(got["node_days"]), hist.plain(in_line.node_days), check_dtype=False)
        pd.testing.assert_frame_equal(hist.plain(got["mtbf_runs"]), hist.plain(in_line.mtbf_runs), check_dtype=False)
        pd.testing.assert_series_equal(got["first_seen"], in_line.first_seen, check_dtype=False)
    finally:
        release.set()
        with engine.begin() as conn:  # back to the history the other tests share
            conn.execute(text("DELETE FROM runs WHERE run_id = :r"), {"r": late["run_id"]})
        rollups.rebuild(engine)


def test_a_late_field_whose_read_failed_raises_a_history_error_each_time_it_is_read(engine, monkeypatch):
    """PostgreSQL: a read that fails on the second connection after ``load_summary`` returned is the same
    redacted HistoryError as any other read's, raised where the field is read, and again at the next read
    (never a silent None); what was read before it is unaffected."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite reads in line: one connection")
    from sqlalchemy.exc import OperationalError

    from healthcheck.history.db import HistoryError
    from healthcheck.report import dbsummary

    def fails(self):
        raise OperationalError("SELECT ...", {}, Exception("server closed the connection unexpectedly"))

    since, now = hist.WINDOWS["30d"]
    monkeypatch.setattr(dbsummary._Reader, "_mtbf_runs", fails)
    summary = load_summary(engine, since, now)
    assert len(summary.node_days) and len(summary.perf_recent)
    for _ in range(2):
        with pytest.raises(HistoryError, match="server closed the connection"):
            summary.mtbf_runs
    assert "mtbf_runs" in summary.pending


def test_a_read_asked_for_before_the_second_connection_reaches_it_is_still_handed_over(engine, monkeypatch):
    """PostgreSQL: the report asks for a read-ahead result (the kept samples) before the second connection has
    read it; the second connection must still deliver it (it once looked the read up in the dict the report
    had just popped it from, died on a KeyError, and the report waited forever), and the fields read while
    the report is built too."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite reads in line: one connection")
    import threading

    from healthcheck.report import dbsummary

    since, now = hist.WINDOWS["30d"]
    asked = threading.Event()
    real_later, real_rows = dbsummary._Reader._later, dbsummary._Reader._recent_rows

    def later(self, name, read):
        got = real_later(self, name, read)
        if name == "recent_samples":
            asked.set()  # taken by the report while the other connection has not read the samples yet
        return got

    def slow_rows(self, names, long_, n):
        assert asked.wait(60)
        return real_rows(self, names, long_, n)

    monkeypatch.setattr(dbsummary._Reader, "_later", later)
    monkeypatch.setattr(dbsummary._Reader, "_recent_rows", slow_rows)
    out: list = []
    reader = threading.Thread(target=lambda: out.append(load_summary(engine, since, now).settle()), daemon=True)
    reader.start()
    reader.join(120)
    assert not reader.is_alive(), "the report waits for a read the second connection never delivers"
    assert asked.is_set() and out and len(out[0].node_days)
    monkeypatch.undo()
    alone = load_summary(engine, since, now)
    pd.testing.assert_frame_equal(hist.plain(out[0].perf_recent), hist.plain(alone.perf_recent), check_dtype=False)


def test_postgres_reads_without_parallel_workers_or_jit_and_only_in_its_own_transactions(engine, monkeypatch):
    """PostgreSQL: both of the report's connections read with no parallel workers, no JIT and 64 MB to group
    in (SET LOCAL in their transactions, ``dbsummary._plain_plans``); a connection taken from the same engine
    afterwards has the server's defaults again."""
    if engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL settings")
    from healthcheck.report import dbsummary

    def settings(conn):
        return tuple(conn.exec_driver_sql("SELECT current_setting('max_parallel_workers_per_gather'), "
                                          "current_setting('jit'), current_setting('work_mem')").one())

    with engine.connect() as conn:
        defaults = settings(conn)
    if defaults == ("0", "off", "64MB"):
        pytest.skip("this server's defaults are the report's settings: nothing to tell apart")
    seen = {}
    real_counts, real_days = dbsummary._Reader._counts, dbsummary._Reader._node_days

    def counts(self):
        seen["report"] = settings(self.conn)
        return real_counts(self)

    def node_days(self):
        seen["other"] = settings(self.conn)
        return real_days(self)

    monkeypatch.setattr(dbsummary._Reader, "_counts", counts)
    monkeypatch.setattr(dbsummary._Reader, "_node_days", node_days)
    since, now = hist.WINDOWS["30d"]
    summary = load_summary(engine, since, now)
    summary.settle()
    assert seen == {"report": ("0", "off", "64MB"), "other": ("0", "off", "64MB")}
    with engine.connect() as conn:
        assert settings(conn) == defaults


def test_postgres_walks_the_nodes_once_per_connection(engine, monkeypatch):
    """PostgreSQL: every node of the history is found by one loose index scan per connection and passed to
    the reads that need it (the latest runs, the onsets, the last runs, the MTBF runs, first seen), not
    walked again by each (the summary equals the in-memory one: the tests above)."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite's planner skips through the index itself")
    from sqlalchemy import event

    walks = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if "nodes_walk" in statement:
            walks.append(id(conn))

    since, now = hist.WINDOWS["30d"]
    event.listen(engine, "before_cursor_execute", count)
    try:
        db = load_summary(engine, since, now)
        db.settle()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert 1 <= len(walks) <= 2 and len(set(walks)) == len(walks)  # one per connection that needs the nodes
    assert len(db.first_seen) and len(db.latest_runs) and len(db.recent_runs)


def test_text_arrays_reach_the_server_as_the_same_strings(engine):
    """``_text_array``: strings with quotes, backslashes, commas, braces, spaces and none at all arrive as
    themselves, in order (PostgreSQL's array literal, written in one pass)."""
    if engine.dialect.name == "sqlite":
        pytest.skip("PostgreSQL arrays")
    from sqlalchemy import func, select

    from healthcheck.report.dbsummary import _text_array

    values = ['gpu001', 'a"b', 'back\\slash', 'x,y', '{z}', ' sp ', '', 'NULL', 'é']
    with engine.connect() as conn:
        assert list(conn.execute(select(func.unnest(_text_array(iter(values))))).scalars()) == values
        assert conn.execute(select(func.cardinality(_text_array([])))).scalar() == 0
