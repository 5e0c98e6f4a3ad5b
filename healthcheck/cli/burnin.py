"""`healthcheck burnin run` (report, submit and fleet-digests: :mod:`healthcheck.cli.burnin_jobs`).
Registered into :mod:`healthcheck.cli`; heavy imports inside the commands only. Option handling, output
and exit status only: the bookkeeping (results directory, spool records, drains, the job's summary) is
:mod:`healthcheck.burnin.bookkeeping`. Exit status: 0 passed
(warnings allowed), 1 a node or GPU failed, 2 usage or config error, 3 internal error, 4 more nodes
failed than the blast radius allows (nothing drained: suspect a shared cause)."""
from __future__ import annotations

import os
import sys

import click

from ..core import exitcodes
from .common import emit_json, exit_with, expectations_for, load_config, UsageFailure, verbosity_options

SHARED_CAUSE_EXIT = exitcodes.FLAGGED  # the allocation failed for a cause its nodes share: nobody drained


def burnin_settings(config, flags: dict):
    from ..burnin.settings import SettingsError, resolve

    try:
        return resolve(config.burnin if config else {}, os.environ, flags)
    except SettingsError as exc:
        raise UsageFailure(str(exc)) from None


def _references(path: str):
    from ..policies.references import ReferencesError, load
    from ..safeio.trust import UntrustedFile, check_trusted, running_as_root

    try:
        if path and running_as_root():
            check_trusted(path, "references file")
        return load(path or None)
    except (ReferencesError, UntrustedFile, OSError) as exc:
        raise UsageFailure(str(exc)) from None


def _job_nodes() -> tuple[str | None, list[str]]:
    text = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not text:
        return None, []
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError

    try:
        return text, list(NodeSet(text))
    except NodeSetParseError as exc:
        raise UsageFailure(f"SLURM_JOB_NODELIST {text!r}: {exc}") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def burnin():
    """Burn-in: GEMM stress with result verification, bandwidth tests, DCGM diag, nccl-tests, storage.

    \b
    Example:
      sbatch -N 4 -w gpu[01-04] sbatch_templates/burnin.sbatch      # the usual way
      healthcheck burnin run --suite quick --backend numpy           # this node, by hand
      healthcheck burnin report 4711
    """


_FLAG_OPTIONS = [
    click.option("--suite", type=click.Choice(["quick", "standard", "full"]), help="Preset of durations and tests."),
    click.option("--phases", help="Comma list of phases (checks,gemm,bandwidth,dcgm,nccl,storage,rdma,soak)."),
    click.option("--backend", type=click.Choice(["auto", "torch", "cupy", "numpy"]), help="GEMM/bandwidth backend."),
    click.option("--duration", "gemm_duration_s", type=float, help="GEMM stress seconds per GPU."),
    click.option("--references", help="Site references file (merged over the built-in ones)."),
    click.option("--results-dir", "results_dir", help="Where each node leaves its result for the allocation step."),
    click.option("--nccl-dir", "nccl_dir", help="Directory with the nccl-tests binaries."),
]


def _flag_options(fn):
    for opt in reversed(_FLAG_OPTIONS):
        fn = opt(fn)
    return fn


@burnin.command("run")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@_flag_options
@click.option("--allocation", is_flag=True,
              help="The allocation step: gather every node's result, run the collective across the job's "
                   "nodes, localise slow nodes, drain what failed (once per job, after the per-node runs).")
@click.option("--no-drain", is_flag=True, help="Report only; drain nothing (allocation step).")
@click.option("--node", help="This node's name (default: $SLURMD_NODENAME or the short hostname).")
@click.option("--spool", "spool_dir", help="Record the run in this spool (default: the config's [slurm] spool_dir).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--progress/--no-progress", default=None,
              help="A start and an end line per phase with elapsed time and ETA on stderr (default: on a terminal; "
                   "-v is --progress everywhere).")
