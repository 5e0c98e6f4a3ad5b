"""What every command group shares: the one usage error, the exit codes (healthcheck.core.exitcodes), the
config and expectations loaders, the option bundles (``--config``, ``--format``, ``--since``, ``--db``),
and leaving with a status. Imports click and the library; never imported by the library.
"""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

import click

from ..core import exitcodes

CONFIG_ENV = "HEALTHCHECK_CONFIG"
DEFAULT_CONFIG = "/etc/healthcheck/healthcheck.toml"
DB_HELP = ("Database URL or SQLite path (default: $HEALTHCHECK_DB_URL, else the default SQLite file). "
           "Never put a password here: use $HEALTHCHECK_DB_PASSWORD_FILE.")


class UsageFailure(click.ClickException):
    """A usage, config or input error: one line on stderr, exit 2."""

    exit_code = exitcodes.USAGE


class Unavailable(click.ClickException):
    """The history database, slurmctld or systemd could not be used: one line on stderr, exit 6."""

    exit_code = exitcodes.UNAVAILABLE


MAX_INPUT = 64 * 1024 * 1024  # a recorded tool output or a design file; the parsers have their own bounds


def read_input(path: str, what: str = "tool output", limit: int = MAX_INPUT) -> bytes:
    """The bytes of an input file named on the command line: a regular file of at most ``limit`` bytes
    (a FIFO, a device or a folder is refused before it is read: safety.read_regular); else exit 2
    naming the file."""
    from ..safeio.trust import read_regular

    try:
        return read_regular(path, what, limit)
    except OSError as exc:
        raise UsageFailure(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def read_text(path: str, what: str = "tool output", limit: int = MAX_INPUT) -> str:
    """:func:`read_input` decoded as UTF-8 (undecodable bytes replaced: tool outputs are mostly ASCII)."""
    return read_input(path, what, limit).decode("utf-8", "replace")


def use_color(stream=None) -> bool:
    """Colours only on a terminal, and never with ``--no-color`` or ``NO_COLOR`` set and not empty
    (https://no-color.org)."""
    import os
    import sys

    if os.environ.get("NO_COLOR"):
        return False
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get("healthcheck.no_color"):
        return False
    return (stream or sys.stdout).isatty()


def exit_with(code: int) -> None:
    sys.stdout.flush()
    sys.exit(code)


def config_path_of(path: str | None) -> str | None:
    """The config named by --config, $HEALTHCHECK_CONFIG, or /etc/healthcheck/healthcheck.toml if present."""
    return path or os.environ.get(CONFIG_ENV) or (DEFAULT_CONFIG if os.path.exists(DEFAULT_CONFIG) else None)


def load_config(path: str | None):
    """The loaded config (see :func:`config_path_of`), None without one; a bad one is a UsageFailure."""
    from ..config import ConfigError, load

    path = config_path_of(path)
    if path is None:
        return None
    try:
        return load(path)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc


def expectations_for(config, node: str):
    from ..config import ConfigError, default_expectations

    try:
        return config.expectations_for(node) if config else default_expectations()
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc


def open_history(db_url: str | None, config_path: str | None = None):
    """The history engine for ``--db`` (else the site config's or the default). A URL it refuses (a
    password on the command line, an unknown driver) is a usage error (exit 2); connecting happens on
    first use, under :func:`guard` (exit 6)."""
    from ..config import ConfigError, site_db_url
    from ..history.db import HistoryError, open_engine

    try:
        return open_engine(db_url, None if db_url else site_db_url(config_path))
    except (ConfigError, HistoryError) as exc:
        raise UsageFailure(str(exc)) from None


def verbosity_options(fn):
    """``-q/--quiet`` and ``-v/--verbose``, the same on every command that prints progress: the command gets
    ``verbosity`` -1 (errors and the result only), 0 (the default: progress on a terminal) or 1 (a line
    per step, also into a log file or cron mail)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, quiet, verbose, **kwargs):
        if quiet and verbose:
            raise UsageFailure("-q/--quiet and -v/--verbose exclude each other")
        return fn(*args, verbosity=-1 if quiet else 1 if verbose else 0, **kwargs)

    wrapper = click.option("-v", "--verbose", is_flag=True, help="A line per step (into logs and cron mail "
                           "too), instead of a progress bar on a terminal.")(wrapper)
    return click.option("-q", "--quiet", is_flag=True, help="Only errors and the result: no progress.")(wrapper)


class OutputPath(click.ParamType):
    """A file (or, ``folder_ok``, a new or empty folder) the command will write: refused as a usage error
    (exit 2) at once, before any work, when it cannot be written there: its folder missing or not
    writable, or it names an existing folder where a file is meant (``report --html DIR/x.html`` into a
    missing DIR used to fail after the whole build)."""

    name = "path"

    def __init__(self, folder_ok: bool = False):
        self.folder_ok = folder_ok
        self.name = "path" if folder_ok else "file"  # the metavar in --help and the man page

    def convert(self, value, param, ctx):
        import os

        path = os.fspath(value)
        if not path:
            self.fail("an empty path", param, ctx)
        if os.path.isdir(path) and not self.folder_ok:
            self.fail(f"{path!r} is a folder; give a file name", param, ctx)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            self.fail(f"cannot write {path!r}: its folder {parent!r} does not exist", param, ctx)
        if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
            self.fail(f"cannot write {path!r}: permission denied", param, ctx)
        return path


def guard(fn, *args, **kwargs):
    """Run a history call; its errors (already redacted by the store) become exit 6 with one line."""
    from ..history.db import HistoryError

    try:
        return fn(*args, **kwargs)
    except HistoryError as exc:
        raise Unavailable(str(exc)) from None


class Since(click.ParamType):
    """``--since``: a duration back from now (30d, 12h, 2w, 90m, 45s) or an ISO-8601 time (UTC when
    zoneless); the value is an aware datetime."""

    name = "WHEN"

    def convert(self, value, param, ctx):
        if isinstance(value, datetime):
            return value
        from ..core.timespec import parse_since

        try:
            return parse_since(str(value), datetime.now(timezone.utc))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SINCE = Since()


def config_option(help_text: str = "Expectations file (TOML); else $HEALTHCHECK_CONFIG, else "
                                   "/etc/healthcheck/healthcheck.toml when present."):
    return click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE", help=help_text)


def format_option(choices=("text", "json"), default: str | None = "text", help_text: str | None = None):
    """``--format``: one flag name on every command that prints data; ``json`` documents carry
    ``schema_version``."""
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default,
                        show_default=default is not None, help=help_text or "Output format.")


def since_option(default: str | None = "30d", help_text: str | None = None):
    return click.option("--since", type=SINCE, default=default, show_default=default is not None, metavar="WHEN",
                        help=help_text or "Start of the window: a duration back from now (30d, 12h, 2w) or an "
                                          "ISO-8601 time.")


def db_option():
    return click.option("--db", "db_url", metavar="URL", help=DB_HELP)


def json_document(data) -> dict:
    """The JSON document of a command: ``schema_version`` first (1 unless the data says otherwise); a
    list becomes ``{"schema_version": 1, "items": [...]}`` (every document is an object)."""
    if isinstance(data, dict):
        return {"schema_version": data.get("schema_version", 1), **data}
    return {"schema_version": 1, "items": data}


def emit_json(document, *, allow_nan: bool = True, indent: int = 1) -> None:
    """Print a command's JSON document (see :func:`json_document`)."""
    import json

    click.echo(json.dumps(json_document(document), indent=indent, default=str, allow_nan=allow_nan))
