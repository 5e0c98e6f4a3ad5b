"""The soak phase end to end on the NumPy backend (the CPU, a tiny GEMM), with the fake pynvml as the
telemetry and counter source: slices recorded with their throughput, telemetry and counters, a fake GPU
heating and its PCIe replays growing mid-run named by the judge, a product that changes between slices
caught, a counter source that fails said; the phase registered in the node run (opt-in: the default
phases, and so the verdict of the existing ones, are unchanged). Slices are counted with an injected
clock: the tests assert behaviour, never how long anything took."""
from __future__ import annotations

import itertools

import pynvml
import pytest

from healthcheck.burnin import node_run
from healthcheck.burnin.backends import NumpyBackend
from healthcheck.burnin.judge_soak import judge_soak
from healthcheck.policies.references import load
from healthcheck.burnin.settings import PHASES, SettingsError, resolve
from healthcheck.burnin.soak import nvml_counters, run_soak
from healthcheck.core.model import Status
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml


class SoakNvml(FakeNvml):
    """The fake plus the SM clock (``gpu.sm_clock``, default 1980 MHz)."""

    def nvmlDeviceGetClockInfo(self, h, clock):
        g = self._dev(h, "nvmlDeviceGetClockInfo")
        if clock != pynvml.NVML_CLOCK_SM:
            self._raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return getattr(g, "sm_clock", 1980)


def ticking(step: float = 10.0):
    """A clock that advances ``step`` seconds at every reading (two readings per slice)."""
    counter = itertools.count()
    return lambda: next(counter) * step


def test_slices_carry_throughput_telemetry_and_counters_and_the_judge_names_what_grew():
    gpu = FakeGpu(temperature=60, pcie_replay=5)
    fake = SoakNvml([gpu])

    def degrade(k):  # after each slice: 3 C warmer; from slice 6 on, 40 PCIe replays per slice
        gpu.temperature += 3
        if k >= 5:
            gpu.pcie_replay += 40

    run = run_soak(NumpyBackend(), [0], duration_s=200, slice_s=0.05, n=32, dtype="fp32", nvml=fake,
                   on_slice=degrade, clock=ticking())
    assert run.slices == 10 and run.notes == []
    (s,) = run.series
    assert s.component == "cpu0" and s.slowdown_c == 89  # the fake's NVML slowdown threshold
    load_points = s.points[1:]
    assert s.points[0].t_s == 0 and s.points[0].counters["pcie_replay_count"] == 5
    assert [p.t_s for p in load_points] == [20.0 * k for k in range(1, 11)]
    assert all(p.tflops and p.tflops > 0 and p.problem is None for p in load_points)
    assert [p.temp_c for p in load_points] == [60.0 + 3 * k for k in range(10)]
    assert all(p.sm_clock_mhz == 1980 and p.power_w == pytest.approx(71.234) for p in load_points)
    assert [p.counters["pcie_replay_count"] for p in load_points][4:7] == [5, 45, 85]
    got = {f.check: f for f in judge_soak(run.series)}
    errors = got["burnin.soak.errors"]
    assert errors.status is Status.WARN and "pcie_replay_count +200" in errors.message
    assert errors.metrics["onset_s"] == 120.0  # read after slice 6: the replays grew during it
    assert got["burnin.soak.verify"].status is Status.PASS
    # 3 C a slice (20 s) is 540 C/h: heating; the fake's 89 C slowdown is reached within the margin
    assert got["burnin.soak.thermal"].status is Status.FAIL


def test_a_product_that_changes_between_slices_is_caught():
    class Drifting(NumpyBackend):
        corrupt = False

        def matmul(self, device, a, b, out):
            super().matmul(device, a, b, out)
            if self.corrupt:  # the same slightly wrong product every time (within the float64 check's
                out[0, 0] *= 1 + 1e-5  # tolerance): only the digest against the first slice's differs

    backend = Drifting()
    run = run_soak(backend, [0], duration_s=100, slice_s=0.05, n=32, dtype="fp32",
                   on_slice=lambda k: setattr(backend, "corrupt", k >= 2), clock=ticking())
    problems = [p.problem for p in run.series[0].points[1:]]
    assert problems[:2] == [None, None] and all(p and "differs from the first slice" in p for p in problems[2:])
    verify = next(f for f in judge_soak(run.series) if f.check == "burnin.soak.verify")
    assert verify.status is Status.FAIL and "t=1m00s" in verify.message


