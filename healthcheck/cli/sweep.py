"""`healthcheck sweep`: the nightly burn-in of idle nodes and of nodes we drained. Registered into
:mod:`healthcheck.cli`. Exit status: 0 nothing failed, 1 nodes failed (drained under the rules),
2 usage or config error, 3 internal error, 4 a check failed on more nodes than the blast radius allows
(suspect check or shared cause: not drained for it), 5 another sweep is running."""
from __future__ import annotations

import os
import sys

import click

from .common import emit_json, exit_with, load_config, Unavailable, UsageFailure, verbosity_options


class _Bar:
    """A click progress bar of the burn-in jobs, on a terminal only (cron and systemd get plain lines)."""

    def __init__(self) -> None:
        self.bar = None
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = click.progressbar(length=total, label="sweep: burn-in jobs", file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@click.command("sweep")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@click.option("--dry-run", is_flag=True, help="Print the plan (nodes, jobs, actions); change nothing.")
@click.option("--max-nodes", type=int, help="Nodes burned in at once.")
@click.option("--partition", help="Only nodes of this partition.")
@click.option("--window", help="HH:MM-HH:MM: start only inside this local time window.")
@click.option("--suite", type=click.Choice(["quick", "standard", "full"]), help="Burn-in suite of the jobs.")
@click.option("--no-report", is_flag=True, help="Do not write the readiness report at the end.")
@click.option("--db", "db_url", help="History database for the sweep's results (else the config's / default).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@verbosity_options
def sweep(config_path, dry_run, max_nodes, partition, window, suite, no_report, db_url, fmt, verbosity):
    """Burn in idle nodes and nodes we drained; resume what passes, drain what fails, within a budget.

    Never touches a node whose reason is not ours; when one check fails on more nodes than the blast
    radius allows, drains nobody for it and says so (exit 4). A lock prevents overlapping sweeps; a
    sweep killed halfway is continued by the next run.

    \b
    Example:
      healthcheck sweep --dry-run
      healthcheck sweep --config /etc/healthcheck/healthcheck.toml --max-nodes 32 --window 01:00-05:00
    """
    from ..burnin.submit import SubmitError
    from ..safeio.trust import UntrustedFile
    from ..config import Config
    from ..slurm.actions import backend_for
    from ..slurm.backend import SlurmError, SlurmUnreachable
    from ..sweep import state as st
    from ..sweep.jobs import JobError
    from ..sweep.run import BUSY_EXIT, Sweeper
    from ..sweep.settings import SweepSettingsError, resolve

    config = load_config(config_path) or Config(None)
    try:
        settings = resolve(config.sweep, {"max_nodes": max_nodes, "partition": partition, "window": window,
                                          "suite": suite, "report": False if no_report else None,
                                          "db_url": db_url})
    except SweepSettingsError as exc:
        raise UsageFailure(str(exc)) from None

    def log(message: str) -> None:
        if verbosity >= 0:
            click.echo(f"[sweep] {message}", err=True)

    def steps(done: int, total: int) -> None:
        click.echo(f"[sweep] burn-in jobs: {done} of {total} done", err=True)

    if dry_run or verbosity < 0:
        bar = None
    else:
        bar = steps if verbosity > 0 else (_Bar() if sys.stderr.isatty() else None)
    fleet = None
    if settings.report:  # the sweep uses the history: its jobs compare their GEMM products with the fleet's
        from ..sweep.finish import write_fleet_digests

        def digests(results_dir: str) -> str | None:
            return write_fleet_digests(results_dir, settings.db_url or None, config.path, log)

        fleet = digests

    sweeper = Sweeper(config, settings, backend_for(config.slurm), log=log, progress=bar, fleet_digests=fleet)
    try:
        outcome = sweeper.run(dry_run=dry_run)
    except st.SweepBusy as exc:
        click.echo(f"[sweep] {exc}: not starting a second one", err=True)
        exit_with(BUSY_EXIT)
        return
    except (SlurmUnreachable, SlurmError) as exc:  # slurmctld down, scontrol missing or refusing: exit 6
        raise Unavailable(f"sweep stopped: Slurm could not be used ({exc}); nothing was changed by this run "
                          "(the next run continues from the saved state)") from None
    except (st.StateError, JobError, SubmitError, UntrustedFile, OSError) as exc:
        raise click.ClickException(f"sweep stopped: {exc} (the next run continues from the saved state)") from None
    finally:
        if isinstance(bar, _Bar):
            bar.close()
    if not dry_run and outcome.results_dir and settings.report and outcome.results:
        from ..sweep.finish import ingest_and_report

        outcome.report = ingest_and_report(config.slurm.spool_dir, outcome.results_dir, settings.db_url or None,
                                           config.path, log, drift=(outcome.fleet or {}).get("drift"))
        if outcome.report:
            from ..sweep.run import write_json

            write_json(os.path.join(outcome.results_dir, "sweep.json"), outcome.to_dict())
    if fmt == "json":
        emit_json(outcome.to_dict())
    else:
        from ..sweep.text import render

        click.echo(render(outcome))
    exit_with(outcome.exit_code if not dry_run else 0)


