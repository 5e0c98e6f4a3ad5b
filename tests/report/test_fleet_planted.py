"""The planted faults of a simulated 1,000-node, 90-day fleet (benchmarks/fleet_sim.py) are the top findings of
the report's ranking, and no unplanted node is among them: a slowly heating GPU, a node whose GEMM dropped 5 %, a
flapping InfiniBand port, a rack-wide PCIe downgrade, amid realistic noise (one-off Xids, single slow burn-in
runs, temperature spikes, a few full disks, version drift)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from healthcheck.analysis.fleetrank import rank_fleet
from healthcheck.analysis.fleetviews import fleet_tables, shared_causes
from healthcheck.report import build_report
from healthcheck.report.summary import summarize_frames

SIM_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_sim.py"


def _fleet_sim():
    spec = importlib.util.spec_from_file_location("fleet_sim", SIM_PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fleet_sim", mod)  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return sys.modules["fleet_sim"]


@pytest.fixture(scope="module")
def sim():
    return _fleet_sim().simulate(nodes=1000, days=90, seed=0)


@pytest.fixture(scope="module")
def report(sim):
    summary = summarize_frames(sim.frames, sim.since, sim.now, recent=5)
    return build_report(summary, sim.since, sim.now, gpu_model=sim.gpu_model, topology=sim.topology)


def test_the_planted_faults_are_the_top_findings_of_the_report(sim, report):
    planted = sim.planted
    assert len(planted) == 35  # 1 + 1 + 1 + a rack of 32
    top = [r.node for r in report.risks[:len(planted)]]
    assert set(top) == planted
    assert not [r.node for r in report.risks[:len(planted)] if r.node not in planted]
    # and the next ones are far behind: noise ranks below every planted fault with a margin
    lowest_planted = min(r.score for r in report.risks[:len(planted)])
    assert all(r.score < lowest_planted / 2 for r in report.risks[len(planted):])


def test_each_planted_fault_is_explained(sim, report):
    by = {r.node: r for r in report.risks}
    heat = by[sim.truth["heating"][0]]
    assert any(e.startswith("FAIL temperature_c [gpu3]") and "at or above 89" in e for e in heat.evidence)
    gemm = by[sim.truth["gemm_drop"][0]]
    assert sum("regression gemm_tflops" in e and "since 2026-05-0" in e for e in gemm.evidence) >= 6
    flap = by[sim.truth["flapping_ib"][0]]
    assert any(e.startswith("flapping:") for e in flap.evidence)
    assert any(e.startswith("growth link_downed [mlx5_2/1]") for e in flap.evidence)
    rack = [by[n] for n in sim.truth["pcie_rack"]]
    assert all(any("pcie_width" in e and "below 16" in e for e in r.evidence) for r in rack)


def test_the_analysis_on_the_full_frames_agrees(sim):
    f = sim.frames
    ranked = rank_fleet(metrics=f["metrics"], results=f["results"], runs=f["runs"], actions=f["actions"],
                        now=sim.now, gpu_model=sim.gpu_model, rack=sim.rack)
    assert set(ranked["node"].head(len(sim.planted))) == sim.planted
    top = ranked.set_index("node").loc[sim.truth["heating"][0]]
    floor = next(w for w in top["why"] if w["kind"] == "floor")
    assert floor["metric"] == "temperature_c" and floor["value"] >= 89 and floor["hits"] == floor["runs"] == 5
    # the rack-wide downgrade is one cause of one rack, and nothing else is shared by a rack
    shared = shared_causes(ranked, sim.rack)
    assert set(shared["group"]) == {"r002"} and set(shared["subject"]) == {"pcie_width", "gpu.pcie.link"}
    assert shared.iloc[0]["text"].endswith("on 32 of 32 nodes")


def test_the_fleet_tables_of_the_simulation(sim):
    f = sim.frames
    tabs = fleet_tables(metrics=f["metrics"], results=f["results"], runs=f["runs"], actions=f["actions"],
                        versions=sim.versions, now=sim.now)
    assert set(tabs["regressions"]["node"]) == set(sim.truth["gemm_drop"])
    assert set(tabs["new_nodes"]["node"]) == set(sim.new_nodes)
    assert tabs["mtbf_check"].set_index("key").loc["gpu.pcie.link", "nodes"] == 32
    assert set(tabs["drift"]["node"]) == {"gpu00011", "gpu00040", "gpu00041", "gpu00042", "gpu00290"}
