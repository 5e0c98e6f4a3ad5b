"""`healthcheck job ...`: what the node-side job sampler saw of running jobs. Registered into
:mod:`healthcheck.cli`."""
from __future__ import annotations

import json

import click

from .common import Unavailable, UsageFailure


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def job():
    """Running jobs as the agent's job sampler sees them (docs/job-stalls.md).

    \b
    Example:
      healthcheck job stalls 81234           # is job 81234 stalled, and which node differs?
    """


@job.command("stalls")
@click.argument("job_id", required=False)
@click.option("--local", is_flag=True,
              help="This node's summaries only (every job, or JOB_ID's), from the sampler's state file.")
@click.option("--from", "from_files", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="Read the nodes' summaries from this file (JSON lines, what --local --format json prints on "
                   "each node) instead of gathering them with srun (repeatable).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The hooks' config (its [slurm] state_dir); default /etc/healthcheck/healthcheck.toml.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--timeout", type=click.FloatRange(1, 600), default=60.0, show_default=True,
              help="Seconds the srun step over the job's nodes may take.")
def job_stalls(job_id, local, from_files, config_path, fmt, timeout):
    """Is a running job stalled in a collective, and which of its nodes is the likely culprit? Each
    node's agent samples its GPUs every 30 s while a job runs there; a node whose GPUs of the job are busy
    at near-idle power for 4 samples in a row is "pinned" (its spool has a WARN record, context
    job-sample; nothing is drained). This gathers every node's summary of JOB_ID (one `srun --overlap`
    step over the job's nodes, reading a file on each; or --from files) and names the nodes whose GPUs
    differ from the rest: when some nodes are pinned, the ones that are not. Exit 0 when not stalled,
    1 when stalled, 6 when the summaries cannot be had.

    \b
    Example:
      healthcheck job stalls 81234
      healthcheck job stalls --local --format json     # on a node: what its sampler kept
      healthcheck job stalls 81234 --from gpu01.jsonl --from gpu02.jsonl
    """
    from ..core import exitcodes
    from ..slurm import jobstalls
    from .common import config_path_of, exit_with

    if local:
        from ..hook.job_sampler import settings_for, show
        import os

        node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
        try:
            state_dir = settings_for(config_path_of(config_path), node)[0]
        except Exception as exc:  # noqa: BLE001 - a config that cannot be used is the admin's to fix
            raise UsageFailure(f"config not usable: {exc}") from exc
        for summary in show(state_dir, job_id):
            click.echo(json.dumps(summary, sort_keys=True) if fmt == "json" else _line(summary))
        return
    if not job_id:
        raise UsageFailure("give a JOB_ID (or --local for this node's jobs)")
    nodes = None
    if from_files:
        from .common import read_text

        summaries = []
        for path in from_files:
            summaries += jobstalls.parse_summaries(read_text(path, "job summaries"))
    else:
        try:
            summaries, hostlist = jobstalls.gather(job_id, config_path=config_path, timeout=timeout)
        except jobstalls.GatherError as exc:
            raise Unavailable(str(exc)) from exc
        nodes = jobstalls.hostnames(hostlist)
    result = jobstalls.verdict(job_id, summaries, nodes)
    if fmt == "json":
        click.echo(json.dumps(result, sort_keys=True))
    else:
        click.echo(f"job {job_id}: {'STALLED' if result['stalled'] else 'not stalled'}: {result['why']}")
        for summary in result["nodes"]:
            click.echo("  " + _line(summary))
        if result["unknown"]:
            click.echo(f"  no judged summary from: {', '.join(result['unknown'])}")
    if result["stalled"]:
        exit_with(exitcodes.FAIL)


def _line(s: dict) -> str:
    def num(v, unit):
        return "n/a" if v is None else f"{v:g}{unit}"

    state = "too few samples" if not s.get("judged") else (
        "no GPU process of the job" if not s.get("gpus") else
        "pinned at idle power" if not s.get("not_pinned") else
        f"GPUs {','.join(map(str, s['not_pinned']))} not pinned")
    since = f" since {s['pinned_since']}" if s.get("pinned_since") else ""
    return (f"{s.get('node')} job {s.get('job')}: {state}{since}; {s.get('gpus', 0)} GPU(s), "
            f"{len(s.get('pinned') or [])} pinned; {num(s.get('utilization_gpu_pct'), ' %')} at "
            f"{num(s.get('power_draw_w'), ' W')}")
