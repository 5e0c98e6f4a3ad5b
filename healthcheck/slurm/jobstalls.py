"""A job's stall seen across its nodes (issue 32.6): each node's summary of the job, as its job sampler
left it (``python -m healthcheck.hook.job_sampler --show JOB``), gathered through one ``srun --overlap``
step over the job's own nodes, then compared by the pure
:func:`healthcheck.checks.gpu_usage.odd_nodes`: the nodes whose GPUs differ from the rest are named.
Subprocesses only through the seam; the step reads a file on each node, it opens no GPU."""
from __future__ import annotations

import json
import sys

from ..checks.gpu_usage import odd_nodes
from ..safeio import subproc
from .backend_base import slurm_env


def run_slurm(argv: list[str], timeout: float) -> subproc.Result:
    """A Slurm client command (squeue, scontrol, srun) with Slurm's environment: the safe one plus a
    trusted SLURM_CONF (``backend_base.slurm_env``), so a site's non-default slurm.conf is used."""
    return subproc.run(argv, timeout, env=slurm_env())


class GatherError(Exception):
    """The job's nodes or their summaries could not be had (no such job, srun failed)."""


def parse_summaries(text: str) -> list[dict]:
    """One JSON object per line (what ``--show`` prints on each node); other lines are skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("node"), str):
            out.append(item)
    return out


def job_nodes(job_id: str, run=run_slurm, timeout: float = 30.0) -> tuple[int, str]:
    """(node count, hostlist) of a running job, from squeue."""
    done = run(["squeue", "-h", "-j", job_id, "-o", "%D|%N|%T"], timeout)
    line = done.stdout.strip().splitlines()[0] if done.ok and done.stdout.strip() else ""
    parts = line.split("|")
    if len(parts) != 3 or not parts[0].isdigit():
        raise GatherError(f"job {job_id}: not found by squeue ({(done.stderr or done.stdout).strip()[:200] or 'no output'})")
    if parts[2] != "RUNNING":
        raise GatherError(f"job {job_id} is {parts[2]}, not running")
    return int(parts[0]), parts[1]


def gather(job_id: str, *, python: str | None = None, config_path: str | None = None, timeout: float = 60.0,
           run=run_slurm) -> tuple[list[dict], str]:
    """Every node's summary of ``job_id`` through one srun step (one task per node, ``--overlap`` so
    that it starts beside the job's own steps), and the job's hostlist. GatherError when it cannot."""
    if not job_id.isdigit():
        raise GatherError(f"job id must be digits, got {job_id!r}")
    count, hostlist = job_nodes(job_id, run)
    argv = ["srun", f"--jobid={job_id}", "--overlap", f"--nodes={count}", "--ntasks-per-node=1",
            "--cpus-per-task=1", "--mem=0", "--quiet", python or sys.executable, "-I", "-m",
            "healthcheck.hook.job_sampler", "--show", job_id]
    if config_path:
        argv += ["--config", config_path]
    try:
        done = run(argv, timeout)
    except subproc.ToolNotFound as exc:
        raise GatherError(f"srun not found: {exc}") from exc
    summaries = parse_summaries(done.stdout)
    if not summaries:
        raise GatherError(f"srun gave no summary (exit {done.returncode}): {done.stderr.strip()[:300]}")
    return summaries, hostlist


def hostnames(hostlist: str, run=run_slurm, timeout: float = 30.0) -> list[str] | None:
    """The node names of a hostlist (``scontrol show hostnames``); None when scontrol cannot say."""
    try:
        done = run(["scontrol", "show", "hostnames", hostlist], timeout)
    except subproc.ToolNotFound:
        return None
    names = [n.strip() for n in done.stdout.splitlines() if n.strip()] if done.ok else []
    return names or None


def verdict(job_id: str, summaries: list[dict], nodes: list[str] | None = None) -> dict:
    """The job's summaries and what :func:`odd_nodes` makes of them, as one plain dict."""
    of_job = [s for s in summaries if s.get("job") in (job_id, None)]
    out = odd_nodes(of_job, nodes)
    out["job"] = job_id
    out["nodes"] = sorted(of_job, key=lambda s: s.get("node") or "")
    return out
