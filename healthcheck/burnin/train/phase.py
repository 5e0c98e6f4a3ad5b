"""The training phase across an allocation (I/O): start the workers through the launcher (the
subprocess seam: a deadline, the process group killed), read what they left, judge it (``judge.py``),
and remove the checkpoints whatever happened.

Three launches, each of the same spec and data:

1. the uninterrupted run: its loss curve against the reference (``burnin.train.convergence``), the
   ranks' agreement (``burnin.train.ranks``), tokens/s (``burnin.train.throughput``), SM activity
   (``burnin.train.activity``), its checkpoints' write rate (``burnin.train.checkpoint``);
2. the same run killed after step ``kill_at`` (one rank's process, or every rank: ``kill_mode``);
3. a restart from the latest checkpoint of (2): its steps against (1)'s (``burnin.train.resume``), the
   recovery time (the kill to the end of the first step after the restart).

``resume = False`` runs (1) only. Without torch the phase is one ERROR saying so (``burnin.train``).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ...core.model import Finding, Status
from ...safeio import subproc
from . import judge
from .spec import TrainData, TrainSpec, check, world_class

WORKER = ("-m", "healthcheck.burnin.train.run")


class TrainPhaseError(RuntimeError):
    """The phase could not run (no torch on this host, a launch that left nothing); an ERROR, not a FAIL."""


@dataclass
class Launch:
    """How the ranks start: ``launcher`` (the burn-in's template, with ``{nnodes}``, ``{nodelist}``,
    ``{tasks_per_node}``) on ``nodes``; or, with ``local_ranks``, that many processes on this host (one
    node, no Slurm: a workstation, the tests)."""

    nodes: list[str]
    tasks_per_node: int = 1
    launcher: tuple[str, ...] = ()
    local_ranks: int = 0
    python: str = sys.executable
    timeout_s: float = 600.0

    @property
    def world(self) -> int:
        return self.local_ranks or len(self.nodes) * self.tasks_per_node


@dataclass
class RunOutput:
    steps: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    killed: list[dict[str, Any]] = field(default_factory=list)
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    activity: dict[str, dict[str, Any]] = field(default_factory=dict)
    done: dict[str, Any] | None = None
    returncodes: list[int | None] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def loss(self) -> list[float]:
        return [s["loss"] for s in self.steps]


@dataclass
class TrainOutcome:
    findings: list[Finding]                      # the job's (the allocation's) findings
    node_findings: dict[str, list[Finding]]      # a rank that disagreed, on its node (silent data corruption)
    record: dict[str, Any]                       # the curves and figures, for the job's record


def launch(spec: TrainSpec, out: str, how: Launch, log: Callable[[str], None] = lambda _m: None) -> RunOutput:
    """One run of ``spec`` (every rank), its outputs read back from ``out``."""
    shutil.rmtree(out, ignore_errors=True)  # a run's outputs are its own (a rerun starts clean)
    os.makedirs(out, mode=0o700)
    spec_path = os.path.join(out, "spec.json")
    with open(spec_path, "w", encoding="utf-8") as fh:
        fh.write(spec.to_json())
    rendezvous = os.path.join(out, f"rendezvous-{os.urandom(4).hex()}")
    cmd = [how.python, *WORKER, "--spec", spec_path, "--out", out, "--rendezvous", rendezvous]
    t0 = time.monotonic()
    if how.local_ranks:
        results: list[subproc.Result | None] = [None] * how.local_ranks

        def one(rank: int) -> None:
            env = {**subproc.job_env(), "RANK": str(rank), "WORLD_SIZE": str(how.local_ranks),
                   "LOCAL_RANK": str(rank)}
            for key in [k for k in env if k.startswith(("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"))]:
                del env[key]
            results[rank] = _run(cmd, how.timeout_s, env)

        threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in range(how.local_ranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(how.timeout_s + 30)
        done = [r for r in results if r is not None]
    else:
        from ..nccl_run import launcher_argv

        argv = [*launcher_argv(how.launcher, how.nodes, how.tasks_per_node), *cmd]
        log(f"train: {' '.join(argv[:12])} ...")
        done = [_run(argv, how.timeout_s, subproc.job_env())]
    got = read_output(out)
    got.duration_s = time.monotonic() - t0
    got.returncodes = [r.returncode for r in done]
    got.stderr_tail = [line for r in done for line in r.stderr.splitlines() if line.strip()][-6:]
    try:
        os.unlink(rendezvous)
    except OSError:
        pass
    return got


def _run(argv: list[str], timeout_s: float, env: dict[str, str]) -> subproc.Result:
    """subproc.run, with a launcher or interpreter that is not there as a run that did not start."""
    try:
        return subproc.run(argv, timeout_s, env=env)
    except (subproc.ToolNotFound, OSError) as exc:
        return subproc.Result(argv, None, "", f"not started: {exc}", 0.0)


def read_output(out: str) -> RunOutput:
    """What the worker left in ``out`` (run.py's docstring); lines that are not JSON are skipped."""
    got = RunOutput()
    try:
        with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as fh:
            for line in fh:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                (got.steps if "step" in item else got.checkpoints).append(item)
    except FileNotFoundError:
        pass
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name)
        try:
            if name.startswith("rank-") and name.endswith(".json"):
                item = _load(path)
                got.ranks[int(item["rank"])] = item
            elif name.startswith("killed-") and name.endswith(".json"):
                got.killed.append(_load(path))
            elif name.startswith("activity-") and name.endswith(".json"):
                got.activity[name[len("activity-"):-5]] = _load(path)
            elif name == "done.json":
                got.done = _load(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return got


def _load(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _failed_launch(what: str, run: RunOutput) -> Finding:
    tail = "; ".join(run.stderr_tail[-3:])[:240]
    return Finding(judge.RUN, Status.ERROR, f"the {what} run did not complete (exit {run.returncodes}, "
                   f"{len(run.steps)} steps recorded): {tail or 'no output'}")


def run_phase(spec: TrainSpec, data: TrainData, how: Launch, workdir: str, *, resume: bool = True,
              kill_mode: str = "rank", log: Callable[[str], None] = lambda _m: None) -> TrainOutcome:
    """The three runs (or one without ``resume``) in ``workdir`` (a shared folder; its checkpoints are
    removed at the end, whatever happened), judged."""
    world = how.world
    spec = check(spec, world)
    ckpt = os.path.join(workdir, "checkpoints")
    record: dict[str, Any] = {"spec": json.loads(spec.to_json()), "world": world, "world_class": world_class(world)}
    node_findings: dict[str, list[Finding]] = {}
    try:
        log(f"train: {spec.model} on {world} rank(s), {spec.steps} steps")
        full = launch(replace(spec, checkpoint_dir=os.path.join(ckpt, "full")), os.path.join(workdir, "full"), how, log)
        record["full"] = {"loss": full.loss, "seconds": round(full.duration_s, 3), "ranks": full.ranks,
                          "step_s": [round(max(s["step_s"]), 6) for s in full.steps],  # the slowest rank's
                          "tokens_per_s": [round(sum(s["tokens_per_s"]), 1) for s in full.steps],  # the job's
                          "activity": full.activity, "checkpoints": full.checkpoints,
                          "params": (full.done or {}).get("params"), "torch": (full.done or {}).get("torch")}
        if full.done is None or len(full.steps) < spec.steps:
            return TrainOutcome([_failed_launch("uninterrupted", full)], node_findings, record)
        findings = _judge_full(spec, data, full, world, node_findings)
        if resume:
            findings.append(_kill_and_resume(spec, data, full, how, workdir, ckpt, kill_mode, record, log))
        return TrainOutcome(findings, node_findings, record)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)  # the checkpoints never outlive the phase


def _judge_full(spec: TrainSpec, data: TrainData, run: RunOutput, world: int,
                node_findings: dict[str, list[Finding]]) -> list[Finding]:
    what = f"{spec.key}|{world_class(world)}"
    out = [judge.judge_convergence(run.loss, data.curve(spec, world), data.tol("band_rel"), data.tol("band_abs"),
                                   what)]
    nodes = {r: str(info.get("node")) for r, info in run.ranks.items()}
    ranks = judge.judge_ranks([s["probe"] for s in run.steps], data.tol("rank_agreement_rel"), nodes,
                              [s.get("grad") or [] for s in run.steps])
    for f in ranks:
        rank = int(f.metrics.get("rank", -1)) if f.metrics else -1
        if f.status is Status.FAIL and rank in nodes:
            node_findings.setdefault(nodes[rank], []).append(f)
    out.extend(ranks)
    gpu = next((i.get("device") for i in run.ranks.values() if i.get("device") not in (None, "cpu")), None)
    per_rank = {f"rank {r}": [s["tokens_per_s"][r] for s in run.steps if r < len(s["tokens_per_s"])]
                for r in range(world)}
    warm = int(data.tol("warmup_steps"))
    out.extend(judge.judge_throughput(per_rank, data.throughput_for(spec, gpu), f"{spec.key}|{gpu or 'cpu'}", warm))
    samples: dict[str, list[float]] = {}
    sources = set()
    for node, act in sorted(run.activity.items()):
        sources.add(act.get("source"))
        for idx, values in (act.get("samples") or {}).items():
            samples[f"{node}/gpu{idx}"] = [float(v) for v in values]
    source = sources.pop() if len(sources) == 1 else ("mixed: " + ", ".join(sorted(map(str, sources))))
    out.extend(judge.judge_activity(samples, source, data.tol("sm_activity_min_pct"),
                                    data.tol("sm_activity_spread_pct")))
    out.append(judge.judge_checkpoints(run.checkpoints))
    return out


def kill_step(spec: TrainSpec) -> int:
    """Where the kill run dies: halfway between the last two checkpoints before the end (so the restart
    loses steps and has a checkpoint to start from)."""
    every = spec.checkpoint_every
    last = (spec.steps - 1) // every * every
    if last < every:
        raise TrainPhaseError(f"no checkpoint before the end ({spec.steps} steps, checkpoint_every {every}): "
                              "the kill-and-resume test needs one")
    return min(spec.steps - 1, last + max(1, every // 2))


def _kill_and_resume(spec: TrainSpec, data: TrainData, full: RunOutput, how: Launch, workdir: str, ckpt: str, kill_mode: str,
                     record: dict[str, Any], log: Callable[[str], None]) -> Finding:
    try:
        at = kill_step(spec)
    except TrainPhaseError as exc:
        return Finding(judge.RESUME, Status.ERROR, str(exc))
    folder = os.path.join(ckpt, "killed")
    killed_rank = how.world - 1 if kill_mode == "rank" else 0
    log(f"train: again, killing {'rank ' + str(killed_rank) if kill_mode == 'rank' else 'every rank'} after step {at}")
    killed = launch(replace(spec, checkpoint_dir=folder, kill_at=at, kill_mode=kill_mode, kill_rank=killed_rank),
                    os.path.join(workdir, "killed"), how, log)
    if not killed.killed:
        return _failed_launch("killed", killed)
    log("train: restart from the latest checkpoint")
    resumed = launch(replace(spec, checkpoint_dir=folder, resume=True), os.path.join(workdir, "resumed"), how, log)
    first = resumed.steps[0] if resumed.steps else None
    kill_wall = min(float(k["wall"]) for k in killed.killed)
    recovery = float(first["wall"]) - kill_wall if first else None
    record["resume"] = {"kill_at": at, "kill_mode": kill_mode, "killed": killed.killed,
                        "loss": resumed.loss, "first_step": first["step"] if first else None,
                        "recovery_s": recovery, "seconds": round(killed.duration_s + resumed.duration_s, 3)}
    if resumed.done is None:
        return _failed_launch("resumed", resumed)
    return judge.judge_resume({s["step"]: s["loss"] for s in resumed.steps}, {s["step"]: s["loss"] for s in full.steps},
                              data.tol("resume_deviation_rel"), recovery, first["step"] - 1 if first else None)
