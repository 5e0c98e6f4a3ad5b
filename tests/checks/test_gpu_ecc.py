"""gpu.ecc.mode, gpu.ecc.uncorrected, gpu.ecc.corrected, gpu.retired_pages, gpu.row_remap."""
from __future__ import annotations

import pytest

from healthcheck.checks.gpu_ecc import DATACENTER_MODELS, is_datacenter
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Status

from tests.checks.gpu_builders import by_component, h100, only, run, snapshot, statuses, with_gpu

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


# ---------------------------------------------------------------------------------- gpu.ecc.mode

@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", True),
    ("NVIDIA A100-SXM4-80GB", True),
    ("Tesla V100-SXM2-32GB", True),
    ("NVIDIA GH200 480GB", True),
    ("NVIDIA L40S", True),
    ("NVIDIA A10", True),
    ("NVIDIA H100 NVL", True),
    ("NVIDIA RTX A2000", False),      # "A2" must not match "A2000"
    ("NVIDIA GeForce RTX 4090", False),
    ("NVIDIA RTX A1000", False),      # "A10" must not match "A1000"
    (None, False),
])
def test_is_datacenter(name, expected):
    assert is_datacenter(name, DATACENTER_MODELS) is expected


def test_ecc_mode_enabled_passes():
    found = run("gpu.ecc.mode", snapshot())
    assert {f.status for f in found} == {PASS} and found[0].metrics == {"ecc_enabled": 1.0}


def test_ecc_disabled_on_datacenter_gpu_fails():
    snap = with_gpu(snapshot(), 2, ecc_mode_current=False, ecc_mode_pending=False)
    f = by_component(run("gpu.ecc.mode", snap))["gpu2"]
    assert f.status is FAIL and f.message == "ECC disabled"


def test_ecc_disabled_on_workstation_gpu_warns():
    gpu = h100(0, name="NVIDIA RTX A6000", ecc_mode_current=False, ecc_mode_pending=False)
    assert only(run("gpu.ecc.mode", snapshot(gpus=[gpu]))).status is WARN


def test_ecc_require_enabled_override():
    gpu = h100(0, name="NVIDIA RTX A6000", ecc_mode_current=False, ecc_mode_pending=False)
    snap = snapshot(gpus=[gpu])
    assert only(run("gpu.ecc.mode", snap, require_enabled=True)).status is FAIL
    dc = snapshot(gpus=[h100(0, ecc_mode_current=False, ecc_mode_pending=False)])
    assert only(run("gpu.ecc.mode", dc, require_enabled=False)).status is WARN


def test_ecc_datacenter_list_is_threshold_data():
    gpu = h100(0, name="NVIDIA RTX A6000", ecc_mode_current=False, ecc_mode_pending=False)
    exp = Expectations(thresholds={"gpu.ecc.mode": {"datacenter_models": ["A6000"]}})
    assert only(run("gpu.ecc.mode", snapshot(gpus=[gpu]), exp)).status is FAIL


def test_ecc_pending_change_warns():
    snap = with_gpu(snapshot(), 1, ecc_mode_pending=False)
    f = by_component(run("gpu.ecc.mode", snap))["gpu1"]
    assert f.status is WARN and "pending until reset" in f.message


def test_ecc_disabled_with_enable_pending_still_fails():
    snap = with_gpu(snapshot(), 1, ecc_mode_current=False, ecc_mode_pending=True)
    f = by_component(run("gpu.ecc.mode", snap))["gpu1"]
    assert f.status is FAIL and "change to enabled pending until reset" in f.message


def test_ecc_mode_not_reported_skips():
    snap = with_gpu(snapshot(), 0, ecc_mode_current=None, ecc_mode_pending=None)
    assert statuses(run("gpu.ecc.mode", snap))["gpu0"] is SKIP


# --------------------------------------------------------------------------- gpu.ecc.uncorrected

def test_uncorrected_zero_passes_with_metrics():
    f = run("gpu.ecc.uncorrected", snapshot())[0]
    assert f.status is PASS
    assert f.metrics == {"ecc_uncorrected_volatile": 0.0, "ecc_uncorrected_aggregate": 0.0}


def test_uncorrected_volatile_fails_with_message():
    snap = with_gpu(snapshot(), 5, ecc_uncorrected_volatile=2, ecc_uncorrected_aggregate=5)
    f = by_component(run("gpu.ecc.uncorrected", snap))["gpu5"]
    assert f.status is FAIL
    assert f.message == "uncorrected ECC errors: volatile 2, aggregate 5 (limit 0)"


def test_uncorrected_aggregate_only_warns_by_default():
    snap = with_gpu(snapshot(), 5, ecc_uncorrected_aggregate=3)
    f = by_component(run("gpu.ecc.uncorrected", snap))["gpu5"]
    assert f.status is WARN and "historic" in f.message


def test_uncorrected_aggregate_limit_from_config():
    snap = with_gpu(snapshot(), 5, ecc_uncorrected_aggregate=3)
    exp = Expectations(thresholds={"gpu.ecc.uncorrected": {"max_aggregate": 2}})
    assert by_component(run("gpu.ecc.uncorrected", snap, exp))["gpu5"].status is FAIL
    exp = Expectations(thresholds={"gpu.ecc.uncorrected": {"max_aggregate": 10}})
    assert by_component(run("gpu.ecc.uncorrected", snap, exp))["gpu5"].status is PASS


def test_uncorrected_volatile_limit_override():
    snap = with_gpu(snapshot(), 0, ecc_uncorrected_volatile=1, ecc_uncorrected_aggregate=1)
    assert by_component(run("gpu.ecc.uncorrected", snap, max_volatile=1, max_aggregate=1))[
        "gpu0"].status is PASS


