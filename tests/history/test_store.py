"""The store against SQLite and a real PostgreSQL: schema, idempotent ingest, bad input, queries."""
from __future__ import annotations

import csv
import json
from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select, text

from healthcheck.history import migrations
from healthcheck.history.db import HistoryError, SchemaTooNew, SchemaTooOld
from healthcheck.history.ingest import ingest
from healthcheck.history.queries import load_frames, show, export, parse_since
from healthcheck.history.schema import actions, metrics, results, runs
from tests.history.conftest import migrate_to
from tests.history.recs import T0, action_record, run_record, write_spool


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (runs, results, metrics, actions)}


def test_upgrade_creates_schema_and_is_idempotent(store):
    eng = store.engine()
    assert migrations.status(eng).state == "empty"
    with pytest.raises(SchemaTooOld, match="db upgrade"):
        migrations.require_current(eng)
    migrations.upgrade(eng)
    assert migrations.status(eng).state == "current"
    assert migrations.upgrade(eng).state == "current"  # second time: nothing to do
    assert counts(eng) == {"runs": 0, "results": 0, "metrics": 0, "actions": 0}


def test_newer_schema_is_refused_and_nothing_written(engine, tmp_path):
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    write_spool(tmp_path / "sp", [run_record("gpu01", 1)])
    for call in (lambda: migrations.upgrade(engine), lambda: migrations.require_current(engine, create=True)):
        with pytest.raises(SchemaTooNew, match="newer than this healthcheck"):
            call()
    assert migrations.status(engine).describe().startswith("schema at 9999_future")


def test_ingest_stores_every_row_and_reingest_is_a_noop(engine, tmp_path):
    recs = [run_record("gpu01", i, status="fail" if i == 4 else "pass") for i in range(5)]
    write_spool(tmp_path / "sp", recs + [action_record("gpu01", 4)])
    first = ingest([tmp_path / "sp"], engine)
    assert (first.runs, first.results, first.metrics, first.actions) == (5, 50, 5 * 17, 1)
    assert first.skipped == [] and first.duplicates == 0
    before = counts(engine)
    assert before == {"runs": 5, "results": 50, "metrics": 85, "actions": 1}
    again = ingest([tmp_path / "sp"], engine)
    assert (again.runs, again.results, again.actions, again.duplicates) == (0, 0, 0, 6)
    assert counts(engine) == before
    with engine.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == recs[4]["run_id"])).one()
        assert row.status == "fail" and row.node == "gpu01" and row.job_id == "1004"
        assert row.started_at == datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
        temp = conn.execute(select(metrics.c.value, metrics.c.unit).where(
            metrics.c.run_id == recs[0]["run_id"], metrics.c.component == "GPU7",
            metrics.c.name == "temperature_c")).one()
        assert tuple(temp) == (48.0, "C")


def test_crash_mid_ingest_resumes_without_loss_or_duplicate(engine, tmp_path):
    write_spool(tmp_path / "sp", [run_record("gpu02", i) for i in range(40)])

    class Crash(Exception):
        pass

    def crash_after_two(report):
        if report.batches == 2:
            raise Crash

    with pytest.raises(Crash):
        ingest([tmp_path / "sp"], engine, batch_rows=100, on_batch=crash_after_two)
    partial = counts(engine)
    assert 0 < partial["runs"] < 40
    assert partial["results"] == partial["runs"] * 10  # whole runs only: a batch is one transaction
    done = ingest([tmp_path / "sp"], engine, batch_rows=100)
    assert done.runs == 40 - partial["runs"]
    assert counts(engine) == {"runs": 40, "results": 400, "metrics": 40 * 17, "actions": 0}


