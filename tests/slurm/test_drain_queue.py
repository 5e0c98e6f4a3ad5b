"""A queued drain is never lost, and an Xid is acknowledged only when a drain for it really ended.

The sequence a reviewer reproduced with a fake scontrol, step by step against a fake backend: slurmctld
hangs (the drain is queued, and the ledger used to say "drained by us"); the next run is held back by
the drain cap, or refused with a non-transient error (the queued drain used to be dropped); the run after
that saw the node in service, took it for "resumed by an admin" and acknowledged the Xid for good.
Now: no ledger before Slurm confirmed the drain, the queued item survives holds and errors, and only
an admin's resume of a confirmed drain acknowledges its events. The same on a real Slurm cluster:
tests/slurm/test_drain_never_lost.py."""
from __future__ import annotations

import json
import time

import pytest

from healthcheck.core.model import Finding, Status, Verdict
from healthcheck.slurm import actions, ledger, pending
from healthcheck.slurm.backend import SlurmError, SlurmUnreachable
from healthcheck.slurm.nodestate import NodeState
from healthcheck.slurm.pending import PendingAction, queue, take_all
from healthcheck.config.slurm_settings import SlurmSettings

REASON = "healthcheck: gpu.xid gpu0: Xid 79 (GPU has fallen off the bus) x1 on 0000:18:00.0 [run run-1]"
EVENTS = ["boot-a|100.000000|0000:18:00.0|xid|79"]


def state(name="node1", flags=(), reason=None, when=None, st="IDLE"):
    return NodeState(name=name, state=st, flags=frozenset(flags), reason=reason, reason_time=when,
                     fields={"Partitions": "batch"})


def local_iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


class Log(list):
    def __call__(self, message: str) -> None:
        self.append(message)

    def has(self, text: str) -> bool:
        return any(text in line for line in self)


class Slurm:
    """A fake slurmctld for a fleet of 4 nodes. ``mode``: "ok", "hang" (every call SlurmUnreachable),
    "auth" (every call SlurmError, as scontrol's "Protocol authentication error")."""

    def __init__(self, mode="ok"):
        self.mode, self.deadline, self.calls = mode, None, []
        self.fleet = {f"node{i}": state(f"node{i}") for i in range(1, 5)}

    def _answer(self, call):
        self.calls.append(call)
        if self.mode == "hang":
            raise SlurmUnreachable("scontrol did not finish within 1s")
        if self.mode == "auth":
            raise SlurmError("update NodeName=node1 State=DRAIN: Protocol authentication error")

    def node(self, name):
        self._answer(("node", name))
        return self.fleet[name]

    def nodes(self):
        self._answer(("nodes",))
        return dict(self.fleet)

    def drain(self, name, reason):
        self._answer(("drain", name, reason))
        self.fleet[name] = state(name, ("DRAIN",), reason, local_iso(time.time()))

    def resume(self, name):
        self._answer(("resume", name))
        self.fleet[name] = state(name)

    def admin(self, name, reason=None, resume=False):
        self.fleet[name] = state(name) if resume else state(name, ("DRAIN",), reason, local_iso(time.time()))


def settings(tmp_path, **kw):
    return SlurmSettings(**{"drain_cap_nodes": 2, "drain_cap_fraction": 0.1,
                            "spool_dir": str(tmp_path / "spool"), **kw})


def xid_verdict(context="slurm-check"):
    return Verdict.of("node1", [Finding("gpu.xid", Status.FAIL, "Xid 79 (GPU has fallen off the bus) x1 on "
                                                                "0000:18:00.0", "gpu0")],
                      "2026-12-03T00:00:00+00:00", 0.1, context)


def healthy(context="slurm-check"):
    return Verdict.of("node1", [Finding("gpu.xid", Status.PASS, "no new NVIDIA Xid events")],
                      "2026-12-03T00:00:00+00:00", 0.1, context)


