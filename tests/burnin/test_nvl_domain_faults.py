"""Issue 33.5: a rack-level NVLink fault is blamed on the rack. In the burn-in's allocation step, FAILs of
the NVLink fabric shared by more than half of one declared domain's trays become one job finding naming
the domain (burnin.nvlink_domain), and the trays are not drained for it; a tray's own fault is."""
from __future__ import annotations

import json

from healthcheck.burnin import allocation
from healthcheck.burnin.nvldomain import CHECK, declared
from healthcheck.burnin.settings import resolve
from healthcheck.burnin.summary import allocation_text
from healthcheck.config import load
from healthcheck.core.model import Status
from healthcheck.policies.references import load as load_refs

TRAYS = [f"gb{i:03d}" for i in range(1, 19)]
DOMAINS = ({n: "nvl01" for n in TRAYS}, {"nvl01": 18})
UNHEALTHY = {"check": "gpu.fabric", "status": "fail", "component": "gpu0",
             "message": "fabric health summary Unhealthy"}


def _record(node: str, results: list[dict]) -> dict:
    ok = [{"check": "burnin.gemm.tflops", "status": "pass", "message": "m", "component": "gpu0",
           "metrics": {"tflops": 1.0}}]
    status = "fail" if any(r["status"] == "fail" for r in results) else "pass"
    return {"node": node, "status": status, "burnin": {"gpu_count": 4}, "results": ok + results}


def _run(tmp_path, faults: dict[str, list[dict]], domains=DOMAINS):
    results = tmp_path / "results"
    results.mkdir()
    for n in TRAYS:
        (results / f"{n}.json").write_text(json.dumps(_record(n, faults.get(n, []))))
    settings = resolve({"results_dir": str(results), "phases": ["checks"], "max_drain_fraction": 0.25})
    return allocation.run_allocation(TRAYS, settings, load_refs(), "72", nvlink_domains=domains)


def test_seventeen_unhealthy_trays_are_one_fault_of_their_domain(tmp_path):
    faults = {n: [UNHEALTHY] for n in TRAYS[:17]}
    faults["gb005"] = [UNHEALTHY, {"check": "gpu.ecc", "status": "fail", "component": "gpu2", "message": "DBE"}]
    out = _run(tmp_path, faults)
    (domain,) = [f for f in out.collective if f.check == CHECK]
    assert domain.status is Status.FAIL and domain.component == "nvl01"
    assert domain.message == ("NVLink domain nvl01: gpu.fabric failing on 17 of 18 trays: a switch tray or the "
                              "backplane, not 17 node faults")
    assert domain.metrics == {"n_nodes": 17.0, "domain_size": 18.0}
    assert out.drain == ["gb005"]  # its ECC fault is its own; nobody is drained for the rack's fabric
    assert out.suspect_shared_cause == domain.message + ": its trays not drained for it"
    assert out.domain_faults[0]["nodes"] == TRAYS[:17] and out.to_dict()["domain_faults"] == out.domain_faults
    text = allocation_text(out.to_dict())
    assert f"FAIL  {CHECK} nvl01: NVLink domain nvl01: gpu.fabric failing on 17 of 18 trays" in text


def test_without_declared_domains_the_blast_radius_still_holds(tmp_path):
    out = _run(tmp_path, {n: [UNHEALTHY] for n in TRAYS[:17]}, domains=None)
    assert not [f for f in out.collective if f.check == CHECK] and out.domain_faults == []
    assert out.drain == [] and "17 of 18 nodes failed (gpu.fabric), more than the blast-radius cap of 4" in \
        out.suspect_shared_cause


def test_a_tray_fault_of_the_fabric_stays_the_trays(tmp_path):
    # 3 trays fail gpu.fabric: not more than half of the domain: three node faults, drained
    out = _run(tmp_path, {n: [UNHEALTHY] for n in TRAYS[:3]})
    assert out.domain_faults == [] and out.drain == TRAYS[:3] and out.suspect_shared_cause is None


def test_another_fabric_cause_on_one_tray_is_drained_beside_the_domain_fault(tmp_path):
    faults = {n: [UNHEALTHY] for n in TRAYS[:12]}
    faults["gb018"] = [{"check": "gpu.nvlink.errors", "status": "fail", "component": "gpu1/link7", "message": "BER"}]
    out = _run(tmp_path, faults)
    assert [r["cause"] for r in out.domain_faults] == ["gpu.fabric"] and out.drain == ["gb018"]


def test_sxids_shared_by_the_domain_are_its_switch_trays(tmp_path):
    sxid = {"check": "gpu.xid", "status": "fail", "component": "nvidia-nvswitch0",
            "message": "SXid 12028 (Fatal) x1 on nvidia-nvswitch0", "metrics": {"xid_events": 1, "sxid_12028": 1}}
    out = _run(tmp_path, {n: [sxid] for n in TRAYS[:10]})
    assert [(r["cause"], r["n_nodes"]) for r in out.domain_faults] == [("SXid", 10)] and out.drain == []


def test_the_domains_come_from_the_config_as_the_drain_cap_reads_them(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('[slurm]\ndrain_cap_level = "rack"\n[topology.rack]\nr01 = "gb[001-018]"\nr02 = "gb[019-020]"\n')
    of, sizes = declared(load(str(path)))
    assert of["gb018"] == "r01" and sizes == {"r01": 18, "r02": 2}
    assert declared(None) == ({}, {})
