"""Rollups for the readiness report: per-run row counts, metric_series, counter_levels, rollup_pending,
rollup_state; the metrics index on (node, started_at) becomes one on (node, name, started_at).

The new tables are created empty and ``rollup_state`` holds no row, which marks the rollups as not built:
``healthcheck.history.migrations.upgrade`` rebuilds them from the stored rows right after this revision
(``healthcheck db upgrade``; ``healthcheck db rebuild-rollups`` does the same on demand). Filling them here
would freeze today's rollup code into the migration; the rebuild is the one definition.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa

from healthcheck.history.schema import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _key_columns() -> list:
    return [sa.Column("name", sa.String(128), primary_key=True), sa.Column("node", sa.String(255), primary_key=True),
            sa.Column("check", sa.String(128), primary_key=True),
            sa.Column("component", sa.String(128), primary_key=True)]


def upgrade() -> None:
    # nullable, no default: rows stored before this revision get their counts from the rebuild
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("n_results", sa.Integer))
        batch.add_column(sa.Column("n_metrics", sa.Integer))
        batch.add_column(sa.Column("n_flagged", sa.Integer))
    # one series' samples (the report reads the error counters that moved); it serves queries by node as
    # the index it replaces did, so ingest maintains as many indexes as before
    op.create_index("ix_metrics_node_name_started", "metrics", ["node", "name", "started_at"])
    op.drop_index("ix_metrics_node_started", table_name="metrics")
    op.create_table(
        "metric_series",
        *_key_columns(),
        sa.Column("first_at", UTCDateTime(), nullable=False),
        sa.Column("last_at", UTCDateTime(), nullable=False),
        sa.Column("last_run_id", sa.String(64), nullable=False),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.Column("last_value", sa.Float, nullable=False),
        sqlite_with_rowid=False,  # SQLite: rows stored in key order (read by key prefix, merged by key)
    )
    op.create_table(
        "counter_levels",
        *_key_columns(),
        sa.Column("value", sa.Float, primary_key=True),
        sa.Column("first_at", UTCDateTime(), nullable=False),
        sa.Column("last_at", UTCDateTime(), nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "rollup_pending",
        sa.Column("run_id", sa.String(64), primary_key=True),
    )
    op.create_table(
        "rollup_state",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rollup_state")
    op.drop_table("rollup_pending")
    op.drop_table("counter_levels")
    op.drop_table("metric_series")
    op.create_index("ix_metrics_node_started", "metrics", ["node", "started_at"])
    op.drop_index("ix_metrics_node_name_started", table_name="metrics")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("n_flagged")
        batch.drop_column("n_metrics")
        batch.drop_column("n_results")
