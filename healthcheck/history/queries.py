"""Reading the history: ``show`` (the CLI's table), ``export`` (csv, json, parquet; streamed), and
``load_frames`` (pandas DataFrames for the analyses and the report; contract in notes/history-design).

Time filters take ``since`` as an aware datetime; ``parse_since`` turns "7d", "12h", "30m", "2w", "90s",
"2024-05-01" or a full ISO-8601 time into one.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator

from .db import HistoryError, describe_error, is_sqlite

EXPORT_FORMATS = ("csv", "json", "parquet")
FRAME_TABLES = ("runs", "results", "metrics", "actions")
EXPORT_TABLES = FRAME_TABLES + ("gemm_digests",)
FRAME_COLUMNS = {
    "runs": ("run_id", "node", "context", "job_id", "started_at", "duration_s", "status"),
    "results": ("run_id", "node", "started_at", "check", "component", "status", "message"),
    "metrics": ("run_id", "node", "started_at", "check", "component", "name", "value"),
    "actions": ("record_id", "run_id", "node", "time", "action", "reason", "job_id", "context"),
    "gemm_digests": ("run_id", "node", "started_at", "component", "fleet_key", "digest"),
}
from ..core.timespec import parse_since  # noqa: E402,F401 - re-exported for the CLI

TIME_COLUMN = {"runs": "started_at", "results": "started_at", "metrics": "started_at", "actions": "time",
               "gemm_digests": "started_at"}


def _like(pattern: str) -> str:
    """A shell-style glob (gpu.*, *ecc*) as a LIKE pattern with '\\' escapes."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _filtered(stmt, table, node: str | None, since: datetime | None, check: str | None = None):
    if node:
        stmt = stmt.where(table.c.node.like(_like(node), escape="\\") if any(c in node for c in "*?")
                          else table.c.node == node)
    if since is not None:
        stmt = stmt.where(table.c[TIME_COLUMN[table.name]] >= since)
    if check:
        stmt = stmt.where(table.c.check.like(_like(check), escape="\\") if any(c in check for c in "*?")
                          else table.c.check == check)
    return stmt


