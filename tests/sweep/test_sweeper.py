"""The sweep's flow with Slurm faked at its two seams (node states/actions, jobs/reservations): the
paths the real-cluster tests cannot reach cheaply — a job that never ends, a reason changed by an admin
during the sweep, progress reporting."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from healthcheck.config import Config
from healthcheck.slurm.nodestate import NodeState
from healthcheck.config.slurm_settings import SlurmSettings
from healthcheck.sweep.run import Sweeper
from healthcheck.sweep.settings import resolve

OURS = "healthcheck: gpu.xid gpu1: Xid 79 [run 0123456789ab]"


class FakeBackend:
    def __init__(self, states):
        self.states = states
        self.calls = []

    def nodes(self):
        return dict(self.states)

    def node(self, name):
        return self.states[name]

    def drain(self, name, reason):
        self.calls.append(("drain", name, reason))
        self.states[name] = NodeState(name, "IDLE", frozenset({"DRAIN"}), reason)

    def resume(self, name):
        self.calls.append(("resume", name))
        self.states[name] = NodeState(name, "IDLE")


class FakeJobs:
    def __init__(self, finish, results_of):
        self.finish, self.results_of = finish, results_of
        self.submitted, self.cancelled, self.reservations = [], [], []

    def create_reservation(self, name, nodes, minutes, user):
        self.reservations.append(("create", name, tuple(nodes)))

    def delete_reservation(self, name):
        self.reservations.append(("delete", name))

    def jobs_named(self, prefix):
        return {}

    def submit(self, argv, env):
        node = argv[argv.index("-w") + 1]
        self.submitted.append(node)
        results_dir = env["HEALTHCHECK_BURNIN_RESULTS_DIR"]
        status = self.results_of.get(node)
        if status:
            with open(f"{results_dir}/{node}.json", "w") as fh:
                json.dump({"node": node, "status": status, "results": [
                    {"check": "gpu.xid", "status": status, "message": "Xid 79", "component": "gpu1"}]}, fh)
        return str(100 + len(self.submitted))

    def job_state(self, job):
        return "COMPLETED" if self.finish(job) else "RUNNING"

    def cancel(self, job):
        self.cancelled.append(job)


def make(tmp_path, states, jobs, **sweep):
    cfg = Config(None, slurm=SlurmSettings(state_dir=str(tmp_path / "state"), spool_dir=str(tmp_path / "spool")))
    template = tmp_path / "b.sbatch"
    template.write_text("#!/bin/sh\n")
    settings = resolve({"results_root": str(tmp_path / "sweeps"), "poll_s": 0.01, "template": str(template), **sweep})
    seen = []
    sweeper = Sweeper(cfg, settings, FakeBackend(states), jobs, log=lambda m: None,
                      clock=lambda: datetime(2026, 12, 2, 2, 15, tzinfo=timezone.utc), sleep=lambda s: None,
                      progress=lambda done, total: seen.append((done, total)))
    return sweeper, seen


def test_a_job_past_the_deadline_is_cancelled_and_ours_is_put_back(tmp_path):
    states = {"g1": NodeState("g1", "IDLE", frozenset({"DRAIN"}), OURS), "g2": NodeState("g2", "IDLE")}
    jobs = FakeJobs(finish=lambda job: job == "102", results_of={"g2": "pass"})
    sweeper, seen = make(tmp_path, states, jobs, wait_timeout_s=0.001)
    out = sweeper.run()
    assert jobs.submitted == ["g1", "g2"] and jobs.cancelled == ["101"]
    assert out.results == {"g1": "error", "g2": "pass"}
    acts = {a["node"]: a for a in out.applied}
    assert acts["g1"]["action"] == "restore" and sweeper.backend.states["g1"].reason == OURS
    assert ("resume", "g1") in sweeper.backend.calls  # resumed into the reservation, then put back
    assert jobs.reservations[0][0] == "create" and jobs.reservations[-1][0] == "delete"
    assert seen and seen[-1] == (1, 2)
    assert out.exit_code == 0


def test_an_admin_reason_set_during_the_sweep_is_left_alone(tmp_path):
    states = {"g1": NodeState("g1", "IDLE"), "g2": NodeState("g2", "IDLE")}
    jobs = FakeJobs(finish=lambda job: True, results_of={"g1": "fail", "g2": "pass"})
    sweeper, _ = make(tmp_path, states, jobs, max_drain_fraction=1.0)
    real_nodes = sweeper.backend.nodes

    def admin_acts():  # the admin drains g1 while its burn-in runs
        sweeper.backend.states["g1"] = NodeState("g1", "IDLE", frozenset({"DRAIN"}), "RMA 4711")
        return real_nodes()

    sweeper.backend.nodes = lambda: real_nodes() if not jobs.submitted else admin_acts()
    out = sweeper.run()
    (g1,) = [a for a in out.applied if a["node"] == "g1"]
    assert g1["action"] == "drain" and g1["applied"] is False and "not ours" in g1["why"]
    assert sweeper.backend.states["g1"].reason == "RMA 4711"
    assert out.exit_code == 1


def test_outside_the_window_nothing_starts(tmp_path):
    jobs = FakeJobs(finish=lambda job: True, results_of={})
    sweeper, _ = make(tmp_path, {"g1": NodeState("g1", "IDLE")}, jobs, window="03:00-05:00")
    out = sweeper.run()
    assert jobs.submitted == [] and "outside the sweep window" in out.notes[0]
