"""Builders for GPU check tests: a healthy 8x H100 SXM node (values as nvidia-smi -q shows them on a
DGX H100-class node, driver 5xx), faults made with dataclasses.replace."""
from __future__ import annotations

from healthcheck.config import default_expectations

import dataclasses
from typing import Any

from healthcheck.checks import registry
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Finding, GpuInfo, HostInfo, KernelEvent, NvLink, Snapshot, Status

# PCI addresses of the eight SXM GPUs of a DGX H100-class board.
H100_BUS_IDS = (
    "0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
    "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0",
)
TAKEN_AT = "2024-05-01T12:00:00Z"
HOST_UPTIME_S = 86_400.0


def nvlinks(count: int = 18, **fields: Any) -> list[NvLink]:
    base = dict(active=True, speed_gbps=26.562, replay_errors=0, recovery_errors=0,
                crc_flit_errors=0, crc_data_errors=0)
    base.update(fields)
    return [NvLink(link=i, **base) for i in range(count)]


def h100(index: int = 0, **changes: Any) -> GpuInfo:
    gpu = GpuInfo(
        index=index,
        pci_bus_id=H100_BUS_IDS[index % len(H100_BUS_IDS)],
        uuid=f"GPU-6a1b2c3d-0000-1111-2222-3333444455{index:02d}",
        serial=f"165232306{index:04d}",
        name="NVIDIA H100 80GB HBM3",
        vbios="96.00.89.00.01",
        driver_version="550.90.07",
        cuda_driver_version="12.4",
        ecc_mode_current=True, ecc_mode_pending=True,
        ecc_corrected_volatile=0, ecc_uncorrected_volatile=0,
        ecc_corrected_aggregate=0, ecc_uncorrected_aggregate=0,
        # Hopper does not retire pages (N/A); it remaps rows.
        retired_pages_sbe=None, retired_pages_dbe=None, retired_pages_pending=None,
        remap_correctable=0, remap_uncorrectable=0, remap_pending=False, remap_failure=False,
        temperature_c=33.0, temp_slowdown_c=89.0, temp_shutdown_c=92.0, temp_max_operating_c=87.0,
        mem_temperature_c=41.0, mem_temp_max_c=95.0,
        throttle_reasons=["gpu_idle"],
        power_draw_w=72.02, power_limit_w=700.0,
        pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
        pcie_replay_count=0,
        nvlinks=nvlinks(),
        persistence_mode=True,
        processes=[],
        memory_used_mib=2.0, memory_total_mib=81559.0,
        fabric_state="completed", fabric_status="Success",
        reset_required=False, recovery_action="none",
        # Idle H100 with persistence mode: P0 at 0 %; 56 C below slowdown (89 - 33), as NVML reports.
        temp_tlimit_margin_c=56.0, performance_state="P0", utilization_gpu_pct=0.0,
    )
    return dataclasses.replace(gpu, **changes) if changes else gpu


def h100_node(count: int = 8) -> list[GpuInfo]:
    return [h100(i) for i in range(count)]


def snapshot(gpus: list[GpuInfo] | None = None, *, default_gpus: bool = True,
             **changes: Any) -> Snapshot:
    """A healthy 8x H100 node; pass gpus=... (or default_gpus=False for None) and any Snapshot field."""
    if gpus is None and default_gpus:
        gpus = h100_node()
    snap = Snapshot(
        node="gpu01", taken_at=TAKEN_AT, gpus=gpus, gpu_source="nvml",
        gpu_pci_devices=[g.pci_bus_id for g in gpus if g.pci_bus_id] if gpus is not None else None,
        kernel_events=[], host=HostInfo(hostname="gpu01", uptime_s=HOST_UPTIME_S),
    )
    return dataclasses.replace(snap, **changes) if changes else snap


def with_gpu(snap: Snapshot, index: int, **changes: Any) -> Snapshot:
    """The snapshot with GPU ``index`` changed."""
    gpus = [dataclasses.replace(g, **changes) if g.index == index else g for g in snap.gpus]
    return dataclasses.replace(snap, gpus=gpus)


def xid(number: int, pci: str | None = H100_BUS_IDS[0], **fields: Any) -> KernelEvent:
    return KernelEvent(kind="xid", pci_bus_id=pci, xid=number,
                       message=fields.pop("message", f"Xid {number}"), **fields)


def run(name: str, snap: Snapshot, exp: Expectations | None = None, **overrides: Any) -> list[Finding]:
    """Call check ``name`` as the runner would: defaults overlaid by exp.thresholds, then overrides."""
    spec = registry.load_all()[name]
    exp = exp or default_expectations()
    thresholds = exp.thresholds_for(name, spec.thresholds)
    thresholds.update(overrides)
    findings = spec.func(snap, exp, thresholds)
    for f in findings:
        assert f.check == name
        assert isinstance(f.status, Status)
        assert f.message
    return findings


def by_component(findings: list[Finding]) -> dict[str | None, Finding]:
    out = {f.component: f for f in findings}
    assert len(out) == len(findings), "one finding per component"
    return out


def statuses(findings: list[Finding]) -> dict[str | None, Status]:
    return {c: f.status for c, f in by_component(findings).items()}


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]