def test_shared_directory_of_many_nodes_spools(engine, tmp_path):
    shared = tmp_path / "shared"
    for n in range(1, 4):
        write_spool(shared / "rack1" / f"gpu0{n}", [run_record(f"gpu0{n}", i) for i in range(3)])
    # a node's rotated file (records.jsonl.1) alone is a spool too
    write_spool(shared / "rack2" / "gpu09", [run_record("gpu09", 0)])
    (shared / "rack2" / "gpu09" / "records.jsonl").rename(shared / "rack2" / "gpu09" / "records.jsonl.1")
    (shared / "README").write_text("not a spool\n")
    report = ingest([shared], engine)
    assert len(report.spools) == 4 and report.runs == 10
    with engine.connect() as conn:
        nodes = sorted(conn.execute(select(runs.c.node).distinct()).scalars())
    assert nodes == ["gpu01", "gpu02", "gpu03", "gpu09"]


def test_overlapping_spools_in_one_call_store_each_run_once(engine, tmp_path):
    recs = [run_record("gpu05", i) for i in range(6)]
    write_spool(tmp_path / "a", recs[:4])
    write_spool(tmp_path / "b", recs[2:])
    report = ingest([tmp_path / "a", tmp_path / "b"], engine)
    assert report.runs == 6 and report.duplicates == 2
    assert counts(engine)["runs"] == 6


def test_bad_input_is_skipped_with_reasons_and_stored_rows_are_unharmed(engine, tmp_path):
    write_spool(tmp_path / "good", [run_record("gpu01", i) for i in range(3)])
    ingest([tmp_path / "good"], engine)
    before = counts(engine)
    bad = tmp_path / "bad"
    future = dict(run_record("gpu01", 7), schema_version=7)
    bad_status = dict(run_record("gpu01", 8), status="melted")
    write_spool(bad, [run_record("gpu01", 5), future, bad_status])
    with open(bad / "records.jsonl", "a") as fh:
        fh.write('{"kind": "run", "run_id": "x", "node": "gpu0\n')            # truncated JSON
    write_spool(bad, [run_record("gpu01", 6)])
    other = tmp_path / "other"  # another tool's JSONL named like a spool
    other.mkdir()
    (other / "records.jsonl").write_text('{"level":"info","msg":"started"}\n{"level":"warn","msg":"x"}\n')
    report = ingest([tmp_path / "good", bad, other], engine)
    assert report.runs == 2  # runs 5 and 6 went in around the bad lines
    reasons = " | ".join(f"{s.where}: {s.reason}" for s in report.skipped)
    assert "unknown schema_version 7" in reasons
    assert "status 'melted'" in reasons
    assert "records.jsonl:4: not JSON" in reasons
    assert "not a healthcheck record" in reasons and "another tool's file" in reasons
    after = counts(engine)
    assert after["runs"] == before["runs"] + 2 and after["results"] == before["results"] + 20


def test_missing_path_is_a_clear_error(engine, tmp_path):
    with pytest.raises(HistoryError, match="no such file or directory"):
        ingest([tmp_path / "nope"], engine)


def test_database_down_then_back_every_record_exactly_once(store, tmp_path):
    """Runs keep spooling while the database is unreachable; the next ingest brings in each once."""
    spool_dir = tmp_path / "spool"
    write_spool(spool_dir, [run_record("gpu03", i) for i in range(5)])
    eng = store.engine()
    migrations.upgrade(eng)
    ingest([spool_dir], eng)
    if store.kind == "postgres":
        store.server.stop()
        down = store.engine()
    else:  # the database file's directory is gone (unmounted share)
        from healthcheck.history.db import make_engine, resolve_url

        down = make_engine(resolve_url(str(tmp_path / "unmounted" / "history.sqlite")))
    try:
        write_spool(spool_dir, [run_record("gpu03", i) for i in range(5, 12)]
                    + [action_record("gpu03", 11)])  # the hooks never touch the database
        with pytest.raises(HistoryError) as err:
            ingest([spool_dir], down)
        assert "Traceback" not in str(err.value)
    finally:
        if store.kind == "postgres":
            store.server.start()
    eng = store.engine()
    report = ingest([spool_dir], eng)
    assert (report.runs, report.actions, report.duplicates) == (7, 1, 5)
    assert counts(eng) == {"runs": 12, "results": 120, "metrics": 12 * 17, "actions": 1}
    with eng.connect() as conn:
        ids = list(conn.execute(select(runs.c.run_id)).scalars())
    assert len(ids) == len(set(ids)) == 12


