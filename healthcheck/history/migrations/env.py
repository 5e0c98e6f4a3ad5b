"""Alembic environment: runs on the connection handed over in ``config.attributes["connection"]``
(see ``healthcheck.history.migrations.upgrade``); there is no alembic.ini and no URL here.

On PostgreSQL the migration transaction first takes a transaction-scoped advisory lock, so several
``healthcheck db upgrade`` / ingest processes starting at once run the migrations one after another
(the later ones find the database at head and do nothing)."""
from __future__ import annotations

from alembic import context
from sqlalchemy import text

from healthcheck.history.schema import metadata

ADVISORY_LOCK_KEY = 0x6863_6869_7374  # "hchist"

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)

with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
    context.run_migrations()
