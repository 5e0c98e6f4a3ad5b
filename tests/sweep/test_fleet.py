"""The sweep's fleet view: version drift across a class, and a rack that overheats reported once as a
facility issue (its nodes not drained one by one for it)."""
from __future__ import annotations

from healthcheck.config import loads
from healthcheck.core.model import Finding, Status
from healthcheck.sweep.decide import NodeResult, decide
from healthcheck.sweep.fleet import fleet_view
from healthcheck.sweep.settings import resolve

CONFIG = loads("""
[class.h100]
nodes = "n[1-6]"
[class.h100.versions]
driver = "550.*"
[topology.rack]
r01 = "n[1-4]"
r02 = "n[5-6]"
""", "site.toml")

HOT = {"check": "burnin.telemetry", "status": "fail", "component": "gpu2",
       "message": "gpu2: hw_thermal_slowdown active 40% of samples under load (max 91 C)"}


def record(node: str, driver: str, hot: bool, t: str = "2026-12-02T02:20:00+00:00") -> dict:
    results = [{"check": "burnin.gemm.verify", "status": "pass", "component": "gpu0", "message": "ok"}]
    if hot:
        results.append(HOT)
    return {"node": node, "run_id": f"r{node}", "started_at": t, "status": "fail" if hot else "pass",
            "results": results, "burnin": {"node_class": "h100", "versions": {"driver": driver, "cuda": "12.4"}}}


def test_drift_and_facility_from_sweep_records():
    records = {f"n{i}": record(f"n{i}", "550.54.15", hot=i in (1, 2, 3)) for i in range(1, 7)}
    records["n6"] = record("n6", "535.129.03", hot=False)
    view = fleet_view(records, CONFIG)
    assert len(view.drift) == 1 and "driver" in view.drift[0] and "n6" in view.drift[0]
    assert view.drift_fail == ["n6"]  # off the class's expected 550.* too
    (row,) = view.facility
    assert (row["level"], row["group"], row["kind"], row["n_nodes"], row["group_size"]) == ("rack", "r01", "thermal",
                                                                                              3, 4)
    assert view.facility_nodes == {"n1", "n2", "n3"}


def test_facility_nodes_are_not_drained_for_the_shared_heat_but_for_their_own_faults():
    hot = Finding("burnin.telemetry", Status.FAIL, HOT["message"], "gpu2")
    ecc = Finding("gpu.ecc.uncorrected", Status.FAIL, "uncorrected ECC", "gpu5")
    results = {"n1": NodeResult("n1", Status.FAIL, [hot]), "n2": NodeResult("n2", Status.FAIL, [hot, ecc]),
               "n5": NodeResult("n5", Status.FAIL, [hot])}
    d = decide(results, {}, 100, resolve({}), "a" * 32, facility={"n1", "n2"})
    acts = {a.node: a for a in d.actions}
    assert acts["n1"].action == "none" and "facility issue" in acts["n1"].why
    assert acts["n2"].action == "drain" and acts["n2"].checks == ["gpu.ecc.uncorrected"]
    assert acts["n5"].action == "drain" and acts["n5"].checks == ["burnin.telemetry"]  # alone in its rack


def test_no_topology_no_facility_and_no_versions_no_drift():
    records = {f"n{i}": {"node": f"n{i}", "results": [HOT], "started_at": "2026-12-02T02:20:00+00:00",
                         "burnin": {}} for i in range(1, 5)}
    view = fleet_view(records, loads("", "empty.toml"))
    assert view.drift == [] and view.facility == [] and view.facility_nodes == set()
