"""The sweep's pure parts: which nodes it tests, what it does with their results, its settings and
its lock/state file."""
from __future__ import annotations

import multiprocessing

import pytest

from healthcheck.core.model import Finding, Status
from healthcheck.slurm.nodestate import NodeState
from healthcheck.sweep import state as st
from healthcheck.sweep.decide import NodeResult, cap_for, decide
from healthcheck.sweep.plan import make_plan
from healthcheck.sweep.settings import SweepSettingsError, in_window, resolve

OURS = "healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC errors [run 0123456789ab]"


def node(name, state="IDLE", flags=(), reason=None, partitions="gpu", **fields):
    return NodeState(name, state, frozenset(flags), reason, fields={"Partitions": partitions, **fields})


def test_plan_orders_ours_first_skips_foreign_busy_unavailable_and_caps():
    states = {n.name: n for n in [
        node("g1"), node("g2", "ALLOCATED"), node("g3", flags={"DRAIN"}, reason="RMA ticket 4711"),
        node("g4", flags={"DRAIN"}, reason=OURS), node("g5", flags={"NOT_RESPONDING"}),
        node("g6", "DOWN", reason="Not responding"), node("g7"), node("g8", ReservationName="maint"),
        node("g9", "MIXED", flags={"DRAIN"}, reason=OURS), node("c1", partitions="cpu"), node("g10")]}
    plan = make_plan(states, resolve({"max_nodes": 3, "partition": "gpu"}))
    assert [(c.node, c.ours) for c in plan.test] == [("g4", True), ("g1", False), ("g10", False)]
    assert plan.over_budget == ["g7"]
    assert "not ours" in plan.skipped["g3"] and "not ours" in plan.skipped["g6"]
    assert plan.skipped["g2"] == "busy (allocated)" and "not_responding" in plan.skipped["g5"]
    assert "reservation" in plan.skipped["g8"] and "job is finishing" in plan.skipped["g9"]
    assert "c1" not in plan.skipped and all(c.node != "c1" for c in plan.test)
    no_res = make_plan(states, resolve({"reservation": False}))
    assert "needs the sweep reservation" in no_res.skipped["g4"]


def fail(node_name, *checks, ours=False):
    findings = [Finding(c, Status.FAIL, f"{c} broke", "gpu0") for c in checks]
    return NodeResult(node_name, Status.FAIL, findings, ours, OURS if ours else None)


def ok(node_name, ours=False, status=Status.PASS):
    return NodeResult(node_name, status, [], ours, OURS if ours else None)


def test_decide_drains_failures_resumes_ours_and_restores_what_proved_nothing():
    results = {"a": fail("a", "gpu.ecc.uncorrected"), "b": ok("b", ours=True), "c": ok("c", ours=True,
               status=Status.ERROR), "d": ok("d")}
    d = decide(results, {}, 40, resolve({"max_drain_fraction": 0.1}), "f" * 32)
    acts = {a.node: a for a in d.actions}
    assert acts["a"].action == "drain" and acts["a"].reason.startswith("healthcheck: gpu.ecc.uncorrected gpu0")
    assert "[run ffffffffffff]" in acts["a"].reason
    assert acts["b"].action == "resume" and acts["c"].action == "restore" and acts["c"].reason == OURS
    assert acts["d"].action == "none" and not d.flagged


def test_blast_radius_counts_this_sweep_and_our_earlier_drains():
    settings = resolve({"max_drain_fraction": 0.1})
    assert cap_for(40, settings) == 4 and cap_for(3, settings) == 1
    assert cap_for(1000, resolve({"max_drain_fraction": 0.1, "max_drain_nodes": 5})) == 5
    results = {n: fail(n, "sw.versions") for n in ("a", "b", "c")}
    results["d"] = fail("d", "sw.versions", "gpu.xid")
    results["e"] = fail("e", "sw.versions", ours=True)  # was out already: put back, not counted
    earlier = {"x": "healthcheck: sw.versions driver 535 [run 1]", "y": "healthcheck: gpu.xid gpu1 [run 2]"}
    d = decide(results, earlier, 40, settings, "r" * 32)
    assert set(d.suspect) == {"sw.versions"} and "4 node(s) in this sweep, 1 already drained" in d.suspect["sw.versions"]
    acts = {a.node: a for a in d.actions}
    assert all(acts[n].action == "none" and "suspect" in acts[n].why for n in "abc")
    assert acts["d"].action == "drain" and acts["d"].checks == ["gpu.xid"]  # drained for the other check only
    assert acts["e"].action == "drain"  # ours: it goes back to drained
    under = decide({n: fail(n, "sw.versions") for n in "ab"}, {}, 40, settings, "r" * 32)
    assert not under.flagged and {a.action for a in under.actions} == {"drain"}


def test_settings_validation_and_window():
    with pytest.raises(SweepSettingsError, match="window must be HH:MM-HH:MM"):
        resolve({"window": "1am-5am"})
    with pytest.raises(SweepSettingsError, match="max_drain_fraction"):
        resolve({"max_drain_fraction": 0})
    with pytest.raises(SweepSettingsError, match="unknown key"):
        resolve({"nodes": 4})
    assert resolve({"max_nodes": 8}, {"max_nodes": 2, "partition": None}).max_nodes == 2
    assert in_window("01:00-05:00", 3, 0) and not in_window("01:00-05:00", 5, 0)
    assert in_window("22:00-04:00", 23, 59) and in_window("22:00-04:00", 1, 0) and not in_window("22:00-04:00", 12, 0)
    assert in_window("", 12, 0)


def _hold(path, ready, release):
    with st.Lock(path):
        ready.set()
        release.wait(10)


def test_lock_refuses_a_second_sweep_and_is_released_by_a_dead_holder(tmp_path):
    ready, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(str(tmp_path), ready, release))
    holder.start()
    assert ready.wait(10)
    with pytest.raises(st.SweepBusy):
        with st.Lock(str(tmp_path)):
            pass
    holder.kill()
    holder.join(10)
    with st.Lock(str(tmp_path)):  # the kernel released the dead holder's lock
        pass


def test_state_round_trip_and_bad_state(tmp_path):
    s = st.SweepState("20261202T010000-abcd", "2026-12-02T01:00:00+00:00", str(tmp_path / "r"),
                      nodes=[{"node": "g1", "ours": False, "reason": None}], jobs={"g1": "17"})
    st.save(str(tmp_path), s)
    assert st.load(str(tmp_path)) == s
    (tmp_path / st.STATE_FILE).write_text("{broken")
    with pytest.raises(st.StateError, match="remove it to start afresh"):
        st.load(str(tmp_path))
    st.clear(str(tmp_path))
    assert st.load(str(tmp_path)) is None


def test_config_file_sweep_table_is_validated_with_its_line():
    from healthcheck.config import ConfigError, loads

    assert loads('[sweep]\nmax_nodes = 8\nwindow = "01:00-05:00"\n', "s.toml").sweep == {"max_nodes": 8,
                                                                                        "window": "01:00-05:00"}
    with pytest.raises(ConfigError) as err:
        loads('[sweep]\nmax_nodes = 8\nwindow = "late"\n', "s.toml")
    assert "s.toml:3" in str(err.value) and "window" in str(err.value)