def test_a_failing_counter_source_is_noted_once_and_the_soak_goes_on():
    def broken():
        raise OSError("NVML went away")

    run = run_soak(NumpyBackend(), [0], duration_s=60, slice_s=0.05, n=16, dtype="fp32", read_counters=broken,
                   clock=ticking())
    assert run.slices == 3 and run.notes == ["error counters not read: OSError: NVML went away"]
    assert all(p.counters == {} for p in run.series[0].points)


@pytest.mark.parametrize("kwargs", [{"duration_s": 0, "slice_s": 1}, {"duration_s": 10, "slice_s": float("nan")}])
def test_bad_durations_are_refused(kwargs):
    with pytest.raises(ValueError, match="soak duration_s and slice_s must be > 0"):
        run_soak(NumpyBackend(), [0], n=16, dtype="fp32", **kwargs)


def test_nvml_counters_sum_the_nvlink_counters_over_the_links():
    gpu = FakeGpu(nvlink_errors={(0, pynvml.NVML_NVLINK_ERROR_DL_REPLAY): 2,
                                 (3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY): 5})
    counters, slowdown = nvml_counters(SoakNvml([gpu, FakeGpu()]))
    assert counters[0]["nvlink_replay_errors"] == 7 and counters[1]["nvlink_replay_errors"] == 0
    assert counters[0]["pcie_replay_count"] == 0 and "ecc_uncorrected_volatile" in counters[0]
    assert slowdown == {0: 89.0, 1: 89.0}


# -- the phase in the node run --------------------------------------------------------------------

def test_soak_is_opt_in_and_its_settings_are_validated():
    default = resolve({}, environ={})
    assert default.phases == PHASES and "soak" not in PHASES
    assert node_run.expected("soak", default) == (3600.0, True)
    s = resolve({"phases": ["checks", "soak"], "soak_duration_s": 7200},
                environ={"HEALTHCHECK_BURNIN_SOAK_SAMPLE_S": "30"})
    assert s.phases == ("checks", "soak") and s.soak_duration_s == 7200.0 and s.soak_sample_s == 30.0
    with pytest.raises(SettingsError, match="soak_sample_s = 120 is longer than soak_duration_s = 60"):
        resolve({"soak_duration_s": 60, "soak_sample_s": 120}, environ={})
    with pytest.raises(SettingsError, match="soak_duration_s = 0 out of range"):
        resolve({"soak_duration_s": 0}, environ={})
    with pytest.raises(SettingsError, match="soak_sample_s must be a number"):
        resolve({}, environ={"HEALTHCHECK_BURNIN_SOAK_SAMPLE_S": "a minute"})


def test_the_soak_phase_runs_in_the_node_run_on_numpy(monkeypatch):
    """The phase end to end through the node run (the wiring, the record, the findings). A CPU's GEMM
    throughput on a loaded CI machine varies far more than a GPU's: the throughput verdict is the
    judge's own tests' business, so here a drop of up to 100 % counts as held."""
    from healthcheck.burnin import judge_soak

    monkeypatch.setitem(judge_soak.THRESHOLDS, "throughput_drop", judge_soak.Threshold(1.0, "test: any"))
    settings = resolve({"backend": "numpy", "phases": ["soak"], "soak_duration_s": 1, "soak_sample_s": 0.2,
                        "gemm_n": 64}, environ={})
    ctx = node_run.NodeContext("n1", settings, load())
    verdict = node_run.run_node(ctx, "2026-01-01T00:00:00Z")
    by = {f.check: f for f in verdict.findings}
    assert by["burnin.soak.verify"].status is Status.PASS and by["burnin.soak.verify"].component == "cpu0"
    assert by["burnin.soak.telemetry"].status is Status.SKIP  # NumPy: no NVML, throughput only
    assert by["burnin.soak.throughput"].status in (Status.PASS, Status.SKIP)  # few slices on a loaded machine
    assert verdict.status not in (Status.FAIL, Status.ERROR), [f.message for f in verdict.findings]
    soak = ctx.extra["soak"]
    assert soak["slices"] >= 1 and len(soak["devices"]["cpu0"]["tflops"]) == soak["slices"] + 1
    assert "soak" in ctx.extra["phase_seconds"]
    assert not any(f.check.startswith("burnin.gemm") for f in verdict.findings)  # only the phases asked for
