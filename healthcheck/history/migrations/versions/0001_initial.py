"""Initial history schema: runs, results, metrics, actions.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""
from alembic import op
import sqlalchemy as sa

from healthcheck.history.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("record_id", sa.String(64), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("context", sa.String(32), nullable=False),
        sa.Column("job_id", sa.String(64)),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("duration_s", sa.Float),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("config_hash", sa.String(64)),
        sa.Column("tool_version", sa.String(64)),
        sa.Column("ingested_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_runs_node_started", "runs", ["node", "started_at"])
    op.create_index("ix_runs_started", "runs", ["started_at"])
    op.create_table(
        "results",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("check", sa.String(128), nullable=False),
        sa.Column("component", sa.String(128)),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("message", sa.Text),
    )
    op.create_index("ix_results_check_started", "results", ["check", "started_at"])
    op.create_index("ix_results_node_started", "results", ["node", "started_at"])
    op.create_table(
        "metrics",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("check", sa.String(128), nullable=False),
        sa.Column("component", sa.String(128)),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(16)),
    )
    op.create_index("ix_metrics_name_started", "metrics", ["name", "started_at"])
    op.create_index("ix_metrics_node_started", "metrics", ["node", "started_at"])
    op.create_table(
        "actions",
        sa.Column("record_id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64)),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("time", UTCDateTime(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("job_id", sa.String(64)),
        sa.Column("context", sa.String(32)),
        sa.Column("why", sa.Text),
        sa.Column("checks", sa.Text),
    )
    op.create_index("ix_actions_node_time", "actions", ["node", "time"])
    op.create_index("ix_actions_time", "actions", ["time"])


def downgrade() -> None:
    for table in ("actions", "metrics", "results", "runs"):
        op.drop_table(table)
