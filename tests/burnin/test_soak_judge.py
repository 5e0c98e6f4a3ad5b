"""The soak's judge on synthetic series: a healthy flat run passes; a GPU losing throughput while its
clocks hold, a slowly throttling GPU, a heating GPU, a GPU whose error counters grow mid-run and one
whose power capping appears are each named, with when it started; thresholds are data."""
from __future__ import annotations

import dataclasses

import pytest

from healthcheck.burnin.judge_soak import (COUNTERS, THRESHOLDS, SoakPoint, SoakSeries, Threshold, hinge,
                                           judge_soak, slope)
from healthcheck.core.model import Status

STEP = 360.0  # one point every 6 minutes
POINTS = 40   # a 4-hour soak


def series(tflops=lambda t: 700.0, clock=lambda t: 1980.0, temp=lambda t: 70.0, reasons=lambda t: {},
           counters=lambda t: {"ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0,
                               "pcie_replay_count": 3, "nvlink_recovery_errors": 0},
           slowdown=89.0, n=POINTS, component="gpu0") -> SoakSeries:
    """Point 0 (before the load: counters only), then ``n`` slices; a small deterministic ripple on the
    measurements, as a real run has."""
    pts = [SoakPoint(0.0, counters=counters(0.0))]
    for k in range(1, n + 1):
        t = k * STEP
        ripple = (-1) ** k * 0.004
        pts.append(SoakPoint(t, tflops=tflops(t) * (1 + ripple), temp_c=temp(t) + (k % 3) * 0.5,
                             power_w=650.0, sm_clock_mhz=clock(t) * (1 - abs(ripple) / 4), reasons=reasons(t),
                             counters=counters(t)))
    return SoakSeries(component, pts, slowdown)


def by_check(findings):
    return {f.check.rsplit(".", 1)[-1]: f for f in findings}


def test_healthy_flat_run_passes_every_check():
    got = by_check(judge_soak([series()]))
    assert set(got) == {"verify", "throughput", "thermal", "clocks", "errors"}
    assert all(f.status is Status.PASS for f in got.values()), [f.message for f in got.values()]
    assert got["throughput"].metrics["soak_baseline_tflops"] == pytest.approx(700, rel=0.01)


def test_throughput_falling_while_clocks_hold_fails_with_its_onset():
    # healthy for 2 h, then losing 4 % an hour: 8 % down at the end
    s = series(tflops=lambda t: 700.0 if t <= 7200 else 700.0 * (1 - 0.04 * (t - 7200) / 3600))
    f = by_check(judge_soak([s]))["throughput"]
    assert f.status is Status.FAIL and f.component == "gpu0"
    assert "while the SM clock held" in f.message
    # the onset: where the flat part ends and the trend begins (within a slice of 2 h)
    assert abs(f.metrics["onset_s"] - 7200) <= STEP
    assert "since t=1h54m" in f.message or "since t=2h0" in f.message
    assert f.metrics["soak_tflops_slope_pct_per_h"] < 0


def test_slowly_throttling_gpu_is_named_with_its_reason_and_onset():
    def clock(t):
        return 1980.0 if t < 5400 else 1980.0 * (1 - 0.05 * (t - 5400) / 3600)

    s = series(tflops=lambda t: 700.0 * clock(t) / 1980.0, clock=clock,
               reasons=lambda t: {"sw_thermal_slowdown": 1.0} if t >= 5400 else {})
    got = by_check(judge_soak([s]))
    assert got["throughput"].status is Status.FAIL
    assert got["throughput"].message.startswith("throttling:") and "sw_thermal_slowdown" in got["throughput"].message
    assert got["clocks"].status is Status.FAIL
    assert got["clocks"].metrics["onset_s"] == 5400 and "sw_thermal_slowdown since t=1h30m" in got["clocks"].message


def test_heating_gpu_warns_then_fails_near_its_slowdown_temperature():
    heating = lambda t: 70.0 if t < 3600 else 70.0 + 4.0 * (t - 3600) / 3600 * 2  # noqa: E731 - 8 C/h from 1 h
    far = by_check(judge_soak([series(temp=heating, slowdown=120.0)]))["thermal"]
    assert far.status is Status.WARN and "heating over the run" in far.message
    assert abs(far.metrics["onset_s"] - 3600) <= STEP
    assert far.metrics["soak_temp_slope_c_per_h"] > 5
    near = by_check(judge_soak([series(temp=heating, slowdown=95.0)]))["thermal"]
    assert near.status is Status.FAIL and "within 5 C of slowdown" in near.message


def test_hot_but_steady_gpu_warns_no_headroom():
    f = by_check(judge_soak([series(temp=lambda t: 86.0, slowdown=89.0)]))["thermal"]
    assert f.status is Status.WARN and "no headroom" in f.message