def show(engine, node: str | None = None, check: str | None = None, since: datetime | None = None,
         status: str | None = None, limit: int = 50) -> tuple[list[str], list[tuple]]:
    """The newest ``limit`` runs (with their non-passing checks), or with ``check`` (a name or glob)
    the newest results of those checks. Returns (column names, rows), newest first."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from .schema import results, runs

    try:
        with engine.connect() as conn:
            if check:
                cols = ["started_at", "node", "check", "component", "status", "message", "run_id"]
                stmt = _filtered(select(*(results.c[c] for c in cols)), results, node, since, check)
                if status:
                    stmt = stmt.where(results.c.status == status)
                stmt = stmt.order_by(results.c.started_at.desc(), results.c.seq).limit(limit)
                return cols, [tuple(r) for r in conn.execute(stmt)]
            cols = ["started_at", "node", "context", "job_id", "status", "duration_s", "run_id"]
            stmt = _filtered(select(*(runs.c[c] for c in cols)), runs, node, since)
            if status:
                stmt = stmt.where(runs.c.status == status)
            rows = [tuple(r) for r in conn.execute(stmt.order_by(runs.c.started_at.desc()).limit(limit))]
            ids = [r[-1] for r in rows]
            bad: dict[str, list[str]] = {}
            for i in range(0, len(ids), 900):
                q = (select(results.c.run_id, results.c.check, results.c.status)
                     .where(results.c.run_id.in_(ids[i:i + 900]), results.c.status.in_(("fail", "error", "warn")))
                     .order_by(results.c.run_id, results.c.seq))
                for run_id, name, st in conn.execute(q):
                    entry = f"{name}:{st}"
                    if entry not in bad.setdefault(run_id, []):
                        bad[run_id].append(entry)
            return cols + ["not_passing"], [r + (" ".join(bad.get(r[-1], [])),) for r in rows]
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


def _stream(engine, table_name: str, node: str | None, since: datetime | None,
            chunk: int = 50_000) -> Iterator[tuple[list[str], list[tuple]]]:
    from sqlalchemy import select

    from .schema import TABLES

    table = TABLES[table_name]
    stmt = _filtered(select(table), table, node, since)
    stmt = stmt.order_by(*table.primary_key.columns)
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=chunk).execute(stmt)
        cols = list(result.keys())
        for part in result.partitions(chunk):
            yield cols, [tuple(r) for r in part]


def export(engine, fmt: str, output: str | os.PathLike[str], table: str = "results", node: str | None = None,
           since: datetime | None = None) -> int:
    """Write one table (filtered) to ``output`` as csv, json (an array of objects) or parquet; return
    the row count. The file appears whole or not at all (written beside it, then renamed)."""
    from sqlalchemy.exc import SQLAlchemyError

    if fmt not in EXPORT_FORMATS:
        raise HistoryError(f"unknown export format {fmt!r}: use one of {', '.join(EXPORT_FORMATS)}")
    if table not in EXPORT_TABLES:
        raise HistoryError(f"unknown table {table!r}: use one of {', '.join(EXPORT_TABLES)}")
    from ..safeio.atomic import atomic_file

    out = os.fspath(output)
    if fmt == "parquet":
        _pyarrow()  # without the [parquet] extra: the error before any file is touched
    writer = {"csv": _write_csv, "json": _write_json, "parquet": _write_parquet}[fmt]
    try:  # a unique O_EXCL|O_NOFOLLOW temporary beside it, mode 0644 whatever the umask, then renamed
        with atomic_file(out, 0o644) as fh:
            return writer(_stream(engine, table, node, since), fh, table)
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    except OSError as exc:
        raise HistoryError(f"{out}: {exc.strerror or exc}") from None


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


@contextmanager
def _text(binary, newline: str | None = None):
    """A UTF-8 text view of the open binary file ``binary``, flushed and detached (not closed) at the end."""
    import io

    fh = io.TextIOWrapper(binary, encoding="utf-8", newline=newline)
    try:
        yield fh
    finally:
        fh.flush()
        fh.detach()


def _write_csv(chunks, binary, _table: str) -> int:
    import csv

    count = 0
    with _text(binary, newline="") as fh:
        out = csv.writer(fh)
        header = False
        for cols, rows in chunks:
            if not header:
                out.writerow(cols)
                header = True
            out.writerows([tuple(_plain(v) for v in row) for row in rows])
            count += len(rows)
        if not header:
            from .schema import TABLES

            out.writerow([c.name for c in TABLES[_table].columns])
    return count


def _write_json(chunks, binary, _table: str) -> int:
    import json

    count = 0
    with _text(binary) as fh:
        fh.write("[")
        for cols, rows in chunks:
            for row in rows:
                fh.write(",\n" if count else "\n")
                fh.write(json.dumps({c: _plain(v) for c, v in zip(cols, row)}, allow_nan=False))
                count += 1
        fh.write("\n]\n")
    return count


def _arrow_schema(table_name: str):
    import pyarrow as pa
    from sqlalchemy import Float, Integer

    from .schema import TABLES, UTCDateTime

    fields = []
    for col in TABLES[table_name].columns:
        kind = (pa.timestamp("us", tz="UTC") if isinstance(col.type, UTCDateTime) else pa.float64()
                if isinstance(col.type, Float) else pa.int64() if isinstance(col.type, Integer) else pa.string())
        fields.append(pa.field(col.name, kind))
    return pa.schema(fields)


def _pyarrow():
    """(pyarrow, pyarrow.parquet), or HistoryError naming the [parquet] extra."""
    from ..core.extras import MissingExtra, require

    needed_by = "healthcheck history export --format parquet"
    try:
        require("parquet", needed_by)
        import pyarrow as pa
        import pyarrow.parquet as pq
    except MissingExtra as exc:
        raise HistoryError(str(exc)) from None
    except ImportError as exc:  # there but broken: the extra to reinstall, and why it would not import
        from ..core.extras import install_line

        raise HistoryError(f"{needed_by} needs the [parquet] extra: {install_line('parquet')} "
                           f"(pyarrow does not import: {exc})") from None
    return pa, pq


def _write_parquet(chunks, binary, table_name: str) -> int:
    pa, pq = _pyarrow()
    schema = _arrow_schema(table_name)
    count = 0
    with pq.ParquetWriter(binary, schema) as writer:
        for cols, rows in chunks:
            columns = list(zip(*rows))
            arrays = [pa.array(list(columns[i]), type=schema.field(c).type) for i, c in enumerate(cols)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            count += len(rows)
    return count


def load_frames(engine, since: datetime | None = None, node: str | None = None,
                tables: tuple[str, ...] = FRAME_TABLES, metric_names: list[str] | None = None) -> dict:
    """pandas DataFrames ``{"runs", "results", "metrics", "actions"}`` (columns: FRAME_COLUMNS; times
    tz-aware UTC ``datetime64``), filtered by time/node (and metric name), in (time, primary key) order.
    The readiness report reads ``healthcheck.report.dbsummary.load_summary`` instead (no full read of the
    metrics); this is the contract of the analyses and the report's fallback. Timestamps are read as text
    on SQLite and converted by pandas in one vectorised pass (no per-row Python conversion)."""
    import pandas as pd
    from sqlalchemy import String, select, type_coerce
    from sqlalchemy.exc import SQLAlchemyError

    from .schema import TABLES

    frames = {}
    try:
        with engine.connect() as conn:
            for name in tables:
                table = TABLES[name]
                cols = FRAME_COLUMNS[name]
                tcol = TIME_COLUMN[name]
                exprs = [type_coerce(table.c[c], String()).label(c) if c == tcol and is_sqlite(engine)
                         else table.c[c] for c in cols]
                stmt = _filtered(select(*exprs), table, node, since)
                if name == "metrics" and metric_names:
                    stmt = stmt.where(table.c.name.in_(metric_names))
                key = [c if is_sqlite(engine) or not isinstance(c.type, String) else c.collate("C")
                       for c in table.primary_key.columns]  # ties by code point, as the rollups break them
                rows = conn.execute(stmt.order_by(table.c[tcol], *key)).all()
                frame = pd.DataFrame.from_records([tuple(r) for r in rows], columns=list(cols))
                frame[tcol] = pd.to_datetime(frame[tcol], utc=True, format="ISO8601")
                if "value" in frame:
                    frame["value"] = frame["value"].astype("float64")
                frames[name] = frame
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    return frames
