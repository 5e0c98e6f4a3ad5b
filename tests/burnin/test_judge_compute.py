"""The pure judges: GEMM verify / TFLOPS, bandwidth, telemetry, against the built-in references and
hand-made ones; a fuzz test feeds them arbitrary (NaN, inf, None, negative) results."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.policies import references
from healthcheck.burnin.bandwidth import NO_DEVICE, BandwidthResult
from healthcheck.burnin.gemm import GemmResult
from healthcheck.burnin.judge_compute import fleet_key, judge_bandwidth, judge_gemm, judge_telemetry
from healthcheck.policies.references import Reference, Sku
from healthcheck.burnin.telemetry import TelemetrySummary
from healthcheck.core.model import Status

H100 = "NVIDIA H100 80GB HBM3"
GOOD, BAD, OTHER = "a1" * 16, "b2" * 16, "c3" * 16
H100_SKU = references.load().sku_for(H100)


@pytest.fixture(scope="module")
def h100() -> Sku:
    sku = references.load().sku_for(H100)
    assert sku.name == "h100_sxm"
    return sku


def gemm_result(i: int, tflops: float | None = 700.0, digest: str | None = GOOD, **kw) -> GemmResult:
    fields = dict(device=i, name=H100, component=f"gpu{i}", backend="torch", library="torch 2.5.1 cuda 12.4",
                  seed=1234, dtype="bf16", n=8192,
                  iterations=3000, elapsed_s=10.0, tflops=tflops, digest=digest,
                  digest_metric=None if digest is None else int(digest[:12], 16), verified=3000,
                  reference_error=3.1e-3, tolerance=2e-2)
    fields.update(kw)
    return GemmResult(**fields)


def node(*tflops: float, **kw) -> list[GemmResult]:
    return [gemm_result(i, t, **kw) for i, t in enumerate(tflops)]


def of(findings, check):
    return {f.component: f for f in findings if f.check == check}


# -------------------------------------------------------------------------------------- TFLOPS


def test_tflops_below_the_reference(h100):
    findings = of(judge_gemm(node(700, 702, 699, 512.3, 701, 700, 698, 703), h100), "burnin.gemm.tflops")
    assert findings["gpu3"].status is Status.FAIL
    assert findings["gpu3"].message == "gpu3: 512.3 TFLOP/s below reference >= 595 (h100_sxm gemm_bf16_tflops 700 TFLOP/s)"
    assert findings["gpu3"].metrics == {"gemm_tflops": 512.3, "node_median_tflops": 700.0, "reference_tflops": 700.0}
    ok = findings["gpu0"]
    assert ok.status is Status.PASS
    assert ok.message == "gpu0: 700.0 TFLOP/s bf16 n=8192 (reference 700 TFLOP/s >= 595 <= 1015, node median 700.0)"


def test_tflops_above_the_reference_warns(h100):
    (f,) = of(judge_gemm([gemm_result(0, 1100.0)], h100), "burnin.gemm.tflops").values()
    assert f.status is Status.WARN
    assert f.message == ("gpu0: 1100.0 TFLOP/s above reference <= 1015 (h100_sxm gemm_bf16_tflops 700 TFLOP/s): "
                         "not the load it claims?")
    assert "node_median_tflops" not in f.metrics  # one device: no node median


def test_tflops_below_the_node_median_within_the_reference(h100):
    findings = of(judge_gemm(node(700, 700, 610, 705), h100), "burnin.gemm.tflops")
    assert findings["gpu2"].status is Status.FAIL
    assert findings["gpu2"].message == "gpu2: 610.0 TFLOP/s is 13% below the node median 700.0 (allowed 10%)"
    assert [findings[c].status for c in ("gpu0", "gpu1", "gpu3")] == [Status.PASS] * 3
    relaxed = of(judge_gemm(node(700, 700, 610, 705), h100, node_spread=0.2), "burnin.gemm.tflops")
    assert relaxed["gpu2"].status is Status.PASS


def test_no_reference_judges_against_the_node_median_only(h100):
    findings = of(judge_gemm(node(400, 405, 300), None), "burnin.gemm.tflops")
    assert findings["gpu0"].status is Status.PASS
    assert findings["gpu0"].message == f"gpu0: 400.0 TFLOP/s bf16 n=8192 (no reference for {H100}, node median 400.0)"
    assert findings["gpu2"].status is Status.FAIL and "25% below the node median 400.0" in findings["gpu2"].message
    fp32 = of(judge_gemm(node(50, 51, dtype="fp32"), h100), "burnin.gemm.tflops")
    assert fp32["gpu1"].message == ("gpu1: 51.0 TFLOP/s fp32 n=8192 (no reference for h100_sxm gemm_fp32_tflops, "
                                    "node median 50.5)")
    assert fp32["gpu1"].status is Status.PASS


def test_site_reference_for_the_cpu():
    cpu = Sku("epyc", ["EPYC"], refs={"gemm_fp32_tflops": Reference(2.0, "TFLOP/s", -0.25, 0.5)})
    (f,) = judge_gemm([gemm_result(0, 1.2, dtype="fp32", component="cpu0", name="AMD EPYC")], cpu)[1:]
    assert f.status is Status.FAIL and f.message == "cpu0: 1.2 TFLOP/s below reference >= 1.5 (epyc gemm_fp32_tflops 2 TFLOP/s)"


# -------------------------------------------------------------------------------------- verify


def test_two_devices_that_disagree_have_no_majority():
    findings = of(judge_gemm([gemm_result(0), gemm_result(1, digest=BAD)], None), "burnin.gemm.verify")
    for c in ("gpu0", "gpu1"):
        assert findings[c].status is Status.FAIL
        assert findings[c].message == (f"{c}: no majority: the 2 {H100} disagree "
                                       f"(gpu0 {GOOD[:12]}, gpu1 {BAD[:12]})")


def test_minority_among_eight():
    results = node(*[700] * 8)
    results[6].digest = BAD
    findings = of(judge_gemm(results, None), "burnin.gemm.verify")
    assert findings["gpu6"].status is Status.FAIL
    assert findings["gpu6"].message == f"gpu6: result differs from the other 7 {H100} ({BAD[:12]} vs majority {GOOD[:12]})"
    assert sum(f.status is Status.PASS for f in findings.values()) == 7


def test_devices_of_different_models_are_not_compared():
    results = [gemm_result(0), gemm_result(1, digest=BAD, name="NVIDIA A100-SXM4-80GB")]
    assert all(f.status is Status.PASS for f in of(judge_gemm(results, None), "burnin.gemm.verify").values())


def test_fleet_digest():
    results = node(700, 700)
    key = fleet_key(results[0])
    assert key == f"{H100}|torch 2.5.1 cuda 12.4|bf16|n=8192|seed=1234"
    # the same product under another library stack or seed is another key: other bits are allowed there
    assert fleet_key(gemm_result(0, library="torch 2.6.0 cuda 12.6")) != key != fleet_key(gemm_result(0, seed=7))
    same = of(judge_gemm(results, None, fleet_digests={key: GOOD}), "burnin.gemm.verify")
    assert all(f.status is Status.PASS and f.message.endswith(", same result as the fleet") for f in same.values())
    differs = of(judge_gemm(results, None, fleet_digests={key: OTHER}), "burnin.gemm.verify")
    assert differs["gpu0"].status is Status.FAIL
    assert differs["gpu0"].message == (f"gpu0: differs from the fleet ({GOOD[:12]} vs {OTHER[:12]} for bf16 n=8192) "
                                       "(the whole node differs: driver or library change?)")
    results[1].digest = BAD
    one = of(judge_gemm(node(700, 700, 700)[:1] + results[1:] + [gemm_result(2)], None, fleet_digests={key: GOOD}),
             "burnin.gemm.verify")
    assert one["gpu1"].message == (f"gpu1: result differs from the other 2 {H100} ({BAD[:12]} vs majority {GOOD[:12]}); "
                                   f"differs from the fleet ({BAD[:12]} vs {GOOD[:12]} for bf16 n=8192)")
    other_key = of(judge_gemm(node(700), None, fleet_digests={"other|torch|bf16|n=8192": OTHER}), "burnin.gemm.verify")
    assert other_key["gpu0"].status is Status.PASS


@pytest.mark.parametrize("fleet, status", [
    (int(GOOD[:12], 16), Status.PASS),  # the gemm_digest48 history metric, as an int
    (float(int(GOOD[:12], 16)), Status.PASS),  # ... or as the float it is stored as
    (GOOD[:12].upper(), Status.PASS),  # the first 12 hex digits
    (int(OTHER[:12], 16), Status.FAIL),
    (OTHER[:12], Status.FAIL),
    ("a1", Status.PASS),  # too short to compare: ignored
    (-1.5, Status.PASS),  # not a digest: ignored
])
def test_fleet_digest_forms(fleet, status):
    results = node(700)
    (f,) = of(judge_gemm(results, None, fleet_digests={fleet_key(results[0]): fleet}), "burnin.gemm.verify").values()
    assert f.status is status
    if status is Status.FAIL:
        assert f.message == f"gpu0: differs from the fleet ({GOOD[:12]} vs {OTHER[:12]} for bf16 n=8192)"


def test_verify_pass_message_and_metrics():
    (f,) = of(judge_gemm([gemm_result(0)], None), "burnin.gemm.verify").values()
    assert f.message == "gpu0: 3000 repeated products identical, error 3.1e-03 vs float64 (tolerance 0.02, bf16 n=8192)"
    assert f.metrics == {"gemm_digest48": float(int(GOOD[:12], 16)), "gemm_mismatches": 0.0, "gemm_verified": 3000.0,
                         "gemm_iterations": 3000.0, "gemm_reference_error": 3.1e-3}


def test_nothing_verified():
    (f,) = of(judge_gemm([gemm_result(0, digest=None)], None), "burnin.gemm.verify").values()
    assert (f.status, f.message) == (Status.FAIL, "gpu0: no product verified")


def test_several_errors_are_counted():
    (f,) = of(judge_gemm([gemm_result(0, None, errors=["RuntimeError: a", "RuntimeError: b"])], None),
              "burnin.gemm.verify").values()
    assert f.message == "gpu0: GEMM raised: RuntimeError: a (+1 more)"


# ----------------------------------------------------------------------------------- bandwidth


def bw(kind: str, gbps: float | None, i: int = 0, **kw) -> BandwidthResult:
    return BandwidthResult(i, H100, f"gpu{i}", "torch", kind, 1 << 30, 10, gbps,
                           None if gbps is None else gbps * 0.99, **kw)


def test_bandwidth_against_references(h100):
    findings = judge_bandwidth([bw("hbm_copy", 2903.0), bw("h2d", 26.1, 1), bw("d2h", 70.0, 1), bw("d2h", 46.8)], h100)
    assert [(f.check, f.component, f.status) for f in findings] == [
        ("burnin.bandwidth.hbm", "gpu0", Status.PASS), ("burnin.bandwidth.pcie", "gpu1", Status.FAIL),
        ("burnin.bandwidth.pcie", "gpu1", Status.WARN), ("burnin.bandwidth.pcie", "gpu0", Status.PASS)]
    assert findings[0].message == "gpu0: 2903.0 GB/s (median 2874.0) within reference 2900 GB/s >= 2465 <= 3480"
    assert findings[0].metrics == {"hbm_copy_gbps": 2903.0, "hbm_copy_median_gbps": pytest.approx(2873.97),
                                   "reference_gbps": 2900.0}
    assert findings[1].message == "gpu1 h2d: 26.1 GB/s below reference >= 43.2 (h100_sxm h2d_gbps 54 GB/s)"
    assert findings[2].message == ("gpu1 d2h: 70.0 GB/s above reference <= 66.7 (h100_sxm d2h_gbps 46 GB/s): "
                                   "not the copy it claims?")


def test_bandwidth_failures_and_skips(h100):
    findings = judge_bandwidth([
        bw("hbm_copy", 2900.0, corrupted=True, detail="copy checksum 0x1, expected 0x2"),
        bw("h2d", None, error="RuntimeError: CUDA error: an illegal memory access was encountered"),
        bw("d2h", None, error="not run: the host-to-device test failed"),
        BandwidthResult(0, "AMD EPYC", "cpu0", "numpy", "hbm_copy", 1 << 26, 3, 11.3, 10.9, skipped=NO_DEVICE),
        BandwidthResult(0, "AMD EPYC", "cpu0", "numpy", "h2d", 1 << 26, skipped=NO_DEVICE),
        bw("h2d", None),
    ], h100)
    assert [(f.status, f.message) for f in findings] == [
        (Status.FAIL, "gpu0: copied data differs from the source (copy checksum 0x1, expected 0x2)"),
        (Status.FAIL, "gpu0 h2d: copy failed: RuntimeError: CUDA error: an illegal memory access was encountered"),
        (Status.FAIL, "gpu0 d2h: copy failed: not run: the host-to-device test failed"),
        (Status.SKIP, "cpu0: no device: host memory only (11.3 GB/s measured)"),
        (Status.SKIP, "cpu0 h2d: no device: host memory only"),
        (Status.FAIL, "gpu0 h2d: no bandwidth measured"),
    ]


def test_bandwidth_without_reference():
    (f,) = judge_bandwidth([bw("h2d", 24.5)], None)
    assert (f.status, f.message) == (Status.PASS, f"gpu0 h2d: 24.5 GB/s (median 24.3); no reference for {H100}")
    (f,) = judge_bandwidth([bw("h2d", 24.5)], Sku("x", ["X"]))
    assert f.message == "gpu0 h2d: 24.5 GB/s (median 24.3); no reference for x h2d_gbps"


# ----------------------------------------------------------------------------------- telemetry


def tele(i: int = 0, **kw) -> TelemetrySummary:
    fields = dict(index=i, samples=20, temp_max_c=74.0, power_mean_w=655.2, power_max_w=699.0, sm_clock_min_mhz=1755.0,
                  sm_clock_median_mhz=1980.0, reason_samples=20)
    fields.update(kw)
    return TelemetrySummary(**fields)


def test_telemetry_statuses():
    findings = judge_telemetry({
        0: tele(0),
        1: tele(1, reasons={"hw_slowdown": 0.1}),
        2: tele(2, reasons={"hw_power_brake_slowdown": 0.05, "sw_power_cap": 0.9}, temp_max_c=69.0),
        3: tele(3, reasons={"sw_thermal_slowdown": 0.25, "hw_thermal_slowdown": 0.15}, temp_max_c=91.4),
    })
    assert [(f.component, f.status, f.message) for f in findings] == [
        ("gpu0", Status.PASS, "gpu0: max 74 C, mean 655 W, SM clock >= 1755 MHz"),
        ("gpu1", Status.FAIL, "gpu1: hw_slowdown 10% of samples under load (max 74 C)"),  # never milder than idle
        ("gpu2", Status.FAIL, "gpu2: hw_power_brake_slowdown 5% of samples under load (max 69 C)"),
        ("gpu3", Status.FAIL, "gpu3: sw_thermal_slowdown 25%, hw_thermal_slowdown 15% of samples under load (max 91 C)"),
    ]
    assert findings[0].metrics == {"temp_max_c": 74.0, "power_mean_w": 655.2, "power_max_w": 699.0,
                                   "sm_clock_min_mhz": 1755.0, "sm_clock_median_mhz": 1980.0, "telemetry_samples": 20.0}


def test_telemetry_thresholds():
    summary = {0: tele(0, reasons={"hw_thermal_slowdown": 0.02, "sw_thermal_slowdown": 0.5})}
    (f,) = judge_telemetry(summary, min_fraction=0.05, thermal_fail=("hw_thermal_slowdown",))
    assert f.status is Status.PASS
    assert f.message == ("gpu0: max 74 C, mean 655 W, SM clock >= 1755 MHz, "
                         "reasons: hw_thermal_slowdown 2%, sw_thermal_slowdown 50%")


def test_telemetry_nothing_read():
    (f,) = judge_telemetry({5: TelemetrySummary(5, samples=12, errors=["nvmlDeviceGetTemperature: GPU is lost (x12)"])})
    assert (f.status, f.component, f.message) == (Status.ERROR, "gpu5",
                                                  "gpu5: no telemetry read (nvmlDeviceGetTemperature: GPU is lost (x12))")
    (f,) = judge_telemetry({0: TelemetrySummary(0)})
    assert (f.status, f.message) == (Status.ERROR, "gpu0: no telemetry read (no samples)")


# ---------------------------------------------------------------------------------------- fuzz

numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10 ** 6))
digests = st.one_of(st.none(), st.sampled_from([GOOD, BAD, OTHER]))


@st.composite
def gemm_results(draw):
    return gemm_result(draw(st.integers(0, 7)), draw(numbers), draw(digests),
                       name=draw(st.sampled_from([H100, "NVIDIA A100-SXM4-80GB", ""])),
                       dtype=draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                       mismatches=draw(st.integers(0, 5)), verified=draw(st.integers(0, 10)),
                       first_mismatch=draw(st.one_of(st.none(), st.integers(0, 9))),
                       reference_error=draw(numbers), tolerance=draw(st.floats(0, 1)),
                       errors=draw(st.lists(st.text(max_size=20), max_size=2)))


@st.composite
def bandwidth_results(draw):
    return BandwidthResult(draw(st.integers(0, 7)), H100, "gpu0", "torch", draw(st.sampled_from(["hbm_copy", "h2d", "d2h"])),
                           1 << 20, 3, draw(numbers), draw(numbers), draw(st.booleans()),
                           draw(st.one_of(st.none(), st.text(max_size=10))),
                           draw(st.one_of(st.none(), st.just(NO_DEVICE))), draw(st.one_of(st.none(), st.text(max_size=10))))


@st.composite
def summaries(draw):
    reasons = draw(st.dictionaries(st.sampled_from(["hw_slowdown", "hw_thermal_slowdown", "sw_power_cap", "x"]),
                                   st.floats(allow_nan=True, allow_infinity=True), max_size=3))
    return TelemetrySummary(0, draw(st.integers(0, 50)), draw(numbers), draw(numbers), draw(numbers), draw(numbers),
                            draw(numbers), reasons, draw(st.integers(0, 50)), draw(st.lists(st.text(max_size=10), max_size=2)))


def all_finite(findings):
    return all(isinstance(v, float) and math.isfinite(v) for f in findings for v in f.metrics.values())


@settings(max_examples=150, deadline=None)
@given(st.lists(gemm_results(), max_size=6), st.floats(0, 1),
       st.one_of(st.none(), st.dictionaries(st.sampled_from([f"{H100}|torch|bf16|n=8192"]),
                                            st.one_of(digests, numbers, st.text(max_size=14)))))
def test_judge_gemm_never_raises(results, spread, fleet):
    findings = judge_gemm(results, H100_SKU, fleet_digests=fleet, node_spread=spread)
    assert len(findings) == 2 * len(results)
    assert all(isinstance(f.status, Status) and f.message.startswith(f.component + ":") for f in findings)
    assert all_finite(findings)


@settings(max_examples=150, deadline=None)
@given(st.lists(bandwidth_results(), max_size=6))
def test_judge_bandwidth_never_raises(results):
    findings = judge_bandwidth(results, H100_SKU)
    assert len(findings) == len(results) and all_finite(findings)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.integers(0, 7), summaries(), max_size=4), st.floats(0, 1))
def test_judge_telemetry_never_raises(summary, min_fraction):
    findings = judge_telemetry(summary, min_fraction=min_fraction)
    assert len(findings) == len(summary) and all_finite(findings)
