"""metric_recent: each metric series' newest samples, kept at ingest for the readiness report's fleet
ranking (``healthcheck.history.recent``).

Created empty; the rollup definition changes with it (``rollups.VERSION`` 2), so
``healthcheck.history.migrations.upgrade`` rebuilds every rollup from the stored rows right after this
revision (``healthcheck db upgrade``; ``healthcheck db rebuild-rollups`` on demand), as for 0003.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_recent",
        sa.Column("name", sa.String(128), primary_key=True), sa.Column("node", sa.String(255), primary_key=True),
        sa.Column("check", sa.String(128), primary_key=True),
        sa.Column("component", sa.String(128), primary_key=True),
        sa.Column("n_kept", sa.Integer, nullable=False),
        sa.Column("newest_us", sa.BigInteger, nullable=False),
        sa.Column("oldest_us", sa.BigInteger, nullable=False),
        sa.Column("redo", sa.Integer, nullable=False),
        sa.Column("times", sa.Text().with_variant(ARRAY(sa.BigInteger), "postgresql"), nullable=False),
        sa.Column("vals", sa.Text().with_variant(ARRAY(sa.Float), "postgresql"), nullable=False),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("metric_recent")
