"""Where the history database is, how to reach it, and how to talk about it without leaking secrets.

URL resolution, first match wins: ``--db URL`` > the config's URL > ``$HEALTHCHECK_DB_URL`` > the default
SQLite file (root: ``/var/lib/healthcheck/history.sqlite``; others:
``$XDG_DATA_HOME/healthcheck/history.sqlite``, ``~/.local/share`` when XDG_DATA_HOME is unset).

Accepted forms: ``sqlite:///abs/path.sqlite``, a plain file path (SQLite), ``postgresql://user@host:5432/db``
(``postgres://`` and ``postgresql+psycopg://`` too; the driver is psycopg 3).

Passwords: from the file named by ``$HEALTHCHECK_DB_PASSWORD_FILE`` (trailing newline stripped), else
``$HEALTHCHECK_DB_PASSWORD``, else one inside ``$HEALTHCHECK_DB_URL`` (environment, not argv), else libpq's own
``~/.pgpass``. A password inside ``--db`` is refused: argv is visible to every user in ``ps``. Every message
this package produces about a URL or a database error goes through ``redact`` / ``redact_text``.

SQLite engines run in WAL mode (readers never block the ingest), ``synchronous=NORMAL`` (durable at each
checkpoint, safe with WAL), a busy timeout, and write transactions that start with ``BEGIN IMMEDIATE`` when
asked (``connection.execution_options(sqlite_immediate=True)``), so two writers queue instead of
failing with "database is locked" when a read lock would have to be upgraded.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # sqlalchemy is imported lazily: ~350 ms
    from sqlalchemy.engine import URL, Engine

URL_ENV = "HEALTHCHECK_DB_URL"
PASSWORD_ENV = "HEALTHCHECK_DB_PASSWORD"
PASSWORD_FILE_ENV = "HEALTHCHECK_DB_PASSWORD_FILE"
ROOT_SQLITE = Path("/var/lib/healthcheck/history.sqlite")
BUSY_TIMEOUT_S = 30.0
BOUND_PARAMETERS = 900  # per statement, for IN lists: SQLite's bound-parameter limit is 999 on old builds
MASK = "***"


class HistoryError(Exception):
    """A history-store failure with a message fit for an operator (already redacted)."""


class SchemaTooNew(HistoryError):
    """The database was migrated by a newer healthcheck than this one."""


class SchemaTooOld(HistoryError):
    """The database needs ``healthcheck db upgrade`` before this code can use it."""


def default_sqlite_path(env: Mapping[str, str] | None = None, euid: int | None = None) -> Path:
    """Root: /var/lib/healthcheck/history.sqlite; anyone else: $XDG_DATA_HOME/healthcheck/history.sqlite."""
    env = os.environ if env is None else env
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return ROOT_SQLITE
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"),
                                                    ".local", "share")
    return Path(base) / "healthcheck" / "history.sqlite"


def _parse(text: str) -> "URL":
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if "://" not in text:  # a plain path means SQLite
        return make_url("sqlite:///" + os.path.abspath(os.path.expanduser(text)))
    try:
        url = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise HistoryError(f"not a database URL: {redact_text(text, _url_secrets(text))} ({exc.__class__.__name__})") \
            from None
    backend = url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    elif backend != "sqlite":
        raise HistoryError(f"unsupported database {backend!r} in {redact(url)}: use sqlite or postgresql")
    return url


def _url_secrets(text: str) -> list[str]:
    """The password part of a URL that may not parse (user:PASSWORD@host)."""
    head = text.split("://", 1)[-1].split("@", 1)
    if len(head) == 2 and ":" in head[0]:
        return [head[0].split(":", 1)[1]]
    return []


def _read_password(env: Mapping[str, str]) -> str | None:
    path = env.get(PASSWORD_FILE_ENV)
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().rstrip("\r\n")
        except OSError as exc:
            raise HistoryError(f"{PASSWORD_FILE_ENV}={path}: {exc.strerror or exc}") from None
    return env.get(PASSWORD_ENV) or None


def resolve_url(cli_url: str | None = None, config_url: str | None = None,
                env: Mapping[str, str] | None = None, euid: int | None = None) -> "URL":
    """The database URL to use (see the module docstring), with its password filled in."""
    env = os.environ if env is None else env
    if cli_url:
        url = _parse(cli_url)
        if url.password:
            raise HistoryError(f"--db {redact(url)}: a password on the command line is visible to every user; "
                               f"put it in the file named by {PASSWORD_FILE_ENV} (or in {PASSWORD_ENV})")
    elif config_url:
        url = _parse(config_url)
    elif env.get(URL_ENV):
        url = _parse(env[URL_ENV])
    else:
        url = _parse(str(default_sqlite_path(env, euid)))
    if url.get_backend_name() != "sqlite":
        password = _read_password(env)
        if password is not None:
            url = url.set(password=password)
    return url


def redact(url: "URL | str") -> str:
    """The URL as text with its password replaced by ***."""
    if isinstance(url, str):
        return redact_text(url, _url_secrets(url))
    return url.render_as_string(hide_password=True)


def redact_text(text: str, secrets: list[str | None]) -> str:
    """``text`` with every occurrence of each secret (and of its URL-quoted form) replaced by ***."""
    from urllib.parse import quote, quote_plus

    for secret in secrets:
        if secret:
            # as given, fully quoted, form-quoted, as SQLAlchemy writes it into a URL, and quote()'s default
            for form in {secret, quote(secret, safe=""), quote_plus(secret), quote(secret, safe=" +"), quote(secret)}:
                text = text.replace(form, MASK)
    return text


def secrets_of(url: "URL") -> list[str | None]:
    return [url.password if isinstance(url.password, str) else None]


def describe_error(exc: BaseException, url: "URL") -> str:
    """A one-paragraph, redacted message for a driver/SQLAlchemy error (no SQL, no parameters)."""
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split()) or orig.__class__.__name__
    if len(text) > 500:
        text = text[:500] + "..."
    return redact_text(f"database {redact(url)}: {text}", secrets_of(url))


def is_sqlite(engine_or_url) -> bool:
    url = getattr(engine_or_url, "url", engine_or_url)
    return url.get_backend_name() == "sqlite"


def make_engine(url: "URL", create_dirs: bool = False, busy_timeout_s: float = BUSY_TIMEOUT_S) -> "Engine":
    """An engine for ``url``. SQLite: WAL, busy timeout, BEGIN IMMEDIATE on request; ``create_dirs``
    makes the database file's directory (0750) first (the default location only: an explicit path in
    a missing directory is an error the operator should see)."""
    from sqlalchemy import create_engine, event

    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10},
                             hide_parameters=True)
    if create_dirs and url.database:
        from ..safeio.atomic import make_dirs

        make_dirs(os.path.dirname(os.path.abspath(url.database)), 0o750)  # and parents, whatever the umask
    engine = create_engine(url, connect_args={"timeout": busy_timeout_s}, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def open_engine(cli_url: str | None = None, config_url: str | None = None,
                env: Mapping[str, str] | None = None) -> "Engine":
    """``resolve_url`` + ``make_engine`` (creating the default SQLite file's directory)."""
    env = os.environ if env is None else env
    url = resolve_url(cli_url, config_url, env)
    default = not (cli_url or config_url or env.get(URL_ENV))
    return make_engine(url, create_dirs=default)
