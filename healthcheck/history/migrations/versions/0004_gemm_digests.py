"""gemm_digests: the burn-in's GEMM result digests per GPU, keyed by the fleet key under which every GPU
must compute the same bits (GPU model, library stack, dtype, n, seed).

Created empty: runs stored before this revision carried no fleet key with their digest (only the 48-bit
``gemm_digest48`` metric), so there is nothing to copy; the fleet comparison starts with the first
burn-in ingested after the upgrade.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa

from healthcheck.history.schema import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gemm_digests",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("component", sa.String(128), primary_key=True),
        sa.Column("fleet_key", sa.String(255), primary_key=True),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
    )
    op.create_index("ix_gemm_digests_key_started", "gemm_digests", ["fleet_key", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_gemm_digests_key_started", table_name="gemm_digests")
    op.drop_table("gemm_digests")
