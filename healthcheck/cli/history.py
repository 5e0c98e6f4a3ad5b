"""`healthcheck history ...` and `healthcheck db ...`: thin click shells over healthcheck.history.

Only click is imported here; SQLAlchemy, Alembic and pandas load inside the commands. Library errors
(HistoryError and friends, already redacted) become exit 6 (the database could not be used) with a
one-line message; usage errors exit 2 (healthcheck.core.exitcodes).
Registered into the main group by healthcheck/cli/main.py.
"""
from __future__ import annotations

import sys

import click

from ..core import exitcodes
from .common import UsageFailure, db_option, emit_json, format_option, guard, open_history, since_option


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def history():
    """Results history: ingest the spools, show and export runs.

    \b
    Example:
      healthcheck history ingest /var/lib/healthcheck/spool
      healthcheck history show --node gpu017 --since 7d
    """


@history.command("ingest")
@click.argument("paths", nargs=-1, type=click.Path())
@db_option()
@click.option("--batch-rows", default=100_000, show_default=True, type=click.IntRange(1),
              help="Rows per transaction (whole runs; fewer, larger transactions ingest faster).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors and skipped lines.")
@click.option("-v", "--verbose", is_flag=True, help="A progress line after each batch, anywhere (as --progress).")
@click.option("--progress/--no-progress", default=None,
              help="Spools read and rows stored so far, on stderr after each batch (default: on a terminal).")
def history_ingest(paths, db_url, batch_rows, quiet, verbose, progress):
    """Store spooled records in the database, idempotently (re-ingesting stores nothing twice).

    PATHS are spool directories, or shared directories holding many nodes' spools at any depth
    (default: /var/lib/healthcheck/spool). A corrupt line or an unreadable record is reported on
    stderr and skipped; the rest goes in. The spool files are never modified. Creates the schema in an
    empty database; refuses a database of a newer schema.

    \b
    Example:
      healthcheck history ingest                              # this node's spool, default database
      healthcheck history ingest /shared/spools --db postgresql://hc@db.example/healthcheck
    """
    import os

    from ..history import migrations
    from ..history.ingest import ingest

    if quiet and verbose:
        raise UsageFailure("-q/--quiet and -v/--verbose exclude each other")
    if verbose:
        progress = True
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:  # an input error (exit 2), told before the database is touched
        raise UsageFailure(f"{missing[0]}: no such file or directory (a spool directory or a folder of spools)")
    engine = open_history(db_url)
    guard(migrations.require_current, engine, create=True)
    import sys

    show = sys.stderr.isatty() and not quiet if progress is None else progress
    on_batch = (lambda rep: click.echo(rep.progress(), err=True)) if show else None
    report = guard(ingest, list(paths) or ["/var/lib/healthcheck/spool"], engine, batch_rows=batch_rows,
                   on_batch=on_batch)
    for item in report.skipped[:20]:
        click.echo(f"skipped {item.where}: {item.reason}", err=True)
    if len(report.skipped) > 20:
        click.echo(f"... and {len(report.skipped) - 20} more skipped", err=True)
    if not report.spools:
        click.echo("no spool files found under " + ", ".join(paths or ["/var/lib/healthcheck/spool"]), err=True)
    if not quiet:
        click.echo(report.summary())


@history.command("show")
@db_option()
@click.option("--node", help="Node name or glob (gpu0*).")
@click.option("--check", help="Show results of this check (name or glob, e.g. 'gpu.*') instead of runs.")
@since_option(default=None, help_text="7d, 12h, 30m, 2w or an ISO-8601 time.")
@click.option("--status", type=click.Choice(["pass", "warn", "fail", "error", "skip"]))
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def history_show(db_url, node, check, since, status, limit, fmt):
    """The newest runs (with their non-passing checks), or with --check the newest results of a check.

    \b
    Example:
      healthcheck history show --since 24h --status fail
      healthcheck history show --node 'gpu0*' --check 'gpu.ecc*' --since 30d --format json
    """
    from ..history import migrations
    from ..history.queries import show

    when = since
    engine = open_history(db_url)
    guard(migrations.require_current, engine)
    cols, rows = guard(show, engine, node=node, check=check, since=when, status=status, limit=limit)
    if fmt == "json":
        emit_json({"columns": list(cols), "rows": [{c: _typed(v) for c, v in zip(cols, row)} for row in rows]})
        return
    if not rows:
        click.echo("no matching records")
        return
    table = [cols] + [[_text(v) for v in row] for row in rows]
    widths = [min(max(len(r[i]) for r in table), 60) for i in range(len(cols) - 1)]
    for row in table:
        cells = [row[i][:60].ljust(widths[i]) for i in range(len(cols) - 1)] + [row[-1]]
        click.echo("  ".join(cells).rstrip())


