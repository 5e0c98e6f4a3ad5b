"""Spooled records -> the history database, idempotently.

``ingest(paths, engine)`` finds every spool under ``paths`` (a spool directory itself, or a shared
directory holding many nodes' spools at any depth: any directory with a ``records.jsonl`` or a rotated
``records.jsonl.N``), reads the records oldest first, and stores them in batches, one transaction each.

Idempotence and crash safety: a run's identity is its ``run_id``, an action's its ``record_id``; the
rows of a run (the run, its results, its metrics, its GEMM digests) go in one transaction, runs and
actions are inserted with ON CONFLICT DO NOTHING (SQLite: INSERT OR IGNORE), and a run's other rows
only by the transaction that stored the run. Re-ingesting stores nothing new; an ingest killed part-way leaves
whole batches behind, and the next one stores the rest. The spool is never modified: rotation bounds
it, and reading it again costs parsing it plus, per batch, one indexed look-up (SQLite) or one
conflicting runs insert (PostgreSQL).

Throughput: rows are plain tuples from ``records`` straight to the driver. SQLite: the driver's
executemany (INSERT OR IGNORE), ~100,000 rows per transaction (each commit can cost a WAL checkpoint).
PostgreSQL: each table's rows are COPYed into a temporary table (ON COMMIT DROP) and moved with one
``INSERT .. SELECT .. ORDER BY key``. (Reading the next batch in a thread while the current one is
written was tried: no gain, the GIL hand-offs cost what the overlap saves.)

Concurrency: SQLite write transactions start with BEGIN IMMEDIATE (writers queue on the busy timeout).
PostgreSQL: rows are inserted in key order (the INSERT .. SELECT sorts), tables in a fixed order, so
concurrent ingests of overlapping spools take their locks in the same order and cannot deadlock; the
runs insert RETURNs the runs this transaction really stored, and only their results and metrics follow. A deadlock or
serialization failure reported by the server anyway is retried (bounded).

Rollups (``rollups``): the runs rows carry their own result/metric counts. A batch's transaction also
lists its runs with metrics in rollup_pending; their metric rows are summarised in memory (per series and,
for error counters, per value) and merged into metric_series / counter_levels every ~1,000,000 metric rows
and at the end, in one transaction that also takes those runs off rollup_pending (one merge per ingest,
not one per batch). A re-ingest of stored runs merges nothing; runs left pending by an interrupted ingest
are merged from their rows by the next one (``rollups.refresh``).

Bad input is skipped with a reason and never stops the rest: a corrupt line (truncated JSON, a line of
another tool; reported by ``healthcheck.spool.store``), a record of an unknown schema version or with a bad
field (``rows.RecordInvalid``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from .db import BOUND_PARAMETERS, HistoryError, describe_error, is_sqlite
from . import rollups
from .rows import (ACTION_COLUMNS, DIGEST_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS, RecordInvalid,
                      action_row, run_rows)

FLUSH_METRIC_ROWS = 1_000_000  # metric rows summarised in memory before their rollups are merged
DEFAULT_BATCH_ROWS = 100_000  # rows per transaction: fewer commits and WAL checkpoints (SQLite), ~1 s each
RETRIES = 5
RETRY_SQLSTATES = ("40P01", "40001")  # deadlock_detected, serialization_failure


@dataclass(frozen=True)
class Skipped:
    """A line or record not stored: where (file:line, or spool and record id) and why."""

    where: str
    reason: str


@dataclass
class IngestReport:
    spools: list[Path] = field(default_factory=list)
    records: int = 0           # valid records read (runs + actions)
    runs: int = 0              # runs stored by this ingest
    results: int = 0
    metrics: int = 0
    actions: int = 0
    duplicates: int = 0        # records already stored (or repeated in the spools)
    skipped: list[Skipped] = field(default_factory=list)
    batches: int = 0
    retries: int = 0
    spools_read: int = 0       # spool directories read to their end so far (progress: of len(spools))

    def progress(self) -> str:
        """One line of progress so far (``on_batch`` callers print it)."""
        rows = self.runs + self.results + self.metrics + self.actions
        return (f"ingest: {self.spools_read}/{len(self.spools)} spool(s) read, {self.records:,} record(s), "
                f"{rows:,} row(s) stored in {self.batches} batch(es)")

    def summary(self) -> str:
        return (f"{len(self.spools)} spool(s), {self.records} record(s): stored {self.runs} run(s) "
                f"({self.results} results, {self.metrics} metrics) and {self.actions} action(s); "
                f"{self.duplicates} already stored; {len(self.skipped)} skipped")


def find_spools(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every spool directory at or below ``paths`` (sorted, each once). A path to a spool file stands
    for its directory. HistoryError for a path that does not exist."""
    from ..spool.store import CURRENT

    def is_spool_file(name: str) -> bool:
        return name == CURRENT or (name.startswith(CURRENT + ".") and name[len(CURRENT) + 1:].isdigit())

    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_file() and is_spool_file(path.name):
            found.add(path.parent.resolve())
        elif path.is_dir():
            for here, dirs, files in os.walk(path):
                dirs.sort()
                if any(is_spool_file(name) for name in files):
                    found.add(Path(here).resolve())
        elif path.exists():
            raise HistoryError(f"{path}: not a spool directory or a records.jsonl file")
        else:
            raise HistoryError(f"{path}: no such file or directory")
    return sorted(found)


