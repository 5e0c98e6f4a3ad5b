"""`healthcheck report`: the cluster readiness report from the history database.

A thin shell over :mod:`healthcheck.report` (reading: :mod:`healthcheck.report.load`); pandas and
SQLAlchemy are imported inside the command only.
"""
from __future__ import annotations

import gc
import sys
from datetime import datetime, timezone

import click

from ..core import exitcodes
from .common import OutputPath, UsageFailure, Unavailable, config_option, db_option, verbosity_options

STEPS = ("load", "latest runs", "failing checks", "counter growth", "performance distributions", "drains", "risk",
         "fleet tables", "plots", "render")


def _input(call, *args, **kwargs):
    """A report input read through the library; its errors become exit 2 (config) or 6 (database), an
    empty window exit 1 naming the newest record."""
    from ..report.load import ReportInputError
    from ..report.window import EmptyWindow

    try:
        return call(*args, **kwargs)
    except ReportInputError as exc:
        raise (UsageFailure if exc.kind == "config" else Unavailable)(str(exc)) from None
    except EmptyWindow as exc:
        click.echo(f"healthcheck report: {exc}", err=True)
        sys.exit(exitcodes.FAIL)


def _write(path: str, text: str) -> None:
    """Atomically, mode 0644 (a unique O_EXCL|O_NOFOLLOW temporary beside it, then renamed)."""
    from ..safeio.atomic import atomic_write

    atomic_write(path, text, 0o644)


class _Progress:
    """click.progressbar over the report's steps on a terminal (stderr); when asked off a terminal, one
    line per step ("report: 3/10 counter growth"); silent otherwise."""

    def __init__(self, enabled: bool):
        tty = sys.stderr.isatty()
        self.bar = click.progressbar(length=len(STEPS), label="report", file=sys.stderr) if enabled and tty else None
        self.lines, self.done = enabled and not tty, 0

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __call__(self, label: str) -> None:
        self.done += 1
        if self.lines:
            click.echo(f"report: {self.done}/{len(STEPS)} {label}", err=True)
        if self.bar is not None:
            self.bar.label = f"report: {label:<26}"
            self.bar.update(1)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


class _When(click.ParamType):
    """A duration (30d, 12h, 2w) or an ISO-8601 time, kept as text: ``--since`` counts back from
    ``--until`` (itself from now), so both are resolved together once both are known."""

    name = "WHEN"

    def convert(self, value, param, ctx):
        from ..core.timespec import parse_since

        try:
            parse_since(str(value), datetime.now(timezone.utc))
        except ValueError as exc:
            self.fail(str(exc).replace("--since", f"--{param.name}" if param is not None else "--since"), param, ctx)
        return str(value)


def window_of(since: str, until: str | None, now: datetime) -> tuple[datetime, datetime]:
    """(start, end) of the report's window: ``until`` back from now (None: now), ``since`` back from that
    end; UsageFailure when the end is in the future or the start not before it."""
    from ..core.timespec import parse_since

    end = now if until is None else parse_since(until, now)
    if end > now:
        raise UsageFailure(f"--until {until}: that is in the future (now is {now:%Y-%m-%d %H:%M} UTC)")
    start = parse_since(since, end)
    if start >= end:
        raise UsageFailure(f"--since {since} is not before --until {until or 'now'} "
                           f"({start:%Y-%m-%d %H:%M} >= {end:%Y-%m-%d %H:%M} UTC)")
    return start, end


@click.command("report")
@click.option("--since", type=_When(), default="30d", show_default=True, metavar="WHEN",
              help="Start of the window: a duration back from its end (30d, 12h, 2w) or an ISO-8601 time. A "
                   "window with no run and no drain record exits 1, naming the newest record.")
@click.option("--until", type=_When(), default=None, metavar="WHEN",
              help="End of the window (default: now): a duration back from now (7d) or an ISO-8601 time, to "
                   "report a past period (e.g. --since 2026-05-01 --until 2026-06-01).")
