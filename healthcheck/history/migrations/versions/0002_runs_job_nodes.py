"""runs.job_nodes: the node list of the job a run belongs to (burn-in runs of a multi-node job).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable, no default: every existing row stays as it was (runs of earlier versions had no list)
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("job_nodes", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("job_nodes")
