"""gpu.count, gpu.lost, gpu.reset_required, gpu.fabric, gpu.persistence."""
from __future__ import annotations

import dataclasses

from healthcheck.core.expectations import Expectations
from healthcheck.core.model import ProbeError, Status

from tests.checks.gpu_builders import (
    H100_BUS_IDS, by_component, h100, only, run, snapshot, statuses, with_gpu,
)

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


# ------------------------------------------------------------------------------------ gpu.count

def test_count_pass_with_expectation():
    f = only(run("gpu.count", snapshot(), Expectations(gpu_count=8)))
    assert f.status is PASS
    assert f.metrics == {"count": 8.0, "expected": 8.0, "pci_count": 8.0}


def test_count_pass_without_expectation():
    f = only(run("gpu.count", snapshot()))
    assert f.status is PASS and f.metrics["count"] == 8


def test_count_fewer_than_expected_fails():
    snap = snapshot(gpus=[h100(i) for i in range(7)], gpu_pci_devices=list(H100_BUS_IDS[:7]))
    f = only(run("gpu.count", snap, Expectations(gpu_count=8)))
    assert f.status is FAIL
    assert "driver sees 7 GPUs, expected 8" in f.message


def test_count_lost_gpu_does_not_count():
    snap = with_gpu(snapshot(), 3, lost=True, error="GPU is lost")
    f = only(run("gpu.count", snap, Expectations(gpu_count=8)))
    assert f.status is FAIL
    assert "7 GPUs (1 lost), expected 8" in f.message


def test_count_pci_bus_shows_gpu_the_driver_misses():
    gpus = [h100(i) for i in range(8) if i != 5]
    snap = snapshot(gpus=gpus, gpu_pci_devices=["00000000:AB:00.0"] + [g.pci_bus_id for g in gpus])
    f = only(run("gpu.count", snap))  # no expectation needed
    assert f.status is FAIL
    assert "missing: 0000:ab:00.0" in f.message
    assert f.metrics["pci_count"] == 8 and f.metrics["count"] == 7


def test_count_pci_compare_by_number_when_driver_lacks_addresses():
    gpus = [h100(i, pci_bus_id=None) for i in range(7)]
    snap = snapshot(gpus=gpus, gpu_pci_devices=list(H100_BUS_IDS))
    f = only(run("gpu.count", snap))
    assert f.status is FAIL
    assert "PCI bus shows 8 NVIDIA GPUs, driver reports 7" in f.message


def test_count_expected_but_no_gpu_data():
    snap = snapshot(default_gpus=False, gpu_pci_devices=None)
    f = only(run("gpu.count", snap, Expectations(gpu_count=8)))
    assert f.status is FAIL and "expected 8 GPUs" in f.message


def test_count_gpus_on_bus_but_no_driver_data():
    snap = snapshot(default_gpus=False, gpu_pci_devices=list(H100_BUS_IDS[:2]))
    f = only(run("gpu.count", snap))
    assert f.status is FAIL
    assert "0000:18:00.0, 0000:2a:00.0" in f.message


def test_count_probe_error_left_to_gpu_responsive():
    snap = snapshot(default_gpus=False, probe_errors={"gpus": ProbeError("hang", "nvmlInit")})
    assert only(run("gpu.count", snap, Expectations(gpu_count=8))).status is SKIP


def test_count_no_gpu_no_expectation_skips():
    for snap in (snapshot(default_gpus=False, gpu_pci_devices=None), snapshot(gpus=[])):
        f = only(run("gpu.count", snap))
        assert f.status is SKIP and f.message == "no NVIDIA GPU"


def test_count_zero_expected_zero_found_passes():
    assert only(run("gpu.count", snapshot(gpus=[]), Expectations(gpu_count=0))).status is PASS


def test_count_empty_list_but_expected_fails():
    f = only(run("gpu.count", snapshot(gpus=[]), Expectations(gpu_count=4)))
    assert f.status is FAIL and "driver sees 0 GPUs, expected 4" in f.message


def test_count_wrong_model():
    snap = with_gpu(snapshot(), 2, name="NVIDIA A100-SXM4-80GB")
    found = by_component(run("gpu.count", snap, Expectations(gpu_count=8, gpu_model="h100")))
    assert found[None].status is PASS
    assert found["gpu2"].status is FAIL
    assert "'NVIDIA A100-SXM4-80GB', expected 'h100'" in found["gpu2"].message
    assert len(found) == 2


# ------------------------------------------------------------------------------------- gpu.lost

def test_lost_pass_per_gpu():
    found = statuses(run("gpu.lost", snapshot()))
    assert found == {f"gpu{i}": PASS for i in range(8)}


def test_lost_fails_with_pci_and_error():
    err = "Unable to determine the device handle for GPU 0000:5d:00.0: Unknown Error"
    snap = with_gpu(snapshot(), 3, lost=True, error=err)
    found = by_component(run("gpu.lost", snap))
    assert found["gpu3"].status is FAIL
    assert found["gpu3"].message == f"GPU lost (0000:5d:00.0): {err}"
    assert all(found[f"gpu{i}"].status is PASS for i in (0, 1, 2, 4, 5, 6, 7))


