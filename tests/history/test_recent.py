"""metric_recent (healthcheck.history.recent): each series' newest KEEP samples stay exactly those of the
stored rows however the runs arrive: in order (prepended at the merge), late, tied in time at the seam or
twice (recomputed from the rows in the merge's transaction); SQLite and PostgreSQL."""
from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from healthcheck.history import recent
from healthcheck.history.ingest import ingest
from healthcheck.history.recent import KEEP, Recent, micros
from healthcheck.history.schema import metric_recent
from tests.history.recs import T0, run_record, write_spool
from tests.history.rollupcheck import expected, stored


def _ingest(engine, path, recs) -> None:
    write_spool(path, recs)
    ingest([path], engine)


@pytest.fixture
def redone(monkeypatch):
    """How many rows each merge recomputed from the rows."""
    counts: list[int] = []
    real = recent.redo_rows

    def spy(conn, sqlite):
        counts.append(real(conn, sqlite))
        return counts[-1]

    monkeypatch.setattr(recent, "redo_rows", spy)
    return counts


def test_runs_in_time_order_are_prepended_and_cut_to_keep(engine, tmp_path, redone):
    for part in range(3):  # three ingests, each newer than the last: no recomputation
        _ingest(engine, tmp_path / f"sp{part}", [run_record("gpu01", i) for i in range(part * 12, part * 12 + 12)])
    assert redone == [0, 0, 0]
    got = stored(engine)
    assert got["recent"] == expected(engine)["recent"]
    n_kept, newest, oldest, redo, times, vals = got["recent"][("ecc_sbe_volatile", "gpu01", "gpu.ecc", "GPU3")]
    assert (n_kept, redo, len(times)) == (KEEP, 0, KEEP)
    assert vals == [float(i) for i in range(35, 35 - KEEP, -1)]  # newest first
    assert times[0] == newest == micros(run_record("gpu01", 35)["started_at"].replace("Z", "+00:00"))
    assert times[-1] == oldest and times == sorted(times, reverse=True)


def test_a_late_spool_a_tie_at_the_seam_and_a_repeat_are_recomputed(engine, tmp_path, redone):
    _ingest(engine, tmp_path / "new", [run_record("gpu01", i) for i in range(20, 40)])
    _ingest(engine, tmp_path / "late", [run_record("gpu01", i) for i in range(0, 20)])  # older, after
    at_39 = T0 + timedelta(hours=39)  # a run at the stored newest instant, with a greater run id
    _ingest(engine, tmp_path / "tie", [run_record("gpu01", 99, run_id="gpu01-zz".ljust(32, "0"), when=at_39)])
    assert redone[0] == 0 and redone[1] > 0 and redone[2] > 0
    got = stored(engine)
    assert got["recent"] == expected(engine)["recent"]
    vals = got["recent"][("ecc_sbe_volatile", "gpu01", "gpu.ecc", "GPU3")][5]
    assert vals[:3] == [99.0, 39.0, 38.0]  # the tie broken by run id, as the rows are ordered
    with engine.connect() as conn:
        assert not conn.execute(select(metric_recent).where(metric_recent.c.redo != 0)).first()


def test_recent_in_memory_keeps_the_newest_once_in_any_order():
    rows = [(f"2026-01-01 00:00:{s:02d}.000000", f"r{s:02d}", 0, float(s)) for s in range(40)]
    got = set()
    for perm in (rows, rows[::-1], rows[7:] + rows[:7] + rows[3:9]):  # the last one repeats six rows
        r = Recent()
        for item in perm:
            r.add(("temperature_c", "n1", "gpu", "GPU0"), item)
        got.add(tuple(r.rows()))
    (row,), = got
    assert row[4:7] == (KEEP, micros("2026-01-01 00:00:39"), micros(f"2026-01-01 00:00:{40 - KEEP:02d}"))
    assert row[8] == "{" + ",".join(repr(micros(f"2026-01-01 00:00:{s:02d}")) for s in range(39, 39 - KEEP, -1)) + "}"
    assert row[9].startswith("{39.0,38.0,") and row[9].count(",") == KEEP - 1


def test_sqlite_array_functions_refuse_what_is_not_an_array():
    assert recent._cat("{3,2}", "{1,0}", 3) == "{3,2,1}" and recent._at("{3,2,1}", 2) == 2
    with pytest.raises(ValueError, match="not an array of samples"):
        recent._cat("3,2", "{1}", 3)
