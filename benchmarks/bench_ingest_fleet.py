"""Ingest of a whole fleet's spools against a bare ``executemany`` of the same rows (issue 35: ingest
throughput >= 0.8x the bare driver), on SQLite or PostgreSQL.

    # the spools: benchmarks/fleet_sim.py --nodes 10000 --spool /tmp/f10k/spool
    .venv/bin/python benchmarks/bench_ingest_fleet.py /tmp/f10k/spool --db sqlite:////tmp/bench.sqlite
    .venv/bin/python benchmarks/bench_ingest_fleet.py /tmp/f10k/spool \
        --db 'postgresql+psycopg:///bench?host=/var/run/postgresql'   # an empty database you own

Each side gets a fresh schema (``migrations.upgrade`` on an empty database; PostgreSQL: the public schema
is dropped first, so name a scratch database; one that already holds runs is refused without
``--replace``):

- "bare": the rows are built outside the clock (``rows.run_rows``/``action_row`` of every record, in
  chunks of ~100,000 rows, the ingest's batch size); on the clock only the driver's ``executemany`` of
  each chunk into runs, results, metrics, actions, gemm_digests and its commit. No rollups, no
  idempotence check, no reading or parsing of the spool: the floor.
- "ingest": ``healthcheck history ingest`` as a user runs it (a subprocess: read, parse, validate,
  insert, rollups), wall time and peak RSS.

The ratio bare_s / ingest_s is the figure (>= 0.8 wanted). ``--side bare|ingest`` runs one side only.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from healthcheck.history import migrations  # noqa: E402
from healthcheck.history.db import is_sqlite, make_engine, resolve_url  # noqa: E402
from healthcheck.history.ingest import DEFAULT_BATCH_ROWS, _sqlite_stamp, find_spools  # noqa: E402
from healthcheck.history.rows import (ACTION_COLUMNS, DIGEST_COLUMNS, METRIC_COLUMNS, RESULT_COLUMNS,  # noqa: E402
                                      RUN_COLUMNS, action_row, run_rows)
from healthcheck.spool.store import read  # noqa: E402

TABLES = (("runs", RUN_COLUMNS), ("results", RESULT_COLUMNS), ("metrics", METRIC_COLUMNS),
          ("actions", ACTION_COLUMNS), ("gemm_digests", DIGEST_COLUMNS))


def fresh(url: str):
    """An engine on an empty database of the current schema."""
    engine = make_engine(resolve_url(url))
    if is_sqlite(engine):
        path = Path(engine.url.database)
        engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        engine = make_engine(resolve_url(url))
    else:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    migrations.upgrade(engine)
    return engine


def chunks(spool: Path, sqlite: bool):
    """Lists of rows per table, ~DEFAULT_BATCH_ROWS rows each, whole records."""
    now = datetime.now(timezone.utc)
    stamp = _sqlite_stamp if sqlite else None
    ingested = stamp(now) if stamp else now
    out = {name: [] for name, _ in TABLES}
    n = 0
    for spool_dir in find_spools([spool]):
        for rec in read(spool_dir):
            if rec["kind"] == "run":
                rows = run_rows(rec, ingested, stamp)
                out["runs"].append(rows.run)
                out["results"] += rows.results
                out["metrics"] += rows.metrics
                out["gemm_digests"] += rows.digests
                n += 1 + len(rows.results) + len(rows.metrics) + len(rows.digests)
            else:
                out["actions"].append(action_row(rec, stamp))
                n += 1
            if n >= DEFAULT_BATCH_ROWS:
                yield out
                out, n = {name: [] for name, _ in TABLES}, 0
    if n:
        yield out


def bare(url: str, spool: Path) -> tuple[float, int]:
    engine = fresh(url)
    sqlite = is_sqlite(engine)
    raw = engine.raw_connection()
    dbapi = raw.driver_connection
    if sqlite:
        dbapi.isolation_level = None
    on_clock, total = 0.0, 0
    cur = dbapi.cursor()
    for chunk in chunks(spool, sqlite):
        t = time.perf_counter()
        if sqlite:
            cur.execute("BEGIN IMMEDIATE")
        for name, columns in TABLES:
            rows = chunk[name]
            if rows:
                names = ", ".join(f'"{c}"' for c in columns)
                marks = ", ".join(("?" if sqlite else "%s") for _ in columns)
                cur.executemany(f'INSERT INTO "{name}" ({names}) VALUES ({marks})', rows)
                total += len(rows)
        if sqlite:
            cur.execute("COMMIT")
        else:
            dbapi.commit()
        on_clock += time.perf_counter() - t
    raw.close()
    engine.dispose()
    return on_clock, total


def ingest(url: str, spool: Path) -> tuple[float, str]:
    fresh(url).dispose()
    exe = Path(sys.executable).with_name("healthcheck")
    t = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "peak %M KB", str(exe), "history", "ingest", str(spool),
                           "--db", url], capture_output=True, text=True, check=True)
    return time.perf_counter() - t, (proc.stdout.strip().splitlines() or [""])[-1] + "; " + proc.stderr.strip()


def holds_runs(url: str) -> bool:
    """Whether the database already holds a history (a ``runs`` row)."""
    from sqlalchemy import inspect, text

    engine = make_engine(resolve_url(url))
    try:
        if is_sqlite(engine) and not Path(engine.url.database).exists():
            return False
        with engine.connect() as conn:
            return "runs" in inspect(conn).get_table_names() and \
                conn.execute(text("SELECT 1 FROM runs LIMIT 1")).first() is not None
    finally:
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spool", type=Path, help="a directory of spools (fleet_sim.py --spool)")
    parser.add_argument("--db", required=True, help="a scratch database (its tables are replaced)")
    parser.add_argument("--side", choices=("both", "bare", "ingest"), default="both")
    parser.add_argument("--replace", action="store_true", help="replace a database that already holds runs")
    args = parser.parse_args()
    if not args.replace and holds_runs(args.db):
        parser.error(f"{args.db} already holds a history: name a scratch database, or pass --replace")
    bare_s = ingest_s = None
    if args.side in ("both", "bare"):
        bare_s, rows = bare(args.db, args.spool)
        print(f"bare executemany: {bare_s:8.1f} s on the clock, {rows:,} rows, {rows / bare_s:,.0f} rows/s",
              flush=True)
    if args.side in ("both", "ingest"):
        ingest_s, said = ingest(args.db, args.spool)
        print(f"history ingest:   {ingest_s:8.1f} s wall ({said})", flush=True)
    if bare_s and ingest_s:
        print(f"ratio bare/ingest: {bare_s / ingest_s:.2f} (goal >= 0.8)")
    os.sys.stdout.flush()


if __name__ == "__main__":
    main()