def ingest(paths: Iterable[str | os.PathLike[str]], engine, batch_rows: int = DEFAULT_BATCH_ROWS,
           on_batch: Callable[[IngestReport], None] | None = None, now: datetime | None = None) -> IngestReport:
    """Store every record of the spools under ``paths``; see the module docstring. ``on_batch`` is
    called after each committed batch (progress; tests use it to simulate a crash)."""
    report = IngestReport(spools=find_spools(paths))
    ingested_at = now or datetime.now(timezone.utc)
    writer = _Writer(engine, report)
    stamp = _sqlite_stamp if writer.sqlite else None
    batches = _batches(report, stamp(ingested_at) if stamp else ingested_at, batch_rows, stamp)
    for batch in batches:
        report.records += batch.records
        report.duplicates += batch.duplicates
        if batch.runs or batch.actions:
            writer.write(batch)
            report.batches += 1
            if on_batch:
                on_batch(report)
    writer.flush()
    writer.refresh()  # runs an earlier, interrupted ingest stored without merging
    return report


def _records(report: IngestReport) -> Iterator[tuple[Path, dict]]:
    from ..spool.store import read

    for spool_dir in report.spools:
        before, found = len(report.skipped), 0

        def corrupt(item, _before=before) -> None:
            report.skipped.append(Skipped(f"{item.path}:{item.lineno}", item.reason))

        for rec in read(spool_dir, on_corrupt=corrupt):
            found += 1
            yield spool_dir, rec
        bad = len(report.skipped) - before
        report.spools_read += 1
        if found == 0 and bad:
            report.skipped.append(Skipped(str(spool_dir), f"no healthcheck records in {bad} line(s): "
                                                          "another tool's file, or not a spool"))


def _sqlite_stamp(when: datetime) -> str:
    """SQLite's stored form of an aware UTC time (what schema.UTCDateTime binds: SQLITE_TIME_FORMAT,
    "YYYY-MM-DD HH:MM:SS.ffffff"), made once per record; isoformat is several times cheaper than strftime."""
    return when.replace(tzinfo=None).isoformat(" ", "microseconds")


@dataclass
class _Batch:
    """Rows holding a whole number of records, and the valid and repeated records read for them."""

    runs: list = field(default_factory=list)
    results: list = field(default_factory=list)
    metrics: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    digests: list = field(default_factory=list)
    records: int = 0
    duplicates: int = 0

    def rows(self) -> int:
        return len(self.runs) + len(self.results) + len(self.metrics) + len(self.actions) + len(self.digests)


def _batches(report: IngestReport, ingested_at, batch_rows: int, stamp=None) -> Iterator[_Batch]:
    """Batches of ~batch_rows rows; the last one may hold no rows."""
    seen_runs: set[str] = set()
    seen_actions: set[str] = set()
    batch = _Batch()
    skipped = report.skipped
    for spool_dir, rec in _records(report):
        try:
            if rec["kind"] == "run":
                rows = run_rows(rec, ingested_at, stamp)
                run_id = rows.run[0]
                if run_id in seen_runs:
                    batch.duplicates += 1
                    continue
                seen_runs.add(run_id)
                batch.runs.append(rows.run)
                batch.results += rows.results
                if rows.metrics:
                    batch.metrics += rows.metrics
                if rows.digests:
                    batch.digests += rows.digests
            else:
                row = action_row(rec, stamp)
                if row[0] in seen_actions:
                    batch.duplicates += 1
                    continue
                seen_actions.add(row[0])
                batch.actions.append(row)
        except RecordInvalid as exc:
            skipped.append(Skipped(f"{spool_dir} record {str(rec.get('record_id'))[:64]}", str(exc)))
            continue
        batch.records += 1
        if batch.rows() >= batch_rows:
            yield batch
            batch = _Batch()
    yield batch


