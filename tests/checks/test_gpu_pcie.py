"""gpu.pcie.link, gpu.pcie.replays."""
from __future__ import annotations

import pytest

from healthcheck.core.expectations import Expectations, PcieExpect
from healthcheck.core.model import Status

from tests.checks.gpu_builders import H100_BUS_IDS, by_component, h100, only, run, snapshot, with_gpu

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


# --------------------------------------------------------------------------------- gpu.pcie.link

def test_full_link_passes_with_metrics():
    f = run("gpu.pcie.link", snapshot())[0]
    assert f.status is PASS and f.message == "PCIe Gen5 x16"
    assert f.metrics == {"pcie_width": 16.0, "pcie_width_max": 16.0, "pcie_gen": 5.0,
                         "pcie_gen_max": 5.0}


def test_width_below_max_fails():
    snap = with_gpu(snapshot(), 6, pcie_width_current=8)
    f = by_component(run("gpu.pcie.link", snap))["gpu6"]
    assert f.status is FAIL and "x8 of x16" in f.message


def test_low_gen_at_idle_not_judged():
    snap = with_gpu(snapshot(), 0, pcie_gen_current=1)  # builder GPUs are idle: P0 at 0 %
    f = by_component(run("gpu.pcie.link", snap))["gpu0"]
    assert f.status is PASS
    assert f.message == ("PCIe Gen1 x16 (gen not judged at 0 % utilisation, P0: "
                         "idle GPUs lower it to save power)")


@pytest.mark.parametrize("util, pstate, status", [
    (23.0, "P0", FAIL),   # P0 with any load: busy
    (50.0, "P2", FAIL),   # at the busy threshold in any P-state
    (100.0, None, FAIL),
    (49.0, "P2", PASS),   # light load below P0: the gen may be lowered
    (0.0, "P0", PASS),    # an idle H100 in persistence mode sits in P0
    (0.0, "P8", PASS),
    (1.0, None, PASS),
])
def test_low_gen_judged_by_load(util, pstate, status):
    snap = with_gpu(snapshot(), 0, pcie_gen_current=4, utilization_gpu_pct=util,
                    performance_state=pstate, throttle_reasons=[])
    assert by_component(run("gpu.pcie.link", snap))["gpu0"].status is status


def test_low_gen_under_load_fails_whatever_gen_action():
    snap = with_gpu(snapshot(), 0, pcie_gen_current=3, utilization_gpu_pct=97.0,
                    throttle_reasons=["sw_power_cap"])
    f = by_component(run("gpu.pcie.link", snap))["gpu0"]
    assert f.status is FAIL
    assert f.message == "PCIe Gen3 x16: Gen3 of Gen5 under load (97 % utilisation at P0)"
    assert by_component(run("gpu.pcie.link", snap, gen_action="warn"))["gpu0"].status is FAIL
    # full gen under the same load passes
    ok = with_gpu(snapshot(), 0, utilization_gpu_pct=97.0)
    assert by_component(run("gpu.pcie.link", ok))["gpu0"].status is PASS


def test_busy_threshold_configurable():
    snap = with_gpu(snapshot(), 0, pcie_gen_current=4, utilization_gpu_pct=30.0,
                    performance_state="P2")
    assert by_component(run("gpu.pcie.link", snap))["gpu0"].status is PASS
    assert by_component(run("gpu.pcie.link", snap, busy_util_pct=25))["gpu0"].status is FAIL


def test_low_gen_when_unknown_load_not_judged():
    snap = with_gpu(snapshot(), 0, pcie_gen_current=1, throttle_reasons=None,
                    utilization_gpu_pct=None, performance_state=None)
    f = by_component(run("gpu.pcie.link", snap))["gpu0"]
    assert f.status is PASS and "gen not judged with load unknown" in f.message


def test_low_gen_without_utilisation_but_not_idle_warns_or_fails_by_config():
    # no utilisation (older bundle): the clock event reasons say "not idle", a guess -> WARN
    snap = with_gpu(snapshot(), 0, pcie_gen_current=4, throttle_reasons=["sw_power_cap"],
                    utilization_gpu_pct=None)
    f = by_component(run("gpu.pcie.link", snap))["gpu0"]
    assert f.status is WARN and f.message == "PCIe Gen4 x16: Gen4 of Gen5 while not idle"
    assert by_component(run("gpu.pcie.link", snap, gen_action="fail"))["gpu0"].status is FAIL
    idle = with_gpu(snap, 0, throttle_reasons=["gpu_idle"])
    f = by_component(run("gpu.pcie.link", idle))["gpu0"]
    assert f.status is PASS and "gen not judged while idle" in f.message


