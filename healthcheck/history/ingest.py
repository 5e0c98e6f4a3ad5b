"""Spooled records -> the history database, idempotently.

``ingest(paths, engine)`` finds every spool under ``paths`` (a spool directory itself, or a shared
directory holding many nodes' spools at any depth: any directory with a ``records.jsonl`` or a rotated
``records.jsonl.N``), reads the records oldest first, and stores them in batches, one transaction each.

Idempotence and crash safety: a run's identity is its ``run_id``, an action's its ``record_id``; the
rows of a run (the run, its results, its metrics) go in one transaction, and every insert is
INSERT .. ON CONFLICT DO NOTHING (SQLite: INSERT OR IGNORE). Re-ingesting stores nothing new; an ingest
killed part-way leaves whole batches behind, and the next one stores the rest. The spool is never
modified: rotation bounds it, and reading it again costs one indexed look-up per batch.

Concurrency: SQLite write transactions start with BEGIN IMMEDIATE (writers queue on the busy timeout).
PostgreSQL: rows are inserted in key order, tables in a fixed order, so concurrent ingests of
overlapping spools take their locks in the same order and cannot deadlock; the runs insert RETURNs the
runs this transaction really stored, and only their results and metrics follow. A deadlock or
serialization failure reported by the server anyway is retried (bounded).

Bad input is skipped with a reason and never stops the rest: a corrupt line (truncated JSON, a line of
another tool; reported by ``healthcheck.spool``), a record of an unknown schema version or with a bad
field (``records.RecordInvalid``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .db import HistoryError, describe_error, is_sqlite
from .records import (ACTION_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS, RecordInvalid, action_row,
                      run_rows)

DEFAULT_BATCH_ROWS = 20_000
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

    def summary(self) -> str:
        return (f"{len(self.spools)} spool(s), {self.records} record(s): stored {self.runs} run(s) "
                f"({self.results} results, {self.metrics} metrics) and {self.actions} action(s); "
                f"{self.duplicates} already stored; {len(self.skipped)} skipped")


def find_spools(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Every spool directory at or below ``paths`` (sorted, each once). A path to a spool file stands
    for its directory. HistoryError for a path that does not exist."""
    from ..spool import CURRENT

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
    for batch in _batches(report, stamp(ingested_at) if stamp else ingested_at, batch_rows, stamp):
        writer.write(*batch)
        report.batches += 1
        if on_batch:
            on_batch(report)
    return report


def _records(report: IngestReport) -> Iterator[tuple[Path, dict]]:
    from ..spool import read

    for spool_dir in report.spools:
        before, found = len(report.skipped), 0

        def corrupt(item, _before=before) -> None:
            report.skipped.append(Skipped(f"{item.path}:{item.lineno}", item.reason))

        for rec in read(spool_dir, on_corrupt=corrupt):
            found += 1
            yield spool_dir, rec
        bad = len(report.skipped) - before
        if found == 0 and bad:
            report.skipped.append(Skipped(str(spool_dir), f"no healthcheck records in {bad} line(s): "
                                                          "another tool's file, or not a spool"))


def _sqlite_stamp(when: datetime) -> str:
    """SQLite's stored form of a UTC time (what schema.UTCDateTime binds), made once per record."""
    from .schema import SQLITE_TIME_FORMAT

    return when.strftime(SQLITE_TIME_FORMAT)


def _batches(report: IngestReport, ingested_at, batch_rows: int, stamp=None):
    """(runs, results, metrics, actions) lists, a whole number of records each, ~batch_rows rows."""
    seen_runs: set[str] = set()
    seen_actions: set[str] = set()
    runs: list = []
    results: list = []
    metrics: list = []
    actions: list = []
    for spool_dir, rec in _records(report):
        rid = rec.get("record_id")
        try:
            if rec["kind"] == "run":
                rows = run_rows(rec, ingested_at, stamp)
                if rows.run["run_id"] in seen_runs:
                    report.duplicates += 1
                    continue
                seen_runs.add(rows.run["run_id"])
                runs.append(rows.run)
                results.extend(rows.results)
                metrics.extend(rows.metrics)
            else:
                row = action_row(rec, stamp)
                if row[0] in seen_actions:
                    report.duplicates += 1
                    continue
                seen_actions.add(row[0])
                actions.append(row)
        except RecordInvalid as exc:
            report.skipped.append(Skipped(f"{spool_dir} record {str(rid)[:64]}", str(exc)))
            continue
        report.records += 1
        if len(runs) + len(results) + len(metrics) + len(actions) >= batch_rows:
            yield runs, results, metrics, actions
            runs, results, metrics, actions = [], [], [], []
    if runs or actions:
        yield runs, results, metrics, actions


