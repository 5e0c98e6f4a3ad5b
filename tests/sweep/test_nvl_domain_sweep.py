"""Issue 33.5 in the sweep: NVLink-fabric failures most trays of one declared NVLink domain share are the
domain's fault, named once (the fleet view, the log, the text), and its trays are neither drained for it
nor counted against the blast radius; a tray's own fault is judged as ever."""
from __future__ import annotations

from healthcheck.config import loads
from healthcheck.core.model import Finding, Status
from healthcheck.sweep.decide import NodeResult, decide
from healthcheck.sweep.fleet import fleet_view
from healthcheck.sweep.settings import resolve
from healthcheck.sweep.text import render

TRAYS = [f"gb{i:03d}" for i in range(1, 19)]
CONFIG = loads('[topology.nvlink]\nnvl01 = "gb[001-018]"\nnvl02 = "gb[019-036]"\n', "site.toml")
FABRIC = {"check": "gpu.fabric", "status": "fail", "component": "gpu0", "message": "fabric health summary Unhealthy"}


def record(node: str, *results: dict) -> dict:
    return {"node": node, "run_id": f"r{node}", "started_at": "2026-12-02T02:20:00+00:00",
            "status": "fail" if results else "pass", "burnin": {}, "results": list(results)}


def test_the_fleet_view_names_the_domain():
    records = {n: record(n, FABRIC) for n in TRAYS[:17]} | {"gb018": record("gb018"), "gb019": record("gb019", FABRIC)}
    (row,) = fleet_view(records, CONFIG).domain_faults
    assert (row["domain"], row["cause"], row["n_nodes"], row["domain_size"]) == ("nvl01", "gpu.fabric", 17, 18)
    assert row["text"].startswith("NVLink domain nvl01: gpu.fabric failing on 17 of 18 trays: a switch tray")
    assert fleet_view(records, loads("", "empty.toml")).domain_faults == []  # no domains declared


def test_the_domains_trays_are_not_drained_for_it_nor_counted_against_the_blast_radius():
    fabric = Finding("gpu.fabric", Status.FAIL, FABRIC["message"], "gpu0")
    ecc = Finding("gpu.ecc.uncorrected", Status.FAIL, "uncorrected ECC", "gpu2")
    results = {n: NodeResult(n, Status.FAIL, [fabric]) for n in TRAYS[:17]}
    results["gb005"] = NodeResult("gb005", Status.FAIL, [fabric, ecc])
    results["gb019"] = NodeResult("gb019", Status.FAIL, [fabric])  # the next rack's one tray: its own fault
    rows = fleet_view({n: record(n, FABRIC) for n in TRAYS[:17]}, CONFIG).domain_faults
    d = decide(results, {}, 36, resolve({"max_drain_fraction": 0.1}), "a" * 32, domain_faults=rows)
    acts = {a.node: a for a in d.actions}
    assert d.suspect == {}  # 17 rack-held failures do not make gpu.fabric a suspect check (cap 3)
    assert acts["gb001"].action == "none" and "shared with its NVLink domain" in acts["gb001"].why
    assert acts["gb005"].action == "drain" and acts["gb005"].checks == ["gpu.ecc.uncorrected"]
    assert acts["gb019"].action == "drain" and acts["gb019"].checks == ["gpu.fabric"]
    # without the domain rows: the old rule, gpu.fabric on 18 nodes is a suspect check, nothing drained for it
    old = decide(results, {}, 36, resolve({"max_drain_fraction": 0.1}), "a" * 32)
    assert "gpu.fabric" in old.suspect and {a.node for a in old.actions if a.action == "drain"} == {"gb005"}


def test_the_sweep_text_names_the_domain():
    class Outcome:
        def to_dict(self):
            return {"dry_run": False, "sweep_id": "s1", "plan": {"test": [], "over_budget": [], "skipped": {}},
                    "results": {}, "applied": [], "actions": [], "suspect": {}, "notes": [], "report": None,
                    "fleet": {"domain_faults": [{"text": "NVLink domain nvl01: gpu.fabric failing on 17 of 18 "
                                                         "trays: a switch tray or the backplane, not 17 node faults"}]}}
    assert "DOMAIN FAULT NVLink domain nvl01: gpu.fabric failing on 17 of 18 trays" in render(Outcome())


def test_a_domain_fault_is_a_shared_cause_exit():
    from healthcheck.sweep.plan import Plan
    from healthcheck.sweep.run import SweepOutcome

    out = SweepOutcome("s1", Plan(), results={"gb001": "fail"}, fleet={"domain_faults": [{"text": "t"}]})
    assert out.exit_code == 4  # suspect check or shared cause: not drained for it (docs/sweep.md)
    out.fleet = {"domain_faults": []}
    assert out.exit_code == 1
