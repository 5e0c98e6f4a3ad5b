"""`healthcheck report`: the cluster readiness report from the history database.

A thin shell over :mod:`healthcheck.report`; pandas and SQLAlchemy are imported inside the
command only. The lead registers :data:`report` into ``healthcheck/cli.py``.
"""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

import click

STEPS = ("load", "latest runs", "failing checks", "counter growth", "performance distributions", "drains", "risk",
         "plots", "render")


class ReportFailure(click.ClickException):
    exit_code = 2  # usage or config error (the database unreachable, a bad config), as in healthcheck.cli


def parse_since(text: str, now: datetime) -> datetime:
    """"30d" (also s, m, h, w) before ``now``, or an ISO-8601 time (UTC when zoneless)."""
    from .timespec import parse_since as parse

    try:
        return parse(text, now)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None


def load_history(db_url: str | None, since: datetime, now: datetime):
    """The window's ``report.summary.Summary`` from the database (``--db``, $HEALTHCHECK_DB_URL or the
    default): through the rollups (``report.dbsummary``), or, where they are not built, from every row
    (``load_frames``; slow on a big history) with a note saying how to rebuild them. A database of
    another schema version is refused (``healthcheck db upgrade``)."""
    from .config import ConfigError, site_db_url
    from .history import migrations
    from .history.db import HistoryError, open_engine
    from .report.dbsummary import RollupsUnavailable, load_summary

    try:
        engine = open_engine(db_url, None if db_url else site_db_url())
        try:
            if not migrations.is_current(engine):  # the fast check; the full one names the reason
                migrations.require_current(engine)
            try:
                summary = load_summary(engine, since, now)
            except RollupsUnavailable as exc:
                from .history.queries import load_frames
                from .report.summary import summarize_frames

                summary = summarize_frames(load_frames(engine, since=since), since, now)
                summary.notes.append(str(exc)[:1].upper() + str(exc)[1:] + ".")
            from .history.digests import load_digests

            summary.gemm_digests = load_digests(engine, since, now)
            return summary
        finally:
            engine.dispose()
    except (HistoryError, ConfigError) as exc:  # already redacted by the store
        raise ReportFailure(str(exc)) from None


def site_view(config_path: str | None):
    """(node -> class name, [topology]) of the site config; (None, None) without one."""
    path = config_path or os.environ.get("HEALTHCHECK_CONFIG")
    if not path:
        return None, None
    from .config import ConfigError, load

    try:
        cfg = load(path)
    except ConfigError as exc:
        raise ReportFailure(str(exc)) from None

    def node_class(node: str) -> str | None:
        cls = cfg.node_class(node)
        return cls.name if cls is not None else None

    return node_class, cfg.topology or None


def _slurm_states():
    """Live node states from slurmctld; (None, note) when Slurm cannot be asked."""
    from .slurm.backend import SlurmError, SlurmUnreachable, backend_from_name

    try:
        return backend_from_name("auto").nodes(), None
    except (SlurmError, SlurmUnreachable, OSError) as exc:
        return None, f"Slurm could not be asked ({exc}); drain states come from our own records."


def _write(path: str, text: str) -> None:
    """Atomically, mode 0644 (a unique O_EXCL|O_NOFOLLOW temporary beside it, then renamed)."""
    from .atomicio import atomic_write

    atomic_write(path, text, 0o644)


class _Progress:
    """click.progressbar over the report's steps, on a terminal only (stderr); silent otherwise."""

    def __init__(self, enabled: bool):
        self.bar = click.progressbar(length=len(STEPS), label="report", file=sys.stderr) if enabled else None

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __call__(self, label: str) -> None:
        if self.bar is not None:
            self.bar.label = f"report: {label:<26}"
            self.bar.update(1)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


@click.command("report")
@click.option("--since", "since_text", default="30d", show_default=True, metavar="WHEN",
              help="Start of the window: a duration back from now (30d, 12h, 2w) or an ISO-8601 time.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Write the self-contained HTML report (plots inline, no network) to FILE.")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default=None,
              help="Print the report as Markdown or JSON (default: markdown, unless --html).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Write the --format output to FILE instead of stdout.")
@click.option("--db", "db_url", metavar="URL", envvar=None,
              help="Database URL (else $HEALTHCHECK_DB_URL, else the default SQLite file). Passwords come "
                   "from $HEALTHCHECK_DB_PASSWORD_FILE or $HEALTHCHECK_DB_PASSWORD, never from this URL.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Expectations file whose node classes group peers for the outlier test "
                   "(else $HEALTHCHECK_CONFIG; without one the whole fleet is one peer group).")
@click.option("--slurm/--no-slurm", default=False, show_default=True,
              help="Ask slurmctld for the nodes' drain states (drained by us vs by others).")
@click.option("--no-plots", is_flag=True, help="Leave the plots out of the HTML (a smaller page).")
def report(since_text, html_path, fmt, output, db_url, config_path, slurm, no_plots):
    """Cluster readiness report: fleet summary (ready / drained by us / drained by others / failing),
    failing checks ranked, nodes ranked by risk with the evidence, performance distributions with
    outliers, error counter growth, drain timeline, and a recommended action per finding.

    \b
    Example:
      healthcheck report --since 30d --html /srv/www/readiness.html
      healthcheck report --since 7d --format markdown --config /etc/healthcheck/healthcheck.toml
      healthcheck report --db postgresql://hc@db.example/hc --format json -o report.json
    """
    if html_path and (fmt or output):
        raise click.UsageError("use either --html FILE or --format/--output, not both")
    now = datetime.now(timezone.utc)
    since = parse_since(since_text, now)
    node_class, topology = site_view(config_path)
    with _Progress(sys.stderr.isatty()) as step:
        history = load_history(db_url, since, now)
        step("load")
        slurm_states, note = _slurm_states() if slurm else (None, None)
        from .report import build_report, render_html, render_json, render_markdown

        rep = build_report(history, since, now, node_class=node_class, slurm_states=slurm_states, progress=step,
                           topology=topology)
        if note:
            rep.notes.append(note)
        if html_path:
            text = render_html(rep, plots=not no_plots, step=step)
        else:
            step("plots")
            text = render_json(rep) if fmt == "json" else render_markdown(rep)
        step("render")
    if html_path:
        _write(html_path, text)
        click.echo(f"wrote {html_path} ({rep.fleet.total} nodes, {len(rep.findings)} findings)", err=True)
    elif output:
        _write(output, text)
    else:
        click.echo(text, nl=False)