class _Writer:
    """One batch, one transaction; dialect-specific inserts that ignore existing keys."""

    def __init__(self, engine, report: IngestReport) -> None:
        from . import schema

        self.engine, self.report, self.schema = engine, report, schema
        self.sqlite = is_sqlite(engine)
        self.rollup, self.pending, self.pending_rows = rollups.Rollup(), [], 0  # stored, not merged yet

    def _transaction(self, work):
        """``work(conn)`` in one write transaction (SQLite: BEGIN IMMEDIATE), retried on a deadlock or a
        serialization failure reported by PostgreSQL; HistoryError (redacted) otherwise."""
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        driver_error = getattr(self.engine.dialect.dbapi, "Error", DBAPIError)  # raised by raw-cursor COPY
        for attempt in range(RETRIES + 1):
            try:
                with self.engine.connect() as conn:
                    conn = conn.execution_options(sqlite_immediate=True)
                    with conn.begin():
                        return work(conn)
            except (DBAPIError, driver_error) as exc:
                code = getattr(getattr(exc, "orig", None) or exc, "sqlstate", None)
                if code in RETRY_SQLSTATES and attempt < RETRIES:
                    self.report.retries += 1
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise HistoryError(describe_error(exc, self.engine.url)) from None
            except SQLAlchemyError as exc:
                raise HistoryError(describe_error(exc, self.engine.url)) from None
        raise AssertionError("unreachable")

    def flush(self) -> None:
        """Merge the rollups of the runs stored so far and take them off the pending list."""
        if self.pending:
            rollup, pending = self.rollup, self.pending
            self._transaction(lambda conn: rollups.settle(conn, rollup, pending, self.sqlite))
            self.rollup, self.pending, self.pending_rows = rollups.Rollup(), [], 0

    def refresh(self) -> None:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.engine.connect() as conn:
                left = rollups.has_pending(conn)
        except SQLAlchemyError as exc:
            raise HistoryError(describe_error(exc, self.engine.url)) from None
        if left:
            rollups.refresh(self.engine)

    def write(self, batch: _Batch) -> None:
        runs, results, metrics, actions, digests = (batch.runs, batch.results, batch.metrics, batch.actions,
                                                    batch.digests)
        runs.sort(key=lambda r: r[0])
        actions.sort(key=lambda r: r[0])
        if not self.sqlite:  # key order = lock order (see the module docstring); SQLite writers are serial
            results.sort(key=lambda r: (r[0], r[1]))
            metrics.sort(key=lambda r: (r[0], r[1], r[2]))
            digests.sort(key=lambda r: (r[0], r[1], r[2]))
        store = self._sqlite if self.sqlite else self._postgres
        counts, stored_metrics = self._transaction(lambda conn: store(conn, runs, results, metrics, actions, digests))
        n_runs, n_results, n_metrics, n_actions = counts
        self.report.runs += n_runs
        self.report.results += n_results
        self.report.metrics += n_metrics
        self.report.actions += n_actions
        self.report.duplicates += (len(runs) - n_runs) + (len(actions) - n_actions)
        if stored_metrics:
            self.rollup.add(stored_metrics)
            self.pending.extend({row[0] for row in stored_metrics})
            self.pending_rows += len(stored_metrics)
            if self.pending_rows >= FLUSH_METRIC_ROWS:
                self.flush()

    def _existing(self, conn, table, key: str, ids: list[str]) -> set[str]:
        from sqlalchemy import select

        column = table.c[key]
        found: set[str] = set()
        for i in range(0, len(ids), BOUND_PARAMETERS):
            found.update(conn.execute(select(column).where(column.in_(ids[i:i + BOUND_PARAMETERS]))).scalars())
        return found

    def _sqlite(self, conn, runs, results, metrics, actions, digests) -> tuple[tuple[int, int, int, int], list]:
        """Inside BEGIN IMMEDIATE nobody else writes, so "not there yet" is exact: insert only those,
        through the driver's executemany. Times arrive already in SQLite's text form (``_sqlite_stamp``)."""
        s = self.schema
        have = self._existing(conn, s.runs, "run_id", [r[0] for r in runs]) if runs else set()
        if have:
            runs = [r for r in runs if r[0] not in have]
            results = [row for row in results if row[0] not in have]
            metrics = [row for row in metrics if row[0] not in have]
            digests = [row for row in digests if row[0] not in have]
        have_actions = self._existing(conn, s.actions, "record_id", [a[0] for a in actions]) if actions else set()
        action_rows = [a for a in actions if a[0] not in have_actions] if have_actions else actions
        for table, columns, rows in (("runs", RUN_COLUMNS, runs), ("results", RESULT_COLUMNS, results),
                                     ("metrics", METRIC_COLUMNS, metrics), ("actions", ACTION_COLUMNS, action_rows),
                                     ("gemm_digests", DIGEST_COLUMNS, digests)):
            if rows:
                names = ", ".join(f'"{c}"' for c in columns)
                marks = ", ".join("?" * len(columns))
                conn.exec_driver_sql(f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})", rows)
        if metrics:
            conn.exec_driver_sql("INSERT INTO rollup_pending (run_id) VALUES (?)",
                                 [(r,) for r in sorted({row[0] for row in metrics})])
        return (len(runs), len(results), len(metrics), len(action_rows)), metrics

    def _postgres(self, conn, runs, results, metrics, actions, digests) -> tuple[tuple[int, int, int, int], list]:
        """COPY each table's rows into a temporary table, then one INSERT .. SELECT .. ORDER BY key ON
        CONFLICT DO NOTHING (runs, actions): rows are taken in key order (lock order), tables runs,
        results, metrics, actions. RETURNING says which runs this transaction stored; only their results
        and metrics are copied (a run stored by a concurrent ingest is that ingest's, whole)."""
        dbapi_conn = conn.connection.driver_connection
        with dbapi_conn.cursor() as cur:
            stored = set(_copy_insert(cur, "runs", RUN_COLUMNS, runs, ("run_id",), returning="run_id"))
            if len(stored) < len(runs):
                results = [row for row in results if row[0] in stored]
                metrics = [row for row in metrics if row[0] in stored]
                digests = [row for row in digests if row[0] in stored]
            # No ON CONFLICT for these: their runs were created by this very transaction (RETURNING),
            # so no row with their keys can exist (the foreign key to runs forbids orphans, and keys are
            # unique within a batch: seq is the finding's position, name a JSON object key). Skipping
            # the speculative-insert check saves ~30% of the server's time; should a conflict ever
            # happen, the batch fails as a whole (a unique violation) and nothing is duplicated.
            n_results = len(_copy_insert(cur, "results", RESULT_COLUMNS, results, ("run_id", "seq"),
                                         on_conflict_do_nothing=False))
            n_metrics = len(_copy_insert(cur, "metrics", METRIC_COLUMNS, metrics, ("run_id", "seq", "name"),
                                         on_conflict_do_nothing=False))
            n_actions = len(_copy_insert(cur, "actions", ACTION_COLUMNS, actions, ("record_id",),
                                         returning="record_id"))
            _copy_insert(cur, "gemm_digests", DIGEST_COLUMNS, digests, ("run_id", "component", "fleet_key"),
                         on_conflict_do_nothing=False)
            # new runs of this transaction: no pending row can exist for them
            _copy_insert(cur, "rollup_pending", ("run_id",), [(r,) for r in sorted({row[0] for row in metrics})],
                         ("run_id",), on_conflict_do_nothing=False)
        return (len(stored), n_results, n_metrics, n_actions), metrics


