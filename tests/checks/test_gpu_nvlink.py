"""gpu.nvlink.state, gpu.nvlink.errors."""
from __future__ import annotations

import dataclasses

from healthcheck.core.expectations import Expectations
from healthcheck.core.model import NvLink, Status

from tests.checks.gpu_builders import by_component, h100, nvlinks, only, run, snapshot, with_gpu

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


def _links_with(index_changes: dict[int, dict]) -> list[NvLink]:
    return [dataclasses.replace(link, **index_changes.get(link.link, {})) for link in nvlinks()]


# ------------------------------------------------------------------------------ gpu.nvlink.state

def test_all_active_passes_with_metrics():
    f = run("gpu.nvlink.state", snapshot(), Expectations(nvlinks_per_gpu=18))[0]
    assert f.status is PASS and f.message == "18 of 18 NVLinks active"
    assert f.metrics == {"nvlinks_active": 18.0, "nvlinks_total": 18.0}


def test_inactive_links_named():
    snap = with_gpu(snapshot(), 2, nvlinks=_links_with({3: {"active": False}, 7: {"active": False}}))
    f = by_component(run("gpu.nvlink.state", snap))["gpu2"]
    assert f.status is FAIL
    assert f.message == "NVLink 3, 7 inactive (16 of 18 active)"


def test_fewer_links_than_expected():
    snap = with_gpu(snapshot(), 0, nvlinks=nvlinks(12))
    f = by_component(run("gpu.nvlink.state", snap, Expectations(nvlinks_per_gpu=18)))["gpu0"]
    assert f.status is FAIL and "12 active NVLinks, expected 18" in f.message
    # without an expectation 12 healthy links are fine
    assert by_component(run("gpu.nvlink.state", snap))["gpu0"].status is PASS


def test_unknown_link_state_noted_not_failed():
    snap = with_gpu(snapshot(), 0, nvlinks=_links_with({5: {"active": None}}))
    f = by_component(run("gpu.nvlink.state", snap))["gpu0"]
    assert f.status is PASS and "link 5 unknown" in f.message
    f = by_component(run("gpu.nvlink.state", snap, Expectations(nvlinks_per_gpu=18)))["gpu0"]
    assert f.status is FAIL


def test_nvlink_none_or_empty():
    pcie_gpu = snapshot(gpus=[h100(0, name="NVIDIA H100 PCIe", nvlinks=None)])
    assert only(run("gpu.nvlink.state", pcie_gpu)).status is SKIP
    assert only(run("gpu.nvlink.state", pcie_gpu, Expectations(nvlinks_per_gpu=18))).status is SKIP
    empty = snapshot(gpus=[h100(0, nvlinks=[])])
    assert only(run("gpu.nvlink.state", empty)).status is SKIP
    assert only(run("gpu.nvlink.state", empty, Expectations(nvlinks_per_gpu=4))).status is FAIL


def test_nvlink_state_lost_gpu_skipped():
    snap = with_gpu(snapshot(), 1, lost=True, nvlinks=None)
    found = by_component(run("gpu.nvlink.state", snap))
    assert "gpu1" not in found and len(found) == 7


# ----------------------------------------------------------------------------- gpu.nvlink.errors

def test_errors_zero_pass_with_sums():
    f = run("gpu.nvlink.errors", snapshot())[0]
    assert f.status is PASS and f.message == "NVLink errors: CRC 0, replay 0, recovery 0"
    assert f.metrics == {"nvlink_crc_errors": 0.0, "nvlink_replay_errors": 0.0,
                         "nvlink_recovery_errors": 0.0}


def test_one_recovery_warns():
    snap = with_gpu(snapshot(), 4, nvlinks=_links_with({9: {"recovery_errors": 1}}))
    f = by_component(run("gpu.nvlink.errors", snap))["gpu4"]
    assert f.status is WARN and "recovery 1" in f.message and "recovery warn limit 0" in f.message


def test_crc_sums_flit_and_data_over_links():
    snap = with_gpu(snapshot(), 4, nvlinks=_links_with({1: {"crc_flit_errors": 6000},
                                                        2: {"crc_data_errors": 4001}}))
    f = by_component(run("gpu.nvlink.errors", snap))["gpu4"]
    assert f.metrics["nvlink_crc_errors"] == 10001 and f.status is WARN


def test_below_warn_passes_and_fail_override():
    snap = with_gpu(snapshot(), 4, nvlinks=_links_with({1: {"replay_errors": 500}}))
    assert by_component(run("gpu.nvlink.errors", snap))["gpu4"].status is PASS
    exp = Expectations(thresholds={"gpu.nvlink.errors": {"replay_fail": 100}})
    f = by_component(run("gpu.nvlink.errors", snap, exp))["gpu4"]
    assert f.status is FAIL and "replay limit 100" in f.message


def test_counters_not_reported():
    none_counters = [NvLink(link=i, active=True) for i in range(4)]
    snap = snapshot(gpus=[h100(0, nvlinks=none_counters), h100(1, nvlinks=None)])
    found = by_component(run("gpu.nvlink.errors", snap))
    assert found["gpu0"].status is SKIP and found["gpu1"].status is SKIP


def test_partial_counters_judged():
    links = [NvLink(link=0, active=True, recovery_errors=2)]
    f = only(run("gpu.nvlink.errors", snapshot(gpus=[h100(0, nvlinks=links)])))
    assert f.status is WARN and "CRC n/a" in f.message
    assert f.metrics == {"nvlink_recovery_errors": 2.0}