def test_show_filters_by_node_check_since_and_status(engine, tmp_path):
    write_spool(tmp_path / "sp", [run_record("gpu01", i, status="fail" if i == 9 else "pass") for i in range(10)]
                + [run_record("gpu02", i) for i in range(10)])
    ingest([tmp_path / "sp"], engine)
    cols, rows = show(engine, node="gpu01", limit=3)
    assert [r[cols.index("run_id")] for r in rows][0].startswith("gpu01-000009")
    assert rows[0][cols.index("not_passing")] == "gpu.ecc:fail"
    since = parse_since("2026-05-01T15:00:00Z", T0)
    cols, rows = show(engine, since=since, limit=100)
    assert len(rows) == 2 * 3  # hours 15, 16, 17 of both nodes
    cols, rows = show(engine, node="gpu0*", check="gpu.e*", status="fail", limit=100)
    assert [(r[cols.index("node")], r[cols.index("component")]) for r in rows] == [("gpu01", "GPU3")]
    cols, rows = show(engine, check="ib.ports", node="gpu02", limit=100)
    assert len(rows) == 10 and all(r[cols.index("status")] == "pass" for r in rows)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_export_each_format(engine, tmp_path, fmt):
    write_spool(tmp_path / "sp", [run_record("gpu01", i) for i in range(4)] + [action_record("gpu01", 2)])
    ingest([tmp_path / "sp"], engine)
    out = tmp_path / f"results.{fmt}"
    assert export(engine, fmt, out, table="results", since=parse_since("2026-05-01T09:00:00", T0)) == 30
    if fmt == "csv":
        rows = list(csv.DictReader(out.open()))
        assert rows[0]["check"] == "gpu.ecc" and rows[0]["started_at"] == "2026-05-01T09:00:00+00:00"
    elif fmt == "json":
        rows = json.loads(out.read_text())
        assert {r["node"] for r in rows} == {"gpu01"} and rows[-1]["check"] == "pcie.link_width"
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(out)
        assert table.num_rows == 30 and str(table.schema.field("started_at").type) == "timestamp[us, tz=UTC]"
    assert len(rows if fmt != "parquet" else range(table.num_rows)) == 30
    assert export(engine, fmt, tmp_path / f"m.{fmt}", table="metrics", node="nobody") == 0


def test_load_frames_contract(engine, tmp_path):
    write_spool(tmp_path / "sp", [run_record("gpu01", i) for i in range(3)] + [action_record("gpu01", 1)])
    ingest([tmp_path / "sp"], engine)
    frames = load_frames(engine)
    assert list(frames["runs"].columns) == ["run_id", "node", "context", "job_id", "started_at", "duration_s",
                                            "status"]
    assert list(frames["metrics"].columns) == ["run_id", "node", "started_at", "check", "component", "name",
                                               "value"]
    assert str(frames["runs"]["started_at"].dt.tz) == "UTC"
    assert str(frames["actions"]["time"].dt.tz) == "UTC"
    m = frames["metrics"]
    sbe = m[(m.name == "ecc_sbe_volatile") & (m.component == "GPU3")].sort_values("started_at")
    assert sbe["value"].tolist() == [0.0, 1.0, 2.0]
    assert len(frames["results"]) == 30 and frames["actions"]["action"].tolist() == ["drain"]
    only = load_frames(engine, since=parse_since("2026-05-01T10:00:00Z", T0), tables=("metrics",),
                       metric_names=["temperature_c"])
    assert set(only) == {"metrics"} and len(only["metrics"]) == 8


