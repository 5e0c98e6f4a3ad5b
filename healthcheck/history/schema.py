"""The history tables (SQLAlchemy 2.x Core metadata; the Alembic revisions create the same thing).

- ``runs``     one row per run record: identity ``run_id`` (the run's UUID, 32 hex), node, context
               (prolog, epilog, slurm-check, check, burnin), job id and the job's node list, start, duration, verdict, config hash,
               tool version.
- ``results``  one row per finding of a run, keyed (run_id, seq) where seq is the finding's position
               in the record; node and started_at are copied from the run so time/node queries need
               no join (they are immutable facts of the run).
- ``metrics``  one row per numeric value of a finding (``metrics: {name: float}``), keyed
               (run_id, seq, name), with check, component, unit, and the run's node/started_at.
- ``actions``  one row per drain/resume record, keyed by its ``record_id``.
- ``gemm_digests``  one row per GPU of a burn-in run: the digest of its GEMM product and the fleet key
               (GPU model, library stack, dtype, n, seed) under which every GPU must compute the same bits
               (migration 0004; read by ``healthcheck.history.digests``).

Rollups (migration 0003; what they hold and why they are exact: ``healthcheck.history.rollups``):

- ``runs.n_results`` / ``n_metrics`` / ``n_flagged``  the run's own row counts (flagged: results that
               fail, warn or error), written with the run row;
- ``metric_series``   one row per metric series (name, node, check, component; '' for none): the time of
               its first sample and its last sample (time, run, seq, value);
- ``counter_levels``  one row per (series, value) of every error counter: first and last time seen;
- ``metric_recent``   one row per metric series: its newest samples (``recent.KEEP``), newest first, as
               two arrays (PostgreSQL ``bigint[]``/``double precision[]``, SQLite the same text), migration
               0005 (``healthcheck.history.recent``);
- ``rollup_pending``  runs stored whose metrics are not merged into the two tables above yet;
- ``rollup_state``    which rollup definition the rows above were built with (key/value).

Every key is natural (from the record), so ingesting the same record twice inserts nothing the
second time: the ingest uses INSERT .. ON CONFLICT DO NOTHING (SQLite: INSERT OR IGNORE).

Timestamps are UTC. PostgreSQL stores ``timestamptz``; SQLite stores text "YYYY-MM-DD HH:MM:SS.ffffff"
(UTC, SQLAlchemy's SQLite format, which sorts and compares as time); both read back tz-aware UTC.
"""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (BigInteger, Column, DateTime, Float, ForeignKey, Index, Integer, MetaData, String, Table,
                        Text, TypeDecorator)
from sqlalchemy.dialects.postgresql import ARRAY

SQLITE_TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


