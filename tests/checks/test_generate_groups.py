"""`config generate` on a node with two GPU models and two PCIe generations: one expectation per
model group and per PCI address where devices of a kind differ, so the node passes its own file
(issue 14, item 1, the GPU half)."""
from __future__ import annotations

import pytest

from healthcheck.config import loads
from healthcheck.core.expectations import GpuModelExpect, PcieExpect
from healthcheck.config.generate import expectations_of, generate_toml
from healthcheck.core.model import GpuInfo, NvLink, PcieLink, Snapshot, Status
from healthcheck.pipeline.judge import judge

H100, L4 = "NVIDIA H100 80GB HBM3", "NVIDIA L4"
GPU_CHECKS = ["gpu.count", "gpu.nvlink.state", "gpu.pcie.link", "pcie.hca.link"]


def _addr(i: int) -> str:
    return f"0000:{0x18 + i:02x}:00.0"


def _node() -> Snapshot:
    """Eight H100 SXM (Gen5, 18 NVLinks) and two L4 (Gen4, no NVLink); HCAs of two generations."""
    gpus = [GpuInfo(i, _addr(i), name=H100, nvlinks=[NvLink(n, True) for n in range(18)], pcie_gen_current=5,
                    pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16) for i in range(8)]
    gpus += [GpuInfo(i, _addr(i), name=L4, nvlinks=[], pcie_gen_current=4, pcie_gen_max=4,
                     pcie_width_current=16, pcie_width_max=16) for i in (8, 9)]
    links = [PcieLink(g.pci_bus_id, "gpu", speed_current_gts=32.0 if g.name == H100 else 16.0,
                      speed_max_gts=32.0 if g.name == H100 else 16.0, width_current=16, width_max=16)
             for g in gpus]
    links += [PcieLink("0000:3a:00.0", "hca", speed_current_gts=32.0, speed_max_gts=32.0, width_current=16,
                       width_max=16, name="mlx5_0"),
              PcieLink("0000:3b:00.0", "hca", speed_current_gts=16.0, speed_max_gts=16.0, width_current=8,
                       width_max=8, name="mlx5_1")]
    return Snapshot(node="gpu01", taken_at="2026-12-01T00:00:00Z", gpus=gpus, pcie_links=links,
                    gpu_pci_devices=[g.pci_bus_id for g in gpus])


def _exp(snap: Snapshot):
    return loads(generate_toml(snap, "mixed", "gpu[01-99]"), "generated.toml").expectations_for("gpu01")


def _fails(snap, exp) -> set[tuple[str, str | None]]:
    return {(f.check, f.component) for f in judge(snap, exp, only=GPU_CHECKS).findings
            if f.status is Status.FAIL}


def test_mixed_node_records_model_groups_and_addresses():
    s = expectations_of(_node())
    assert "gpu_model" not in s and s["gpu_count"] == 10
    assert s["gpu_models"] == {H100: {"count": 8, "nvlinks": 18}, L4: {"count": 2, "nvlinks": 0}}
    assert "nvlinks_per_gpu" not in s  # 18 on one model, 0 on the other
    assert "gpu" not in s["pcie"] and s["pcie"][_addr(8)] == {"gen": 4, "width": 16}
    assert s["pcie"]["0000:3b:00.0"] == {"gen": 4, "width": 8}
    exp = _exp(_node())
    assert exp.gpu_models == {H100: GpuModelExpect(8, 18), L4: GpuModelExpect(2, 0)}
    assert exp.pcie_by_address[_addr(0)] == PcieExpect(5, 16)


def test_mixed_node_passes_its_own_expectations():
    assert _fails(_node(), _exp(_node())) == set()


def test_single_model_node_keeps_the_node_wide_keys():
    snap = _node()
    snap.gpus = snap.gpus[:8]
    snap.pcie_links = [p for p in snap.pcie_links if p.pci_bus_id not in (_addr(8), _addr(9))]
    s = expectations_of(snap)
    assert (s["gpu_model"], s["gpu_count"], s["nvlinks_per_gpu"]) == (H100, 8, 18)
    assert "gpu_models" not in s and s["pcie"]["gpu"] == {"gen": 5, "width": 16}


@pytest.mark.parametrize("change, check, component", [
    (lambda s: s.gpus.pop(2), "gpu.count", None),  # a GPU the driver no longer sees
    (lambda s: setattr(s.gpus[9], "pcie_width_current", 8), "gpu.pcie.link", "gpu9"),  # an L4 at x8
    (lambda s: setattr(s.gpus[0], "pcie_gen_max", 4), "gpu.pcie.link", "gpu0"),  # an H100 in a Gen4 slot
    (lambda s: setattr(s.pcie_links[11], "speed_current_gts", 8.0), "pcie.hca.link", "mlx5_1"),
])
def test_mixed_node_sibling_that_differs_fails(change, check, component):
    exp = _exp(_node())
    sibling = _node()
    change(sibling)
    assert (check, component) in _fails(sibling, exp)


def test_swapped_gpu_model_fails_by_model_group():
    exp = _exp(_node())
    sibling = _node()
    sibling.gpus[9].name = "NVIDIA A10"
    assert any(check == "gpu.count" for check, _ in _fails(sibling, exp))


def test_a_model_group_short_of_a_gpu_fails_and_nvlinks_are_judged_per_model():
    exp = _exp(_node())
    sibling = _node()
    sibling.gpus = sibling.gpus[:-1]  # one GPU of the last model gone
    assert any(check == "gpu.count" for check, _ in _fails(sibling, exp))
    assert exp.nvlinks_per_gpu is None and exp.gpu_models["NVIDIA H100 80GB HBM3"].nvlinks == 18
    nv = _node()
    first = next(g for g in nv.gpus if g.nvlinks)
    first.nvlinks = first.nvlinks[:-1]
    assert ("gpu.nvlink.state", first.component) in _fails(nv, exp)
