"""Every GPU check module registers its checks, documented, with sane specs; the healthy node passes."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.checks import registry
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import (
    THROTTLE_REASONS, GpuInfo, GpuProcess, HostInfo, KernelEvent, NvLink, Snapshot, Status,
)

from tests.checks.gpu_builders import run, snapshot

GPU_CHECKS = {
    "gpu_inventory": ("gpu.count", "gpu.lost", "gpu.reset_required", "gpu.fabric", "gpu.persistence"),
    "gpu_ecc": ("gpu.ecc.mode", "gpu.ecc.uncorrected", "gpu.ecc.corrected", "gpu.retired_pages",
                "gpu.row_remap"),
    "gpu_xid": ("gpu.xid",),
    "gpu_nvlink": ("gpu.nvlink.state", "gpu.nvlink.errors"),
    "gpu_pcie": ("gpu.pcie.link", "gpu.pcie.replays"),
    "gpu_thermal": ("gpu.temperature", "gpu.throttle", "gpu.power"),
    "gpu_usage": ("gpu.processes", "gpu.memory_used"),
}
ALL = [(module, name) for module, names in GPU_CHECKS.items() for name in names]


@pytest.mark.parametrize("module, name", ALL)
def test_registered_with_description(module, name):
    spec = registry.load_all()[name]
    assert spec.func.__module__ == f"healthcheck.checks.{module}"
    assert len(spec.description) > 20
    assert spec.contexts and spec.contexts <= set(registry.CONTEXTS)
    assert "check" in spec.contexts
    json.dumps(spec.thresholds)  # threshold defaults are plain config data


@pytest.mark.parametrize("module, name", ALL)
def test_healthy_h100_node_has_no_problem(module, name):
    exp = Expectations(gpu_count=8, gpu_model="H100", nvlinks_per_gpu=18)
    findings = run(name, snapshot(), exp)
    assert findings
    assert all(f.status in (Status.PASS, Status.SKIP) for f in findings), findings


@pytest.mark.parametrize("module, name", ALL)
def test_findings_survive_json_and_snapshot_roundtrip(module, name):
    snap = Snapshot.from_dict(json.loads(json.dumps(snapshot().to_dict())))
    for f in run(name, snap):
        json.dumps(f.to_dict())


@pytest.mark.parametrize("module, name", ALL)
def test_all_gpus_lost_or_none(module, name):
    base = snapshot()
    lost = dataclasses.replace(base, gpus=[dataclasses.replace(g, lost=True) for g in base.gpus])
    for snap in (lost, snapshot(gpus=[])):
        findings = run(name, snap)
        assert findings
        if name not in ("gpu.lost", "gpu.count", "gpu.xid"):
            assert [f.status for f in findings] == [Status.SKIP]


def test_fast_checks_run_in_prolog():
    specs = registry.load_all()
    for _, name in ALL:
        if name not in ("gpu.processes", "gpu.memory_used"):
            assert specs[name].contexts == set(registry.CONTEXTS), name


# ------------------------------------------------------------------ property: checks never raise

_count = st.none() | st.integers(min_value=0, max_value=10**7)
_temp = st.none() | st.floats(min_value=-20, max_value=130, allow_nan=False)
_flag = st.none() | st.booleans()
_links = st.none() | st.lists(st.builds(NvLink, link=st.integers(0, 17), active=_flag,
                                        replay_errors=_count, recovery_errors=_count,
                                        crc_flit_errors=_count, crc_data_errors=_count), max_size=4)
_gpu = st.builds(
    GpuInfo,
    index=st.integers(0, 7),
    pci_bus_id=st.none() | st.sampled_from(["0000:18:00.0", "0000:2a:00.0", "junk"]),
    name=st.none() | st.sampled_from(["NVIDIA H100 80GB HBM3", "NVIDIA RTX A2000", ""]),
    lost=st.booleans(), error=st.none() | st.text(max_size=10),
    ecc_mode_current=_flag, ecc_mode_pending=_flag,
    ecc_corrected_volatile=_count, ecc_uncorrected_volatile=_count,
    ecc_corrected_aggregate=_count, ecc_uncorrected_aggregate=_count,
    retired_pages_sbe=_count, retired_pages_dbe=_count, retired_pages_pending=_flag,
    remap_correctable=_count, remap_uncorrectable=_count, remap_pending=_flag, remap_failure=_flag,
    temperature_c=_temp, temp_slowdown_c=_temp, temp_shutdown_c=_temp, temp_max_operating_c=_temp,
    mem_temperature_c=_temp, mem_temp_max_c=_temp,
    throttle_reasons=st.none() | st.lists(st.sampled_from(THROTTLE_REASONS + ("odd",)), max_size=3),
    power_draw_w=_temp, power_limit_w=_temp,
    pcie_gen_current=st.none() | st.integers(0, 6), pcie_gen_max=st.none() | st.integers(0, 6),
    pcie_width_current=st.none() | st.integers(0, 32), pcie_width_max=st.none() | st.integers(0, 32),
    pcie_replay_count=_count, nvlinks=_links, persistence_mode=_flag,
    processes=st.none() | st.lists(st.builds(GpuProcess, pid=st.integers(0, 99),
                                             name=st.none() | st.text(max_size=8)), max_size=3),
    memory_used_mib=_temp, memory_total_mib=_temp,
    fabric_state=st.none() | st.sampled_from(["not_supported", "not_started", "in_progress",
                                              "completed", "weird"]),
    fabric_status=st.none() | st.text(max_size=8),
    reset_required=_flag, recovery_action=st.none() | st.text(max_size=8),
)
_event = st.builds(KernelEvent, kind=st.sampled_from(["xid", "fallen_off_bus", "rm_init_failed", "x"]),
                   pci_bus_id=st.none() | st.sampled_from(["0000:18:00.0", "07:00.0", "zz"]),
                   xid=st.none() | st.integers(0, 200), uptime_s=_temp,
                   time=st.none() | st.sampled_from(["2024-05-01T11:00:00", "bad", "2024-05-01T11Z"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.none() | st.lists(_gpu, max_size=4), events=st.none() | st.lists(_event, max_size=4),
       pci=st.none() | st.lists(st.sampled_from(["0000:18:00.0", "0000:c1:00.0"]), max_size=2),
       uptime=_temp, expected=st.none() | st.integers(0, 8), links=st.none() | st.integers(0, 18))
def test_checks_never_raise(gpus, events, pci, uptime, expected, links):
    snap = dataclasses.replace(snapshot(), gpus=gpus, kernel_events=events, gpu_pci_devices=pci,
                               host=HostInfo(uptime_s=uptime))
    exp = Expectations(gpu_count=expected, gpu_model="H100", nvlinks_per_gpu=links)
    specs = registry.load_all()
    for _, name in ALL:
        spec = specs[name]
        if not spec.handles_missing and any(getattr(snap, s) is None for s in spec.needs):
            continue  # the runner SKIPs these
        for f in run(name, snap, exp):
            assert f.status in set(Status)
            assert all(isinstance(v, float) for v in f.metrics.values())
