"""Telemetry sampler on the fake pynvml (real constants and exceptions): values, reason fractions,
graceful degradation, thread lifecycle; reason decoding cross-checked against real nvidia-smi output
(corpus) and the hand-written under-load snapshot in tests/fixtures/burnin/."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pynvml
import pytest

from healthcheck.burnin.judge_compute import judge_telemetry
from healthcheck.burnin.telemetry import Sample, Sampler, summarize
from healthcheck.core.model import THROTTLE_REASONS, Status
from healthcheck.parsers import ParseError
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from tests.conftest import FIXTURES, corpus_params
from tests.fakes.fake_pynvml import FakeNvml, h100_node

LOAD_FIXTURE = FIXTURES / "burnin" / "nvidia-smi-q-d-perf-temp-power-clock-h100x4-under-gemm-load.txt"

# Written out here (not taken from the code under test): canonical name -> pynvml bit.
BITS = {
    "gpu_idle": pynvml.nvmlClocksEventReasonGpuIdle,
    "applications_clocks_setting": pynvml.nvmlClocksEventReasonApplicationsClocksSetting,
    "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
    "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
    "sync_boost": pynvml.nvmlClocksEventReasonSyncBoost,
    "sw_thermal_slowdown": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
    "hw_thermal_slowdown": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
    "hw_power_brake_slowdown": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
    "display_clocks_setting": pynvml.nvmlClocksEventReasonDisplayClockSetting,
}


class LoadNvml(FakeNvml):
    """The fake plus nvmlDeviceGetClockInfo (SM clock from ``gpu.sm_clock``, default 1980 MHz)."""

    def nvmlDeviceGetClockInfo(self, h, clock):
        g = self._dev(h, "nvmlDeviceGetClockInfo")
        if clock != pynvml.NVML_CLOCK_SM:
            self._raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return getattr(g, "sm_clock", 1980)


def opened(gpus, **kwargs) -> tuple[LoadNvml, Sampler]:
    """A fake with NVML initialised and a Sampler not running its thread (sample_once by hand)."""
    fake = LoadNvml(gpus, **kwargs)
    fake.nvmlInit()
    return fake, Sampler(fake, list(range(len(gpus))), period_s=60)


def mask(reasons) -> int:
    return sum(BITS[r] for r in reasons)


def wait_for(predicate, timeout=5.0):
    stop = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < stop, "timed out"
        time.sleep(0.005)


# ------------------------------------------------------------------------------------ sampling


def test_values_and_reason_fractions_when_reasons_toggle():
    gpus = h100_node(2)
    fake, sampler = opened(gpus)
    schedule = [()] * 5 + [("sw_power_cap", "hw_thermal_slowdown")] * 3 + [("sw_power_cap",)] * 2
    for i, reasons in enumerate(schedule):
        gpus[0].clock_reasons = mask(reasons)
        gpus[0].temperature = 70 + i
        gpus[0].power_mw = 600_000 + 10_000 * i
        gpus[0].sm_clock = 1980 - 60 * i
        sampler.sample_once()
    s0, s1 = sampler.summary()[0], sampler.summary()[1]
    assert (s0.samples, s0.reason_samples) == (10, 10)
    assert s0.reasons == {"hw_thermal_slowdown": 0.3, "sw_power_cap": 0.5}
    assert (s0.temp_max_c, s0.power_max_w) == (79.0, 690.0)
    assert s0.power_mean_w == pytest.approx(645.0)
    assert (s0.sm_clock_min_mhz, s0.sm_clock_median_mhz) == (1440.0, 1710.0)
    assert s0.errors == []
    assert (s1.samples, s1.reasons, s1.temp_max_c, s1.power_mean_w) == (10, {}, 33.0, pytest.approx(71.234))
    f0, f1 = judge_telemetry(sampler.summary())
    assert (f0.status, f0.component) == (Status.FAIL, "gpu0")
    assert f0.message == "gpu0: hw_thermal_slowdown 30% of samples under load (max 79 C)"
    assert f0.metrics["hw_thermal_slowdown_pct"] == pytest.approx(30.0)
    assert f0.metrics["sw_power_cap_pct"] == pytest.approx(50.0)
    assert f1.status is Status.PASS
    assert f1.message == "gpu1: max 33 C, mean 71 W, SM clock >= 1980 MHz"
    assert f1.metrics == {"temp_max_c": 33.0, "power_mean_w": pytest.approx(71.234),
                          "power_max_w": pytest.approx(71.234), "sm_clock_min_mhz": 1980.0,
                          "sm_clock_median_mhz": 1980.0, "telemetry_samples": 10.0}


def test_a_failing_call_degrades_only_its_field():
    gpus = h100_node(1)
    gpus[0].errors = {"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_UNKNOWN}
    gpus[0].unsupported = {"nvmlDeviceGetClockInfo"}  # NotSupported: quiet
    _, sampler = opened(gpus)
    for _ in range(3):
        sampler.sample_once()
    s = sampler.summary()[0]
    assert (s.samples, s.temp_max_c, s.power_mean_w, s.sm_clock_min_mhz) == (3, 33.0, None, None)
    assert s.errors == ["nvmlDeviceGetPowerUsage: Unknown Error (x3)"]
    (f,) = judge_telemetry({0: s})
    assert f.status is Status.PASS
    assert f.message == "gpu0: max 33 C, 1 NVML error(s): nvmlDeviceGetPowerUsage: Unknown Error (x3)"


def test_unexpected_values_degrade_too():
    class Odd(LoadNvml):
        def nvmlDeviceGetTemperature(self, h, sensor):
            return "N/A"

        def nvmlDeviceGetPowerUsage(self, h):
            return float("nan")

        def nvmlDeviceGetClockInfo(self, h, clock):
            raise OSError("ctypes: exception: access violation")
    fake = Odd(h100_node(1))
    fake.nvmlInit()
    sampler = Sampler(fake, [0])
    sampler.sample_once()
    s = sampler.summary()[0]
    assert (s.temp_max_c, s.power_mean_w, s.sm_clock_min_mhz, s.reasons, s.reason_samples) == (None, None, None, {}, 1)
    assert s.errors == ["nvmlDeviceGetTemperature: unexpected value 'N/A' (ValueError)",
                        "nvmlDeviceGetPowerUsage: unexpected value nan (ValueError)",
                        "nvmlDeviceGetClockInfo: ctypes: exception: access violation"]


def test_older_pynvml_throttle_function():
    gpus = h100_node(1)
    gpus[0].clock_reasons = mask(["hw_power_brake_slowdown"])
    fake = LoadNvml(gpus, missing={"nvmlDeviceGetCurrentClocksEventReasons"})
    fake.nvmlInit()
    sampler = Sampler(fake, [0])
    sampler.sample_once()
    assert sampler.summary()[0].reasons == {"hw_power_brake_slowdown": 1.0}
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls


def test_pynvml_without_reasons_or_clocks():
    fake = FakeNvml(h100_node(1), missing={"nvmlDeviceGetCurrentClocksEventReasons",
                                           "nvmlDeviceGetCurrentClocksThrottleReasons"})
    fake.nvmlInit()
    sampler = Sampler(fake, [0])
    sampler.sample_once()
    s = sampler.summary()[0]  # the base fake has no nvmlDeviceGetClockInfo either
    assert (s.reason_samples, s.reasons, s.sm_clock_min_mhz, s.temp_max_c, s.errors) == (0, {}, None, 33.0, [])


def test_no_handle_then_recovery():
    gpus = h100_node(1)
    gpus[0].no_handle = pynvml.NVML_ERROR_UNKNOWN
    _, sampler = opened(gpus)
    sampler.sample_once()
    gpus[0].no_handle = None
    sampler.sample_once()
    s = sampler.summary()[0]
    assert (s.samples, s.temp_max_c) == (2, 33.0)
    assert s.errors == ["nvmlDeviceGetHandleByIndex: Unknown Error"]


# ----------------------------------------------------------------------------------- lifecycle


def test_thread_samples_until_stopped_and_survives_a_lost_gpu():
    gpus = h100_node(2)
    fake = LoadNvml(gpus)
    with Sampler(fake, [0, 1], period_s=0.005) as sampler:
        wait_for(lambda: sampler.summary()[1].samples >= 3)
        gpus[1].lost = True
        before = sampler.summary()[1].samples
        wait_for(lambda: sampler.summary()[1].samples >= before + 3)
        assert sampler._thread is not None and sampler._thread.is_alive()
    summary = sampler.summary()
    assert sampler._thread is None and (fake.init_calls, fake.shutdown_calls, fake.initialized) == (1, 1, False)
    assert summary[0].samples >= 6 and summary[0].errors == []
    s1 = summary[1]
    assert re.fullmatch(r"nvmlDeviceGetTemperature: GPU is lost \(x\d+\)", s1.errors[0])
    assert s1.temp_max_c == 33.0  # from before it was lost
    stopped = s1.samples
    time.sleep(0.03)
    assert sampler.summary()[1].samples == stopped


def test_nvml_that_cannot_start():
    fake = LoadNvml(h100_node(2), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with Sampler(fake, [0, 1], period_s=0.01) as sampler:
        pass
    summary = sampler.summary()
    assert [(s.samples, s.errors) for s in summary.values()] == [(0, ["nvmlInit: Driver Not Loaded"])] * 2
    findings = judge_telemetry(summary)
    assert [(f.status, f.message) for f in findings] == [
        (Status.ERROR, "gpu0: no telemetry read (nvmlInit: Driver Not Loaded)"),
        (Status.ERROR, "gpu1: no telemetry read (nvmlInit: Driver Not Loaded)")]


def test_indices_default_to_every_gpu():
    fake = LoadNvml(h100_node(3))
    with Sampler(fake, None, period_s=0.01) as sampler:
        wait_for(lambda: all(s.samples for s in sampler.summary().values()) and len(sampler.summary()) == 3)
    assert sorted(sampler.summary()) == [0, 1, 2]


def test_bad_period():
    with pytest.raises(ValueError, match="telemetry period_s must be > 0, got 0"):
        Sampler(LoadNvml([]), [0], period_s=0)


def test_summarize_nothing():
    s = summarize(4, [])
    assert (s.component, s.samples, s.temp_max_c, s.power_mean_w, s.sm_clock_median_mhz, s.reasons) == \
        ("gpu4", 0, None, None, None, {})
    s = summarize(0, [Sample(reasons=["hw_slowdown", "hw_slowdown"]), Sample(), Sample(reasons=[])])
    assert (s.samples, s.reason_samples, s.reasons) == (3, 2, {"hw_slowdown": 0.5})


# ------------------------------------------------------------- decoding vs real nvidia-smi output


def decoded_by_sampler(infos) -> dict[int, list[str]]:
    """Each GPU's nvidia-smi reason list as a bitmask through the fake NVML, decoded by the Sampler."""
    gpus = h100_node(len(infos))
    for gpu, info in zip(gpus, infos):
        gpu.clock_reasons = mask(info.throttle_reasons)
    fake, sampler = opened(gpus)
    sampler.sample_once()
    return {i: sorted(s.reasons) for i, s in sampler.summary().items()}


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*"))
def test_reasons_nvidia_smi_reports_decode_the_same(path: Path):
    try:
        infos = [g for g in parse_nvidia_smi(path.read_text()).gpus if g.throttle_reasons is not None]
    except ParseError:
        pytest.skip("not a full nvidia-smi -q output")
    if not infos:
        pytest.skip("this output has no clock event reasons")
    assert decoded_by_sampler(infos) == {i: sorted(g.throttle_reasons) for i, g in enumerate(infos)}
    assert all(set(g.throttle_reasons) <= set(THROTTLE_REASONS) for g in infos)