def test_lost_without_address_or_error():
    snap = snapshot(gpus=[h100(0, lost=True, pci_bus_id=None)])
    assert only(run("gpu.lost", snap)).message == "GPU lost (unknown PCI address)"


def test_lost_empty_list_skips():
    assert only(run("gpu.lost", snapshot(gpus=[]))).status is SKIP


# ---------------------------------------------------------------------------- gpu.reset_required

def test_reset_required_pass():
    found = run("gpu.reset_required", snapshot())
    assert {f.status for f in found} == {PASS} and len(found) == 8
    assert found[0].metrics == {"reset_required": 0.0}


def test_reset_required_fail_names_action():
    snap = with_gpu(snapshot(), 1, reset_required=True, recovery_action="gpu_reset")
    f = by_component(run("gpu.reset_required", snap))["gpu1"]
    assert f.status is FAIL and f.message == "GPU needs reset (recovery action: gpu_reset)"
    snap = with_gpu(snapshot(), 1, reset_required=True, recovery_action="none")  # "Reset Required: Yes"
    assert by_component(run("gpu.reset_required", snap))["gpu1"].message == "GPU needs reset"


def test_reset_for_pending_remap_left_to_row_remap():
    snap = with_gpu(snapshot(), 2, reset_required=True, remap_pending=True, recovery_action="gpu_reset")
    f = by_component(run("gpu.reset_required", snap))["gpu2"]
    assert f.status is SKIP and "gpu.row_remap" in f.message
    assert by_component(run("gpu.row_remap", snap))["gpu2"].status is FAIL
    # ... unless the driver asks for more than a reset
    snap = with_gpu(snap, 2, recovery_action="node_reboot")
    f = by_component(run("gpu.reset_required", snap))["gpu2"]
    assert f.status is FAIL and "node_reboot" in f.message


def test_reset_required_none_skips_and_lost_gpu_not_judged():
    snap = with_gpu(with_gpu(snapshot(), 0, reset_required=None), 7, lost=True, reset_required=True)
    found = statuses(run("gpu.reset_required", snap))
    assert found["gpu0"] is SKIP
    assert "gpu7" not in found  # lost GPUs are gpu.lost's
    assert len(found) == 7


def test_reset_required_all_lost_skips_once():
    snap = snapshot(gpus=[h100(0, lost=True), h100(1, lost=True)])
    f = only(run("gpu.reset_required", snap))
    assert f.status is SKIP and "all lost" in f.message


# ----------------------------------------------------------------------------------- gpu.fabric

def test_fabric_completed_success_passes():
    assert {f.status for f in run("gpu.fabric", snapshot())} == {PASS}


def test_fabric_in_progress_fails_with_802():
    snap = with_gpu(snapshot(), 4, fabric_state="in_progress", fabric_status=None)
    f = by_component(run("gpu.fabric", snap))["gpu4"]
    assert f.status is FAIL and "error 802" in f.message and "in_progress" in f.message


def test_fabric_not_started_fails():
    snap = with_gpu(snapshot(), 0, fabric_state="not_started", fabric_status="N/A")
    assert by_component(run("gpu.fabric", snap))["gpu0"].status is FAIL


def test_fabric_completed_with_error_status_fails():
    snap = with_gpu(snapshot(), 0, fabric_status="NVML_ERROR_TIMEOUT")
    f = by_component(run("gpu.fabric", snap))["gpu0"]
    assert f.status is FAIL and "NVML_ERROR_TIMEOUT" in f.message


def test_fabric_not_supported_or_none_skips():
    for state in ("not_supported", None):
        snap = with_gpu(snapshot(), 0, fabric_state=state, fabric_status=None)
        assert by_component(run("gpu.fabric", snap))["gpu0"].status is SKIP


def test_fabric_completed_without_status_passes():
    snap = with_gpu(snapshot(), 0, fabric_status=None)
    assert by_component(run("gpu.fabric", snap))["gpu0"].status is PASS


# ------------------------------------------------------------------------------ gpu.persistence

def test_persistence_on_passes_off_warns():
    snap = with_gpu(snapshot(), 6, persistence_mode=False)
    found = by_component(run("gpu.persistence", snap))
    assert found["gpu6"].status is WARN and found["gpu6"].message == "persistence mode off"
    assert found["gpu0"].status is PASS and found["gpu0"].metrics == {"persistence_mode": 1.0}


def test_persistence_required_by_config_fails():
    snap = with_gpu(snapshot(), 6, persistence_mode=False)
    exp = Expectations(thresholds={"gpu.persistence": {"require": True}})
    assert by_component(run("gpu.persistence", snap, exp))["gpu6"].status is FAIL


def test_persistence_not_reported_skips():
    snap = snapshot(gpus=[dataclasses.replace(h100(0), persistence_mode=None)])
    f = only(run("gpu.persistence", snap))
    assert f.status is SKIP and f.message == "persistence mode not reported"
