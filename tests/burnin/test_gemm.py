"""run_gemm on the NumPy backend: accounting, SDC caught three ways, device isolation.

"Several devices" are the CPU several times (:class:`MultiCpu`), so cross-device agreement and
disagreement can be shown without a GPU. Small n (128) and short runs keep the file fast.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from healthcheck.burnin.backends import DeviceInfo, NumpyBackend
from healthcheck.burnin.gemm import (TOLERANCE, digest48, make_inputs, plain_matmul_tflops, reference_rows,
                                     relative_error, round_to, run_gemm, sample_rows)
from healthcheck.burnin.judge_compute import judge_gemm
from healthcheck.core.model import Status

N = 128


class MultiCpu(NumpyBackend):
    """``count`` devices that are all the CPU."""

    def __init__(self, count: int = 3) -> None:
        super().__init__()
        self.count = count

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(i, "Test CPU", kind="cpu") for i in range(self.count)]


def by_component(findings, check):
    return {f.component: f for f in findings if f.check == check}


def gemm(backend=None, **kwargs):
    kwargs.setdefault("duration_s", 60.0)
    kwargs.setdefault("max_iterations", 6)
    return run_gemm(backend or MultiCpu(), None, n=kwargs.pop("n", N), dtype=kwargs.pop("dtype", "fp32"), **kwargs)


# ------------------------------------------------------------------------------------ accounting


def test_known_iteration_count_and_tflops_accounting():
    results = gemm(max_iterations=5)
    assert [r.component for r in results] == ["cpu0", "cpu1", "cpu2"]
    for r in results:
        assert (r.backend, r.dtype, r.n, r.name) == ("numpy", "fp32", N, "Test CPU")
        assert r.iterations == 5 and r.verified == 5 and r.mismatches == 0 and r.errors == []
        assert r.elapsed_s > 0
        assert r.tflops == pytest.approx(2 * N ** 3 * 5 / r.elapsed_s / 1e12, rel=1e-12)
        assert r.reference_error < 1e-5 and r.tolerance == TOLERANCE["fp32"] == 1e-4
        assert len(r.digest) == 32 and r.digest_metric == int(r.digest[:12], 16)
        assert r.digest_metric < 2 ** 48 and float(r.digest_metric) == r.digest_metric
    assert len({r.digest for r in results}) == 1  # same inputs, same kernel: bitwise the same
    findings = judge_gemm(results, None, node_spread=1.0)  # threads sharing 2 cores: no speed judged
    assert all(f.status is Status.PASS for f in findings), findings
    f = by_component(findings, "burnin.gemm.verify")["cpu1"]
    assert f.message == f"cpu1: 5 repeated products identical, error {results[1].reference_error:.1e} vs float64 " \
                        "(tolerance 0.0001, fp32 n=128)"
    assert f.metrics["gemm_digest48"] == results[1].digest_metric and f.metrics["gemm_mismatches"] == 0


def test_runs_for_the_duration():
    (r,) = run_gemm(NumpyBackend(), [0], duration_s=0.2, n=N, dtype="bf16")
    assert r.elapsed_s >= 0.2 and r.iterations >= 1
    assert r.dtype == "fp32"  # NumPy has no bf16: reported honestly
    assert r.tflops == pytest.approx(2 * N ** 3 * r.iterations / r.elapsed_s / 1e12)


def test_min_iterations_even_with_zero_duration():
    (r,) = run_gemm(NumpyBackend(), [0], duration_s=0.0, n=N, dtype="fp32", min_iterations=3)
    assert r.iterations == 3


def test_inputs_are_deterministic_per_seed():
    first = gemm(MultiCpu(1), max_iterations=1)[0].digest
    assert gemm(MultiCpu(1), max_iterations=1)[0].digest == first
    assert gemm(MultiCpu(1), max_iterations=1, seed=99)[0].digest != first
    a1, b1 = make_inputs(16, "bf16", 7)
    a2, b2 = make_inputs(16, "bf16", 7)
    assert np.array_equal(a1, a2) and np.array_equal(b1, b2) and not np.array_equal(a1, b1)


def test_plain_matmul_baseline():
    best, mean = plain_matmul_tflops(NumpyBackend(), 0, n=N, dtype="fp32", duration_s=0.1)
    assert best >= mean > 0


# ----------------------------------------------------------------------------- SDC detection


def flip_one(device_at: int, iteration_at: int):
    def fault(device, iteration, out):
        if device == device_at and iteration == iteration_at:
            out.view(np.uint32)[17, 3] ^= np.uint32(1 << 4)  # one low mantissa bit
    return fault


def test_sdc_at_iteration_k_is_caught_and_named():
    results = gemm(max_iterations=8, fault=flip_one(1, 5))
    assert [r.mismatches for r in results] == [0, 1, 0]
    assert results[1].first_mismatch == 5 and results[1].verified == 8
    assert len({r.digest for r in results}) == 1  # iteration 0 was fine everywhere
    verify = by_component(judge_gemm(results, None), "burnin.gemm.verify")
    assert verify["cpu1"].status is Status.FAIL
    assert verify["cpu1"].message == ("cpu1: 1 of 8 repeated products differed from the first "
                                      "(silent data corruption, first at iteration 5)")
    assert verify["cpu0"].status is Status.PASS and verify["cpu2"].status is Status.PASS


def test_persistent_corruption_counts_every_iteration():
    def stuck(device, iteration, out):
        if device == 0 and iteration >= 3:
            out[0, 0] = 0.0
    (r,) = gemm(MultiCpu(1), max_iterations=7, fault=stuck)
    assert (r.mismatches, r.first_mismatch) == (5, 3)


def test_wrong_from_the_start_is_caught_by_the_float64_recomputation():
    def scaled(device, iteration, out):
        if device == 2:
            out *= np.float32(1.05)  # consistently wrong: every repeat agrees with iteration 0
    results = gemm(fault=scaled)
    assert results[2].mismatches == 0
    assert results[2].reference_error == pytest.approx(0.05, rel=1e-3)
    verify = by_component(judge_gemm(results, None), "burnin.gemm.verify")
    assert verify["cpu2"].status is Status.FAIL
    assert verify["cpu2"].message.startswith("cpu2: wrong result: error 0.05 vs float64 above the fp32 tolerance 0.0001; "
                                             "result differs from the other 2 Test CPU (")
    assert verify["cpu0"].status is Status.PASS


def test_cross_device_disagreement_names_the_minority():
    def tiny(device, iteration, out):
        if device == 0:
            out[5, 5] += np.float32(1e-4)  # within tolerance, the same each time: only peers see it
    results = gemm(fault=tiny)
    assert results[0].reference_error < results[0].tolerance and results[0].mismatches == 0
    assert results[0].digest != results[1].digest == results[2].digest
    verify = by_component(judge_gemm(results, None), "burnin.gemm.verify")
    assert verify["cpu0"].status is Status.FAIL
    assert verify["cpu0"].message == (f"cpu0: result differs from the other 2 Test CPU "
                                      f"({results[0].digest[:12]} vs majority {results[1].digest[:12]})")
    assert verify["cpu1"].status is verify["cpu2"].status is Status.PASS


def test_compensating_corruption_is_caught_by_the_last_digest():
    """Two elements swapped keep the word sum; the last product's full digest still differs."""
    def swap(device, iteration, out):
        if iteration == 4:
            out[0, 0], out[0, 1] = out[0, 1].copy(), out[0, 0].copy()
    (r,) = gemm(MultiCpu(1), max_iterations=4, fault=swap)
    assert (r.mismatches, r.first_mismatch, r.verified) == (1, 4, 4)