@verbosity_options
def burnin_run(config_path, suite, phases, backend, gemm_duration_s, references, results_dir, nccl_dir, allocation,
               no_drain, node, spool_dir, fmt, progress, verbosity):
    """Burn in this node (under srun: every node of the job), or with --allocation conclude the job.

    \b
    Example:
      srun --ntasks-per-node=1 healthcheck burnin run --suite standard
      healthcheck burnin run --allocation
    """

    click.get_current_context().find_root().meta["healthcheck.verbosity"] = verbosity
    if verbosity:
        progress = verbosity > 0
    config = load_config(config_path)
    flags = {"suite": suite, "phases": phases, "backend": backend, "gemm_duration_s": gemm_duration_s,
             "references": references, "results_dir": results_dir, "nccl_dir": nccl_dir}
    if no_drain:
        flags["drain"] = False
    settings = burnin_settings(config, flags)
    refs = _references(settings.references)
    if settings.fabric and settings.fabric not in refs.fabrics:  # a typo must not switch the judgement off
        raise UsageFailure(f"[burnin] fabric {settings.fabric!r} is not in the references (known: "
                           f"{', '.join(sorted(refs.fabrics)) or 'none'}; add [fabric.{settings.fabric}] to a "
                           "references file)")
    job_id = os.environ.get("SLURM_JOB_ID")
    job_nodes, nodes = _job_nodes()
    from dataclasses import replace

    from ..burnin.bookkeeping import results_dir_for

    settings = replace(settings, results_dir=results_dir_for(settings, job_id))
    if allocation:
        _run_allocation(config, config_path, settings, refs, job_id, nodes, fmt)
    else:
        show = progress if progress is not None else sys.stderr.isatty()
        _run_node(config, config_path, settings, refs, job_id, job_nodes, node, spool_dir, fmt, show)


