"""pcie.hca.link: HCA links at their own maximum and at the node class' expected gen/width."""
from __future__ import annotations

from healthcheck.checks import registry
from healthcheck.checks.pcie import pcie_hca_link
from healthcheck.core.expectations import Expectations, PcieExpect
from healthcheck.core.model import PcieLink, Snapshot, Status
from healthcheck.probes.pcie import probe_pcie_links
from tests.fixtures.sysfs_builder import HCA_ADDRS, SysfsFaults, build_sysfs


def _hca(addr="0000:1a:00.0", *, cur=32.0, mx=32.0, w=16, wmax=16, name="mlx5_0") -> PcieLink:
    return PcieLink(addr, "hca", "0x15b3", "0x1021", cur, mx, w, wmax, name)


def _snap(links) -> Snapshot:
    return Snapshot(node="gpu01", taken_at="2025-01-01T00:00:00Z", pcie_links=links)


def _by(findings):
    return {f.component: f for f in findings}


def test_healthy_hca_passes_with_metrics():
    [f] = pcie_hca_link(_snap([_hca()]), Expectations(), {})
    assert f.status is Status.PASS and f.component == "mlx5_0"
    assert f.message == "gen5 x16 at 0000:1a:00.0"
    assert f.metrics == {"gen_current": 5.0, "gen_max": 5.0, "width_current": 16.0, "width_max": 16.0,
                         "speed_current_gts": 32.0}


def test_width_and_speed_below_own_max_fail():
    links = [_hca(w=8), _hca("0000:3c:00.0", cur=16.0, name="mlx5_1"),
             _hca("0000:4d:00.0", cur=2.5, w=1, name=None)]
    out = _by(pcie_hca_link(_snap(links), Expectations(), {}))
    assert out["mlx5_0"].status is Status.FAIL and "width x8 of x16" in out["mlx5_0"].message
    assert out["mlx5_1"].status is Status.FAIL and "gen4 (16 GT/s) of gen5 (32 GT/s)" in out["mlx5_1"].message
    # No infiniband name known: the PCI address is the component.
    assert out["0000:4d:00.0"].status is Status.FAIL
    assert "width x1" in out["0000:4d:00.0"].message and "gen1" in out["0000:4d:00.0"].message


def test_expectation_by_kind_and_address():
    # A gen4 card at its own maximum in a node class that expects gen5 x16.
    gen4 = _hca(cur=16.0, mx=16.0)
    exp = Expectations(pcie_by_kind={"hca": PcieExpect(gen=5, width=16)})
    [f] = pcie_hca_link(_snap([gen4]), exp, {})
    assert f.status is Status.FAIL and "gen4 below expected gen5" in f.message
    # Per-address expectation wins over the kind's (unnormalised key spelling accepted).
    exp = Expectations(pcie_by_kind={"hca": PcieExpect(gen=5, width=16)},
                       pcie_by_address={"1a:00.0": PcieExpect(gen=4, width=16)})
    assert pcie_hca_link(_snap([gen4]), exp, {})[0].status is Status.PASS
    narrow = _hca(w=8, wmax=8)
    exp = Expectations(pcie_by_kind={"hca": PcieExpect(width=16)})
    [f] = pcie_hca_link(_snap([narrow]), exp, {})
    assert f.status is Status.FAIL and "x8 below expected x16" in f.message


def test_unknown_values():
    [f] = pcie_hca_link(_snap([_hca(cur=None, mx=None, w=None, wmax=None)]), Expectations(), {})
    assert f.status is Status.ERROR
    # Speed unknown but width fine: judge what is known.
    [f] = pcie_hca_link(_snap([_hca(cur=None)]), Expectations(), {})
    assert f.status is Status.PASS


def test_gpus_are_not_judged_here():
    gpu = PcieLink("0000:1b:00.0", "gpu", "0x10de", "0x2330", 2.5, 32.0, 16, 16)
    assert pcie_hca_link(_snap([gpu]), Expectations(), {})[0].status is Status.SKIP
    assert pcie_hca_link(_snap([]), Expectations(), {})[0].status is Status.SKIP


def test_end_to_end_over_fixture_tree(tmp_path):
    faults = SysfsFaults(hca_gen_downgraded=frozenset({2}), hca_width_x8=frozenset({6}),
                         gpu_width_x8=frozenset({0}), gpu_speed_gen1=frozenset({1}))
    build_sysfs(tmp_path, eth_ports=2, faults=faults)
    out = _by(pcie_hca_link(_snap(probe_pcie_links(str(tmp_path))), Expectations(), {}))
    assert len(out) == 10  # 8 CX-7 + 2 Ethernet functions; GPU faults are not this check's business
    assert {c for c, f in out.items() if f.status is Status.FAIL} == {"mlx5_2", "mlx5_6"}
    assert HCA_ADDRS[2] in out["mlx5_2"].message
    exp = Expectations(pcie_by_kind={"hca": PcieExpect(gen=5, width=16)})
    out = _by(pcie_hca_link(_snap(probe_pcie_links(str(tmp_path))), exp, {}))
    # The gen4 Ethernet NICs fall below a kind-wide gen5 expectation; per-address overrides exist for that.
    assert {c for c, f in out.items() if f.status is Status.FAIL} == {"mlx5_2", "mlx5_6", "mlx5_8", "mlx5_9"}


def test_registered():
    spec = registry._REGISTRY["pcie.hca.link"]
    # a cheap sysfs read: in the prolog and epilog too (issue 21)
    assert spec.needs == ("pcie_links",) and spec.contexts == frozenset(registry.CONTEXTS)