def test_verify_every_and_the_last_product():
    (r,) = gemm(MultiCpu(1), max_iterations=5, verify_every=2)
    assert r.verified == 3  # checksums at 2 and 4, digest of 5
    (r,) = gemm(MultiCpu(1), max_iterations=6, verify_every=2)
    assert r.verified == 3  # 2, 4, 6 (6 also by digest)
    (r,) = gemm(MultiCpu(1), max_iterations=5, verify_every=100, fault=flip_one(0, 3))
    assert r.mismatches == 0  # a corruption between verifications is missed, as documented
    (r,) = gemm(MultiCpu(1), max_iterations=5, verify_every=100, fault=flip_one(0, 5))
    assert (r.mismatches, r.first_mismatch) == (1, 5)


@pytest.mark.parametrize("row", [0, 3])  # 0 is a sampled row; 3 is not (the whole product is checked)
def test_non_finite_result_is_a_wrong_result(row):
    def nan(device, iteration, out):
        out[row, 3] = np.nan
    (r,) = gemm(MultiCpu(1), fault=nan)
    assert r.reference_error == math.inf
    (f,) = by_component(judge_gemm([r], None), "burnin.gemm.verify").values()
    assert f.status is Status.FAIL and "wrong result: error inf" in f.message
    assert "gemm_reference_error" not in f.metrics  # metrics stay finite


# ----------------------------------------------------------------------------- device isolation


class Flaky(MultiCpu):
    def __init__(self, bad: int, at: int) -> None:
        super().__init__(3)
        self.bad, self.at, self.calls = bad, at, {}

    def matmul(self, device, a, b, out):
        self.calls[device] = self.calls.get(device, 0) + 1
        if device == self.bad and self.calls[device] > self.at:
            raise RuntimeError("CUDA error: uncorrectable ECC error encountered")
        super().matmul(device, a, b, out)


