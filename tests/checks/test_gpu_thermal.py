"""gpu.temperature, gpu.throttle, gpu.power."""
from __future__ import annotations

import pytest

from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Status

from tests.checks.gpu_builders import by_component, h100, only, run, snapshot, with_gpu

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


# ------------------------------------------------------------------------------- gpu.temperature

def test_idle_temperature_passes_with_metrics():
    f = run("gpu.temperature", snapshot())[0]
    assert f.status is PASS
    assert f.message == "GPU 33 C (slowdown 89 C), memory 41 C (max 95 C)"
    assert f.metrics == {"temperature_c": 33.0, "mem_temperature_c": 41.0, "temp_tlimit_margin_c": 56.0}


@pytest.mark.parametrize("temp, status", [
    (70, PASS), (83.9, PASS), (84, WARN), (86, WARN), (87, WARN), (88.9, WARN), (89, FAIL), (95, FAIL),
])
def test_gpu_temperature_vs_h100_limits(temp, status):
    # H100: slowdown 89, shutdown 92, max operating 87; warn margin 5 below slowdown = 84
    f = only(run("gpu.temperature", snapshot(gpus=[h100(0, temperature_c=temp)])))
    assert f.status is status, f.message


def test_shutdown_margin_when_slowdown_unknown():
    gpu = h100(0, temperature_c=90, temp_slowdown_c=None, temp_max_operating_c=None)
    f = only(run("gpu.temperature", snapshot(gpus=[gpu])))
    assert f.status is FAIL and "within 2 C of shutdown 92 C" in f.message
    cooler = h100(0, temperature_c=89, temp_slowdown_c=None, temp_max_operating_c=None)
    assert only(run("gpu.temperature", snapshot(gpus=[cooler]))).status is PASS
    assert only(run("gpu.temperature", snapshot(gpus=[cooler]), fail_margin_c=5)).status is FAIL


def test_fail_message_names_value_and_limit():
    f = only(run("gpu.temperature", snapshot(gpus=[h100(0, temperature_c=90)])))
    assert f.message.startswith("GPU 90 C >= slowdown 89 C")


def test_memory_temperature():
    assert only(run("gpu.temperature", snapshot(gpus=[h100(0, mem_temperature_c=91)]))).status is WARN
    f = only(run("gpu.temperature", snapshot(gpus=[h100(0, mem_temperature_c=95)])))
    assert f.status is FAIL and "memory 95 C >= max 95 C" in f.message


def test_absolute_max_override():
    snap = snapshot(gpus=[h100(0, temperature_c=70)])
    exp = Expectations(thresholds={"gpu.temperature": {"max_c": 65}})
    f = only(run("gpu.temperature", snap, exp))
    assert f.status is FAIL and "GPU 70 C >= limit 65 C" in f.message


def test_tlimit_offsets_not_taken_as_limits():
    # 545+ drivers on Hopper print T.Limit offsets: shutdown -8, slowdown -2, max operating 0
    gpu = h100(0, temperature_c=33, temp_shutdown_c=-8, temp_slowdown_c=-2, temp_max_operating_c=0,
               mem_temp_max_c=0, temp_tlimit_margin_c=None)
    f = only(run("gpu.temperature", snapshot(gpus=[gpu])))
    assert f.status is PASS and f.message == "GPU 33 C, memory 41 C"


def hopper(margin: float | None, **changes) -> list:
    """An H100 as nvidia-smi -q shows it on 545+: T.Limit offsets only, headroom ``margin``."""
    return [h100(0, temp_shutdown_c=None, temp_slowdown_c=None, temp_max_operating_c=None,
                 mem_temp_max_c=None, temp_tlimit_margin_c=margin, **changes)]


@pytest.mark.parametrize("margin, status", [
    (55, PASS), (5.1, PASS), (5, WARN), (1, WARN), (0.5, WARN), (0, FAIL), (-2, FAIL), (-8, FAIL),
])
def test_tlimit_margin_judged_without_absolute_limits(margin, status):
    f = only(run("gpu.temperature", snapshot(gpus=hopper(margin))))
    assert f.status is status, f.message
    assert f.metrics["temp_tlimit_margin_c"] == margin


def test_tlimit_margin_messages():
    f = only(run("gpu.temperature", snapshot(gpus=hopper(55))))
    assert f.message == "GPU 33 C (T.Limit margin 55 C), memory 41 C"
    f = only(run("gpu.temperature", snapshot(gpus=hopper(3, temperature_c=84))))
    assert f.message == "GPU T.Limit margin 3 C: within 5 C of slowdown"
    f = only(run("gpu.temperature", snapshot(gpus=hopper(-1, temperature_c=88))))
    assert f.message == "GPU T.Limit margin -1 C: at or over the slowdown limit"


def test_tlimit_margin_thresholds_configurable():
    snap = snapshot(gpus=hopper(2))
    assert only(run("gpu.temperature", snap)).status is WARN
    assert only(run("gpu.temperature", snap, tlimit_fail_margin_c=2)).status is FAIL
    assert only(run("gpu.temperature", snap, warn_margin_c=1)).status is PASS


