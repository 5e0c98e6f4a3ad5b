"""Rollups (healthcheck.history.rollups): exactly what the raw rows say, whatever the order, batching,
repetition or interruption of the ingest; rebuilt by `db upgrade` and `db rebuild-rollups`; SQLite and
PostgreSQL."""
from __future__ import annotations

import random

import pytest
from click.testing import CliRunner
from sqlalchemy import delete, select, text, update

from healthcheck.history import migrations, rollups
from healthcheck.history.ingest import ingest
from healthcheck.history.rollups import Rollup, fingerprint, is_counter
from healthcheck.history.schema import rollup_pending, rollup_state, runs
from tests.history.conftest import migrate_to
from tests.history.recs import T0, action_record, run_record, write_spool
from tests.history.rollupcheck import expected, stored


def records(seed: int = 3) -> list[dict]:
    """Runs of three nodes with error counters that grow, reset and come back to earlier values."""
    rng = random.Random(seed)
    out = []
    for node in ("gpu01", "gpu02", "gpu03"):
        sbe = 0.0
        for i in range(30):
            rec = run_record(node, i, status=rng.choice(["pass", "pass", "warn", "fail"]))
            sbe = 0.0 if rng.random() < 0.1 else sbe + rng.choice([0.0, 0.0, 1.0, 4.0])
            rec["results"][2]["metrics"]["ecc_corrected_volatile"] = sbe
            rec["results"][8]["metrics"] = {"symbol_error": float(i // 7), "link_downed": 0.0}
            rec["results"][8]["component"] = "mlx5_0/1" if i % 2 else ""  # "" and None: one rollup key
            out.append(rec)
    return out + [action_record("gpu01", 3)]


def test_rollups_after_ingest_are_those_of_the_rows(engine, tmp_path):
    write_spool(tmp_path / "sp", records())
    ingest([tmp_path / "sp"], engine, batch_rows=500)
    got = stored(engine)
    assert got == expected(engine)
    assert got["levels"] and got["series"]
    assert {k[0] for k in got["levels"]} == {"ecc_corrected_volatile", "symbol_error", "link_downed"}
    with engine.connect() as conn:
        assert rollups.usable(conn)


def test_any_order_any_batching_repeats_and_a_crash_give_the_same_rollups(store, tmp_path):
    recs = records()
    write_spool(tmp_path / "plain", recs)
    first = store.engine()
    migrations.upgrade(first)
    ingest([tmp_path / "plain"], first)
    want = stored(first)
    with first.begin() as conn:  # a second, differently fed database in the same server/file family
        for table in ("counter_levels", "metric_series", "metric_recent", "metrics", "results", "actions", "runs"):
            conn.execute(text(f"DELETE FROM {table}"))
    shuffled = recs[:]
    random.Random(9).shuffle(shuffled)
    write_spool(tmp_path / "shuffled", shuffled)

    def crash(report):
        if report.batches == 3:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        ingest([tmp_path / "shuffled"], first, batch_rows=40, on_batch=crash)
    partial = stored(first)
    assert partial["counts"] == expected(first)["counts"] and len(partial["counts"]) < 90  # whole batches
    with first.connect() as conn:  # not merged yet: the stored runs are pending, the report reads their rows
        assert set(conn.execute(select(rollup_pending.c.run_id)).scalars()) == set(partial["counts"])
    assert rollups.refresh(first) == len(partial["counts"])  # what the next ingest does first
    assert stored(first) == expected(first) != want
    ingest([tmp_path / "shuffled"], first, batch_rows=40)  # resumed
    ingest([tmp_path / "plain"], first, batch_rows=7)  # and everything again: nothing changes
    assert stored(first) == want == expected(first)
    with first.connect() as conn:
        assert not rollups.has_pending(conn)
    first.dispose()


def test_rebuild_recomputes_from_the_rows(engine, tmp_path):
    write_spool(tmp_path / "sp", records())
    ingest([tmp_path / "sp"], engine)
    want = stored(engine)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM counter_levels"))
        conn.execute(text("UPDATE metric_series SET last_value = -1"))
        conn.execute(update(runs).values(n_results=None, n_metrics=None, n_flagged=None))
    done = rollups.rebuild(engine, chunk=37)
    assert done == {"runs": 90, "series": len(want["series"]), "levels": len(want["levels"])}
    assert stored(engine) == want
    assert rollups.rebuild(engine, force=False) == {"runs": 0, "series": 0, "levels": 0}  # usable: nothing to do


def test_a_changed_definition_is_not_usable_until_rebuilt(engine, tmp_path):
    write_spool(tmp_path / "sp", records())
    ingest([tmp_path / "sp"], engine)
    with engine.begin() as conn:
        conn.execute(update(rollup_state).where(rollup_state.c.key == "definition").values(value="older"))
        assert not rollups.usable(conn)
    migrations.upgrade(engine)  # `db upgrade` rebuilds what it finds stale
    with engine.connect() as conn:
        assert rollups.state(conn) == {"definition": fingerprint(), "version": rollups.VERSION}
    assert stored(engine) == expected(engine)


def test_upgrade_from_0002_builds_the_rollups_of_the_stored_rows(store, tmp_path):
    eng = store.engine()
    migrate_to(eng, "0002")
    with eng.begin() as conn:
        conn.execute(text("INSERT INTO runs (run_id, record_id, node, context, started_at, status, ingested_at) VALUES "
                          "('r1', 'r1', 'gpu01', 'prolog', '2026-05-01 12:00:00', 'fail', '2026-05-01 12:00:01')"))
        conn.execute(text("INSERT INTO results (run_id, seq, node, started_at, \"check\", component, status, message) "
                          "VALUES ('r1', 0, 'gpu01', '2026-05-01 12:00:00', 'gpu.ecc', 'GPU0', 'fail', 'x'), "
                          "('r1', 1, 'gpu01', '2026-05-01 12:00:00', 'ib.ports', NULL, 'pass', 'ok')"))
        conn.execute(text("INSERT INTO metrics (run_id, seq, name, node, started_at, \"check\", component, value) "
                          "VALUES ('r1', 0, 'ecc_corrected_volatile', 'gpu01', '2026-05-01 12:00:00', 'gpu.ecc', "
                          "'GPU0', 3.0), ('r1', 1, 'temperature_c', 'gpu01', '2026-05-01 12:00:00', 'ib.ports', "
                          "NULL, 40.5)"))
    assert migrations.upgrade(eng).current == ("0002",)
    got = stored(eng)
    assert got == expected(eng) and got["counts"] == {"r1": (2, 2, 1)}
    assert ("ecc_corrected_volatile", "gpu01", "gpu.ecc", "GPU0", 3.0) in got["levels"]
    assert ("temperature_c", "gpu01", "ib.ports", "") in got["series"]
    eng.dispose()


def test_cli_rebuild_and_status(store, tmp_path):
    from healthcheck.cli.history import db

    eng = store.engine()
    migrations.upgrade(eng)
    write_spool(tmp_path / "sp", records())
    ingest([tmp_path / "sp"], eng)
    with eng.begin() as conn:
        conn.execute(delete(rollup_state))
    runner = CliRunner(env=store.env)
    res = runner.invoke(db, ["status", "--db", store.url])
    assert res.exit_code == 0 and "rollups: not built" in res.output
    res = runner.invoke(db, ["rebuild-rollups", "--db", store.url])
    assert res.exit_code == 0, res.output
    assert "rollups rebuilt from 90 run(s)" in res.output and "counter levels" in res.output
    assert "rollups" not in runner.invoke(db, ["status", "--db", store.url]).output
    assert stored(eng) == expected(eng)
    eng.dispose()


@pytest.mark.parametrize("order", [0, 1])
def test_a_tie_in_time_breaks_by_run_id_code_point_in_every_order(engine, tmp_path, order):
    """Two runs of one node at the same instant, stored by different transactions in either order: the
    latest sample is the greater run id by code point ("run_a" > "Run-b"), also on PostgreSQL, whose
    default collation could say otherwise."""
    when = T0.replace(hour=20)
    recs = [run_record("gpu01", 1, run_id="Run-b".ljust(32, "0"), when=when),
            run_record("gpu01", 2, run_id="run_a".ljust(32, "0"), when=when)]
    write_spool(tmp_path / "sp", recs[::-1] if order else recs)
    ingest([tmp_path / "sp"], engine, batch_rows=1)
    got = stored(engine)
    assert got == expected(engine)
    assert got["series"][("ecc_sbe_volatile", "gpu01", "gpu.ecc", "GPU3")][2] == "run_a".ljust(32, "0")


def test_rollup_merge_in_memory_is_order_free():
    rows = [("r1", 0, "symbol_error", "n1", "2026-01-01 00:00:02.000000", "ib", None, 5.0, None),
            ("r0", 0, "symbol_error", "n1", "2026-01-01 00:00:01.000000", "ib", None, 5.0, None),
            ("r2", 0, "symbol_error", "n1", "2026-01-01 00:00:02.000000", "ib", "", 0.0, None),
            ("r2", 1, "temperature_c", "n1", "2026-01-01 00:00:02.000000", "gpu", "GPU0", 41.0, "C")]
    results = set()
    for perm in (rows, rows[::-1], rows[1:] + rows[:1]):
        r = Rollup()
        for row in perm:
            r.add([row])
        results.add((tuple(sorted(r.series_rows())), tuple(sorted(r.level_rows()))))
    (series, levels), = results
    assert series[0] == ("symbol_error", "n1", "ib", "", "2026-01-01 00:00:01.000000", "2026-01-01 00:00:02.000000",
                         "r2", 0, 0.0)  # the greatest (time, run, seq) is r2's
    assert levels == (("symbol_error", "n1", "ib", "", 0.0, "2026-01-01 00:00:02.000000", "2026-01-01 00:00:02.000000"),
                      ("symbol_error", "n1", "ib", "", 5.0, "2026-01-01 00:00:01.000000", "2026-01-01 00:00:02.000000"))
    assert not any(is_counter(x) for x in ("temperature_c", "busbw_gbps")) and is_counter("nvlink_crc_errors")


def test_head_constant_is_the_scripts_head():
    assert migrations.HEAD == migrations.head()
