"""NVLink5 per-link counters (issue 33, point 2): symbol and effective errors and their bit error rates,
read through NVML field values in the one call that read the link speed, judged by gpu.nvlink.errors with
thresholds as data."""
from __future__ import annotations

import pytest

from healthcheck.config import loads
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Snapshot, Status
from healthcheck.probes.nvml import nvlink_ber, probe_gpus

from tests.checks.gpu_builders import by_component, run
from tests.fakes.fake_pynvml import CLEAN_BER, FakeNvml, gb200_nvl72_tray, h100_node, nvlink5_counters

pynvml = pytest.importorskip("pynvml")
PASS, WARN, FAIL = Status.PASS, Status.WARN, Status.FAIL


def _tray(**counters):
    fakes = gb200_nvl72_tray()
    fakes[1].nvlink_field_values = nvlink5_counters(**counters)
    fake = FakeNvml(fakes)
    return probe_gpus(nvml=fake), fake


def _errors(gpus, exp: Expectations | None = None) -> dict:
    snap = Snapshot(node="n1", taken_at="2026-01-01T00:00:00Z", gpus=gpus)
    return by_component(run("gpu.nvlink.errors", snap, exp or Expectations()))


def test_ber_decoding_follows_nvml():
    assert nvlink_ber(CLEAN_BER) == pytest.approx(1.5e-254)
    assert nvlink_ber((3 << 8) | 12) == pytest.approx(3e-12)  # mantissa 3, exponent 12
    assert nvlink_ber(0) == 0.0


def test_counters_come_in_the_speed_call_no_call_more():
    gpus, fake = _tray(symbol_errors=40, effective_errors=0)
    link = gpus[1].nvlinks[5]
    assert (link.symbol_errors, link.effective_errors) == (40, 0)
    assert link.effective_ber == pytest.approx(1.5e-254)
    assert fake.calls.count("nvmlDeviceGetFieldValues") == 2 * len(gpus)  # links (speed + NVLink5), the rest


def test_clean_tray_passes_and_shows_the_counters():
    found = _errors(_tray()[0])
    assert {f.status for f in found.values()} == {PASS}
    assert "effective (after FEC) 0" in found["gpu0"].message
    assert found["gpu0"].metrics["nvlink_symbol_errors"] == 0


def test_effective_errors_warn_by_default_and_fail_where_configured():
    gpus, _ = _tray(effective_errors=2)
    found = _errors(gpus)
    assert found["gpu1"].status is WARN and found["gpu1"].metrics["nvlink_effective_errors"] == 36
    assert found["gpu0"].status is PASS
    exp = loads('[defaults.thresholds]\n"gpu.nvlink.errors" = { effective_fail = 10 }\n').expectations_for("n1")
    assert _errors(gpus, exp)["gpu1"].status is FAIL


def test_symbol_errors_alone_are_not_judged():
    assert _errors(_tray(symbol_errors=10_000)[0])["gpu1"].status is PASS


def test_effective_ber_thresholds_are_the_sites():
    gpus, _ = _tray(effective_ber=(5 << 8) | 11)  # 5e-11
    assert _errors(gpus)["gpu1"].status is PASS  # no limit by default: NVIDIA publishes none
    exp = loads('[defaults.thresholds]\n"gpu.nvlink.errors" = { effective_ber_warn = 1e-12, effective_ber_fail = 1e-10 }\n')
    found = _errors(gpus, exp.expectations_for("n1"))["gpu1"]
    assert found.status is WARN and "5.0e-11" in found.message
    exp = loads('[defaults.thresholds]\n"gpu.nvlink.errors" = { effective_ber_fail = 1e-11 }\n')
    assert _errors(gpus, exp.expectations_for("n1"))["gpu1"].status is FAIL


def test_hopper_reports_none_and_keeps_its_message():
    gpus = probe_gpus(nvml=FakeNvml(h100_node(1)))
    assert gpus[0].nvlinks[0].effective_errors is None and gpus[0].nvlinks[0].effective_ber is None
    found = _errors(gpus)["gpu0"]
    assert found.status is PASS and found.message == "NVLink errors: CRC 0, replay 0, recovery 0"
    assert "nvlink_effective_errors" not in found.metrics
