"""Issue 14's hook-side points without slurmctld: Slurm calls inside the budget (a deadline on every
backend call), the drain ledger that ends with the drain, kernel events acted on once, the drain cap's
counting, and a pending-actions queue whose bad items are set aside while the rest is applied.
The same behaviours against a real slurmctld: tests/slurm/test_verdict_actions.py."""
from __future__ import annotations

import json
import time

import pytest

from healthcheck.safeio import subproc
from healthcheck.checks.gpu_xid import event_key
from healthcheck.core.model import Finding, Status, Verdict
from healthcheck.slurm import actions, ledger
from healthcheck.slurm.backend import ScontrolBackend, SlurmUnreachable
from healthcheck.slurm.draincap import cap_for, held_back
from healthcheck.slurm.nodestate import NodeState
from healthcheck.slurm.pending import REJECTED, PendingAction, queue, take_valid
from healthcheck.config.slurm_settings import SlurmSettings
from tests.checks.gpu_builders import only, run, snapshot, xid

REASON = "healthcheck: gpu.xid gpu0: Xid 79 (GPU has fallen off the bus) x1 on 0000:18:00.0"


def state(name="node1", st="IDLE", flags=(), reason=None, when=None, partitions="batch"):
    return NodeState(name=name, state=st, flags=frozenset(flags), reason=reason, reason_time=when,
                     fields={"Partitions": partitions} if partitions else {})


def local_iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


class Recorder:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, message: str) -> None:
        self.lines.append(message)


# -- Slurm calls inside the budget -------------------------------------------------------------------

def test_a_hung_scontrol_costs_the_deadline_not_three_timeouts(tmp_path):
    hung = tmp_path / "scontrol"
    hung.write_text("#!/bin/sh\nexec sleep 60\n")
    hung.chmod(0o755)
    backend = ScontrolBackend(scontrol=str(hung), timeout_s=5.0, retries=2,
                              deadline=time.monotonic() + 0.8)
    start = time.monotonic()
    with pytest.raises(SlurmUnreachable):
        backend.node("node1")
    # without the deadline this is 3 x 5 s plus backoff; a loaded machine may add a little, never seconds
    assert time.monotonic() - start < 3.0


def test_past_the_deadline_no_call_is_started():
    calls = []

    def runner(argv, timeout, env=None, **kw):
        calls.append(timeout)
        return subproc.Result(argv, 0, "", "", False, 0.0)

    backend = ScontrolBackend(scontrol="/bin/true", run=runner, deadline=time.monotonic() - 1)
    with pytest.raises(SlurmUnreachable, match="no time left"):
        backend.resume("node1")
    assert calls == []


def test_each_call_gets_at_most_what_is_left():
    seen = []

    def runner(argv, timeout, env=None, **kw):
        seen.append(timeout)
        return subproc.Result(argv, 0, "", "", False, 0.0)

    ScontrolBackend(scontrol="/bin/true", run=runner, timeout_s=5.0,
                    deadline=time.monotonic() + 1.0).resume("node1")
    assert len(seen) == 1 and 0 < seen[0] <= 1.0


def test_lazy_backend_hands_its_deadline_to_the_backend():
    lazy = actions.LazyBackend(SlurmSettings(scontrol="/bin/true"), deadline=123.0)
    assert lazy.scontrol  # builds it
    assert lazy._backend.deadline == 123.0
    lazy.deadline = 456.0
    assert lazy._backend.deadline == 456.0


# -- the ledger ends with the drain ----------------------------------------------------------------------

def test_ledger_ends_when_the_node_is_resumed_and_acknowledges_its_events(tmp_path):
    log = Recorder()
    ledger.remember_drain(str(tmp_path), REASON, "slurm-check", ["b|1.000000|0000:18:00.0|xid|79"], log)
    entry = ledger.read_ledger(str(tmp_path), log)
    assert ledger.reconcile(state(st="IDLE", flags=("DRAIN",), reason=REASON), str(tmp_path), entry, log) == entry
    assert ledger.reconcile(state(st="IDLE"), str(tmp_path), entry, log) is None
    assert not (tmp_path / ledger.LEDGER).exists()
    assert ledger.read_acks(str(tmp_path), log) == ["b|1.000000|0000:18:00.0|xid|79"]
    assert any("drain is over" in line for line in log.lines)