def _log(message: str) -> None:
    """A [burnin] line on stderr; none with -q (errors and the verdict still print)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get("healthcheck.verbosity", 0) < 0:
        return
    click.echo(f"[burnin] {message}", err=True)


def _run_node(config, config_path, settings, refs, job_id, job_nodes, node, spool_dir, fmt, progress=False):
    from ..burnin.bookkeeping import record_node_run
    from ..burnin.node_run import NodeContext, run_node
    from ..core.clock import utc_now_iso
    from ..pipeline.acquire import snapshot_for
    from ..pipeline.judge import sources_needed
    from ..probes.live import short_hostname
    from ..spool.entries import new_run_id

    node = node or os.environ.get("SLURMD_NODENAME") or short_hostname()
    if "/" in node or node.startswith("."):
        raise UsageFailure(f"node name {node!r} is not a plain name")
    exp = expectations_for(config, node)
    started = utc_now_iso()
    cls = config.node_class(node) if config else None
    ctx = NodeContext(node, settings, refs, job_id, job_nodes,
                      snapshot=lambda: (snapshot_for(node, exp, started, sources=sources_needed(exp, "burnin")), exp),
                      log=_log,
                      node_class=cls.name if cls else None,
                      progress=_log if progress else None)
    verdict = run_node(ctx, started)
    record = record_node_run(ctx, verdict, new_run_id(), config_path or (config.path if config else None),
                             spool_dir or (config.slurm.spool_dir if config else None), _log)
    if fmt == "json":
        emit_json(record)
    else:
        from ..burnin.summary import node_text

        click.echo(node_text(record))
    from ..output.render import exit_code

    if ctx.extra.get("hung"):  # a thread is stuck in a GPU call: interpreter shutdown would wait on it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code(verdict))
    exit_with(exit_code(verdict))


def _run_allocation(config, config_path, settings, refs, job_id, nodes, fmt):
    from ..burnin.allocation import run_allocation
    from ..burnin.bookkeeping import summary_name
    from ..core.clock import utc_now_iso

    if not nodes:
        raise UsageFailure("--allocation needs the job's node list (run it inside the burn-in job: "
                           "SLURM_JOB_NODELIST is not set)")
    started = utc_now_iso()
    from ..burnin.nvldomain import declared

    sections = {"rdma_settings": config.section("burnin.rdma"),
                "counter_settings": config.section("fabric.counters")} if config else {}
    outcome = run_allocation(nodes, settings, refs, job_id, _log, nvlink_domains=declared(config), **sections)
    conclude(outcome, config, config_path, settings, started, summary_name(job_id), fmt,
             os.environ.get("SLURM_JOB_NODELIST"))


def conclude(outcome, config, config_path, settings, started: str, summary: str, fmt: str,
             job_nodes: str | None, could_not_run: bool = False) -> None:
    """The end of a job's verdict, wherever it was reached (the allocation step; ``burnin report
    --drain`` over an array's node results): the bookkeeping (drains, the spool, the summary:
    :func:`healthcheck.burnin.bookkeeping.record_job`), then the text or JSON and the exit status."""
    from ..burnin.bookkeeping import record_job
    from ..burnin.summary import allocation_text
    from ..core.model import Status

    record_job(outcome, config, config_path, settings, started, summary, job_nodes, _log)
    if fmt == "json":
        emit_json(outcome.to_dict())
    else:
        click.echo(allocation_text(outcome.to_dict()))
    if could_not_run:  # e.g. the training smoke test without torch: recorded, and the exit status says so
        exit_with(exitcodes.UNAVAILABLE)
    if outcome.suspect_shared_cause:
        exit_with(SHARED_CAUSE_EXIT)
    exit_with(exitcodes.FAIL if outcome.status is Status.FAIL else exitcodes.OK)


@burnin.command("train")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@click.option("--model", "train_model", help="A [model.NAME] of the train data (default: small on GPUs, tiny on CPUs).")
@click.option("--tasks-per-node", "train_tasks_per_node", type=int, help="Ranks per node (default: the GPU count, 1 on CPUs).")
@click.option("--local-ranks", type=click.IntRange(1, 64), help="Run that many ranks on this host, without Slurm.")
@click.option("--no-resume", is_flag=True, help="Skip the kill-and-resume test (one run only).")
@click.option("--kill-mode", "train_kill_mode", type=click.Choice(["rank", "step"]),
              help="What the resume test kills: one rank's process, or every rank's.")
@click.option("--references", "train_references", help="Site train data file (models, curves, throughput) over the packaged one.")
@click.option("--record-reference", "record_to", type=click.Path(dir_okay=False),
              help="Write this run's loss curve as a reference entry to FILE (run it on a golden allocation).")
@click.option("--results-dir", "results_dir", help="Shared folder for the run (default ./burnin-JOBID).")
@click.option("--no-drain", is_flag=True, help="Report only; drain nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--lr-scale", type=float, default=1.0, hidden=True)        # faults the tests inject
@click.option("--corrupt-rank", type=int, default=-1, hidden=True)
@click.option("--corrupt-step", type=int, default=0, hidden=True)
def burnin_train(config_path, train_model, train_tasks_per_node, local_ranks, no_resume, train_kill_mode,
                 train_references, record_to, results_dir, no_drain, fmt, lr_scale, corrupt_rank, corrupt_step):
    """Train a small transformer across the job's nodes: convergence, ranks' agreement, resume, speed.

    \b
    Example:
      sbatch -N 2 --gpus-per-node=8 sbatch_templates/train-smoke.sbatch
      healthcheck burnin train                                   # inside a job: every node
      healthcheck burnin train --local-ranks 2 --no-drain        # this host, no Slurm
      healthcheck burnin train --record-reference ref.toml       # on a golden allocation
    """
    from dataclasses import replace

    from ..burnin.allocation import AllocationOutcome, NodeOutcome, plan_drains, run_train
    from ..burnin.bookkeeping import results_dir_for, summary_name
    from ..core.clock import utc_now_iso
    from ..core.model import Finding, Status

    config = load_config(config_path)
    flags = {"train_model": train_model, "train_tasks_per_node": train_tasks_per_node,
             "train_kill_mode": train_kill_mode, "train_references": train_references, "results_dir": results_dir}
    if no_resume:
        flags["train_resume"] = False
    if no_drain:
        flags["drain"] = False
    settings = burnin_settings(config, flags)
    job_id = os.environ.get("SLURM_JOB_ID")
    job_nodes, nodes = _job_nodes()
    if local_ranks:
        from ..probes.live import short_hostname

        nodes = [os.environ.get("SLURMD_NODENAME") or short_hostname()]
    elif not nodes:
        raise UsageFailure("burnin train needs the job's node list (run it inside a job: SLURM_JOB_NODELIST is not "
                           "set), or --local-ranks N on this host")
    settings = replace(settings, results_dir=results_dir_for(settings, job_id) or os.path.abspath("burnin-local"),
                       phases=("train",))
    started = utc_now_iso()
    outcome = AllocationOutcome(job_id, nodes, {n: NodeOutcome(n, Status.PASS, [], None) for n in nodes})
    result = run_train(outcome, settings, _log, local_ranks=local_ranks or 0, lr_scale=lr_scale,
                       corrupt_rank=corrupt_rank, corrupt_step=corrupt_step)
    outcome.drain, outcome.suspect_shared_cause = plan_drains(outcome.per_node, settings)
    if record_to:
        from ..burnin.train.setup import reference_entry
        from ..safeio.atomic import atomic_write

        try:
            entry = reference_entry(result, job_nodes or nodes[0], started[:10])
        except ValueError as exc:
            outcome.collective.append(Finding("burnin.train", Status.FAIL, str(exc)[:300]))
        else:
            try:
                atomic_write(record_to, entry, 0o644)
                _log(f"reference written to {record_to}:\n{entry}")
            except OSError as exc:
                outcome.collective.append(Finding("burnin.train", Status.ERROR,
                                                  f"reference not written to {record_to}: {exc.strerror or exc}"))
    could_not = any(f.check == "burnin.train" and f.status is Status.ERROR for f in outcome.collective)
    conclude(outcome, config, config_path, settings, started, summary_name(job_id), fmt, job_nodes, could_not)