def _copy_insert(cur, table: str, columns: tuple[str, ...], rows: list[tuple], key: tuple[str, ...],
                 returning: str | None = None, on_conflict_do_nothing: bool = True) -> Sequence:
    """PostgreSQL: ``rows`` into ``table`` through COPY to a temporary table (dropped at commit) and
    INSERT .. SELECT .. ORDER BY ``key`` [ON CONFLICT DO NOTHING]. Returns the ``returning`` column of
    the rows stored (or, without ``returning``, one entry per row stored)."""
    if not rows:
        return []
    names = ", ".join(f'"{c}"' for c in columns)
    tmp = f'"hc_ingest_{table}"'
    cur.execute(f'CREATE TEMPORARY TABLE {tmp} (LIKE "{table}") ON COMMIT DROP')
    with cur.copy(f"COPY {tmp} ({names}) FROM STDIN") as copy:
        write_row = copy.write_row
        for row in rows:
            write_row(row)
    order = ", ".join(f'"{c}"' for c in key)
    sql = f'INSERT INTO "{table}" ({names}) SELECT {names} FROM {tmp} ORDER BY {order}'
    if on_conflict_do_nothing:
        sql += " ON CONFLICT DO NOTHING"
    if returning:
        cur.execute(f'{sql} RETURNING "{returning}"')
        return [r[0] for r in cur.fetchall()]
    cur.execute(sql)
    return range(cur.rowcount)