def test_uncorrected_partial_and_missing_counts():
    snap = with_gpu(snapshot(), 0, ecc_uncorrected_volatile=None, ecc_uncorrected_aggregate=None)
    snap = with_gpu(snap, 1, ecc_uncorrected_volatile=1, ecc_uncorrected_aggregate=None)
    found = by_component(run("gpu.ecc.uncorrected", snap))
    assert found["gpu0"].status is SKIP
    assert found["gpu1"].status is FAIL and "aggregate n/a" in found["gpu1"].message
    assert found["gpu1"].metrics == {"ecc_uncorrected_volatile": 1.0}


# ----------------------------------------------------------------------------- gpu.ecc.corrected

def test_corrected_small_counts_pass():
    snap = with_gpu(snapshot(), 0, ecc_corrected_volatile=177, ecc_corrected_aggregate=177)
    f = by_component(run("gpu.ecc.corrected", snap))["gpu0"]
    assert f.status is PASS and f.metrics["ecc_corrected_volatile"] == 177


def test_corrected_many_warns_never_fails_by_default():
    snap = with_gpu(snapshot(), 0, ecc_corrected_volatile=10_001, ecc_corrected_aggregate=900_000)
    f = by_component(run("gpu.ecc.corrected", snap))["gpu0"]
    assert f.status is WARN and "volatile warn limit 10000" in f.message


def test_corrected_fail_volatile_override_and_aggregate_warn():
    snap = with_gpu(snapshot(), 0, ecc_corrected_volatile=50, ecc_corrected_aggregate=500)
    assert by_component(run("gpu.ecc.corrected", snap, fail_volatile=10))["gpu0"].status is FAIL
    f = by_component(run("gpu.ecc.corrected", snap, warn_aggregate=100))["gpu0"]
    assert f.status is WARN and "aggregate warn limit 100" in f.message


def test_corrected_not_reported_skips():
    snap = snapshot(gpus=[h100(0, ecc_corrected_volatile=None, ecc_corrected_aggregate=None)])
    assert only(run("gpu.ecc.corrected", snap)).status is SKIP


# ----------------------------------------------------------------------------- gpu.retired_pages

def _volta(**changes):
    base = dict(name="Tesla V100-SXM2-32GB", retired_pages_sbe=0, retired_pages_dbe=0,
                retired_pages_pending=False, remap_correctable=None, remap_uncorrectable=None,
                remap_pending=None, remap_failure=None)
    base.update(changes)
    return snapshot(gpus=[h100(0, **base)])


def test_retired_pages_skipped_on_hopper():
    assert {f.status for f in run("gpu.retired_pages", snapshot())} == {SKIP}


def test_retired_pages_zero_passes():
    f = only(run("gpu.retired_pages", _volta()))
    assert f.status is PASS and f.metrics["retired_pages_total"] == 0


def test_retired_pages_pending_fails():
    f = only(run("gpu.retired_pages", _volta(retired_pages_dbe=1, retired_pages_pending=True)))
    assert f.status is FAIL and "pending" in f.message and "reset" in f.message


@pytest.mark.parametrize("sbe, dbe, status", [
    (3, 2, PASS), (10, 5, WARN), (40, 20, FAIL), (0, 64, FAIL), (14, 0, PASS),
])
def test_retired_pages_totals(sbe, dbe, status):
    f = only(run("gpu.retired_pages", _volta(retired_pages_sbe=sbe, retired_pages_dbe=dbe)))
    assert f.status is status
    assert f.metrics["retired_pages_total"] == sbe + dbe


def test_retired_pages_override():
    snap = _volta(retired_pages_sbe=3, retired_pages_dbe=0)
    assert only(run("gpu.retired_pages", snap, warn_total=1)).status is WARN
    assert only(run("gpu.retired_pages", snap, fail_total=3)).status is FAIL


# -------------------------------------------------------------------------------- gpu.row_remap

def test_row_remap_clean_passes():
    f = run("gpu.row_remap", snapshot())[0]
    assert f.status is PASS
    assert f.metrics == {"remap_correctable": 0.0, "remap_uncorrectable": 0.0,
                         "remap_pending": 0.0, "remap_failure": 0.0}


def test_row_remap_pending_fails():
    # the A100 case from the corpus: 1 correctable remap, pending
    snap = with_gpu(snapshot(), 3, remap_correctable=1, remap_pending=True)
    f = by_component(run("gpu.row_remap", snap))["gpu3"]
    assert f.status is FAIL and "pending, GPU reset required" in f.message


def test_row_remap_failure_fails_rma():
    snap = with_gpu(snapshot(), 3, remap_uncorrectable=9, remap_failure=True)
    f = by_component(run("gpu.row_remap", snap))["gpu3"]
    assert f.status is FAIL and "RMA" in f.message and "uncorrectable 9" in f.message


def test_row_remap_some_uncorrectable_pass_with_metric():
    snap = with_gpu(snapshot(), 3, remap_uncorrectable=4)
    f = by_component(run("gpu.row_remap", snap))["gpu3"]
    assert f.status is PASS and f.metrics["remap_uncorrectable"] == 4


def test_row_remap_limits():
    snap = with_gpu(snapshot(), 3, remap_uncorrectable=512)
    assert by_component(run("gpu.row_remap", snap))["gpu3"].status is FAIL
    snap = with_gpu(snapshot(), 3, remap_uncorrectable=8)
    exp = Expectations(thresholds={"gpu.row_remap": {"warn_uncorrectable": 8}})
    assert by_component(run("gpu.row_remap", snap, exp))["gpu3"].status is WARN


def test_row_remap_not_supported_skips():
    snap = _volta()
    f = only(run("gpu.row_remap", snap))
    assert f.status is SKIP and f.message == "row remapping not reported"
