"""The five fault drills. Each injects one fault on the running cluster, waits (polling every
``Cluster.poll_s``, monotonic clock) for each stage, repairs what it broke, and returns a
``DrillResult``; a stage that does not come within its bound is reported missing (the drill fails),
and the repair runs whatever happened (``finally``).

    failing-check  a fault bundle on NODE; a job pinned to NODE: its prolog sees the fault (detect),
                   the node is drained with our reason (drain), the job is requeued without having run
                   there (requeue); repaired (healthy bundle) -> the next HealthCheckProgram resumes it
                   (resume); the job then runs and completes.
    hung-gpu       NODE's GPU hangs (a sysfs vendor file that never answers); a job pinned to NODE: the
                   prolog returns within its budget (hook_s <= budget_s), the node is drained for the
                   hang (node.responsive / gpu.responsive), the job requeued; repaired -> resumed.
    node-death     a job runs on a node; that node's slurmd and the job's slurmstepd are killed: the
                   controller sees it not responding (detect), DOWN (drain), the job requeued
                   (requeue); slurmd restarted -> the node back in service (resume); the job completes.
    ctld-restart   slurmctld stopped; NODE turns faulty; the HealthCheckProgram judges it (detect) and
                   queues the drain; slurmctld started; the next HealthCheckProgram applies the queue
                   (drain); repaired -> resumed. A job submitted before stays queued (nothing lost).

    training-restart  a training job (burnin/train, 2 nodes, ``--requeue``) is requeued by Slurm once it
                   has checkpointed (the fault): the job is requeued (requeue), its second attempt resumes
                   from the checkpoint (resume: the first step after the restart), it completes; the steps
                   both attempts ran agree within the resume limit and the curve stays in its reference
                   band; its checkpoints are removed.

Where a drill needs "the next HealthCheckProgram", it runs the installed hook itself, as slurmd does
at each HealthCheckInterval, so a drill does not depend on the interval; ``detect_runs`` counts the
hook runs on the node from the fault to the one that saw it ("time to detect: 1 prolog").
"""
from __future__ import annotations

import os
import shlex
from datetime import datetime, timezone
from typing import Callable

from ..spool import store as spool
from .cluster import Cluster, DrillError, TimedOut
from .model import DrillResult, Timeline
from .site import Site

DEFAULT_TIMEOUT_S = 120.0  # per stage; the node-death stages wait for SlurmdTimeout on top of it
JOB_RUN_TIMEOUT_S = 180.0  # a drill's job must finish within this (the test jobs run seconds)
BUDGET_SLACK_S = 1.0  # a hook's own measure may pass its budget by its exit and record write