def test_low_gen_with_low_width_is_one_fail():
    snap = with_gpu(snapshot(), 0, pcie_gen_current=3, pcie_width_current=8, throttle_reasons=[],
                    utilization_gpu_pct=None)
    f = by_component(run("gpu.pcie.link", snap))["gpu0"]
    assert f.status is FAIL and f.message == "PCIe Gen3 x8: width x8 of x16; Gen3 of Gen5 while not idle"
    busy = with_gpu(snap, 0, utilization_gpu_pct=88.0)
    f = by_component(run("gpu.pcie.link", busy))["gpu0"]
    assert f.message == "PCIe Gen3 x8: width x8 of x16; Gen3 of Gen5 under load (88 % utilisation at P0)"


def test_judge_gen_at_idle_override():
    snap = with_gpu(snapshot(), 0, pcie_gen_current=1)
    exp = Expectations(thresholds={"gpu.pcie.link": {"judge_gen_at_idle": True,
                                                     "gen_action": "fail"}})
    assert by_component(run("gpu.pcie.link", snap, exp))["gpu0"].status is FAIL


def test_expectation_by_kind_and_address():
    # a Gen5 GPU behind a Gen4 switch: max gen 4 (what the system allows)
    snap = with_gpu(snapshot(), 1, pcie_gen_max=4, pcie_gen_current=4)
    assert by_component(run("gpu.pcie.link", snap))["gpu1"].status is PASS
    exp = Expectations(pcie_by_kind={"gpu": PcieExpect(gen=5, width=16)})
    f = by_component(run("gpu.pcie.link", snap, exp))["gpu1"]
    assert f.status is FAIL and "max Gen4, expected Gen5" in f.message
    # a per-address expectation wins over the per-kind one (address written NVML-style)
    exp = Expectations(pcie_by_kind={"gpu": PcieExpect(gen=5, width=16)},
                       pcie_by_address={"00000000:2A:00.0": PcieExpect(gen=4, width=16)})
    assert by_component(run("gpu.pcie.link", snap, exp))["gpu1"].status is PASS
    assert H100_BUS_IDS[1] == "0000:2a:00.0"


def test_expected_width():
    snap = snapshot(gpus=[h100(0, pcie_width_current=8, pcie_width_max=8)])
    assert only(run("gpu.pcie.link", snap)).status is PASS
    exp = Expectations(pcie_by_kind={"gpu": PcieExpect(width=16)})
    f = only(run("gpu.pcie.link", snap, exp))
    assert f.status is FAIL and "x8, expected x16" in f.message


def test_link_not_reported_and_partial():
    none = snapshot(gpus=[h100(0, pcie_gen_current=None, pcie_gen_max=None,
                               pcie_width_current=None, pcie_width_max=None)])
    assert only(run("gpu.pcie.link", none)).status is SKIP
    partial = snapshot(gpus=[h100(0, pcie_gen_current=None, pcie_gen_max=None, pcie_width_max=None)])
    f = only(run("gpu.pcie.link", partial))
    assert f.status is PASS and f.metrics == {"pcie_width": 16.0}


# ------------------------------------------------------------------------------ gpu.pcie.replays

def test_replays_levels():
    for count, status in ((0, PASS), (100, PASS), (101, WARN), (10_000, WARN)):
        f = only(run("gpu.pcie.replays", snapshot(gpus=[h100(0, pcie_replay_count=count)])))
        assert f.status is status and f.metrics == {"pcie_replay_count": float(count)}


def test_replays_fail_override_and_message():
    snap = snapshot(gpus=[h100(0, pcie_replay_count=600)])
    f = only(run("gpu.pcie.replays", snap, fail=500))
    assert f.status is FAIL and f.message == "PCIe replays: 600 (limit 500)"


def test_replays_not_reported():
    snap = snapshot(gpus=[h100(0, pcie_replay_count=None)])
    assert only(run("gpu.pcie.replays", snap)).status is SKIP