def test_awkward_text_survives_the_bulk_path(engine, tmp_path):
    """Tabs, newlines, backslashes, quotes and non-ASCII in messages (COPY's escapes on PostgreSQL)."""
    rec = run_record("gpu07", 1)
    awkward = 'a\tb\nc\\d "e" \\N ü€ \r'
    rec["results"][0]["message"] = awkward
    rec["results"][1]["message"] = None
    write_spool(tmp_path / "sp", [rec, action_record("gpu07", 1)])
    report = ingest([tmp_path / "sp"], engine)
    assert (report.runs, report.results, report.actions) == (1, 10, 1)
    with engine.connect() as conn:
        got = dict(conn.execute(select(results.c.seq, results.c.message).where(results.c.seq < 2)).all())
    assert got == {0: awkward, 1: None}


def test_big_batches_mixed_with_stored_runs(engine, tmp_path):
    """A batch holding runs already stored and new ones: only the new runs' rows go in, whole."""
    write_spool(tmp_path / "a", [run_record("gpu08", i) for i in range(0, 30, 2)])
    ingest([tmp_path / "a"], engine, batch_rows=40)
    write_spool(tmp_path / "b", [run_record("gpu08", i) for i in range(30)])
    report = ingest([tmp_path / "b"], engine)
    assert (report.runs, report.results, report.duplicates, report.batches) == (15, 150, 15, 1)
    assert counts(engine) == {"runs": 30, "results": 300, "metrics": 30 * 17, "actions": 0}


def test_reader_errors_reach_the_caller_after_the_batches_before(engine, tmp_path, monkeypatch):
    from healthcheck.history import ingest as ingest_module

    def broken(report):
        yield tmp_path, run_record("gpu09", 0) | {"record_id": "r0"}
        raise OSError("disk gone")

    write_spool(tmp_path / "sp", [run_record("gpu09", 0)])
    monkeypatch.setattr(ingest_module, "_records", broken)
    with pytest.raises(OSError, match="disk gone"):
        ingest([tmp_path / "sp"], engine, batch_rows=1)
    assert counts(engine)["runs"] == 1  # the batch read before the error is committed


def test_sqlite_time_text_is_what_the_column_type_binds():
    from healthcheck.history.ingest import _sqlite_stamp
    from healthcheck.history.schema import SQLITE_TIME_FORMAT

    for when in (datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc),
                 datetime(2026, 5, 1, 8, 0, 1, 7, tzinfo=timezone.utc)):
        assert _sqlite_stamp(when) == when.strftime(SQLITE_TIME_FORMAT)


def test_upgrade_from_0001_keeps_rows_and_adds_job_nodes(store, tmp_path):
    """A database created by the first release (0001) is 'behind', refused until upgraded; the upgrade
    keeps every stored run and the new column then carries a burn-in job's node list."""
    eng = store.engine()
    migrate_to(eng, "0001")
    with eng.begin() as conn:
        conn.execute(text("INSERT INTO runs (run_id, record_id, node, context, started_at, status, ingested_at) "
                          "VALUES ('r-old', 'rec-old', 'gpu01', 'prolog', '2026-05-01 12:00:00', 'pass', "
                          "'2026-05-01 12:00:01')"))
    assert migrations.status(eng).state == "behind"
    with pytest.raises(SchemaTooOld, match="db upgrade"):
        migrations.require_current(eng)
    assert migrations.upgrade(eng).current == ("0001",)
    assert migrations.status(eng).state == "current"
    rec = run_record("gpu02", 1)
    rec["context"], rec["job_nodes"] = "burnin", "gpu[01-04]"
    write_spool(tmp_path / "sp", [rec])
    assert ingest([tmp_path / "sp"], eng).runs == 1
    with eng.connect() as conn:
        rows = dict(conn.execute(select(runs.c.run_id, runs.c.job_nodes)).all())
    assert rows == {"r-old": None, rec["run_id"]: "gpu[01-04]"}
    eng.dispose()
