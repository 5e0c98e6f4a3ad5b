"""`healthcheck burnin report|submit|fleet-digests`: the commands around a burn-in job (its verdict and
drains after the fact, its submission, the fleet's GEMM results), registered onto the ``burnin`` group of
:mod:`healthcheck.cli_burnin` by :mod:`healthcheck.cli`. Heavy imports inside the commands only."""
from __future__ import annotations

import os

import click

from ..core import exitcodes

from .burnin import burnin_settings, burnin
from .common import emit_json, guard, load_config, open_history, OutputPath, SINCE, UsageFailure


@burnin.command("report")
@click.argument("job_id")
@click.option("--results-dir", "results_dir", help="The job's results directory (default: ./burnin-JOBID).")
@click.option("--drain", is_flag=True,
              help="Decide drains now over every node result in the directory, under the blast radius "
                   "(an array job's tasks each saw one node and drained nothing).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Expectations file ([burnin] blast radius, [slurm] scontrol and spool) for --drain.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def burnin_report(job_id, results_dir, drain, config_path, fmt):
    """The verdict of a burn-in job, per node and per GPU, from its results directory; with --drain,
    drain what failed (at most the blast radius of the nodes found; our ownership rules apply).

    \b
    Example:
      healthcheck burnin report 4711 --results-dir /shared/burnin-4711
      healthcheck burnin report 4800 --drain      # after sbatch --array=... burnin-array.sbatch
    """
    from ..burnin.summary import SummaryError, allocation_text, load_job

    directory = results_dir or os.path.join(os.getcwd(), f"burnin-{job_id}")
    if drain:
        _drain_from_results(job_id, directory, config_path, fmt)
        return
    try:
        data = load_job(directory, job_id)
    except SummaryError as exc:
        raise UsageFailure(str(exc)) from None
    if fmt == "json":
        emit_json(data)
    else:
        click.echo(allocation_text(data))


def _drain_from_results(job_id: str, directory: str, config_path: str | None, fmt: str) -> None:
    from dataclasses import replace

    from ..burnin.allocation import AllocationOutcome, attribute_domains, compare_digests, plan_drains, read_results
    from ..burnin.nvldomain import declared
    from ..burnin.summary import SummaryError, node_results
    from .burnin import conclude
    from ..core.clock import utc_now_iso

    if not os.path.isdir(directory):
        raise UsageFailure(f"no results directory {directory} for job {job_id} (give --results-dir)")
    try:
        nodes = sorted(node_results(directory))
    except SummaryError as exc:
        raise UsageFailure(str(exc)) from None
    if not nodes:
        raise UsageFailure(f"{directory}: no node results for job {job_id}")
    config = load_config(config_path)
    settings = replace(burnin_settings(config, {}), results_dir=directory, drain=True)
    per_node = read_results(directory, nodes)
    outcome = AllocationOutcome(job_id, nodes, per_node)
    compare_digests(per_node)
    attribute_domains(outcome, *declared(config))
    outcome.drain, outcome.suspect_shared_cause = plan_drains(per_node, settings, outcome.domain_faults)
    from ClusterShell.NodeSet import NodeSet

    conclude(outcome, config, config_path, settings, utc_now_iso(), f"summary-{job_id}", fmt,
             str(NodeSet.fromlist(nodes)))


@burnin.command("fleet-digests")
@click.option("--db", "db_url", metavar="URL", help="Database URL or SQLite path (default: $HEALTHCHECK_DB_URL, "
              "else the default SQLite file). Never put a password here: use $HEALTHCHECK_DB_PASSWORD_FILE.")
@click.option("--since", type=SINCE, default="30d", show_default=True, metavar="WHEN", help="Runs to read: 7d, 12h, 2w or an ISO-8601 time.")
@click.option("--min-gpus", type=click.IntRange(1, 1_000_000), default=4, show_default=True,
              help="GPUs that must have run a fleet key before its majority is trusted.")
@click.option("--min-nodes", type=click.IntRange(1, 1_000_000), default=2, show_default=True,
              help="Nodes those GPUs must span.")
@click.option("--output", "-o", type=OutputPath(),
              help="Write the fleet digests file here (point [burnin] fleet_digests at it).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def burnin_fleet_digests(db_url, since, min_gpus, min_nodes, output, fmt):
    """The fleet's majority GEMM result per GPU model, library stack, dtype and size, from the history;
    the GPUs whose latest result differs (silent data corruption). Exit 1 when any GPU differs.

    Run it from cron on the history host, the file on the shared filesystem.

    \b
    Example:
      healthcheck burnin fleet-digests --since 30d -o /shared/healthcheck/fleet-digests.json
    """
    from datetime import datetime, timezone

    from ..burnin.fleetfile import FleetFileError, write
    from ..history import migrations
    from ..history.digests import fleet_from_history

    when = since
    engine = open_history(db_url)
    try:
        guard(migrations.require_current, engine)
        view = guard(fleet_from_history, engine, when, min_gpus=min_gpus, min_nodes=min_nodes)
    finally:
        engine.dispose()
    if output:
        try:
            write(output, {k: v.to_dict() for k, v in view.keys.items()},
                  datetime.now(timezone.utc).isoformat(timespec="seconds"), when.isoformat() if when else None)
        except FleetFileError as exc:
            raise UsageFailure(str(exc)) from None
    if fmt == "json":
        emit_json({"keys": {k: v.to_dict() for k, v in view.keys.items()},
                   "deviants": [{"node": d.node, "component": d.component, "fleet_key": d.fleet_key,
                                 "digest": d.digest, "majority": d.majority, "run_id": d.run_id,
                                 "started_at": d.started_at.isoformat()} for d in view.deviants]})
    else:
        for key, v in view.keys.items():
            state = f"majority {v.digest[:12]}" if v.digest else "undecided"
            click.echo(f"{key}: {state} ({v.votes} of {v.gpus} GPUs on {v.nodes} nodes)")
        for d in view.deviants:
            click.echo(f"DIFFERS {d.node} {d.message()}")
        if not view.keys:
            click.echo("no GEMM digests in the history for this window (run a burn-in, then `history ingest`)")
        if output:
            click.echo(f"wrote {output} ({len(view.majorities)} decided key(s))", err=True)
    if view.deviants:
        raise SystemExit(exitcodes.FAIL)


@burnin.command("submit")
@click.option("-N", "--nodes", "nnodes", type=int, help="Number of nodes.")
@click.option("-w", "--nodelist", help="Nodes to burn in (Slurm hostlist).")
@click.option("-p", "--partition", help="Partition.")
@click.option("--reservation", help="Reservation.")
@click.option("--gpus-per-node", type=int, help="GPUs per node (requests GRES).")
@click.option("--suite", type=click.Choice(["quick", "standard", "full"]),
              help="Suite for this job (default: the site's [burnin] suite, else standard).")
@click.option("--template", type=click.Path(dir_okay=False, exists=True),
              help="The sbatch template (default: sbatch_templates/burnin.sbatch).")
@click.option("--time", "time_limit", help="Time limit (sbatch --time).")
@click.option("--dry-run", is_flag=True, help="Print the sbatch command, submit nothing.")
def burnin_submit(nnodes, nodelist, partition, reservation, gpus_per_node, suite, template, time_limit, dry_run):
    """Render the sbatch flags for a burn-in and submit it.

    \b
    Example:
      healthcheck burnin submit -N 8 -w gpu[01-08] --suite full --dry-run
    """
    from ..burnin.submit import SubmitError, sbatch_argv, submit

    from ..safeio.trust import UntrustedFile, check_trusted, running_as_root

    try:
        argv = sbatch_argv(template, nnodes=nnodes, nodelist=nodelist, partition=partition,
                           reservation=reservation, gpus_per_node=gpus_per_node, suite=suite, time_limit=time_limit)
        if running_as_root():  # Slurm runs the script as root on the nodes
            check_trusted(argv[-1], "sbatch template")
    except (SubmitError, UntrustedFile) as exc:
        raise UsageFailure(str(exc)) from None
    if dry_run:
        click.echo(" ".join(argv))
        return
    try:
        click.echo(submit(argv))
    except SubmitError as exc:
        raise click.ClickException(str(exc)) from None