def test_a_later_prolog_error_is_not_ours(tmp_path):
    """Our prolog drained, an admin resumed, and much later Slurm drained the node 'Prolog error' for
    a cause of its own: the ledger must not claim it (today it did, and the node was resumed by us)."""
    log = Recorder()
    ledger.remember_drain(str(tmp_path), REASON, "prolog", [], log)
    entry = ledger.read_ledger(str(tmp_path), log)
    just_after = state(st="IDLE", flags=("DRAIN",), reason="Prolog error", when=local_iso(entry["epoch"] + 2))
    assert ledger.slurm_mark_of_ours(just_after, entry)
    much_later = state(st="IDLE", flags=("DRAIN",), reason="Prolog error",
                       when=local_iso(entry["epoch"] + 3 * 3600))
    assert not ledger.slurm_mark_of_ours(much_later, entry)
    assert ledger.reconcile(much_later, str(tmp_path), entry, log) is None


def test_an_admin_reason_ends_the_ledger(tmp_path):
    log = Recorder()
    ledger.remember_drain(str(tmp_path), REASON, "slurm-check", [], log)
    entry = ledger.read_ledger(str(tmp_path), log)
    assert ledger.reconcile(state(st="IDLE", flags=("DRAIN",), reason="RMA 4711"), str(tmp_path), entry, log) is None


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe", b'{"keys": "nope"}'])
def test_corrupt_state_files_are_set_aside_and_read_as_empty(tmp_path, content):
    log = Recorder()
    (tmp_path / ledger.ACKS).write_bytes(content)
    assert ledger.read_acks(str(tmp_path), log) == []
    assert log.lines, "a corrupt file must be logged"
    (tmp_path / ledger.LEDGER).write_bytes(content)
    assert ledger.read_ledger(str(tmp_path), log) is None


def test_acknowledgements_are_bounded_and_keep_the_newest(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger, "MAX_ACKS", 5)
    log = Recorder()
    ledger.acknowledge(str(tmp_path), [f"k{i}" for i in range(4)], log)
    ledger.acknowledge(str(tmp_path), [f"k{i}" for i in range(2, 8)], log)
    assert ledger.read_acks(str(tmp_path), log) == ["k3", "k4", "k5", "k6", "k7"]


# -- kernel events acted on once -----------------------------------------------------------------------

def test_acknowledged_events_do_not_fail_again_new_ones_do():
    old, new = xid(79, uptime_s=100.0), xid(79, uptime_s=5000.0)
    boot = "3f1c0e52-aaaa-bbbb-cccc-000000000001"
    snap = snapshot(kernel_events=[old])
    snap.boot_id = boot
    assert only(run("gpu.xid", snap)).status is Status.FAIL
    snap.acknowledged_events = [event_key(old, boot)]
    passed = only(run("gpu.xid", snap))
    assert passed.status is Status.PASS and "1 already acted on" in passed.message
    snap.kernel_events = [old, new]
    failed = only(run("gpu.xid", snap))
    assert failed.status is Status.FAIL and "x1" in failed.message


def test_the_same_stamp_in_another_boot_is_a_new_event():
    ev = xid(48, uptime_s=100.0)
    assert event_key(ev, "boot-a") != event_key(ev, "boot-b")
    assert event_key(ev, "boot-a") == event_key(xid(48, uptime_s=100.0), "boot-a")
    assert event_key(ev, "boot-a") != event_key(xid(48, uptime_s=100.5), "boot-a")


# -- the drain cap -----------------------------------------------------------------------------------

def settings(**kw):
    return SlurmSettings(**{"drain_cap_nodes": 2, "drain_cap_fraction": 0.1, **kw})


