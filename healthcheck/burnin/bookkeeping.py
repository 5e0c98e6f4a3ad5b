"""The burn-in's bookkeeping around its measurements (issue 31: library logic, kept out of the CLI): where
a job's results go, the node run's record in the spool and the results directory, and the end of a
job's verdict (drains under the ownership rules, the job step's run and action records, the summary).

A spool or results directory that cannot be written is a warning through ``log``, never an error: the
verdict already reached stands (printed by the caller, who also picks the exit status). The command
line (:mod:`healthcheck.cli.burnin`) does the option handling, the output and the exit status."""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from ..core.model import Verdict
from .allocation import AllocationOutcome, apply_drains, job_verdict
from .node_run import NodeContext, node_record, write_result
from .settings import BurninSettings

Log = Callable[[str], None]


def results_dir_for(settings: BurninSettings, job_id: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """Where each node leaves its result for the allocation step: the settings' ``results_dir``, else
    ``burnin-<job>`` in the job's submit directory (or here), else none ("") outside a job."""
    if settings.results_dir:
        return settings.results_dir
    if job_id:
        return os.path.join(environ.get("SLURM_SUBMIT_DIR") or os.getcwd(), f"burnin-{job_id}")
    return ""


def summary_name(job_id: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """summary-<job>[_<array task>]: jobs and array tasks may share one results directory (the sweep's)."""
    task = environ.get("SLURM_ARRAY_TASK_ID")
    return f"summary-{job_id or 'nojob'}" + (f"_{task}" if task else "")


def record_node_run(ctx: NodeContext, verdict: Verdict, run_id: str, config_path: str | None,
                    spool: str | None, log: Log) -> dict[str, Any]:
    """The node run's record (:func:`node_run.node_record`), appended to ``spool`` (none: a warning that
    the history will not see it) and written to the settings' results directory for the allocation
    step; returned for the caller to print."""
    record = node_record(ctx, verdict, run_id, config_path)
    if not spool:
        log("warning: not recorded in the history: no spool (give --spool DIR, or a config file with "
            "[slurm] spool_dir)")
    else:
        from ..spool.store import SpoolError, append

        try:
            append(spool, record)
        except (SpoolError, OSError, ValueError) as exc:
            log(f"warning: run not recorded in {spool}: {exc}")
    results_dir = ctx.settings.results_dir
    if results_dir:
        try:
            write_result(results_dir, ctx.node, record)
        except OSError as exc:
            log(f"warning: result not written to {results_dir}: {exc.strerror or exc}")
    return record


def record_job(outcome: AllocationOutcome, config, config_path: str | None, settings: BurninSettings,
               started: str, summary: str, job_nodes: str | None, log: Log) -> str:
    """The bookkeeping at the end of a job's verdict, wherever it was reached (the allocation step;
    ``burnin report --drain`` over an array's node results): drains under the ownership rules (when the
    settings allow and the outcome plans any), the job's run and its actions in the config's spool, the
    summary ``summary``.json in the results directory. Returns the job step's run id."""
    from ..spool.entries import new_run_id

    run_id = new_run_id()
    if settings.drain and outcome.drain:
        from ..config.slurm_settings import SlurmSettings
        from ..slurm.actions import backend_for

        slurm_settings = config.slurm if config else SlurmSettings()
        apply_drains(outcome, slurm_settings, backend_for(slurm_settings), run_id, log)
    if config:
        spool_job(config.slurm.spool_dir, outcome, run_id, started, config_path or config.path,
                  outcome.job_id, job_nodes, log)
    if settings.results_dir:
        try:
            write_result(settings.results_dir, summary, {"run_id": run_id, **outcome.to_dict()})
        except OSError as exc:
            log(f"warning: summary not written: {exc.strerror or exc}")
    return run_id


def spool_job(spool: str, outcome: AllocationOutcome, run_id: str, started: str, config_path: str | None,
              job_id: str | None, job_nodes: str | None, log: Log) -> None:
    """The job step's own run (the collective, the localisation, the fleet digests; context
    ``burnin-job``, node = the batch host) and one action record per drain, for the history."""
    from ..core.clock import utc_now_iso
    from ..probes.live import short_hostname
    from ..spool.entries import action_record, run_record
    from ..spool.store import SpoolError, append

    host = os.environ.get("SLURMD_NODENAME") or short_hostname()
    verdict = job_verdict(outcome, host, started)
    records = [run_record(verdict, run_id, job_id, config_path, job_nodes=job_nodes)]
    for a in outcome.actions:
        if a["action"] in ("drain", "resume"):
            records.append(action_record(run_id, a["node"], a["action"], a["reason"], time=utc_now_iso(),
                                         job_id=job_id, context="burnin", why=a["why"],
                                         checks=sorted({f.check for f in outcome.per_node[a["node"]].findings
                                                        if f.status.value == "fail"})))
    try:
        for rec in records:
            append(spool, rec)
    except (SpoolError, OSError, ValueError) as exc:
        log(f"warning: job step not recorded in {spool}: {exc}")