class _Writer:
    """One batch, one transaction; dialect-specific inserts that ignore existing keys."""

    def __init__(self, engine, report: IngestReport) -> None:
        from . import schema

        self.engine, self.report, self.schema = engine, report, schema
        self.sqlite = is_sqlite(engine)

    def write(self, runs: list[dict], results: list[tuple], metrics: list[tuple], actions: list[tuple]) -> None:
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        runs.sort(key=lambda r: r["run_id"])
        actions.sort(key=lambda r: r[0])
        if not self.sqlite:  # key order = lock order (see the module docstring); SQLite writers are serial
            results.sort(key=lambda r: (r[0], r[1]))
            metrics.sort(key=lambda r: (r[0], r[1], r[2]))
        for attempt in range(RETRIES + 1):
            try:
                with self.engine.connect() as conn:
                    conn = conn.execution_options(sqlite_immediate=True)
                    with conn.begin():
                        counts = (self._sqlite if self.sqlite else self._generic)(conn, runs, results, metrics,
                                                                                 actions)
                break
            except DBAPIError as exc:
                code = getattr(exc.orig, "sqlstate", None)
                if code in RETRY_SQLSTATES and attempt < RETRIES:
                    self.report.retries += 1
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise HistoryError(describe_error(exc, self.engine.url)) from None
            except SQLAlchemyError as exc:
                raise HistoryError(describe_error(exc, self.engine.url)) from None
        n_runs, n_results, n_metrics, n_actions = counts
        self.report.runs += n_runs
        self.report.results += n_results
        self.report.metrics += n_metrics
        self.report.actions += n_actions
        self.report.duplicates += (len(runs) - n_runs) + (len(actions) - n_actions)

    def _existing(self, conn, table, key: str, ids: list[str]) -> set[str]:
        from sqlalchemy import select

        column = table.c[key]
        found: set[str] = set()
        for i in range(0, len(ids), 900):  # SQLite's bound-parameter limit is 999 on old builds
            found.update(conn.execute(select(column).where(column.in_(ids[i:i + 900]))).scalars())
        return found

    def _sqlite(self, conn, runs, results, metrics, actions) -> tuple[int, int, int, int]:
        """Inside BEGIN IMMEDIATE nobody else writes, so "not there yet" is exact: insert only those.
        Times arrive already in SQLite's text form (``_sqlite_stamp``)."""
        s = self.schema
        have = self._existing(conn, s.runs, "run_id", [r["run_id"] for r in runs]) if runs else set()
        run_rows = [tuple(r[c] for c in RUN_COLUMNS) for r in runs if r["run_id"] not in have]
        if have:
            results = [row for row in results if row[0] not in have]
            metrics = [row for row in metrics if row[0] not in have]
        have_actions = self._existing(conn, s.actions, "record_id", [a[0] for a in actions]) if actions else set()
        action_rows = [a for a in actions if a[0] not in have_actions]
        for table, columns, rows in (("runs", RUN_COLUMNS, run_rows), ("results", RESULT_COLUMNS, results),
                                     ("metrics", METRIC_COLUMNS, metrics), ("actions", ACTION_COLUMNS, action_rows)):
            if rows:
                names = ", ".join(f'"{c}"' for c in columns)
                marks = ", ".join("?" * len(columns))
                conn.exec_driver_sql(f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})", rows)
        return len(run_rows), len(results), len(metrics), len(action_rows)

    def _generic(self, conn, runs, results, metrics, actions) -> tuple[int, int, int, int]:
        """PostgreSQL: skip what is visibly there, then let ON CONFLICT settle races; RETURNING says
        which runs this transaction stored, and only their results/metrics are inserted."""
        from sqlalchemy.dialects.postgresql import insert

        s = self.schema
        have = self._existing(conn, s.runs, "run_id", [r["run_id"] for r in runs]) if runs else set()
        fresh = [r for r in runs if r["run_id"] not in have]
        stored: set[str] = set()
        if fresh:
            stmt = insert(s.runs).on_conflict_do_nothing().returning(s.runs.c.run_id)
            stored = set(conn.execute(stmt, fresh).scalars())
        results = [dict(zip(RESULT_COLUMNS, row)) for row in results if row[0] in stored]
        metrics = [dict(zip(METRIC_COLUMNS, row)) for row in metrics if row[0] in stored]
        if results:
            conn.execute(insert(s.results).on_conflict_do_nothing(), results)
        if metrics:
            conn.execute(insert(s.metrics).on_conflict_do_nothing(), metrics)
        n_actions = 0
        if actions:
            have_actions = self._existing(conn, s.actions, "record_id", [a[0] for a in actions])
            rows = [dict(zip(ACTION_COLUMNS, a)) for a in actions if a[0] not in have_actions]
            if rows:
                stmt = insert(s.actions).on_conflict_do_nothing().returning(s.actions.c.record_id)
                n_actions = len(conn.execute(stmt, rows).all())
        return len(stored), len(results), len(metrics), n_actions