def fleet(n: int, drained: dict[str, str], when: float | None = None, partitions="batch"):
    out = {}
    for i in range(1, n + 1):
        name = f"node{i}"
        reason = drained.get(name)
        out[name] = state(name, "IDLE", ("DRAIN",) if reason else (), reason,
                          local_iso(when if when is not None else time.time() - 60) if reason else None,
                          partitions)
    return out


def test_cap_is_the_larger_of_nodes_and_fraction():
    assert cap_for(8, settings()) == 2
    assert cap_for(1000, settings()) == 100
    assert cap_for(1000, settings(drain_cap_fraction=0.0, drain_cap_nodes=5)) == 5


def test_the_third_node_for_the_same_check_is_held_back():
    reason = "healthcheck: gpu.count: expected 16 GPUs, found 8 [run 0123456789ab]"
    nodes = fleet(8, {"node1": reason, "node2": reason})
    held = held_back("node3", ["gpu.count"], nodes, settings(), time.time())
    assert held == {"gpu.count": {"drained": 2, "cap": 2, "nodes": 8, "examples": ["node1", "node2"],
                                  "scope": "partition"}}
    assert held_back("node3", ["gpu.xid"], nodes, settings(), time.time()) == {}  # another check
    assert held_back("node3", ["gpu.count"], nodes, settings(drain_cap=False), time.time()) == {}


def test_old_drains_and_foreign_reasons_do_not_count():
    reason = "healthcheck: gpu.count: expected 16 GPUs, found 8"
    old = fleet(8, {"node1": reason, "node2": reason}, when=time.time() - 3 * 86400)
    assert held_back("node3", ["gpu.count"], old, settings(), time.time()) == {}
    foreign = fleet(8, {"node1": "gpu.count bad", "node2": "RMA"})
    assert held_back("node3", ["gpu.count"], foreign, settings(), time.time()) == {}


def test_only_nodes_sharing_a_partition_count():
    reason = "healthcheck: gpu.count: expected 16 GPUs, found 8"
    nodes = fleet(4, {"node1": reason, "node2": reason}, partitions="other")
    nodes["node3"] = state("node3", partitions="batch")
    assert held_back("node3", ["gpu.count"], nodes, settings(), time.time()) == {}


def test_the_cap_counts_within_an_nvlink_domain_and_names_it():
    """Issue 33: 2 trays of one 18-tray NVLink domain drained for gpu.fabric hold the third back even in a
    partition of 200 nodes (whose own cap is 20): the fault is the domain's, not each tray's."""
    reason = "healthcheck: gpu.fabric gpu0: fabric health Unhealthy"
    nodes = fleet(200, {"node1": reason, "node2": reason})
    domain = ("nvlink nvl01", [f"node{i}" for i in range(1, 19)])
    assert held_back("node3", ["gpu.fabric"], nodes, settings(), time.time()) == {}  # the partition's cap: 20
    held = held_back("node3", ["gpu.fabric"], nodes, settings(), time.time(), domain)
    assert held["gpu.fabric"] == {"drained": 2, "cap": 2, "nodes": 18, "examples": ["node1", "node2"],
                                  "scope": "nvlink nvl01"}
    other = ("nvlink nvl02", [f"node{i}" for i in range(19, 37)])  # a tray of another domain: drained as usual
    assert held_back("node20", ["gpu.fabric"], nodes, settings(), time.time(), other) == {}


