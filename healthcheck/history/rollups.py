"""Rollups of the history, so the readiness report reads one row per series instead of every sample.

What is kept (tables in ``schema``, created by migration 0003):

- ``runs.n_results`` / ``n_metrics`` / ``n_flagged``: the run's own row counts (flagged = results that fail,
  warn or error), computed from the record and written with the run row. Windowed counts are sums over
  the window's runs; the runs worth reading for failing checks are those with ``n_flagged > 0``.
- ``metric_series``: per series (name, node, check, component; '' for none): ``first_at`` = the earliest
  sample, and the latest sample = the greatest ``(started_at, run_id, seq)``: its time, run, seq, value.
  The report's performance distributions take each series' latest value in the window: this row, unless
  the series has samples after the window's end (then those few series are read from ``metrics``).
- ``counter_levels``: per series of an error counter (``is_counter``) and per distinct value, the first
  and last time that value was seen. The samples of a series inside a window are all equal exactly when
  one level has a sample in it: without samples after the window's end, those are the levels with
  ``last_at >= since``. Only the series with two or more such levels (a counter that moved in the window)
  are read from ``metrics`` to compute their growth; a constant one has grown by 0 and is not read.
- ``metric_recent``: per series its newest ``recent.KEEP`` samples (the fleet ranking's input; how the
  merge stays exact: ``healthcheck.history.recent``).
- ``rollup_pending``: the runs stored whose metric rows are not merged into the tables above yet.
  The transaction that stores a run's rows adds its id here; the one that merges its metrics (``settle``)
  removes it. Rollups plus pending runs always account for every row: the report reads the pending runs'
  series from ``metrics`` (few, normally none).
- ``rollup_state``: the rollup definition the rows were built with (``VERSION``, ``recent.KEEP`` and the
  fingerprint of ``COUNTER_PATTERNS``). ``usable`` is False when it differs from this code's (or nothing was built):
  the report then reads the raw rows and says ``healthcheck db rebuild-rollups`` would make it fast.

Why they stay exact: every value is a function of the *set* of stored rows (minimum, maximum, maximum
under a total order, the top ``recent.KEEP`` under it, a run's own counts), never of the order in which rows
arrived, so merging is idempotent and commutative: merging a run twice, or runs in any order, gives the
same rows (``metric_recent`` by recomputing a series from its rows where a merge is not a plain append).
The ingest summarises the metric rows of the runs it stored in memory (``Rollup``), batch after batch, and merges
them every million rows and at its end, removing those runs from ``rollup_pending`` in the same
transaction (one merge per ingest instead of one per batch: a batch of runs from many nodes touches
nearly every series). An ingest killed mid-way leaves its stored runs pending; the next ingest merges them
from the rows (``refresh``). ``rebuild`` recomputes everything from the stored rows through the same
``Rollup`` code. Rows are never deleted by healthcheck; after deleting rows by hand, rebuild.

Nothing here imports SQLAlchemy at module level: ``report.actions`` imports ``is_counter`` from here.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any, Iterable

from . import recent as recent_
from .db import BOUND_PARAMETERS

VERSION = "2"  # 2: metric_recent
# Error counters (growth rates). Volatile counters reset with the driver; the growth handles resets.
COUNTER_PATTERNS: tuple[str, ...] = (
    r"^ecc_(un)?corrected_(volatile|aggregate)$", r"^retired_pages_(sbe|dbe|total|pending)$",
    r"^remap_(un)?correctable$", r"^nvlink_\w+_errors$", r"replay", r"^xid_events$",
    r"^symbol_error$", r"^link_downed$", r"^link_error_recovery$", r"^port_rcv_errors$",
    r"^port_rcv_remote_physical_errors$", r"^local_link_integrity_errors$",
    r"^excessive_buffer_overrun_errors$", r"^port_xmit_discards$",
)
_COUNTER = re.compile("|".join(f"(?:{p})" for p in COUNTER_PATTERNS), re.I)
KEY = ("name", "node", "check", "component")
STREAM_COLUMNS = ("run_id", "seq", "name", "node", "started_at", "check", "component", "value")
SERIES_COLUMNS = KEY + ("first_at", "last_at", "last_run_id", "last_seq", "last_value")
LEVEL_COLUMNS = KEY + ("value", "first_at", "last_at")


@lru_cache(maxsize=4096)
def is_counter(name: str) -> bool:
    """True for error counters (cumulative: their growth per hour is what matters)."""
    return bool(_COUNTER.search(name))


def fingerprint() -> str:
    """The rollup definition: VERSION and the counter patterns (levels exist for those names only)."""
    text = VERSION + "\n" + f"keep={recent_.KEEP}\n" + "\n".join(COUNTER_PATTERNS)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Rollup:
    """The rollup rows of a set of metric rows (``records.METRIC_COLUMNS`` tuples), merged in memory.

    ``add`` takes rows in any order; ``series_rows`` / ``level_rows`` are what ``merge`` writes.
    Times compare as stored (SQLite: the fixed-width text of ``schema.SQLITE_TIME_FORMAT``; PostgreSQL:
    aware datetimes), so the in-memory order is the database's order."""

    def __init__(self, from_rows: bool = False) -> None:
        """``from_rows``: the rows are read back from the database (a rebuild, a refresh)."""
        self.series: dict[tuple, list] = {}
        self.levels: dict[tuple, list] = {}
        self.recent = recent_.Recent(share_ids=from_rows)
        self._counter: dict[str, bool] = {}

    def add(self, rows: Iterable[tuple]) -> None:
        series, levels, counter, recent = self.series, self.levels, self._counter, self.recent.add
        for run_id, seq, name, node, started, check, component, value, *_ in rows:
            key = (name, node, check, component or "")
            recent(key, (started, run_id, seq, value))
            entry = series.get(key)
            if entry is None:
                series[key] = [started, started, run_id, seq, value]
            else:
                if started < entry[0]:
                    entry[0] = started
                if started >= entry[1] and (started, run_id, seq) > (entry[1], entry[2], entry[3]):
                    entry[1:] = (started, run_id, seq, value)
            is_c = counter.get(name)
            if is_c is None:
                is_c = counter[name] = is_counter(name)
            if is_c:
                lkey = key + (value,)
                span = levels.get(lkey)
                if span is None:
                    levels[lkey] = [started, started]
                elif started < span[0]:
                    span[0] = started
                elif started > span[1]:
                    span[1] = started

    def series_rows(self) -> list[tuple]:
        """In key order (SQLite's upserts then walk its b-tree in order)."""
        return [k + tuple(self.series[k]) for k in sorted(self.series)]

    def level_rows(self) -> list[tuple]:
        return [k + tuple(self.levels[k]) for k in sorted(self.levels)]

    def __len__(self) -> int:
        return len(self.series) + len(self.levels)