def queued(sd) -> list[dict]:
    path = sd / pending.FILENAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_hook(slurm, sd, tmp_path, verdict, log, events=EVENTS, **kw):
    """What a hook run does around its checks: the queue, the re-check of our drain, then the verdict."""
    actions.apply_pending(slurm, str(sd), settings(tmp_path, **kw), log, "node1")
    acks = actions.reconcile_before_checks(slurm, "node1", str(sd), log)
    decision = actions.decide_and_act(verdict.context, verdict, "node1", settings(tmp_path, **kw), slurm,
                                      str(sd), "run-" + str(len(log)), log, events)
    return decision, acks


def hung_run(tmp_path):
    """Step 1: an Xid FAIL while scontrol hangs: the drain is queued with the run's events, no ledger."""
    sd, log, slurm = tmp_path / "state", Log(), Slurm("hang")
    decision = actions.decide_and_act("slurm-check", xid_verdict(), "node1", settings(tmp_path), slurm, str(sd),
                                      "run-1", log, EVENTS)
    return sd, log, slurm, decision


# -- the sequence, one step at a time ------------------------------------------------------------------

def test_a_hung_scontrol_queues_the_drain_without_a_ledger(tmp_path):
    sd, log, _, decision = hung_run(tmp_path)
    assert decision.action == "drain" and "queued" in decision.why
    assert not (sd / ledger.LEDGER).exists(), "the ledger says 'drained by us' for a drain Slurm never took"
    [item] = queued(sd)
    assert item["action"] == "drain" and item["events"] == EVENTS and item["run_id"] == "run-1"