def test_a_domain_held_back_finding_blames_the_domain(tmp_path):
    reason = "healthcheck: gpu.fabric gpu0: fabric health Unhealthy"
    backend = FakeBackend(fleet(200, {"node1": reason, "node2": reason}))
    verdict = Verdict.of("node3", [Finding("gpu.fabric", Status.FAIL, "fabric health Unhealthy", "gpu0")],
                         "2026-12-03T00:00:00+00:00", 0.1, "prolog")
    asked = []

    def domain():
        asked.append(1)
        return ("nvlink nvl01", [f"node{i}" for i in range(1, 19)])

    decision = actions.decide_and_act("prolog", verdict, "node3", settings(), backend, str(tmp_path / "s"),
                                      "run-1", Recorder(), domain=domain)
    assert decision.action == "none" and decision.held == ("gpu.fabric",) and backend.drained == []
    (cap,) = [f for f in verdict.findings if f.check == "slurm.drain_cap"]
    assert "2 of 18 nodes of nvlink nvl01" in cap.message and "NVLink domain" in cap.message
    healthy = Verdict.of("node3", [Finding("gpu.ecc.mode", Status.PASS, "on")], "2026-12-03T00:00:00+00:00", 0.1,
                         "prolog")
    actions.decide_and_act("prolog", healthy, "node3", settings(), backend, str(tmp_path / "t"), "run-2",
                           Recorder(), domain=domain)
    assert asked == [1]  # asked only when the cap is evaluated: never on a healthy run


def test_the_hook_finds_the_nodes_nvlink_domain_in_the_topology(tmp_path):
    from healthcheck.config import loads
    from healthcheck.hook.run import nvlink_domain

    config = loads('[slurm]\ndrain_cap_level = "nvlink"\n[topology.nvlink]\nnvl01 = "gb[001-018]"\n'
                   'nvl02 = "gb[019-036]"\n', "site.toml")
    name, members = nvlink_domain(config, config.slurm, "gb020")
    assert name == "nvlink nvl02" and members[0] == "gb019" and len(members) == 18
    assert nvlink_domain(config, config.slurm, "login1") is None  # in no domain
    plain = loads('[topology.nvlink]\nnvl01 = "gb[001-018]"\n', "site.toml")
    assert nvlink_domain(plain, plain.slurm, "gb001") is None  # no drain_cap_level: partitions only


class FakeBackend:
    def __init__(self, nodes: dict):
        self._nodes, self.drained, self.deadline = nodes, [], None

    def node(self, name):
        return self._nodes[name]

    def nodes(self):
        return dict(self._nodes)

    def drain(self, name, reason):
        self.drained.append((name, reason))

    def resume(self, name):
        raise AssertionError("no resume expected")


def test_a_held_back_node_is_not_drained_and_the_run_says_so(tmp_path):
    reason = "healthcheck: gpu.count: expected 16 GPUs, found 8"
    backend = FakeBackend(fleet(8, {"node1": reason, "node2": reason}))
    verdict = Verdict.of("node3", [Finding("gpu.count", Status.FAIL, "expected 16 GPUs, found 8")],
                         "2026-12-03T00:00:00+00:00", 0.1, "prolog")
    decision = actions.decide_and_act("prolog", verdict, "node3", settings(), backend, str(tmp_path / "s"),
                                      "run-1", Recorder())
    assert decision.action == "none" and decision.held == ("gpu.count",) and backend.drained == []
    cap = [f for f in verdict.findings if f.check == "slurm.drain_cap"]
    assert cap and cap[0].status is Status.WARN and "held back by the drain cap" in cap[0].message
    assert cap[0].metrics["held_back"] == 1.0 and cap[0].metrics["cap"] == 2.0


def test_other_failures_still_drain_when_one_check_is_capped(tmp_path):
    reason = "healthcheck: gpu.count: expected 16 GPUs, found 8"
    backend = FakeBackend(fleet(8, {"node1": reason, "node2": reason}))
    verdict = Verdict.of("node3", [Finding("gpu.count", Status.FAIL, "expected 16 GPUs, found 8"),
                                   Finding("gpu.ecc.uncorrected", Status.FAIL, "volatile 2", "gpu3")],
                         "2026-12-03T00:00:00+00:00", 0.1, "slurm-check")
    decision = actions.decide_and_act("slurm-check", verdict, "node3", settings(), backend,
                                      str(tmp_path / "s"), "run-1", Recorder())
    assert decision.action == "drain" and backend.drained[0][1].startswith("healthcheck: gpu.ecc.uncorrected gpu3")
    assert decision.held == ("gpu.count",)


# -- the pending-actions queue -------------------------------------------------------------------------