def _names(columns: Iterable[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _upsert_sql(table: str, sqlite: bool, source: str) -> str:
    """INSERT .. ON CONFLICT DO UPDATE merging a rollup row into the stored one (min/max/latest)."""
    lo, hi = ("min", "max") if sqlite else ("LEAST", "GREATEST")
    cp = "" if sqlite else ' COLLATE "C"'  # run ids by code point, as Python (and SQLite) compare them
    t = f'"{table}"'
    if table == "metric_series":
        cols = SERIES_COLUMNS
        newer = (f"(excluded.last_at, excluded.last_run_id{cp}, excluded.last_seq) > "
                 f"({t}.last_at, {t}.last_run_id{cp}, {t}.last_seq)")
        sets = [f"first_at = {lo}({t}.first_at, excluded.first_at)"]
        sets += [f"{c} = CASE WHEN {newer} THEN excluded.{c} ELSE {t}.{c} END"
                 for c in ("last_run_id", "last_seq", "last_value")]
        sets.append(f"last_at = {hi}({t}.last_at, excluded.last_at)")
        key = KEY
    else:
        cols = LEVEL_COLUMNS
        sets = [f"first_at = {lo}({t}.first_at, excluded.first_at)", f"last_at = {hi}({t}.last_at, excluded.last_at)"]
        key = KEY + ("value",)
    return (f"INSERT INTO {t} ({_names(cols)}) {source} "
            f"ON CONFLICT ({_names(key)}) DO UPDATE SET {', '.join(sets)}")


def merge(conn, rollup: Rollup, sqlite: bool) -> None:
    """Merge ``rollup`` into the stored rollups, inside the caller's transaction. SQLite: executemany.
    PostgreSQL: COPY into a temporary table, then one INSERT .. SELECT .. ORDER BY key .. ON CONFLICT DO
    UPDATE per table (rows in key order: concurrent ingests lock them in the same order)."""
    for table, cols, rows in (("metric_series", SERIES_COLUMNS, rollup.series_rows()),
                              ("counter_levels", LEVEL_COLUMNS, rollup.level_rows())):
        if not rows:
            continue
        if sqlite:
            conn.exec_driver_sql(_upsert_sql(table, True, f"VALUES ({', '.join('?' * len(cols))})"), rows)
            continue
        key = KEY + (("value",) if table == "counter_levels" else ())
        tmp = f'"hc_rollup_{table}"'
        with conn.connection.driver_connection.cursor() as cur:
            cur.execute(f'CREATE TEMPORARY TABLE {tmp} (LIKE "{table}") ON COMMIT DROP')
            with cur.copy(f"COPY {tmp} ({_names(cols)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute(_upsert_sql(table, False, f"SELECT {_names(cols)} FROM {tmp} ORDER BY {_names(key)}"))
            cur.execute(f"DROP TABLE {tmp}")
    recent_.merge(conn, rollup.recent, sqlite)


def settle(conn, rollup: Rollup, run_ids: Iterable[str], sqlite: bool) -> None:
    """Merge ``rollup`` (the metrics of ``run_ids``) and take those runs off ``rollup_pending``, inside the
    caller's transaction: rollups and pending list change together."""
    from sqlalchemy import delete

    from .schema import rollup_pending

    merge(conn, rollup, sqlite)
    ids = sorted(set(run_ids))
    for i in range(0, len(ids), BOUND_PARAMETERS):
        conn.execute(delete(rollup_pending).where(rollup_pending.c.run_id.in_(ids[i:i + BOUND_PARAMETERS])))


def refresh(engine, chunk: int = 100_000) -> int:
    """Merge the metrics of every pending run (left by an ingest that stopped before merging; or being
    merged by a concurrent one: merging twice changes nothing) and settle them. Returns how many runs."""
    from sqlalchemy.exc import SQLAlchemyError

    from .db import HistoryError, describe_error, is_sqlite

    sqlite = is_sqlite(engine)
    cols = ", ".join(f'"{c}"' for c in STREAM_COLUMNS)
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(sqlite_immediate=True)
            with conn.begin():
                rollup, ids = Rollup(from_rows=True), set()
                result = conn.exec_driver_sql(  # one statement: a pending run's rows are all visible with it
                    f"SELECT {cols} FROM metrics WHERE run_id IN (SELECT run_id FROM rollup_pending)",
                    execution_options={"stream_results": True, "yield_per": chunk})
                for part in result.partitions(chunk):
                    rollup.add(part)
                    ids.update(row[0] for row in part)
                if ids:
                    settle(conn, rollup, ids, sqlite)
                return len(ids)
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


def has_pending(conn) -> bool:
    from sqlalchemy import select

    from .schema import rollup_pending

    return conn.execute(select(rollup_pending.c.run_id).limit(1)).first() is not None


def state(conn) -> dict[str, str]:
    """The ``rollup_state`` rows ({} when the table is empty)."""
    from sqlalchemy import select

    from .schema import rollup_state

    return {k: v for k, v in conn.execute(select(rollup_state.c.key, rollup_state.c.value))}


def usable(conn) -> bool:
    """True when the stored rollups were built by this definition (see the module docstring)."""
    return state(conn).get("definition") == fingerprint()


def _lock(conn, sqlite: bool) -> None:
    """Keep writers out while rebuilding (SQLite: the caller's BEGIN IMMEDIATE already does). Tables in
    the ingest's order; SHARE ROW EXCLUSIVE lets readers in and no other writer or rebuild."""
    if not sqlite:
        conn.exec_driver_sql("LOCK TABLE runs, results, metrics, metric_series, counter_levels, metric_recent, "
                             "rollup_pending, rollup_state IN SHARE ROW EXCLUSIVE MODE")


def _count(table, runs, *where: Any):
    """(SELECT count(*) FROM table WHERE table.run_id = runs.run_id [AND where]) for an UPDATE of runs."""
    from sqlalchemy import func, select

    return select(func.count()).select_from(table).where(table.c.run_id == runs.c.run_id, *where).scalar_subquery()


def rebuild(engine, chunk: int = 100_000, force: bool = True) -> dict[str, int]:
    """Recompute every rollup from the stored rows, in one transaction (writers wait). ``force=False``:
    only when not ``usable`` (rechecked under the lock, so concurrent upgrades rebuild once).
    Returns counts: runs, series, levels (all 0 when nothing was done)."""
    from sqlalchemy import delete, insert, update
    from sqlalchemy.exc import SQLAlchemyError

    from .db import HistoryError, describe_error, is_sqlite
    from .rows import FLAGGED
    from .schema import (counter_levels, metric_recent, metric_series, metrics, results, rollup_pending,
                         rollup_state, runs)

    sqlite = is_sqlite(engine)
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(sqlite_immediate=True)
            with conn.begin():
                _lock(conn, sqlite)
                if not force and usable(conn):
                    return {"runs": 0, "series": 0, "levels": 0}
                n_runs = conn.execute(update(runs).values(
                    n_results=_count(results, runs), n_metrics=_count(metrics, runs),
                    n_flagged=_count(results, runs, results.c.status.in_(FLAGGED)))).rowcount
                conn.execute(delete(metric_series))
                conn.execute(delete(counter_levels))
                conn.execute(delete(metric_recent))
                conn.execute(delete(rollup_pending))  # every stored row is in the rebuild
                rollup = Rollup(from_rows=True)
                cols = ", ".join(f'"{c}"' for c in STREAM_COLUMNS)
                result = conn.exec_driver_sql(f"SELECT {cols} FROM metrics",
                                              execution_options={"stream_results": True, "yield_per": chunk})
                for part in result.partitions(chunk):
                    rollup.add(part)
                merge(conn, rollup, sqlite)
                conn.execute(delete(rollup_state))
                conn.execute(insert(rollup_state), [{"key": "definition", "value": fingerprint()},
                                                    {"key": "version", "value": VERSION}])
                return {"runs": n_runs, "series": len(rollup.series), "levels": len(rollup.levels)}
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
