"""Ingest throughput: 1,000,000 result rows from a spool into SQLite, against raw sqlite3 executemany
of the same rows into the same schema (target: ingest/raw >= 0.5), and a PostgreSQL figure when a URL
is given.

    .venv/bin/python benchmarks/bench_ingest.py                     # SQLite only
    HEALTHCHECK_DB_PASSWORD_FILE=pw .venv/bin/python benchmarks/bench_ingest.py --pg-url postgresql://u@h/db
    .venv/bin/python benchmarks/bench_ingest.py --runs 10000        # quicker

The spool holds RUNS run records of 10 findings each (no metrics, so "rows" are result rows), written
straight to records.jsonl. "ingest" is the whole `healthcheck history ingest` path (read + parse JSON +
validate + insert, in transactions of ~100,000 rows, the default); "raw" is only sqlite3.executemany of pre-built row
tuples in one transaction, with the same pragmas (WAL, synchronous=NORMAL): the floor.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from healthcheck.history import migrations  # noqa: E402
from healthcheck.history.db import make_engine, resolve_url  # noqa: E402
from healthcheck.history.ingest import ingest  # noqa: E402
from healthcheck.history.rows import RESULT_COLUMNS, RUN_COLUMNS, run_rows  # noqa: E402
from healthcheck.history.schema import SQLITE_TIME_FORMAT  # noqa: E402

CHECKS = ("gpu.ecc", "gpu.temperature", "gpu.clocks", "gpu.nvlink", "ib.ports", "pcie.link_width",
          "host.mounts", "host.memory", "gpu.xid", "gpu.retired_pages")


def make_spool(directory: Path, n_runs: int) -> list[dict]:
    directory.mkdir(parents=True)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    records = []
    with open(directory / "records.jsonl", "w") as fh:
        for i in range(n_runs):
            rec = {"kind": "run", "record_id": f"{i:032x}", "run_id": f"{i:032x}", "node": f"gpu{i % 512:03d}",
                   "context": "prolog", "job_id": str(100000 + i),
                   "started_at": (t0 + timedelta(seconds=37 * i)).isoformat(), "duration_s": 0.021,
                   "status": "pass", "config_hash": "3f1c9a0b2d4e5f60", "tool_version": "0.1.0",
                   "results": [{"check": c, "status": "pass", "message": f"{c} ok", "component": f"GPU{k % 8}",
                                "metrics": {}} for k, c in enumerate(CHECKS)]}
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            records.append(rec)
    return records


def raw_sqlite(path: Path, records: list[dict]) -> float:
    engine = make_engine(resolve_url(str(path), env={}))
    migrations.upgrade(engine)
    engine.dispose()
    now = datetime.now(timezone.utc)
    run_tuples, result_tuples = [], []
    for rec in records:
        rows = run_rows(rec, now)
        run = rows.run_dict()
        run_tuples.append(tuple(run[c].strftime(SQLITE_TIME_FORMAT) if c in ("started_at", "ingested_at")
                                else run[c] for c in RUN_COLUMNS))
        stamp = run["started_at"].strftime(SQLITE_TIME_FORMAT)
        result_tuples.extend(r[:3] + (stamp,) + r[4:] for r in rows.results)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    t = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO runs ({','.join(RUN_COLUMNS)}) VALUES ({','.join('?' * len(RUN_COLUMNS))})",
                     run_tuples)
    cols = ",".join(f'"{c}"' for c in RESULT_COLUMNS)
    conn.executemany(f"INSERT INTO results ({cols}) VALUES ({','.join('?' * len(RESULT_COLUMNS))})", result_tuples)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t
    conn.close()
    return elapsed


def timed_ingest(url: str, spool: Path) -> tuple[float, int]:
    engine = make_engine(resolve_url(url))
    migrations.upgrade(engine)
    t = time.perf_counter()
    report = ingest([spool], engine)
    elapsed = time.perf_counter() - t
    engine.dispose()
    return elapsed, report.results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="run records (10 result rows each)")
    parser.add_argument("--pg-url", help="also ingest into this (empty) PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        base = Path(tmp)
        records = make_spool(base / "spool", args.runs)
        rows = args.runs * len(CHECKS)
        raw_s = raw_sqlite(base / "raw.sqlite", records)
        del records
        ingest_s, stored = timed_ingest(f"sqlite:///{base / 'ingest.sqlite'}", base / "spool")
        assert stored == rows, (stored, rows)
        again_s, _ = timed_ingest(f"sqlite:///{base / 'ingest.sqlite'}", base / "spool")
        print(f"result rows:             {rows:,}")
        print(f"raw sqlite3 executemany: {raw_s:7.2f} s  {rows / raw_s:>10,.0f} rows/s")
        print(f"healthcheck ingest:      {ingest_s:7.2f} s  {rows / ingest_s:>10,.0f} rows/s "
              "(read + parse + validate + insert)")
        print(f"ratio ingest/raw:        {raw_s / ingest_s:7.2f}  (target >= 0.5)")
        print(f"re-ingest (no-op):       {again_s:7.2f} s")
        if args.pg_url:
            pg_s, pg_rows = timed_ingest(args.pg_url, base / "spool")
            print(f"PostgreSQL ingest:       {pg_s:7.2f} s  {pg_rows / pg_s:>10,.0f} rows/s")


if __name__ == "__main__":
    main()