def _rollups_usable(engine) -> bool:
    from sqlalchemy.exc import SQLAlchemyError

    from ..history import rollups
    from ..history.db import HistoryError, describe_error

    try:
        with engine.connect() as conn:
            return rollups.usable(conn)
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


def _typed(value):
    """A JSON value as typed as the database's: numbers stay numbers, times become ISO 8601 (UTC), a
    non-finite number null."""
    import math
    from datetime import datetime

    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _text(value) -> str:
    from datetime import datetime

    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


@history.command("export")
@db_option()
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"]), required=True)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option("--table", type=click.Choice(["runs", "results", "metrics", "actions", "gemm_digests"]), default="results",
              show_default=True)
@click.option("--node", help="Node name or glob.")
@since_option(default=None, help_text="7d, 12h, 30m, 2w or an ISO-8601 time.")
def history_export(db_url, fmt, output, table, node, since):
    """Write one table of the history to a file (written whole, or not at all).

    \b
    Example:
      healthcheck history export --format parquet --output metrics.parquet --table metrics --since 30d
      healthcheck history export --format csv -o results.csv --node gpu017
    """
    from ..history import migrations
    from ..history.queries import export

    when = since
    engine = open_history(db_url)
    guard(migrations.require_current, engine)
    count = guard(export, engine, fmt, output, table=table, node=node, since=when)
    click.echo(f"{count} {table} row(s) written to {output}")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def db():
    """The history database's schema: create, migrate, inspect.

    \b
    Example:
      healthcheck db upgrade
      healthcheck db status --db postgresql://hc@db.example/healthcheck
    """


@db.command("upgrade")
@db_option()
def db_upgrade(db_url):
    """Create or migrate the schema to this healthcheck's version (safe to run concurrently).

    \b
    Example:
      healthcheck db upgrade
      HEALTHCHECK_DB_PASSWORD_FILE=/etc/healthcheck/db.pw healthcheck db upgrade --db postgresql://hc@db/hc
    """
    from ..history import migrations
    from ..history.db import redact

    engine = open_history(db_url)
    before = guard(migrations.upgrade, engine)
    after = guard(migrations.status, engine)
    if before.current == after.current:
        click.echo(f"{redact(engine.url)}: already at {after.head}")
    else:
        click.echo(f"{redact(engine.url)}: upgraded {','.join(before.current) or 'empty'} -> {after.head}")


@db.command("rebuild-rollups")
@db_option()
def db_rebuild_rollups(db_url):
    """Recompute the report's rollups (per-run counts, metric series, counter levels) from the stored rows.

    `healthcheck db upgrade` does this by itself when the rollups are missing or were built by another
    version; run it after deleting rows by hand. Writers wait while it runs (one transaction; an ingest
    that gives up waiting is simply run again).

    \b
    Example:
      healthcheck db rebuild-rollups --db /var/lib/healthcheck/history.sqlite
    """
    import time

    from ..history import migrations, rollups
    from ..history.db import redact

    engine = open_history(db_url)
    guard(migrations.require_current, engine)
    start = time.monotonic()
    done = guard(rollups.rebuild, engine)
    click.echo(f"{redact(engine.url)}: rollups rebuilt from {done['runs']} run(s): {done['series']} metric series, "
               f"{done['levels']} counter levels ({time.monotonic() - start:.1f} s)")


@db.command("status")
@db_option()
@format_option(help_text="json: {database, state, description, rollups_current}.")
def db_status(db_url, fmt):
    """Say where the schema stands; exit 0 when current, 1 when it needs an upgrade, 6 when newer than
    this tool.

    \b
    Example:
      healthcheck db status
    """
    from ..history import migrations
    from ..history.db import redact

    engine = open_history(db_url)
    now = guard(migrations.status, engine)
    rollups = guard(_rollups_usable, engine) if now.state == "current" else None
    if fmt == "json":
        emit_json({"database": redact(engine.url), "state": now.state, "description": now.describe(),
                   "rollups_current": rollups})
    else:
        click.echo(f"{redact(engine.url)}: {now.describe()}")
        if rollups is False:
            click.echo("rollups: not built for this healthcheck (run `healthcheck db rebuild-rollups`)")
    sys.exit({"current": exitcodes.OK, "empty": exitcodes.FAIL, "behind": exitcodes.FAIL,
              "newer": exitcodes.UNAVAILABLE}[now.state])