def test_bad_queue_items_are_set_aside_and_the_rest_is_kept(tmp_path):
    good = PendingAction("node1", "drain", REASON, "2026-12-03T00:00:00+00:00", "r1")
    queue(str(tmp_path), good)
    path = tmp_path / "pending-actions.jsonl"
    with open(path, "a") as fh:
        fh.write(json.dumps({"node": "gpu[01-64]", "action": "drain", "reason": REASON,
                             "created_at": "2026-12-03T00:00:00+00:00"}) + "\n")
        fh.write(json.dumps({"node": "node1x", "action": "resume", "reason": None,
                             "created_at": "2026-12-03T00:00:00+00:00"}) + "\n")
        fh.write(json.dumps({"node": "node1", "action": "drain", "reason": "maintenance by evil",
                             "created_at": "2026-12-03T00:00:00+00:00"}) + "\n")
        fh.write("{half a line\n")
    log = Recorder()
    taken = take_valid(str(tmp_path), "node1", log)
    assert taken == [good]  # (the foreign drain for node1 replaced nothing: items are validated one by one)
    rejected = [json.loads(line) for line in (tmp_path / REJECTED).read_text().splitlines()]
    whys = " / ".join(r["why"] for r in rejected)
    assert len(rejected) == 4, rejected
    assert "one plain node name" in whys and "not this node" in whys and "not ours" in whys
    assert "corrupt line" in whys
    assert len(log.lines) == 4


def test_apply_pending_never_raises_and_applies_the_good_items(tmp_path):
    queue(str(tmp_path), PendingAction("node1", "drain", REASON, "2026-12-03T00:00:00+00:00", "r1"))
    with open(tmp_path / "pending-actions.jsonl", "a") as fh:
        fh.write(json.dumps({"node": "bad name", "action": "drain", "reason": REASON,
                             "created_at": "2026-12-03T00:00:00+00:00"}) + "\n")
    backend = FakeBackend({"node1": state("node1")})
    actions.apply_pending(backend, str(tmp_path), SlurmSettings(spool_dir=str(tmp_path / "spool")),
                          Recorder(), "node1")
    assert backend.drained == [("node1", REASON)]
    assert (tmp_path / REJECTED).exists()
    assert not (tmp_path / "pending-actions.jsonl").exists()


# -- ERROR results in the drain reason ----------------------------------------------------------------

def test_a_drain_reason_counts_the_checks_that_could_not_judge():
    from healthcheck.slurm.policy import decide
    from healthcheck.slurm.reasons import without_run

    verdict = Verdict.of("node1", [Finding("gpu.ecc.uncorrected", Status.FAIL, "volatile 2", "gpu3"),
                                   Finding("gpu.ecc.mode", Status.ERROR, "ecc mode: Unknown Error", "gpu4"),
                                   Finding("gpu.row_remap", Status.ERROR, "Unknown Error", "gpu4")],
                         "2026-12-03T00:00:00+00:00", 0.1, "slurm-check")
    decision = decide("slurm-check", verdict, state(), SlurmSettings(), "0123456789abcdef")
    assert decision.action == "drain"
    assert decision.reason.startswith("healthcheck: gpu.ecc.uncorrected gpu3: volatile 2 (2 unjudged) [run ")
    # the same cause with another number of unjudged checks is the same reason (no re-drain)
    again = decide("slurm-check", Verdict.of("node1", verdict.findings[:2], "x", 0.1, "slurm-check"),
                   state(st="IDLE", flags=("DRAIN",), reason=decision.reason), SlurmSettings(), "fedcba9876543210")
    assert without_run(decision.reason) == without_run(again.reason or decision.reason)
    assert again.action == "none"


# -- durability where it matters ------------------------------------------------------------------------

@pytest.mark.parametrize("status,action,synced", [(Status.PASS, "none", False), (Status.WARN, "none", False),
                                                   (Status.FAIL, "none", True), (Status.ERROR, "none", True),
                                                   (Status.PASS, "resume", True)])
