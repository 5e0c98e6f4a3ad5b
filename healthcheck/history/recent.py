"""The last samples of every metric series, kept at ingest (``metric_recent``), so the readiness report's
fleet ranking reads one row per series instead of every node's recent metric rows.

A row per series (name, node, check, component; '' for none): its newest ``KEEP`` samples, newest first,
as two arrays (``times`` in microseconds since the epoch, UTC, and ``vals``), their count ``n_kept``, the
newest and oldest kept time (``newest_us``, ``oldest_us``) and ``redo``. PostgreSQL stores the arrays as
``bigint[]``/``double precision[]``; SQLite as the same text (``{1,2,3}``), so one reader parses both.

The samples of a series are ordered by (started_at, run_id, seq), as everywhere in the history. What is
kept is the top ``KEEP`` of the *set* of stored samples under that order, so it stays exact however runs
arrive:

- the ingest keeps, in memory, each series' newest samples of the rows it stored (``Recent``: the whole
  identity (time, run, seq), so ties in time within a batch are ordered exactly);
- merging a batch whose oldest kept sample is strictly newer than the stored newest (the normal case: a
  node's runs arrive in time order) prepends the batch's arrays and cuts them to ``KEEP``: exact;
- any other merge (a node's older spool ingested late, a tie in time at the seam, a run merged twice by
  a concurrent ``refresh``) marks the row ``redo``; ``redo_rows`` then recomputes those series from their
  metric rows in the same transaction, so no row is left marked after a merge.

``KEEP`` bounds what the ranking may ask: the last n samples and the last n + the regression window of the
"higher is better" figures (``report.dbsummary`` checks that its request fits, and reads the rows
otherwise). Nothing here imports SQLAlchemy at module level.
"""
from __future__ import annotations

from bisect import insort
from datetime import datetime, timezone
from sys import intern
from typing import Iterable

from .db import BOUND_PARAMETERS

KEEP = 25  # >= the ranking's default n (5) + its regression window (20): report.dbsummary checks it
SLACK = 8  # samples kept beyond KEEP in memory before a series is cut back (fewer list copies)
TABLE = "metric_recent"
KEY = ("name", "node", "check", "component")
COLUMNS = KEY + ("n_kept", "newest_us", "oldest_us", "redo", "times", "vals")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def micros(started) -> int:
    """A sample's time as stored (PostgreSQL: an aware datetime; SQLite: "YYYY-MM-DD HH:MM:SS.ffffff",
    UTC) -> microseconds since the epoch."""
    if isinstance(started, str):
        started = datetime.fromisoformat(started)
    if started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    delta = started - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def array_text(items: Iterable) -> str:
    """PostgreSQL's array literal, as COPY takes it and the report's reader parses it."""
    return "{" + ",".join(map(repr, items)) + "}"


class Recent:
    """Per series, the newest samples (time as stored, run_id, seq, value) of the rows added, oldest first.
    ``share_ids``: kept items share one string per run id (rows read back from the database carry a copy
    each: a rebuild at 1,000 nodes peaked at 446 MiB without sharing, 394 MiB with it; the ingest's rows
    share their run's already)."""

    def __init__(self, share_ids: bool = False) -> None:
        self.series: dict[tuple, list] = {}
        self.share_ids = share_ids

    def add(self, key: tuple, item: tuple) -> None:
        """``item``: (time as stored, run_id, seq, value)."""
        if self.share_ids:
            item = (item[0], intern(item[1]), item[2], item[3])
        lst = self.series.get(key)
        if lst is None:
            self.series[key] = [item]
            return
        if item > lst[-1]:
            lst.append(item)
        elif item in lst:  # the same row twice (a run added again): once
            return
        else:
            insort(lst, item)
        if len(lst) > KEEP + SLACK:
            del lst[:-KEEP]

    def rows(self) -> list[tuple]:
        """``COLUMNS`` tuples in key order, redo 0, arrays as text (newest first)."""
        out = []
        for key in sorted(self.series):
            kept = self.series[key][-KEEP:][::-1]
            times = [micros(item[0]) for item in kept]
            out.append(key + (len(kept), times[0], times[-1], 0, array_text(times),
                              array_text(float(item[3]) for item in kept)))
        return out


def upsert_sql(sqlite: bool, source: str) -> str:
    """INSERT .. ON CONFLICT DO UPDATE: a batch strictly newer than the stored row is prepended (cut to
    ``KEEP``); anything else marks the row ``redo`` (see the module docstring)."""
    t = f'"{TABLE}"'
    newer = f"(excluded.oldest_us > {t}.newest_us AND {t}.redo = 0)"
    if sqlite:  # the arrays are text: the functions ``sqlite_functions`` registers
        times = f"hc_recent_cat(excluded.times, {t}.times, {KEEP})"
        vals = f"hc_recent_cat(excluded.vals, {t}.vals, {KEEP})"
        kth = f"hc_recent_at({times}, {KEEP})"
        lo, hi = "min", "max"
    else:
        times = f"(excluded.times || {t}.times)[1:{KEEP}]"
        vals = f"(excluded.vals || {t}.vals)[1:{KEEP}]"
        kth = f"(excluded.times || {t}.times)[{KEEP}]"
        lo, hi = "LEAST", "GREATEST"
    total = f"excluded.n_kept + {t}.n_kept"
    sets = [f"times = CASE WHEN {newer} THEN {times} ELSE {t}.times END",
            f"vals = CASE WHEN {newer} THEN {vals} ELSE {t}.vals END",
            f"oldest_us = CASE WHEN {newer} THEN (CASE WHEN {total} <= {KEEP} THEN {t}.oldest_us ELSE {kth} END) "
            f"ELSE {lo}({t}.oldest_us, excluded.oldest_us) END",
            f"n_kept = CASE WHEN {newer} THEN {lo}({total}, {KEEP}) ELSE {t}.n_kept END",
            f"newest_us = {hi}({t}.newest_us, excluded.newest_us)",
            f"redo = CASE WHEN {newer} THEN 0 ELSE 1 END"]
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    key = ", ".join(f'"{c}"' for c in KEY)
    return f"INSERT INTO {t} ({cols}) {source} ON CONFLICT ({key}) DO UPDATE SET {', '.join(sets)}"