def test_a_drain_cap_hold_keeps_the_queued_drain(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    created = queued(sd)[0]["created_at"]
    slurm.mode = "ok"
    for other in ("node2", "node3"):  # the cap (2) is reached for gpu.xid
        slurm.admin(other, REASON.replace("[run run-1]", f"[run {other}]"))
    for _ in range(2):  # held each run, logged each time, never dropped
        decision, acks = run_hook(slurm, sd, tmp_path, xid_verdict(), log)
        assert decision.action == "none" and decision.held == ("gpu.xid",)
        assert [q["created_at"] for q in queued(sd)] == [created] and queued(sd)[0]["events"] == EVENTS
        assert not slurm.fleet["node1"].drained and acks == []
        assert not (sd / ledger.LEDGER).exists() and not (sd / ledger.ACKS).exists()
    assert sum("held back by the drain cap" in line and "kept in the queue" in line for line in log) == 2


@pytest.mark.parametrize("where", ["state read", "drain"])
def test_a_slurm_error_keeps_the_queued_drain(tmp_path, where):
    sd, log, slurm, _ = hung_run(tmp_path)
    if where == "state read":
        slurm.mode = "auth"
    else:
        slurm.mode = "ok"
        real_drain = slurm.drain

        def refused(name, reason):
            raise SlurmError("update: Protocol authentication error")
        slurm.drain = refused
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert queued(sd)[0]["events"] == EVENTS and queued(sd)[0]["run_id"] == "run-1"
    assert log.has("refused by Slurm") and log.has("Protocol authentication error")
    assert not (sd / ledger.LEDGER).exists() and not (sd / ledger.ACKS).exists()
    if where == "drain":
        slurm.drain = real_drain
    slurm.mode = "ok"
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert slurm.fleet["node1"].drained and queued(sd) == []


def test_the_whole_sequence_acknowledges_the_xid_only_after_the_admin_resumed_the_drain(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "auth"  # run 2: munge broken
    run_hook(slurm, sd, tmp_path, xid_verdict(), log)
    slurm.mode = "ok"  # run 3: the cap holds
    for other in ("node2", "node3"):
        slurm.admin(other, REASON)
    run_hook(slurm, sd, tmp_path, xid_verdict(), log)
    assert not slurm.fleet["node1"].drained and queued(sd) and not (sd / ledger.ACKS).exists()
    for other in ("node2", "node3"):  # run 4: the cap frees up: the queued drain is applied
        slurm.admin(other, resume=True)
    decision, acks = run_hook(slurm, sd, tmp_path, xid_verdict(), log)
    assert slurm.fleet["node1"].drained and slurm.fleet["node1"].reason == REASON  # the queued reason
    assert decision.action == "none" and acks == []  # "already drained by us for the same reason"
    assert ledger.read_ledger(str(sd), log)["events"] == EVENTS and ledger.read_ledger(str(sd), log)["context"] == "queued"
    assert queued(sd) == [] and not (sd / ledger.ACKS).exists()
    applied = [json.loads(line) for line in (tmp_path / "spool" / "records.jsonl").read_text().splitlines()]
    assert [a["run_id"] for a in applied if a["kind"] == "action"] == ["run-1"]
    slurm.admin("node1", resume=True)  # the admin resumes: only now is the Xid acknowledged
    _, acks = run_hook(slurm, sd, tmp_path, healthy(), log)
    assert acks == EVENTS and not (sd / ledger.LEDGER).exists()


def test_a_queued_drain_without_a_ledger_is_never_taken_for_an_admins_resume(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "ok"
    acks = actions.reconcile_before_checks(slurm, "node1", str(sd), log)
    assert acks == [] and queued(sd)  # the node in service is not "resumed": it was never drained


# -- supersession ---------------------------------------------------------------------------------------

def test_our_resume_after_a_healthy_run_supersedes_the_queued_drain(tmp_path):
    sd, log, slurm = tmp_path / "state", Log(), Slurm("ok")
    ledger.remember_drain(str(sd), "healthcheck: gpu.ecc.uncorrected gpu3: 2", "slurm-check", ["k-old"], log)
    slurm.admin("node1", "healthcheck: gpu.ecc.uncorrected gpu3: 2")
    # a drain queued meanwhile (a run whose state read failed), still there when a healthy run resumes
    queue(str(sd), PendingAction("node1", "drain", REASON, "2026-12-03T00:00:00+00:00", "run-q", tuple(EVENTS)))
    decision = actions.decide_and_act("slurm-check", healthy(), "node1", settings(tmp_path), slurm, str(sd),
                                      "run-2", log, [])
    assert decision.action == "resume" and not slurm.fleet["node1"].drained
    assert queued(sd) == [] and log.has("superseded by our resume")
    assert ledger.read_acks(str(sd), log) == ["k-old"]  # the confirmed drain ended; the queued one never was


def test_a_foreign_reason_supersedes_the_queued_drain_and_acknowledges_nothing(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "ok"
    slurm.admin("node1", "RMA 4711")
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert queued(sd) == [] and log.has("'RMA 4711' (not ours)")
    assert slurm.fleet["node1"].reason == "RMA 4711" and not (sd / ledger.ACKS).exists()


def test_our_drain_standing_supersedes_the_queued_one_and_takes_its_events(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "ok"
    ledger.remember_drain(str(sd), "healthcheck: gpu.ecc.uncorrected gpu3: 2", "slurm-check", ["k-ecc"], log)
    slurm.admin("node1", "healthcheck: gpu.ecc.uncorrected gpu3: 2")
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert queued(sd) == [] and log.has("superseded: the node is drained by us")
    assert ledger.read_ledger(str(sd), log)["events"] == ["k-ecc", *EVENTS]


def test_a_drain_that_went_through_unanswered_gets_its_ledger_when_seen(tmp_path):
    """scontrol timed out but slurmctld took the drain: the next run sees our reason on the node."""
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "ok"
    slurm.admin("node1", queued(sd)[0]["reason"])
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert queued(sd) == [] and ledger.read_ledger(str(sd), log)["events"] == EVENTS
    slurm.admin("node1", resume=True)
    assert actions.reconcile_before_checks(slurm, "node1", str(sd), log) == EVENTS


def test_a_confirmed_drain_supersedes_older_queued_actions_and_keeps_their_events(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "ok"
    decision = actions.decide_and_act("slurm-check", xid_verdict(), "node1", settings(tmp_path), slurm, str(sd),
                                      "run-2", log, ["k-new"])
    assert decision.action == "drain" and queued(sd) == [] and log.has("superseded by our drain")
    assert ledger.read_ledger(str(sd), log)["events"] == [*EVENTS, "k-new"]
    slurm.admin("node1", resume=True)  # the admin's resume: a later run must not drain it again
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert not slurm.fleet["node1"].drained


def test_a_queued_resume_leaves_the_ledger_until_it_is_applied(tmp_path):
    sd, log, slurm = tmp_path / "state", Log(), Slurm("ok")
    ledger.remember_drain(str(sd), REASON, "slurm-check", EVENTS, log)
    slurm.admin("node1", REASON)
    real_resume = slurm.resume
    slurm.resume = lambda name: (_ for _ in ()).throw(SlurmUnreachable("no time left"))
    decision = actions.decide_and_act("slurm-check", healthy(), "node1", settings(tmp_path), slurm, str(sd),
                                      "run-2", log, [])
    assert decision.action == "resume" and "queued" in decision.why
    assert (sd / ledger.LEDGER).exists() and not (sd / ledger.ACKS).exists()  # the drain has not ended
    slurm.resume = real_resume
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert not slurm.fleet["node1"].drained and ledger.read_acks(str(sd), log) == EVENTS


@pytest.mark.parametrize("first,second", [("drain", "resume"), ("resume", "drain")])
def test_the_newest_queued_decision_wins(tmp_path, first, second):
    def item(action, t):
        return PendingAction("node1", action, REASON if action == "drain" else None, t, "r-" + t,
                             tuple(EVENTS) if action == "drain" else ())
    queue(tmp_path, item(first, "2026-12-03T00:00:00+00:00"))
    queue(tmp_path, item(second, "2026-12-03T01:00:00+00:00"))
    [kept] = take_all(tmp_path)
    assert kept.action == second and kept.created_at == "2026-12-03T01:00:00+00:00"
    # put back after a failure while a newer decision was queued meanwhile: the newer one stays
    queue(tmp_path, item(first, "2026-12-03T02:00:00+00:00"))
    pending.requeue(tmp_path, [kept])
    assert [a.action for a in take_all(tmp_path)] == [first]


# -- before_act --------------------------------------------------------------------------------------

def test_before_act_sees_the_decision_before_slurm_and_cannot_stop_it(tmp_path):
    sd, log, slurm = tmp_path / "state", Log(), Slurm("ok")
    seen = []

    def before(decision):
        seen.append((decision.action, list(slurm.calls)))
        raise RuntimeError("the agent's pipe is gone")
    decision = actions.decide_and_act("prolog", xid_verdict("prolog"), "node1", settings(tmp_path), slurm, str(sd),
                                      "run-1", log, EVENTS, before_act=before)
    assert decision.action == "drain" and slurm.fleet["node1"].drained
    assert seen and seen[0][0] == "drain" and not any(c[0] == "drain" for c in seen[0][1])
    assert log.has("RuntimeError: the agent's pipe is gone")
    called = []
    actions.decide_and_act("prolog", healthy("prolog"), "node1", settings(tmp_path), slurm, str(sd), "run-2",
                           log, [], before_act=called.append)
    assert called == []  # no action: not called


# -- robustness -----------------------------------------------------------------------------------------

def test_an_unexpected_error_puts_the_item_back(tmp_path):
    sd, log, slurm, _ = hung_run(tmp_path)
    slurm.mode = "ok"
    slurm.node = lambda name: (_ for _ in ()).throw(KeyError("bug"))
    actions.apply_pending(slurm, str(sd), settings(tmp_path), log, "node1")
    assert queued(sd)[0]["events"] == EVENTS and log.has("KeyError")