def test_errors_growing_mid_run_are_named_with_when_they_started():
    def counters(t):
        return {"ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0,
                "pcie_replay_count": 3 + (int((t - 10800) / STEP + 1) * 20 if t >= 10800 else 0),
                "nvlink_recovery_errors": 0}

    f = by_check(judge_soak([series(counters=counters)]))["errors"]
    assert f.status is Status.WARN and "pcie_replay_count +" in f.message and "since t=3h00m" in f.message
    assert f.metrics["onset_s"] == 10800  # read after the slice that ended then: it grew in that slice

    def ecc(t):
        return {**counters(0.0), "ecc_uncorrected_volatile": 1 if t >= 7200 else 0}

    f = by_check(judge_soak([series(counters=ecc)]))["errors"]
    assert f.status is Status.FAIL and f.message.startswith("ecc_uncorrected_volatile +1 since t=2h00m")


def test_a_counter_reset_is_said_and_not_counted_as_growth():
    f = by_check(judge_soak([series(counters=lambda t: {"pcie_replay_count": 50 if t < 3600 else 2})]))["errors"]
    assert f.status is Status.PASS and "went backwards" in f.message and "pcie_replay_count" in f.message


def test_power_capping_appearing_mid_run_warns():
    f = by_check(judge_soak([series(reasons=lambda t: {"sw_power_cap": 0.8} if t >= 9000 else {})]))["clocks"]
    assert f.status is Status.WARN and "sw_power_cap since t=2h30m" in f.message
    # present from the start: the power controller at its limit, normal under load
    f = by_check(judge_soak([series(reasons=lambda t: {"sw_power_cap": 0.9})]))["clocks"]
    assert f.status is Status.PASS


def test_a_slice_that_failed_verification_fails_with_its_time():
    s = series()
    s.points[12].problem = "3 product(s) differed from the slice's first (first at iteration 7)"
    f = by_check(judge_soak([s]))["verify"]
    assert f.status is Status.FAIL and "t=1h12m" in f.message and f.metrics["onset_s"] == 12 * STEP


def test_too_short_a_run_skips_the_trends_and_says_why():
    got = by_check(judge_soak([series(n=3)]))
    assert got["throughput"].status is Status.SKIP and "soak_duration_s" in got["throughput"].message
    assert got["thermal"].status is Status.SKIP
    assert got["verify"].status is Status.PASS


def test_no_slice_is_an_error_and_bad_times_are_refused():
    assert [f.status for f in judge_soak([SoakSeries("gpu1", [SoakPoint(0.0)])])] == [Status.ERROR]
    with pytest.raises(ValueError, match="gpu0.*in order"):
        judge_soak([SoakSeries("gpu0", [SoakPoint(0.0), SoakPoint(20.0), SoakPoint(10.0)])])
    with pytest.raises(ValueError, match="finite"):
        judge_soak([SoakSeries("gpu0", [SoakPoint(0.0), SoakPoint(float("nan"))])])


def test_thresholds_are_data_with_reasons_and_change_the_verdict():
    assert all(isinstance(t.value, (int, float)) and len(t.reason) > 20 for t in THRESHOLDS.values())
    assert all(len(c.reason) > 20 for c in COUNTERS.values())
    falling = series(tflops=lambda t: 700.0 * (1 - 0.02 * t / 3600))  # -8 % over 4 h
    assert by_check(judge_soak([falling]))["throughput"].status is Status.FAIL
    lenient = {**THRESHOLDS, "throughput_drop": dataclasses.replace(THRESHOLDS["throughput_drop"], value=0.2)}
    assert by_check(judge_soak([falling], lenient))["throughput"].status is Status.PASS
    strict = {"pcie_replay_count": dataclasses.replace(COUNTERS["pcie_replay_count"], allowance=0)}
    grows = series(counters=lambda t: {"pcie_replay_count": int(t // 7200)})
    assert by_check(judge_soak([grows], counters=strict))["errors"].status is Status.WARN
    assert by_check(judge_soak([grows]))["errors"].status is Status.PASS
    assert isinstance(THRESHOLDS["min_points"], Threshold)


def test_slope_and_hinge_helpers():
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert slope([5], [1]) == 0.0
    times = [float(t) for t in range(10)]
    assert hinge(times, [5, 5, 5, 5, 5, 5, 4, 3, 2, 1]) == 5  # flat until 5, then falling
    assert hinge(times, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]) == 0  # a trend from the start
    assert hinge(times, [5, 5, 5, 5, 9, 9, 9, 9, 9, 9]) == 4  # a step: the first point after it
    assert hinge([1.0, 2.0], [1, 2]) == 1.0


def test_every_gpu_is_judged_on_its_own():
    got = judge_soak([series(component="gpu0"), series(component="gpu5", temp=lambda t: 60 + 10 * t / 3600,
                                                       slowdown=200.0)])
    thermal = {f.component: f.status for f in got if f.check == "burnin.soak.thermal"}
    assert thermal == {"gpu0": Status.PASS, "gpu5": Status.WARN}


def test_a_sudden_throughput_step_is_dated_to_the_slice_that_showed_it():
    s = series(tflops=lambda t: 700.0 if t < 8000 else 620.0)  # first slice measured low ends at 8280 s
    f = by_check(judge_soak([s]))["throughput"]
    assert f.status is Status.FAIL and f.metrics["onset_s"] == 23 * STEP and "since t=2h18m" in f.message