def _items(text: str) -> list[str]:
    if not (isinstance(text, str) and text[:1] == "{" and text[-1:] == "}" and len(text) > 2):
        raise ValueError(f"{TABLE}: not an array of samples: {text!r:.60}")
    return text[1:-1].split(",")


def _cat(newer: str, older: str, keep: int) -> str:
    """SQLite: the text arrays ``newer`` then ``older``, cut to ``keep`` items."""
    return "{" + ",".join((_items(newer) + _items(older))[:keep]) + "}"


def _at(text: str, k: int) -> int:
    """SQLite: item ``k`` (1-based) of a text array of integers."""
    return int(_items(text)[k - 1])


def sqlite_functions(dbapi_conn) -> None:
    """Register the SQL functions the SQLite merge uses on ``dbapi_conn`` (``merge`` does, before its upsert)."""
    dbapi_conn.create_function("hc_recent_cat", 3, _cat, deterministic=True)
    dbapi_conn.create_function("hc_recent_at", 2, _at, deterministic=True)


def merge(conn, recent: Recent, sqlite: bool) -> None:
    """Merge ``recent`` into ``metric_recent`` inside the caller's transaction, then recompute the rows it
    marked ``redo`` (normally none)."""
    rows = recent.rows()
    if rows:
        if sqlite:
            sqlite_functions(conn.connection.driver_connection)
            conn.exec_driver_sql(upsert_sql(True, f"VALUES ({', '.join('?' * len(COLUMNS))})"), rows)
        else:
            cols = ", ".join(f'"{c}"' for c in COLUMNS)
            key = ", ".join(f'"{c}"' for c in KEY)
            with conn.connection.driver_connection.cursor() as cur:
                cur.execute(f'CREATE TEMPORARY TABLE "hc_rollup_{TABLE}" (LIKE "{TABLE}") ON COMMIT DROP')
                with cur.copy(f'COPY "hc_rollup_{TABLE}" ({cols}) FROM STDIN') as copy:
                    for row in rows:
                        copy.write_row(row)
                cur.execute(upsert_sql(False, f'SELECT {cols} FROM "hc_rollup_{TABLE}" ORDER BY {key}'))
                cur.execute(f'DROP TABLE "hc_rollup_{TABLE}"')
    redo_rows(conn, sqlite)


PAIRS_PER_QUERY = BOUND_PARAMETERS // 2  # (node, name) pairs per IN list


def redo_rows(conn, sqlite: bool) -> int:
    """Recompute every row marked ``redo`` from its series' metric rows. Returns how many."""
    from sqlalchemy import and_, delete, func, insert, select, tuple_

    from .schema import metric_recent, metrics

    marked = [tuple(r) for r in conn.execute(select(*(metric_recent.c[c] for c in KEY))
                                             .where(metric_recent.c.redo != 0).order_by(*KEY))]
    if not marked:
        return 0
    wanted = set(marked)
    pairs = sorted({(node, name) for name, node, _check, _comp in marked})
    fresh = Recent(share_ids=True)
    m = metrics.c
    for i in range(0, len(pairs), PAIRS_PER_QUERY):
        stmt = select(m.name, m.node, m.check, func.coalesce(m.component, ""), m.started_at, m.run_id, m.seq,
                      m.value).where(tuple_(m.node, m.name).in_(pairs[i:i + PAIRS_PER_QUERY]))
        for name, node, check, comp, started, run_id, seq, value in conn.execute(stmt):
            key = (name, node, check, comp)
            if key in wanted:
                fresh.add(key, (started, run_id, seq, value))
    r = metric_recent.c
    for key in marked:  # in key order: concurrent merges lock rows in the same order
        conn.execute(delete(metric_recent).where(and_(*(r[c] == v for c, v in zip(KEY, key)))))
    rows = fresh.rows()
    if rows:
        conn.execute(insert(metric_recent), [dict(zip(COLUMNS, _typed(row, sqlite))) for row in rows])
    return len(marked)


def _typed(row: tuple, sqlite: bool) -> tuple:
    """A ``Recent.rows`` tuple as SQLAlchemy binds it: PostgreSQL's arrays as lists."""
    if sqlite:
        return row
    *head, times, vals = row
    return (*head, [int(x) for x in _items(times)], [float(x) for x in _items(vals)])