def test_only_failures_and_actions_are_fsynced(tmp_path, monkeypatch, status, action, synced):
    from healthcheck.spool import append as spoolwrite
    from healthcheck.slurm.policy import Decision

    calls = []
    monkeypatch.setattr(spoolwrite.os, "fsync", lambda fd: calls.append(fd))
    verdict = Verdict.of("node1", [Finding("host.disk", status, "x")], "2026-12-03T00:00:00+00:00", 0.1, "prolog")
    actions.record(str(tmp_path / "spool"), verdict, Decision(action, None, "why"), "r" * 32, "1", None, Recorder())
    lines = (tmp_path / "spool" / "records.jsonl").read_text().splitlines()
    assert lines and json.loads(lines[0])["status"] == status.value
    assert bool(calls) is synced


def test_a_node_already_drained_is_not_said_to_be_held_back(tmp_path):
    reason = "healthcheck: gpu.count: expected 16 GPUs, found 8"
    nodes = fleet(8, {"node1": reason, "node2": reason, "node3": reason})
    backend = FakeBackend(nodes)
    verdict = Verdict.of("node3", [Finding("gpu.count", Status.FAIL, "expected 16 GPUs, found 8")],
                         "2026-12-03T00:00:00+00:00", 0.1, "slurm-check")
    decision = actions.decide_and_act("slurm-check", verdict, "node3", settings(), backend, str(tmp_path / "s"),
                                      "run-1", Recorder())
    assert decision.action == "none" and decision.held == () and backend.drained == []
    assert not [f for f in verdict.findings if f.check == "slurm.drain_cap"]


def test_events_seen_while_our_drain_stands_are_old_once_it_ends(tmp_path):
    """Drained for one Xid; more Xids are logged while the node sits drained; the admin resumes it:
    all of them are old then, only later ones count."""
    state_dir = str(tmp_path / "s")
    log = Recorder()
    ledger.remember_drain(state_dir, REASON, "slurm-check", ["k-first"], log)
    drained = FakeBackend({"node1": state("node1", "IDLE", ("DRAIN",), REASON)})
    verdict = Verdict.of("node1", [Finding("gpu.xid", Status.FAIL, "Xid 79", "gpu0")],
                         "2026-12-03T00:00:00+00:00", 0.1, "slurm-check")
    actions.decide_and_act("slurm-check", verdict, "node1", settings(), drained, state_dir, "run-2", log,
                           ["k-first", "k-while-drained"])
    assert ledger.read_ledger(state_dir, log)["events"] == ["k-first", "k-while-drained"]
    resumed = FakeBackend({"node1": state("node1")})
    actions.reconcile_before_checks(resumed, "node1", state_dir, log)
    assert ledger.read_acks(state_dir, log) == ["k-first", "k-while-drained"]


def test_a_pyslurm_rpc_that_never_answers_is_abandoned_at_the_deadline(monkeypatch):
    """pyslurm's RPCs cannot be interrupted: with a deadline the call runs in a thread that is given
    up on, so the hook still returns within its budget (docs/slurm-actions.md)."""
    from healthcheck.slurm.pyslurm_backend import PyslurmBackend
    from tests.fakes import fake_pyslurm as fp

    fp.reset({"node1": "IDLE"})
    monkeypatch.setattr(fp.Node, "load", staticmethod(lambda name: time.sleep(30)))
    backend = PyslurmBackend(module=fp, retries=2)
    backend.deadline = time.monotonic() + 0.5
    start = time.monotonic()
    with pytest.raises(SlurmUnreachable):
        backend.node("node1")
    assert time.monotonic() - start < 3.0  # 0.5 s deadline; without it: 30 s, three times


def test_the_config_is_loaded_under_a_timer(monkeypatch):
    """Whatever makes loading the config slow (not only a FIFO, which the loader refuses itself), the
    hook gives up at its timer and judges nothing."""
    from healthcheck.hook import run as hooks

    monkeypatch.setattr(hooks, "load_config", lambda path, node: time.sleep(30))
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="not loaded within"):
        hooks._load_within("/etc/healthcheck/site.toml", "node1", 0.3)
    assert time.monotonic() - start < 3.0