def test_absolute_limits_win_over_the_margin():
    # both known (NVML on Hopper): the absolute slowdown limit decides, as before
    gpu = h100(0, temperature_c=70, temp_tlimit_margin_c=-3)
    assert only(run("gpu.temperature", snapshot(gpus=[gpu]))).status is PASS
    gpu = h100(0, temperature_c=89, temp_tlimit_margin_c=40)
    assert only(run("gpu.temperature", snapshot(gpus=[gpu]))).status is FAIL


def test_margin_alone_is_enough_to_judge():
    gpus = hopper(0, temperature_c=None, mem_temperature_c=None)
    f = only(run("gpu.temperature", snapshot(gpus=gpus)))
    assert f.status is FAIL and f.metrics == {"temp_tlimit_margin_c": 0.0}
    f = only(run("gpu.temperature", snapshot(gpus=hopper(30, temperature_c=None, mem_temperature_c=None))))
    assert f.status is PASS and f.message == "GPU (T.Limit margin 30 C)"


def test_temperature_not_reported():
    gpu = h100(0, temperature_c=None, mem_temperature_c=None, temp_tlimit_margin_c=None)
    assert only(run("gpu.temperature", snapshot(gpus=[gpu]))).status is SKIP


# ---------------------------------------------------------------------------------- gpu.throttle

@pytest.mark.parametrize("reasons, status", [
    ([], PASS),
    (["gpu_idle"], PASS),
    (["applications_clocks_setting", "sync_boost"], PASS),
    (["sw_power_cap"], PASS),
    (["sw_thermal_slowdown"], WARN),
    (["hw_slowdown"], FAIL),
    (["hw_slowdown", "hw_thermal_slowdown"], FAIL),
    (["hw_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"], FAIL),
])
def test_throttle_reasons(reasons, status):
    f = only(run("gpu.throttle", snapshot(gpus=[h100(0, throttle_reasons=reasons)])))
    assert f.status is status


def test_throttle_message_lists_reasons():
    snap = with_gpu(snapshot(), 3, throttle_reasons=["hw_slowdown", "hw_thermal_slowdown"])
    f = by_component(run("gpu.throttle", snap))["gpu3"]
    assert f.message == "clock slowdown active: hw_slowdown, hw_thermal_slowdown"
    assert f.metrics == {"throttle_fail_reasons": 2.0, "throttle_warn_reasons": 0.0}


def test_sw_power_cap_configurable():
    snap = snapshot(gpus=[h100(0, throttle_reasons=["sw_power_cap"])])
    assert only(run("gpu.throttle", snap, sw_power_cap="warn")).status is WARN
    assert only(run("gpu.throttle", snap, sw_power_cap="fail")).status is FAIL


def test_reason_lists_are_threshold_data():
    snap = snapshot(gpus=[h100(0, throttle_reasons=["sw_thermal_slowdown"])])
    exp = Expectations(thresholds={"gpu.throttle": {"fail_reasons": ["sw_thermal_slowdown"]}})
    assert only(run("gpu.throttle", snap, exp)).status is FAIL


def test_throttle_not_reported():
    assert only(run("gpu.throttle", snapshot(gpus=[h100(0, throttle_reasons=None)]))).status is SKIP


# ------------------------------------------------------------------------------------- gpu.power

def test_power_normal_passes():
    f = run("gpu.power", snapshot())[0]
    assert f.status is PASS and f.message == "power 72.02 W of limit 700 W"
    assert f.metrics == {"power_draw_w": 72.02, "power_limit_w": 700.0}


def test_power_limit_lowered_against_expectation():
    snap = snapshot(gpus=[h100(0, power_limit_w=500.0)])
    assert only(run("gpu.power", snap)).status is PASS  # no expectation: not judged
    exp = Expectations(thresholds={"gpu.power": {"expected_limit_w": 700}})
    f = only(run("gpu.power", snap, exp))
    assert f.status is WARN and "power limit 500 W below 0.9 x expected 700 W" == f.message
    assert only(run("gpu.power", snap, exp, low_limit_action="fail")).status is FAIL
    ok = snapshot(gpus=[h100(0, power_limit_w=650.0)])
    assert only(run("gpu.power", ok, exp)).status is PASS


def test_draw_above_limit_warns():
    snap = snapshot(gpus=[h100(0, power_draw_w=760.0)])
    f = only(run("gpu.power", snap))
    assert f.status is WARN and "draw above 1.05 x limit" in f.message
    assert only(run("gpu.power", snapshot(gpus=[h100(0, power_draw_w=720.0)]))).status is PASS


def test_power_not_reported_or_partial():
    assert only(run("gpu.power", snapshot(gpus=[h100(0, power_draw_w=None, power_limit_w=None)]))
                ).status is SKIP
    f = only(run("gpu.power", snapshot(gpus=[h100(0, power_limit_w=None)])))
    assert f.status is PASS and f.message == "power 72.02 W of limit n/a"
