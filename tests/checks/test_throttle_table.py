"""One throttle table for every context (issue 14, item 7): the idle judge (gpu.throttle) and the
under-load judge (burnin.telemetry) both follow healthcheck.policies.throttle.TABLE, and no reason, hardware
brakes above all, is milder under load than at idle."""
from __future__ import annotations

import pytest

from healthcheck.policies import throttle
from healthcheck.burnin.judge_compute import judge_telemetry
from healthcheck.burnin.telemetry import TelemetrySummary
from healthcheck.checks import registry
from healthcheck.config import default_expectations
from healthcheck.core.model import THROTTLE_REASONS, Snapshot, Status

from tests.checks.gpu_builders import h100

HARDWARE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
LEVEL = {Status.PASS: 0, Status.WARN: 1, Status.FAIL: 2}


def idle_status(reason: str) -> Status:
    spec = registry.load_all()["gpu.throttle"]
    exp = default_expectations()
    snap = Snapshot(node="n", taken_at="2024-01-01T00:00:00Z", gpus=[h100(0, throttle_reasons=[reason])])
    (f,) = spec.func(snap, exp, exp.thresholds_for("gpu.throttle", spec.thresholds))
    return f.status


def load_status(reason: str) -> Status:
    summary = TelemetrySummary(0, samples=10, temp_max_c=70.0, power_mean_w=600.0, power_max_w=650.0,
                               sm_clock_min_mhz=1700.0, sm_clock_median_mhz=1900.0,
                               reasons={reason: 0.1}, reason_samples=10)
    (f,) = judge_telemetry({0: summary})
    return f.status


def test_table_covers_every_reason():
    assert set(throttle.TABLE) == set(THROTTLE_REASONS)
    for idle, load, why in throttle.TABLE.values():
        assert idle in throttle.SEVERITY and load in throttle.SEVERITY and why


@pytest.mark.parametrize("reason", THROTTLE_REASONS)
def test_both_judges_follow_the_table(reason):
    idle, load, _ = throttle.TABLE[reason]
    assert idle_status(reason).value == idle
    assert load_status(reason).value == load


@pytest.mark.parametrize("reason", HARDWARE)
def test_hardware_brake_never_milder_under_load(reason):
    assert idle_status(reason) is Status.FAIL
    assert LEVEL[load_status(reason)] >= LEVEL[idle_status(reason)]


@pytest.mark.parametrize("reason", THROTTLE_REASONS)
def test_no_reason_milder_under_load_in_the_table(reason):
    idle, load, _ = throttle.TABLE[reason]
    assert throttle.SEVERITY[load] >= throttle.SEVERITY[idle]


def test_docs_table_matches_the_code():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu-errors.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].strip("`") in throttle.TABLE:
            rows[cells[0].strip("`")] = (cells[1], cells[2], cells[3].replace("`", ""))
    assert rows == {r: (i, lo, why.replace("`", "")) for r, (i, lo, why) in throttle.TABLE.items()}