def test_under_load_fixture_decodes_and_judges():
    text = LOAD_FIXTURE.read_text()
    infos = parse_nvidia_smi(text).gpus
    assert [g.throttle_reasons for g in infos] == [["sw_power_cap"], [], ["hw_slowdown", "hw_thermal_slowdown"],
                                                   ["sw_power_cap", "sw_thermal_slowdown"]]
    sm = [float(m) for m in re.findall(r"^    Clocks\n        Graphics +: \d+ MHz\n        SM +: (\d+) MHz",
                                       text, re.MULTILINE)]
    assert sm == [1755.0, 1980.0, 1095.0, 1410.0]
    gpus = h100_node(4)
    for gpu, info, clock in zip(gpus, infos, sm):
        gpu.clock_reasons = mask(info.throttle_reasons)
        gpu.temperature = int(info.temperature_c)
        gpu.power_mw = int(round(info.power_draw_w * 1000))
        gpu.sm_clock = clock
    _, sampler = opened(gpus)
    sampler.sample_once()
    findings = judge_telemetry(sampler.summary())
    assert [(f.component, f.status) for f in findings] == [("gpu0", Status.PASS), ("gpu1", Status.PASS),
                                                           ("gpu2", Status.FAIL), ("gpu3", Status.FAIL)]
    assert findings[0].message == "gpu0: max 71 C, mean 695 W, SM clock >= 1755 MHz, reasons: sw_power_cap 100%"
    assert findings[2].message == "gpu2: hw_slowdown 100%, hw_thermal_slowdown 100% of samples under load (max 88 C)"
    assert findings[3].message == "gpu3: sw_thermal_slowdown 100% of samples under load (max 84 C)"
    assert findings[2].metrics["hw_slowdown_pct"] == 100.0 and findings[2].metrics["sm_clock_min_mhz"] == 1095.0