def test_a_raising_device_does_not_stop_the_others():
    results = gemm(Flaky(bad=1, at=2), max_iterations=6)
    bad = results[1]
    assert bad.errors == ["RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    assert bad.tflops is None and bad.digest is not None  # iteration 0 had completed
    assert bad.iterations == 1  # iteration 0 and product 1 done; product 2 raised
    assert [r.iterations for r in (results[0], results[2])] == [6, 6]
    assert all(r.errors == [] and r.tflops > 0 for r in (results[0], results[2]))
    findings = judge_gemm(results, None)
    verify, tflops = by_component(findings, "burnin.gemm.verify"), by_component(findings, "burnin.gemm.tflops")
    assert verify["cpu1"].status is Status.FAIL
    assert verify["cpu1"].message == "cpu1: GEMM raised: RuntimeError: CUDA error: uncorrectable ECC error encountered"
    assert tflops["cpu1"].status is Status.FAIL
    assert tflops["cpu1"].message.startswith("cpu1: no GEMM throughput measured (RuntimeError: CUDA error")
    assert verify["cpu0"].status is Status.PASS and verify["cpu2"].status is Status.PASS


def test_a_device_failing_on_upload():
    class NoMemory(MultiCpu):
        def upload(self, device, host, dtype=None):
            if device == 0:
                raise MemoryError("CUDA out of memory. Tried to allocate 128.00 MiB")
            return super().upload(device, host, dtype)
    results = gemm(NoMemory(2))
    assert results[0].errors == ["MemoryError: CUDA out of memory. Tried to allocate 128.00 MiB"]
    assert (results[0].digest, results[0].iterations, results[0].tflops) == (None, 0, None)
    assert results[1].errors == [] and results[1].iterations == 6


# ------------------------------------------------------------------------------------- pieces


@pytest.mark.parametrize("value, rounded", [
    (1.0, 1.0),
    (1.0 + 2 ** -8, 1.0),  # a tie: to the even mantissa (0)
    (1.0 + 3 * 2 ** -8, 1.0 + 2 ** -6),  # a tie: to the even mantissa (2), not 1
    (1.0 + 2 ** -8 + 2 ** -20, 1.0 + 2 ** -7),  # above the tie: up
    (-3.140625, -3.140625),  # representable
    (0.1, 0.10009765625),
])
def test_bf16_rounding(value, rounded):
    assert round_to(np.array([value], dtype=np.float32), "bf16")[0] == np.float32(rounded)


def test_rounded_inputs_are_representable():
    a, _ = make_inputs(32, "bf16", 1)
    assert not np.any(a.view(np.uint32) & 0xFFFF)
    h, _ = make_inputs(32, "fp16", 1)
    assert np.array_equal(h.astype(np.float16).astype(np.float32), h)


def test_sample_rows_and_reference():
    rows = sample_rows(N, 1234)
    assert rows[0] == 0 and rows[-1] == N - 1 and len(rows) >= 3 and rows == sorted(set(rows))
    a, b = make_inputs(N, "fp32", 1234)
    ref = reference_rows(a, b, rows)
    assert ref.dtype == np.float64 and ref.shape == (len(rows), N)
    exact = a.astype(np.float64)[rows] @ b.astype(np.float64)
    assert np.allclose(ref, exact, rtol=0, atol=1e-12)
    assert relative_error(ref, ref) == 0.0


def test_digest48_is_exact_as_a_float():
    assert digest48("ffffffffffff" + "0" * 20) == 2 ** 48 - 1
    assert float(2 ** 48 - 1) == 2 ** 48 - 1


@pytest.mark.parametrize("kwargs, message", [
    ({"n": 1}, "GEMM size n must be an integer >= 2, got 1"),
    ({"n": 64.0}, "GEMM size n must be an integer >= 2, got 64.0"),
    ({"dtype": "int8"}, r"unknown GEMM dtype 'int8' \(choose one of bf16, fp16, fp32\)"),
    ({"duration_s": -1.0}, "GEMM duration_s must be >= 0, got -1.0"),
    ({"duration_s": math.nan}, "GEMM duration_s must be >= 0, got nan"),
    ({"verify_every": 0}, "verify_every must be an integer >= 1, got 0"),
    ({"max_iterations": 0}, "max_iterations must be an integer >= 1 or None, got 0"),
])
def test_bad_arguments(kwargs, message):
    args = {"duration_s": 0.1, "n": N, "dtype": "fp32", **kwargs}
    with pytest.raises(ValueError, match=message):
        run_gemm(NumpyBackend(), None, **args)


def test_unknown_device():
    with pytest.raises(ValueError, match=r"no device 5 on backend numpy \(have: 0, 1\)"):
        run_gemm(MultiCpu(2), [5], duration_s=0.1, n=N, dtype="fp32")