class _Drill:
    """The bookkeeping every drill shares: timeline, notes, problems, losses, hook runs started."""

    def __init__(self, name: str, site: Site, cluster: Cluster, node: str | None, timeout: float):
        self.name, self.site, self.cluster, self.node = name, site, cluster, node
        self.timeout = timeout
        self.tl = Timeline(cluster.clock)
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        self.tl.mark("start")
        self.notes: list[str] = []
        self.problems: list[str] = []
        self.lost: list[str] = []
        self.extra: dict[str, float] = {}
        self.job: str | None = None
        self.reason: str | None = None
        self.hook_runs = 0  # HealthCheckProgram runs started by the drill
        self.seen_records = {r.get("record_id") for r in site.records()}

    def new_records(self, kind: str, node: str | None = None) -> list[dict]:
        node = node or self.node
        return [r for r in self.site.records() if r.get("record_id") not in self.seen_records
                and r.get("kind") == kind and r.get("node") == node]

    def wait(self, mark: str, predicate: Callable[[], object], what: str, timeout: float | None = None) -> float:
        at = self.cluster.wait_for(predicate, self.timeout if timeout is None else timeout, what)
        return self.tl.mark(mark, at)

    def health_check(self, node: str | None = None) -> None:
        self.hook_runs += 1
        res = self.site.health_check(node or self.node)
        if res.timed_out:
            self.problems.append(f"the HealthCheckProgram did not return within {res.duration_s:.0f} s")

    def ready(self, node: str) -> None:
        if not self.cluster.controller_up():
            raise DrillError("slurmctld does not answer `scontrol ping`: start the cluster first")
        state = self.cluster.node(node)
        if not self.cluster.in_service(node):
            raise DrillError(f"{node} is not in service ({state.state}"
                             f"{'+' + '+'.join(sorted(state.flags)) if state.flags else ''}"
                             f"{', reason: ' + state.reason if state.reason else ''}): resume it first")

    def marker(self) -> str:
        folder = self.site.path("jobs")
        os.makedirs(folder, mode=0o755, exist_ok=True)
        path = os.path.join(folder, f"{self.name}-{os.urandom(4).hex()}")
        return path

    def check_spool(self, contexts: tuple[str, ...] = ("slurm-check",)) -> None:
        """Every HealthCheckProgram run the drill started left its run record."""
        runs = [r for r in self.new_records("run") if r.get("context") in contexts]
        if "slurm-check" in contexts and len([r for r in runs if r.get("context") == "slurm-check"]) < self.hook_runs:
            self.lost.append(f"{self.hook_runs} HealthCheckProgram run(s) but only "
                             f"{len([r for r in runs if r.get('context') == 'slurm-check'])} run record(s) in the spool")

    def finish_job(self, marker: str | None = None, want: str | None = None) -> None:
        """Release the job if Slurm held it, wait for it to complete; a job that does not is lost."""
        if self.job is None:
            return
        deadline = self.cluster.clock() + JOB_RUN_TIMEOUT_S
        state, fields = "", {}
        while self.cluster.clock() < deadline:
            if self.cluster.release_if_held(self.job):
                self.notes.append(f"job {self.job} was held by Slurm after its launch failed; released")
            fields = self.cluster.job(self.job)
            state = fields.get("JobState", "")
            if state == "COMPLETED" or state in ("FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "BOOT_FAIL"):
                break
            self.cluster.sleep(0.5)
        if state != "COMPLETED":
            self.lost.append(f"job {self.job} did not complete within {JOB_RUN_TIMEOUT_S:g} s (state "
                             f"{state or 'unknown'}, reason {fields.get('Reason', '-')})")
            for node in sorted(set(filter(None, [self.node, fields.get("ReqNodeList")]))):
                try:
                    st = self.cluster.node(node)
                except DrillError:
                    continue
                self.notes.append(f"{node} then: {st.state}{'+' + '+'.join(sorted(st.flags)) if st.flags else ''}"
                                  f"{', reason: ' + st.reason if st.reason else ''}")
            self.cluster.cancel(self.job)
        elif marker and want and want not in _read(marker):
            self.lost.append(f"job {self.job} completed but its output lacks {want!r}")

    def result(self, expected: tuple[str, ...], fault: str = "fault", repair: str = "repair") -> DrillResult:
        since = self.tl.since
        stages = {"detect_s": since(fault, "detect"), "drain_s": since(fault, "drain"),
                  "requeue_s": since(fault, "requeue"), "resume_s": since(repair, "resume")}
        duration = self.cluster.clock() - self.tl.marks["start"]
        return DrillResult(self.name, self.node or "-", self.started_at, duration, self.job, stages,
                           self.extra, expected, self.lost, self.notes, self.reason, self.problems)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _requeued(fields: dict[str, str]) -> bool:
    try:
        restarts = int(fields.get("Restarts", "0"))
    except ValueError:
        restarts = 0
    return restarts >= 1 or "requeue" in fields.get("Reason", "").lower()


def _prolog_fault(d: _Drill, inject: Callable[[], None], repair: Callable[[], None],
                  want_checks: tuple[str, ...] | None) -> None:
    """The shared body of failing-check and hung-gpu: a fault, a job pinned to the node, the prolog.
    ``want_checks``: the checks the prolog must fail for (None: whichever it failed for), which the
    drain reason must then name."""
    node, cluster = d.node, d.cluster
    marker = d.marker()
    try:
        inject()
        d.tl.mark("fault")
        d.job = cluster.sbatch("-N1", "-w", node, "-o", "/dev/null", "-J", f"drill-{d.name}",
                               "--wrap", f"echo ran-on=$SLURMD_NODENAME >> {shlex.quote(marker)}")

        def failing_prolog():
            return [r for r in d.new_records("run") if r.get("context") == "prolog"
                    and r.get("job_id") == d.job and r.get("status") == "fail"]
        d.wait("detect", failing_prolog, f"a failing prolog record of job {d.job} on {node}")
        runs = d.new_records("run")
        d.extra["detect_runs"] = float(next(i for i, r in enumerate(runs, 1)
                                            if r.get("context") == "prolog" and r.get("status") == "fail"))
        record = failing_prolog()[0]
        d.extra["hook_s"] = float(record.get("duration_s") or 0.0)
        checks = [f.get("check") for f in record.get("results", []) if f.get("status") == "fail"]
        if want_checks is None:
            want_checks = tuple(c for c in checks if c) or ("(no failing check)",)
        elif not any(c in want_checks for c in checks):
            d.problems.append(f"the prolog failed for {checks}, not for {' or '.join(want_checks)}")
        d.wait("drain", lambda: cluster.node(node).drained, f"{node} drained")
        d.reason = cluster.node(node).reason
        if not cluster.drained_by_us(node):
            # slurmctld marks a failed prolog "Prolog error" over our reason; the next health check
            # puts the precise one back (docs/slurm-actions.md)
            d.notes.append(f"Slurm's reason right after the prolog: {d.reason!r}; the next "
                           "HealthCheckProgram restored ours")
            d.health_check()
            d.wait("reason", lambda: cluster.drained_by_us(node), f"{node} drained with our reason")
            d.reason = cluster.node(node).reason
            d.extra["reason_s"] = d.tl.since("fault", "reason") or 0.0
        if not any(c in (d.reason or "") for c in want_checks):
            d.problems.append(f"drain reason {d.reason!r} does not name {' or '.join(want_checks)}")
        d.wait("requeue", lambda: _requeued(cluster.job(d.job)), f"job {d.job} requeued")
        if "ran-on=" in _read(marker):
            d.problems.append(f"job {d.job} ran on {node} while it was faulty")
        if cluster.conf.get("epilog"):
            # Slurm runs the epilog of the failed launch too; it judges the still-faulty node (a hung
            # one for the epilog's whole budget) and would drain it again after an early repair
            def epilog():
                return [r for r in d.new_records("run") if r.get("context") == "epilog"
                        and r.get("job_id") == d.job]
            d.wait("epilog", epilog, f"the epilog record of job {d.job}")
            ep = epilog()[0]
            d.extra["epilog_hook_s"] = float(ep.get("duration_s") or 0.0)
            d.notes.append(f"the epilog of the failed launch judged {node} too: {ep.get('status')} "
                           f"in {d.extra['epilog_hook_s']:.2f} s")
        repair()
        d.tl.mark("repair")
        d.health_check()
        d.wait("resume", lambda: cluster.in_service(node), f"{node} back in service")
        if not [a for a in d.new_records("action") if a.get("action") == "resume"]:
            d.lost.append(f"no resume action record for {node} in the spool")
        d.finish_job(marker, f"ran-on={node}")
        if not [a for a in d.new_records("action") if a.get("action") == "drain"]:
            d.lost.append(f"no drain action record for {node} in the spool")
        d.check_spool()
    except TimedOut as exc:
        d.problems.append(str(exc))
    finally:
        repair()
        if d.job and cluster.job(d.job).get("JobState") not in ("COMPLETED", None):
            cluster.cancel(d.job)


def failing_check(site: Site, cluster: Cluster, node: str, timeout: float = DEFAULT_TIMEOUT_S) -> DrillResult:
    d = _Drill("failing-check", site, cluster, node, timeout)
    d.ready(node)
    _prolog_fault(d, lambda: site.set_bundle(node, fault=True), lambda: site.set_bundle(node, fault=False),
                  want_checks=None)
    return d.result(("detect_s", "drain_s", "requeue_s", "resume_s"))


def hung_gpu(site: Site, cluster: Cluster, node: str, timeout: float = DEFAULT_TIMEOUT_S) -> DrillResult:
    d = _Drill("hung-gpu", site, cluster, node, timeout)
    d.ready(node)
    budget = float(site.budgets["prolog_budget_s"])
    d.extra["budget_s"] = budget
    _prolog_fault(d, lambda: site.set_hung(node, True), lambda: site.set_hung(node, False),
                  want_checks=("node.responsive", "gpu.responsive"))
    if "hook_s" in d.extra and d.extra["hook_s"] > budget + BUDGET_SLACK_S:
        d.problems.append(f"the prolog took {d.extra['hook_s']:.2f} s, over its {budget:g} s budget")
    return d.result(("detect_s", "drain_s", "requeue_s", "resume_s"))


def node_death(site: Site, cluster: Cluster, node: str | None = None,
               timeout: float = DEFAULT_TIMEOUT_S) -> DrillResult:
    """``node`` None: the job goes where Slurm puts it and, requeued, reruns elsewhere; a node given
    pins the job there, so its rerun waits for the node's return."""
    d = _Drill("node-death", site, cluster, node, timeout)
    for n in ([node] if node else []):
        d.ready(n)
    marker = d.marker()
    script = (f"if [ \"${{SLURM_RESTART_COUNT:-0}}\" -gt 0 ]; then echo rerun-on=$SLURMD_NODENAME >> "
              f"{shlex.quote(marker)}; exit 0; fi; echo first-on=$SLURMD_NODENAME >> {shlex.quote(marker)}; "
              "sleep 600")
    pin = ["-w", node] if node else []
    restarted = False
    try:
        d.job = cluster.sbatch("-N1", *pin, "--requeue", "-o", "/dev/null", "-J", "drill-node-death",
                               "--wrap", script)
        d.wait("running", lambda: "first-on=" in _read(marker), f"job {d.job} running")
        d.node = node = cluster.job(d.job).get("NodeList") or _read(marker).split("first-on=")[1].split()[0]
        d.tl.mark("fault")
        killed = cluster.kill_node(node, d.job)
        d.notes.append(f"killed {node}'s slurmd and job {d.job}'s slurmstepd ({len(killed)} processes)")
        slack = float(cluster.conf.get("slurmdtimeout", "300") or 300)
        d.wait("detect", lambda: (lambda s: s.not_responding or s.down)(cluster.node(node)),
               f"{node} not responding", timeout=d.timeout + slack)
        d.wait("drain", lambda: cluster.node(node).down, f"{node} DOWN", timeout=d.timeout + slack)
        d.reason = cluster.node(node).reason
        d.wait("requeue", lambda: _requeued(cluster.job(d.job)), f"job {d.job} requeued")
        d.tl.mark("repair")
        cluster.start_slurmd(node)
        restarted = True
        d.wait("resume", lambda: cluster.in_service(node), f"{node} back in service after slurmd restart")
        d.finish_job(marker, "rerun-on=")
    except TimedOut as exc:
        d.problems.append(str(exc))
    finally:
        if d.node and "fault" in d.tl.marks and not restarted:
            try:
                cluster.start_slurmd(d.node)
            except DrillError as exc:
                d.problems.append(f"could not restart slurmd on {d.node}: {exc}")
        if d.job and cluster.job(d.job).get("JobState") not in ("COMPLETED", None):
            cluster.cancel(d.job)
    return d.result(("detect_s", "drain_s", "requeue_s", "resume_s"))


def ctld_restart(site: Site, cluster: Cluster, node: str, timeout: float = DEFAULT_TIMEOUT_S) -> DrillResult:
    d = _Drill("ctld-restart", site, cluster, node, timeout)
    d.ready(node)
    started = True
    try:
        d.job = cluster.sbatch("-N1", "--hold", "-o", "/dev/null", "-J", "drill-ctld-restart", "--wrap", "true")
        cluster.stop_controller()
        started = False
        d.tl.mark("ctld_down")
        site.set_bundle(node, fault=True)
        d.tl.mark("fault")
        d.health_check()
        d.wait("detect", lambda: [r for r in d.new_records("run") if r.get("status") == "fail"],
               f"a failing HealthCheckProgram record on {node}")
        d.extra["detect_runs"] = float(d.hook_runs)
        queued = _read(site.pending_file(node))
        if not queued.strip():
            d.problems.append("no drain queued while slurmctld was down")
        cluster.start_controller()
        started = True
        d.wait("ctld_up", cluster.controller_up, "slurmctld answering again")
        d.extra["ctld_down_s"] = d.tl.since("ctld_down", "ctld_up") or 0.0
        d.health_check()  # the next HealthCheckProgram applies the queue first
        d.wait("drain", lambda: cluster.drained_by_us(node), f"{node} drained with our reason")
        d.extra["drain_after_up_s"] = d.tl.since("ctld_up", "drain") or 0.0
        d.reason = cluster.node(node).reason
        if _read(site.pending_file(node)).strip():
            d.lost.append("drain actions still queued after slurmctld came back")
        drains = [a for a in d.new_records("action") if a.get("action") == "drain"]
        if not any("queued" in (a.get("why") or "") for a in drains):
            d.lost.append("no record of the drain queued while slurmctld was down")
        if not any((a.get("why") or "").startswith("applied from the queue") for a in drains):
            d.lost.append("no record of the queued drain being applied")
        if not cluster.job(d.job):
            d.lost.append(f"job {d.job}, queued before the restart, is gone")
        elif cluster.job(d.job).get("JobState") != "PENDING":
            d.lost.append(f"job {d.job} is {cluster.job(d.job).get('JobState')}, not PENDING, after the restart")
        site.set_bundle(node, fault=False)
        d.tl.mark("repair")
        d.health_check()
        d.wait("resume", lambda: cluster.in_service(node), f"{node} back in service")
        d.check_spool()
    except TimedOut as exc:
        d.problems.append(str(exc))
    finally:
        site.set_bundle(node, fault=False)
        if not started:
            try:
                cluster.start_controller()
            except DrillError as exc:
                d.problems.append(f"could not restart slurmctld: {exc}")
        if d.job:
            cluster.cancel(d.job)
    return d.result(("detect_s", "drain_s", "resume_s"))


TRAIN_STEPS = 240  # the drill's run: long enough on a loaded machine for the requeue to land mid-run
TRAIN_INTERRUPT_AFTER = 3  # steps past the first checkpoint before the drill requeues the job


def training_restart(site: Site, cluster: Cluster, node: str | None = None,
                     timeout: float = DEFAULT_TIMEOUT_S) -> DrillResult:
    """``node`` given: the job runs there and on one more node Slurm picks; else where Slurm puts it."""
    import json
    import shutil
    import sys
    import time

    from ..burnin.train import judge
    from ..burnin.train.spec import load
    from ..core.model import Status

    d = _Drill("training-restart", site, cluster, node, timeout)
    for n in ([node] if node else []):
        d.ready(n)
    data = load()
    work = site.path("train", f"run-{os.urandom(4).hex()}")
    ckpt = os.path.join(work, "checkpoints")
    os.makedirs(work, mode=0o755)
    spec = data.spec("tiny", steps=TRAIN_STEPS, resume=True, checkpoint_dir=ckpt)
    with open(os.path.join(work, "spec.json"), "w", encoding="utf-8") as fh:
        fh.write(spec.to_json())
    attempt = os.path.join(work, "attempt-${SLURM_RESTART_COUNT:-0}")
    script = (f"mkdir -p {attempt} && exec srun --kill-on-bad-exit=1 {shlex.quote(sys.executable)} -m "
              f"healthcheck.burnin.train.run --spec {shlex.quote(os.path.join(work, 'spec.json'))} --out {attempt} "
              f"--rendezvous {work}/rendezvous-${{SLURM_RESTART_COUNT:-0}}")
    pin = ["-w", node] if node else []

    def steps(n: int) -> dict[int, dict]:
        out: dict[int, dict] = {}
        for line in _read(os.path.join(work, f"attempt-{n}", "metrics.jsonl")).splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if "step" in item:
                out[int(item["step"])] = item
        return out

    def checkpointed() -> bool:
        first = [json.loads(x) for x in _read(os.path.join(work, "attempt-0", "metrics.jsonl")).splitlines()
                 if x.startswith('{"checkpoint"')]
        return bool(first) and max(steps(0), default=0) >= first[0]["checkpoint"] + TRAIN_INTERRUPT_AFTER

    try:
        d.job = cluster.sbatch("-N2", "--ntasks-per-node=1", *pin, "--requeue", "-o", os.path.join(work, "job.out"),
                               "-J", "drill-training-restart", "--wrap", script)
        d.wait("checkpointed", checkpointed, f"job {d.job}'s first checkpoint", timeout=d.timeout + JOB_RUN_TIMEOUT_S)
        try:
            cluster.requeue(d.job)
        except DrillError as exc:  # e.g. the run ended first on a fast machine: it was never interrupted
            raise TimedOut(f"job {d.job} could not be requeued ({exc}); raise TRAIN_STEPS") from None
        fault_wall = time.time()
        d.tl.mark("fault")
        d.tl.mark("repair", d.tl.marks["fault"])  # nothing to repair: the restart is Slurm's and the job's
        lost_after = max(steps(0), default=0)
        d.wait("requeue", lambda: _requeued(cluster.job(d.job)), f"job {d.job} requeued")
        d.wait("resume", lambda: steps(1), f"the first step of job {d.job}'s second attempt",
               timeout=d.timeout + JOB_RUN_TIMEOUT_S)
        d.finish_job()
        first, second = steps(0), steps(1)
        restart = min(second) - 1
        d.extra["restart_step"] = float(restart)
        d.extra["steps_redone"] = float(max(0, lost_after - restart))
        d.extra["recovery_s"] = float(second[min(second)]["wall"]) - fault_wall
        resumed = judge.judge_resume({s: v["loss"] for s, v in second.items()},
                                     {s: v["loss"] for s, v in first.items()},
                                     data.tol("resume_deviation_rel"), d.extra["recovery_s"], restart)
        d.extra["deviation_rel"] = float(resumed.metrics.get("deviation_rel", 0.0))
        merged = [({**first, **second}).get(s, {}).get("loss", float("nan")) for s in range(1, TRAIN_STEPS + 1)]
        converged = judge.judge_convergence(merged, data.curve(spec, 2), data.tol("band_rel"), data.tol("band_abs"),
                                            f"{spec.key}|2-8")
        d.notes.extend([resumed.message, converged.message])
        if resumed.status is not Status.PASS:
            d.problems.append(f"resume: {resumed.message}")
        if converged.status is Status.FAIL:
            d.problems.append(f"convergence: {converged.message}")
        if "done.json" not in os.listdir(os.path.join(work, "attempt-1")):
            d.lost.append("the resumed attempt did not complete the run")
    except TimedOut as exc:
        d.problems.append(str(exc))
    finally:
        if d.job and cluster.job(d.job).get("JobState") not in ("COMPLETED", None):
            cluster.cancel(d.job)
        shutil.rmtree(ckpt, ignore_errors=True)  # the checkpoints never outlive the drill
    return d.result(("requeue_s", "resume_s"))


# name -> (function, whether it takes a node, one line)
DRILLS: dict[str, tuple[Callable[..., DrillResult], str, str]] = {
    "failing-check": (failing_check, "required",
                      "a fault bundle: the prolog sees it, the node is drained, the job does not start there"),
    "hung-gpu": (hung_gpu, "required",
                 "a GPU that never answers: the prolog keeps its budget, drains for the hang"),
    "node-death": (node_death, "optional",
                   "the job's node dies (slurmd and slurmstepd killed): requeue, node back after restart"),
    "ctld-restart": (ctld_restart, "required",
                     "slurmctld down while a node turns faulty: the queued drain lands after; nothing lost"),
    "training-restart": (training_restart, "optional",
                         "a training job requeued mid-run: it resumes from its checkpoint and matches its curve"),
}


def run_drill(name: str, site: Site, cluster: Cluster, node: str | None = None,
              timeout: float = DEFAULT_TIMEOUT_S, record: bool = True) -> DrillResult:
    """Run drill ``name``; with ``record``, append its result to the site's spool as a run record
    (context "drill", check ``drill.<name>``) for the history. DrillError for bad input."""
    if name not in DRILLS:
        raise DrillError(f"no drill {name!r} (known: {', '.join(DRILLS)})")
    func, wants_node, _ = DRILLS[name]
    if wants_node == "required" and not node:
        raise DrillError(f"drill {name} needs a node")
    if node and node not in site.nodes:
        raise DrillError(f"{node} is not a node of this site ({', '.join(site.nodes)})")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise DrillError(f"timeout must be a number of seconds in (0, 3600], got {timeout!r}")
    result = func(site, cluster, node, timeout=timeout)
    if record:
        record_result(site, result)
    return result


def record_result(site: Site, result: DrillResult) -> None:
    """Append ``result`` to the site's spool as a run record (context "drill", check ``drill.<name>``)
    for the history. ``spool.store.SpoolError`` (or OSError) when the spool cannot take it."""
    spool.append(site.spool_dir, result.to_record())