@click.option("--html", "html_path", type=OutputPath(), metavar="FILE",
              help="Write the self-contained HTML report (plots inline, no network) to FILE.")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default=None,
              help="Print the report as Markdown or JSON (default: markdown, unless --html).")
@click.option("-o", "--output", type=OutputPath(), metavar="FILE",
              help="Write the --format output to FILE instead of stdout.")
@db_option()
@config_option("Expectations file whose node classes group peers for the outlier test "
               "(else $HEALTHCHECK_CONFIG; without one the whole fleet is one peer group).")
@click.option("--slurm/--no-slurm", default=False, show_default=True,
              help="Ask slurmctld for the nodes' drain states (drained by us vs by others).")
@click.option("--no-plots", is_flag=True, help="Leave the plots out of the HTML (a smaller page).")
@click.option("--progress/--no-progress", default=None,
              help="The build's steps on stderr (default: a progress bar on a terminal, nothing otherwise).")
@verbosity_options
def report(since, until, html_path, fmt, output, db_url, config_path, slurm, no_plots, progress, verbosity):
    """Cluster readiness report: fleet summary (ready / drained by us / drained by others / failing),
    failing checks ranked, nodes ranked by risk with the evidence, performance distributions with
    outliers, error counter growth, drain timeline, and a recommended action per finding.

    \b
    Example:
      healthcheck report --since 30d --html /srv/www/readiness.html
      healthcheck report --since 7d --format markdown --config /etc/healthcheck/healthcheck.toml
      healthcheck report --db postgresql://hc@db.example/hc --format json -o report.json
      healthcheck report --since 2026-05-01 --until 2026-06-01 --html may.html
    """
    if html_path and (fmt or output):
        raise click.UsageError("use either --html FILE or --format/--output, not both")
    from ..core.hugepages import disable_thp

    disable_thp()  # before the imports and reads: 4 kB pages, zeroed only where touched (core/hugepages.py)
    from ..report.load import fleet_settings, load_history, nvlink_level, site_view, slurm_states

    # the modules' objects (pandas, SQLAlchemy: hundreds of thousands) out of the cyclic collector's sight, once
    # imported and again once read: its full passes over them were 0.15 of its 0.23 s (docs/performance.md)
    gc.freeze()

    since, now = window_of(since, until, datetime.now(timezone.utc))
    if slurm and until is not None:
        raise UsageFailure("--slurm asks for today's drain states: it cannot describe a past window (--until)")
    node_class, topology, config_hash = _input(site_view, config_path)
    fleet = _input(fleet_settings, config_path)  # [fleet]: k of the last n runs, weights, thermal limits
    level = _input(nvlink_level, config_path) if topology else ""  # the NVLink domains' [topology] level
    if verbosity:  # -v: the steps as lines, anywhere; -q: none
        progress = verbosity > 0
    with _Progress(sys.stderr.isatty() if progress is None else progress) as step:
        history = _input(load_history, db_url, since, now, empty_is_error=True, recent=fleet.persist_n)
        gc.freeze()
        step("load")
        states, note = slurm_states() if slurm else (None, None)
        from ..report import build_report, render_json, render_markdown

        rep = _input(build_report, history, since, now, node_class=node_class, slurm_states=states, progress=step,
                     topology=topology, fleet=fleet, nvlink_level=level)  # part of the history is read meanwhile
        rep.config_hash = config_hash
        if note:
            rep.notes.append(note)
        if html_path:
            from ..report.files import write_html

            written = write_html(rep, html_path, plots=not no_plots, step=step)
        else:
            step("plots")
            text = render_json(rep) if fmt == "json" else render_markdown(rep)
        step("render")
    if html_path:
        click.echo(f"wrote {html_path} ({rep.fleet.total} nodes, {len(rep.findings)} findings; "
                   f"{len(written) - 1} CSV tables beside it)", err=True)
    elif output:
        _write(output, text)
    else:
        click.echo(text, nl=False)
