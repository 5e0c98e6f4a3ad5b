"""One sweep, start to end (I/O; the decisions are in plan.py and decide.py).

lock -> continue an unfinished sweep, or plan a new one -> MAINT reservation for the swept nodes ->
resume ours into it -> one burn-in job per node (recorded before and after each submit, adopted by
name after a crash) -> wait with progress -> collect each node's result -> decide under the blast-radius
limit -> act under the ownership rules -> delete the reservation -> history + readiness report.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from ..safeio import subproc
from ..safeio.atomic import make_dirs
from ..core.exitcodes import BUSY as BUSY_EXIT, FAIL, FLAGGED as FLAGGED_EXIT, OK  # noqa: F401 - the one table (BUSY_EXIT for cli/sweep)
from ..core.model import Finding, Status
from ..slurm.reasons import is_ours
from . import state as st
from .decide import Decisions, NodeResult, decide
from .jobs import JobError, SlurmJobs
from .plan import Candidate, Plan, make_plan
from .settings import SweepSettings, in_window

TERMINAL = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
            "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT")


@dataclass
class SweepOutcome:
    sweep_id: str | None
    plan: Plan
    results: dict[str, str] = field(default_factory=dict)       # node -> burn-in status
    decisions: Decisions | None = None
    fleet: dict[str, Any] | None = None                          # version drift, facility issues
    applied: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    results_dir: str | None = None
    report: str | None = None
    dry_run: bool = False

    @property
    def exit_code(self) -> int:
        if (self.decisions and self.decisions.flagged) or (self.fleet or {}).get("domain_faults"):
            return FLAGGED_EXIT  # a suspect check, or an NVLink domain's shared fault: not drained for it
        return FAIL if any(s == "fail" for s in self.results.values()) else OK

    def to_dict(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "dry_run": self.dry_run, "plan": self.plan.to_dict(),
                "results": self.results, "suspect": self.decisions.suspect if self.decisions else {},
                "actions": [a.to_dict() for a in self.decisions.actions] if self.decisions else [],
                "applied": self.applied, "notes": self.notes, "results_dir": self.results_dir,
                "fleet": self.fleet,
                "report": self.report, "exit_code": self.exit_code}


class Sweeper:
    def __init__(self, config, settings: SweepSettings, backend, jobs: SlurmJobs | None = None,
                 log: Callable[[str], None] = print, clock: Callable[[], datetime] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 progress: Callable[[int, int], None] | None = None,
                 fleet_digests: Callable[[str], str | None] | None = None) -> None:
        """``progress(done, total)``: called while waiting (a terminal shows a bar; logs get the lines).
        ``fleet_digests(results_dir)``: writes the fleet's majority GEMM digests there and returns the file
        (None when the history is unreachable); the jobs compare their products with it."""
        self.config, self.settings, self.backend = config, settings, backend
        self.jobs = jobs or SlurmJobs()
        self.log, self.sleep, self.progress = log, sleep, progress
        self.fleet_digests = fleet_digests
        self.clock = clock or (lambda: datetime.now().astimezone())
        self.state_dir = config.slurm.state_dir

    # -------------------------------------------------------------------------------------- plan
    def sbatch_argv(self, sweep_id: str, results_dir: str, node: str, reservation: str | None) -> list[str]:
        from ..burnin.submit import default_template

        s = self.settings
        # --array=0: the array template's own default (--array=1-2) must not run a node twice
        argv = ["sbatch", "--parsable", "-J", f"hc-sweep-{sweep_id}-{node}", "--array=0", "-w", node, "-N", "1",
                "--exclusive",
                f"--nice={s.nice}", f"--time={s.time_limit}", "-o", os.path.join(results_dir, f"{node}.out")]
        if s.partition:
            argv += ["-p", s.partition]
        if reservation:
            argv += [f"--reservation={reservation}"]
        template = s.template or default_template("burnin-array.sbatch")
        from ..safeio.trust import check_trusted, running_as_root

        if running_as_root():  # Slurm runs it as root on the nodes: it must be root's alone (UntrustedFile)
            check_trusted(template, "sbatch template")
        argv += ["--export=ALL", template]
        return argv

    def job_env(self, results_dir: str, fleet_file: str | None = None) -> dict[str, str]:
        env = subproc.job_env()
        # our settings travel to the job, never the database credentials (slurmdbd may store a job's env)
        env.update({k: v for k, v in os.environ.items()
                    if k.startswith("HEALTHCHECK") and not k.startswith("HEALTHCHECK_DB_")})
        env.update({"HEALTHCHECK_BURNIN_SUITE": self.settings.suite, "HEALTHCHECK_BURNIN_DRAIN": "false",
                    "HEALTHCHECK_BURNIN_RESULTS_DIR": results_dir})
        if self.config.path:
            env["HEALTHCHECK_CONFIG"] = os.path.abspath(self.config.path)
        if fleet_file and "fleet_digests" not in (self.config.burnin or {}) and \
                not env.get("HEALTHCHECK_BURNIN_FLEET_DIGESTS"):  # a site's own file wins
            env["HEALTHCHECK_BURNIN_FLEET_DIGESTS"] = fleet_file
        return env

    # --------------------------------------------------------------------------------------- run
    def run(self, dry_run: bool = False) -> SweepOutcome:
        with st.Lock(self.state_dir):
            previous = st.load(self.state_dir)
            if previous is not None and previous.phase != "done":
                if dry_run:
                    out = SweepOutcome(previous.sweep_id, Plan(), dry_run=True, results_dir=previous.results_dir)
                    out.notes.append(f"sweep {previous.sweep_id} is unfinished ({previous.phase}); the next run "
                                     "continues it: nothing new would be planned")
                    return out
                self.log(f"continuing unfinished sweep {previous.sweep_id} ({previous.phase})")
                return self._continue(previous)
            states = self.backend.nodes()
            plan = make_plan(states, self.settings)
            now = self.clock()
            if dry_run:
                return self._dry_run(plan, states, now)
            if not in_window(self.settings.window, now.hour, now.minute):
                out = SweepOutcome(None, plan)
                out.notes.append(f"outside the sweep window {self.settings.window}: nothing started")
                return out
            if not plan.test:
                out = SweepOutcome(None, plan)
                out.notes.append("no node to test")
                return out
            sweep_id = now.strftime("%Y%m%dT%H%M%S") + "-" + os.urandom(2).hex()
            results_dir = os.path.join(self.settings.results_root, sweep_id)
            make_dirs(results_dir, 0o755)  # and its parents, whatever the umask
            state = st.SweepState(sweep_id, now.isoformat(timespec="seconds"), results_dir,
                                  nodes=[{"node": c.node, "ours": c.ours, "reason": c.reason} for c in plan.test])
            st.save(self.state_dir, state)
            return self._continue(state, plan)

    def _dry_run(self, plan: Plan, states, now: datetime) -> SweepOutcome:
        out = SweepOutcome(None, plan, dry_run=True)
        if not in_window(self.settings.window, now.hour, now.minute):
            out.notes.append(f"outside the sweep window {self.settings.window}: a real run would start nothing now")
        res = "healthcheck-sweep-<id>" if self.settings.reservation else None
        if res and plan.test:
            out.notes.append(f"would create reservation {res} (MAINT) on {','.join(c.node for c in plan.test)}")
        for c in plan.test:
            if c.ours:
                out.notes.append(f"would resume {c.node} (drained by us: {c.reason}) into the reservation")
            out.notes.append("would run: " + " ".join(self.sbatch_argv("<id>", "<results>", c.node, res)))
        out.notes.append("then: drain nodes that fail (reason with the run id), resume ours that pass, within "
                         f"the blast-radius cap of {self._cap(states)} node(s) per check")
        return out

    def _cap(self, states) -> int:
        from .decide import cap_for

        return cap_for(len(self._considered(states)), self.settings)

    def _considered(self, states) -> list[str]:
        part = self.settings.partition
        return [n for n, s in states.items()
                if not part or part in s.fields.get("Partitions", "").split(",")]

    def _continue(self, state: st.SweepState, plan: Plan | None = None) -> SweepOutcome:
        cands = [Candidate(d["node"], d["ours"], d["reason"]) for d in state.nodes]
        out = SweepOutcome(state.sweep_id, plan or Plan(test=cands), results_dir=state.results_dir)
        if state.phase == "planned":
            self._start(state, cands)
        if state.phase == "submitted":
            self._wait(state)
            state.phase = "collected"
            st.save(self.state_dir, state)
        if state.phase == "collected":
            self._conclude(state, cands, out)
        return out

    def _start(self, state: st.SweepState, cands: list[Candidate]) -> None:
        nodes = [c.node for c in cands]
        if self.settings.reservation and state.reservation is None:
            name = f"healthcheck-sweep-{state.sweep_id}"
            minutes = math.ceil(self.settings.wait_timeout_s / 60) + 10
            import pwd

            self.jobs.create_reservation(name, nodes, minutes, pwd.getpwuid(os.geteuid()).pw_name)
            state.reservation = name
            st.save(self.state_dir, state)
            self.log(f"reservation {name} on {','.join(nodes)}")
        for c in cands:
            if c.ours and c.node not in state.resumed:
                current = self.backend.node(c.node)
                if current.reason and not is_ours(current.reason):
                    self.log(f"{c.node}: reason changed to {current.reason!r} (not ours): not resumed, not tested")
                    continue
                self.backend.resume(c.node)
                state.resumed.append(c.node)
                st.save(self.state_dir, state)
                self.log(f"{c.node}: resumed into the reservation for its burn-in")
        prefix = f"hc-sweep-{state.sweep_id}-"
        existing = self.jobs.jobs_named(prefix)  # submitted before a crash, not yet recorded
        fleet_file = self.fleet_digests(state.results_dir) if self.fleet_digests else None
        env = self.job_env(state.results_dir, fleet_file)
        for c in cands:
            if c.node in state.jobs:
                continue
            if c.ours and c.node not in state.resumed:
                continue
            job = existing.get(prefix + c.node)
            if job is None:
                job = self.jobs.submit(self.sbatch_argv(state.sweep_id, state.results_dir, c.node, state.reservation),
                                       env)
                self.log(f"{c.node}: burn-in job {job}")
            else:
                self.log(f"{c.node}: adopting job {job} submitted before an interruption")
            state.jobs[c.node] = job
            st.save(self.state_dir, state)
        state.phase = "submitted"
        st.save(self.state_dir, state)

    def _wait(self, state: st.SweepState) -> None:
        started = datetime.fromisoformat(state.started_at)
        deadline = started.timestamp() + self.settings.wait_timeout_s
        last = None
        while True:
            states = {n: self.jobs.job_state(j) for n, j in state.jobs.items()}
            done = [n for n, s in states.items() if s is None or s.split("+")[0] in TERMINAL]
            line = (f"sweep {state.sweep_id}: {len(done)}/{len(states)} done, "
                    f"{sum(1 for s in states.values() if s == 'RUNNING')} running, "
                    f"{sum(1 for s in states.values() if s == 'PENDING')} pending")
            if self.progress is not None:
                self.progress(len(done), len(states))
            elif line != last:
                self.log(line)
            last = line
            if len(done) == len(states):
                if self.progress is not None:
                    self.log(line)
                return
            if time.time() > deadline:
                for n, s in states.items():
                    if n not in done:
                        self.log(f"{n}: job {state.jobs[n]} still {s} at the sweep deadline: cancelled")
                        try:
                            self.jobs.cancel(state.jobs[n])
                        except JobError as exc:
                            self.log(f"{n}: cancel failed: {exc}")
                return
            self.sleep(self.settings.poll_s)

    def _results(self, state: st.SweepState, cands: list[Candidate]) -> tuple[dict[str, NodeResult], dict]:
        out, records = {}, {}
        for c in cands:
            if c.ours and c.node not in state.resumed:
                continue  # its reason changed under us: not tested, not ours to act on
            path = os.path.join(state.results_dir, f"{c.node}.json")
            try:
                with open(path, encoding="utf-8") as fh:
                    rec = json.load(fh)
                records[c.node] = rec
                findings = [Finding.from_dict(r) for r in rec.get("results", [])]
                out[c.node] = NodeResult(c.node, Status(rec["status"]), findings, c.ours, c.reason)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                why = f"no burn-in result ({type(exc).__name__})"
                out[c.node] = NodeResult(c.node, Status.ERROR, [Finding("sweep.result", Status.ERROR, why)], c.ours,
                                         c.reason)
        return out, records

    def _conclude(self, state: st.SweepState, cands: list[Candidate], out: SweepOutcome) -> None:
        from ..spool.entries import new_run_id

        results, records = self._results(state, cands)
        out.results = {n: r.status.value for n, r in results.items()}
        from .fleet import fleet_view

        view = fleet_view(records, self.config)
        out.fleet = view.to_dict()
        for line in view.drift:
            self.log(f"version drift: {line}")
        for row in view.facility:
            self.log(f"FACILITY {row['level']} {row['group']}: {row['kind']} on {row['n_nodes']} of "
                     f"{row['group_size']} nodes ({row['nodes']}): a shared cause, not {row['n_nodes']} node faults")
        for row in view.domain_faults:
            self.log(f"DOMAIN FAULT {row['text']} ({', '.join(row['nodes'])})")
        states = self.backend.nodes()
        ours_now = {n: s.reason for n, s in states.items() if s.reason and is_ours(s.reason)}
        run_id = new_run_id()
        out.decisions = decide(results, ours_now, len(self._considered(states)), self.settings, run_id,
                               facility=view.facility_nodes, domain_faults=view.domain_faults)
        for check, why in out.decisions.suspect.items():
            self.log(f"SUSPECT {why}")
        for action in out.decisions.actions:
            out.applied.append(self._apply(action))
        if state.reservation:
            try:
                self.jobs.delete_reservation(state.reservation)
            except JobError as exc:
                out.notes.append(f"reservation {state.reservation} not deleted: {exc}")
        self._record(state, results, out, run_id)
        state.phase = "done"
        st.save(self.state_dir, state)
        write_json(os.path.join(state.results_dir, "sweep.json"), out.to_dict())

    def _apply(self, action) -> dict[str, Any]:
        from ..slurm.backend import SlurmError

        entry = action.to_dict()
        if action.action in ("none", "resume"):
            entry["applied"] = action.action == "resume"  # resumed at the start, into the reservation
            return entry
        try:
            current = self.backend.node(action.node)
            if current.reason and not is_ours(current.reason):
                entry.update(applied=False, why=f"{action.why}; reason now {current.reason!r}, not ours: left")
                return entry
            self.backend.drain(action.node, action.reason)
            entry["applied"] = True
            self.log(f"{action.node}: {action.action}: {action.reason}")
        except SlurmError as exc:
            entry.update(applied=False, why=f"{action.why}; refused: {exc}")
            self.log(f"{action.node}: {action.action} refused: {exc}")
        return entry

    def _record(self, state: st.SweepState, results: dict[str, NodeResult], out: SweepOutcome, run_id: str) -> None:
        """The nodes' burn-in records and the sweep's actions, to this host's spool (the history ingests
        them; re-ingesting a node's own spool later is a no-op by run id)."""
        from ..spool.entries import action_record
        from ..core.clock import utc_now_iso
        from ..spool.store import SpoolError, append

        spool = self.config.slurm.spool_dir
        records = []
        for node in results:
            try:
                with open(os.path.join(state.results_dir, f"{node}.json"), encoding="utf-8") as fh:
                    records.append(json.load(fh))
            except (OSError, ValueError):
                pass
        for a in out.applied:
            if a.get("applied") and a["action"] in ("drain", "restore", "resume"):
                records.append(action_record(
                    run_id, a["node"], "resume" if a["action"] == "resume" else "drain", a["reason"],
                    time=utc_now_iso(), job_id=state.jobs.get(a["node"]), context="sweep", why=a["why"],
                    checks=a["checks"]))
        try:
            for rec in records:
                append(spool, rec)
        except (SpoolError, OSError, ValueError) as exc:
            out.notes.append(f"sweep records not spooled to {spool}: {exc}")


def write_json(path: str, data: dict) -> None:
    from ..safeio.atomic import atomic_write

    atomic_write(path, json.dumps(data, indent=1, default=str), 0o644)
