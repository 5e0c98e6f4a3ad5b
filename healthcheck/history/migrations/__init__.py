"""Alembic migrations of the history database, run from the installed package (no alembic.ini).

``upgrade(engine)`` brings a database to this code's head revision in one transaction (PostgreSQL
serialises concurrent upgrades with an advisory lock; SQLite with BEGIN IMMEDIATE). A database whose
revision this code does not know was migrated by a newer healthcheck: every entry point refuses it with
``SchemaTooNew`` instead of writing rows a newer schema may not expect.

After migrating, ``upgrade`` rebuilds the rollups when they are not built for this code (revision 0003
creates them empty; see ``healthcheck.history.rollups``). ``HEAD`` names this code's head revision
without importing Alembic (~0.5 s), for the report's fast ``is_current`` check; a test keeps it equal
to the scripts' head.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..db import HistoryError, SchemaTooNew, SchemaTooOld, describe_error

HERE = Path(__file__).resolve().parent
HEAD = "0005"


def _config():
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE).replace("%", "%%"))
    return cfg


def _script():
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def head() -> str:
    """This code's head revision."""
    return _script().get_current_head()


def known_revisions() -> set[str]:
    return {rev.revision for rev in _script().walk_revisions()}


@dataclass(frozen=True)
class SchemaStatus:
    current: tuple[str, ...]   # the database's revisions (empty: not initialised)
    head: str                  # this code's head
    state: str                 # "current" | "empty" | "behind" | "newer"

    def describe(self) -> str:
        cur = ",".join(self.current) or "none"
        return {"current": f"schema at {cur} (current)",
                "empty": f"no schema yet (run `healthcheck db upgrade`; head is {self.head})",
                "behind": f"schema at {cur}, this healthcheck needs {self.head} (run `healthcheck db upgrade`)",
                "newer": f"schema at {cur}, newer than this healthcheck knows (head {self.head}): "
                         "upgrade healthcheck, or point it at another database"}[self.state]


def status(engine) -> SchemaStatus:
    """Where the database's schema stands relative to this code."""
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            current = tuple(sorted(MigrationContext.configure(conn).get_current_heads()))
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    top = head()
    if not current:
        state = "empty"
    elif any(rev not in known_revisions() for rev in current):
        state = "newer"
    elif current == (top,):
        state = "current"
    else:
        state = "behind"
    return SchemaStatus(current, top, state)


def is_current(engine) -> bool:
    """True when the database is at ``HEAD`` (one query, no Alembic import); False otherwise, including
    a database without the version table. Use ``require_current`` for the reason."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))] == [HEAD]
    except SQLAlchemyError:
        return False


def upgrade(engine, rebuild_rollups: bool = True) -> SchemaStatus:
    """Migrate to head, then (``rebuild_rollups``) rebuild the rollups if they are not built for this code;
    return the status before. SchemaTooNew for a database of a newer schema."""
    from alembic import command
    from sqlalchemy.exc import SQLAlchemyError

    before = status(engine)
    if before.state == "newer":
        raise SchemaTooNew(f"database {_redacted(engine)}: {before.describe()}")
    if before.state == "current":
        if rebuild_rollups:
            _rebuild_if_needed(engine)
        return before
    cfg = _config()
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(sqlite_immediate=True)
            with conn.begin():
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    if rebuild_rollups:
        _rebuild_if_needed(engine)
    return before


def _rebuild_if_needed(engine) -> None:
    from .. import rollups
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            if rollups.usable(conn):
                return
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    rollups.rebuild(engine, force=False)


def require_current(engine, create: bool = False) -> None:
    """Refuse a database this code cannot use: newer schema (SchemaTooNew), older (SchemaTooOld: the
    operator runs `healthcheck db upgrade`), empty (SchemaTooOld, unless ``create``: a first ingest
    creates the schema, so the default SQLite file just works)."""
    now = status(engine)
    if now.state == "current":
        return
    if now.state == "newer":
        raise SchemaTooNew(f"database {_redacted(engine)}: {now.describe()}")
    if create and now.state == "empty":
        upgrade(engine)
        return
    raise SchemaTooOld(f"database {_redacted(engine)}: {now.describe()}")


def _redacted(engine) -> str:
    from ..db import redact

    return redact(engine.url)