class UTCDateTime(TypeDecorator):
    """A datetime stored as UTC; naive inputs are taken as UTC; results are tz-aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if isinstance(value, str):  # raw text from a SQLite expression
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("run_id", String(64), primary_key=True),
    Column("record_id", String(64), nullable=False),
    Column("node", String(255), nullable=False),
    Column("context", String(32), nullable=False),
    Column("job_id", String(64)),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("duration_s", Float),
    Column("status", String(8), nullable=False),
    Column("config_hash", String(64)),
    Column("tool_version", String(64)),
    Column("ingested_at", UTCDateTime(), nullable=False),
    Column("job_nodes", Text),  # the job's node list (Slurm hostlist form) where the run belongs to one (burn-in)
    Column("n_results", Integer),  # rollups (0003): the run's rows; NULL until `db rebuild-rollups` for older rows
    Column("n_metrics", Integer),
    Column("n_flagged", Integer),  # results with status fail, warn or error
    Index("ix_runs_node_started", "node", "started_at"),
    Index("ix_runs_started", "started_at"),
)

results = Table(
    "results", metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("node", String(255), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("check", String(128), nullable=False),
    Column("component", String(128)),
    Column("status", String(8), nullable=False),
    Column("message", Text),
    Index("ix_results_check_started", "check", "started_at"),
    Index("ix_results_node_started", "node", "started_at"),
)

metrics = Table(
    "metrics", metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("name", String(128), primary_key=True),
    Column("node", String(255), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("check", String(128), nullable=False),
    Column("component", String(128)),
    Column("value", Float, nullable=False),
    Column("unit", String(16)),
    Index("ix_metrics_name_started", "name", "started_at"),
    Index("ix_metrics_node_name_started", "node", "name", "started_at"),  # 0003 (was node, started_at)
)

actions = Table(
    "actions", metadata,
    Column("record_id", String(64), primary_key=True),
    Column("run_id", String(64)),
    Column("node", String(255), nullable=False),
    Column("time", UTCDateTime(), nullable=False),
    Column("action", String(16), nullable=False),
    Column("reason", Text),
    Column("job_id", String(64)),
    Column("context", String(32)),
    Column("why", Text),
    Column("checks", Text),
    Index("ix_actions_node_time", "node", "time"),
    Index("ix_actions_time", "time"),
)

gemm_digests = Table(  # 0004: the burn-in's GEMM result digests, compared across the fleet
    "gemm_digests", metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("component", String(128), primary_key=True),
    Column("fleet_key", String(255), primary_key=True),  # GPU model | library | dtype | n | seed
    Column("node", String(255), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("digest", String(64), nullable=False),
    Index("ix_gemm_digests_key_started", "fleet_key", "started_at"),
)


def _series_key() -> list[Column]:
    """A rollup's series key: name, node, check, component ('' for a NULL, node-level, component)."""
    return [Column("name", String(128), primary_key=True), Column("node", String(255), primary_key=True),
            Column("check", String(128), primary_key=True), Column("component", String(128), primary_key=True)]


metric_series = Table(
    "metric_series", metadata,
    *_series_key(),
    Column("first_at", UTCDateTime(), nullable=False),
    Column("last_at", UTCDateTime(), nullable=False),
    Column("last_run_id", String(64), nullable=False),
    Column("last_seq", Integer, nullable=False),
    Column("last_value", Float, nullable=False),
    sqlite_with_rowid=False,  # SQLite: rows stored in key order (read by key prefix, merged by key)
)

counter_levels = Table(
    "counter_levels", metadata,
    *_series_key(),
    Column("value", Float, primary_key=True),
    Column("first_at", UTCDateTime(), nullable=False),
    Column("last_at", UTCDateTime(), nullable=False),
    sqlite_with_rowid=False,
)

metric_recent = Table(  # migration 0005; see healthcheck.history.recent
    "metric_recent", metadata,
    *_series_key(),
    Column("n_kept", Integer, nullable=False),
    Column("newest_us", BigInteger, nullable=False),  # microseconds since the epoch, UTC
    Column("oldest_us", BigInteger, nullable=False),
    Column("redo", Integer, nullable=False),  # 1 only inside a merge's transaction (recent.redo_rows)
    Column("times", Text().with_variant(ARRAY(BigInteger), "postgresql"), nullable=False),
    Column("vals", Text().with_variant(ARRAY(Float), "postgresql"), nullable=False),
    sqlite_with_rowid=False,
)

rollup_pending = Table(  # runs stored whose metrics are not merged into the rollups yet
    "rollup_pending", metadata,
    Column("run_id", String(64), primary_key=True),
)

rollup_state = Table(
    "rollup_state", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

TABLES = {"runs": runs, "results": results, "metrics": metrics, "actions": actions, "gemm_digests": gemm_digests}

# Unit of a metric, from its name's suffix (names are a contract: docs/checks.md).
UNIT_SUFFIXES = (("_c", "C"), ("_w", "W"), ("_mhz", "MHz"), ("_mib", "MiB"), ("_gib", "GiB"), ("_gbps", "GB/s"),
                 ("_gbs", "GB/s"), ("_tflops", "TFLOPS"), ("_pct", "%"), ("_percent", "%"), ("_s", "s"),
                 ("_ms", "ms"), ("_us", "us"), ("_bytes", "B"), ("_per_hour", "1/h"))


def unit_of(name: str) -> str | None:
    """The unit implied by a metric name ("temperature_c" -> "C"), or None."""
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    return None
