"""Issue 17 item 5 inside the burn-in job: the job step compares its nodes' software facts (their records'
``burnin.versions``) item by item and names the odd nodes (job findings, never a drain on their own);
and the RDMA phase's pair runs become ``fabric.rdma.pair`` findings of the job's record (the report's
heatmap), low or failed pairs WARN."""
from __future__ import annotations

import json

from healthcheck.burnin.allocation import (MAX_PAIR_FINDINGS, compare_software, job_verdict, pair_findings,
                                           read_results, run_allocation)
from healthcheck.burnin.settings import resolve
from healthcheck.fabric.software import validate as software_validate
from healthcheck.core.model import Status
from tests.fabric.test_rdma_allocation_phase import FAST, NODES, Perfquery, allocation
from tests.fabric.test_rdma_phase import Fleet

VERSIONS = {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5", "kernel": "6.8.0"}


def write_results(tmp_path, versions: dict[str, dict | None], extra: dict | None = None):
    results = tmp_path / "results"
    results.mkdir()
    for node, v in versions.items():
        burnin = {"gpu_count": 8} if v is None else {"gpu_count": 8, "versions": v}
        record = {"node": node, "results": [{"check": "burnin.checks", "status": "pass", "message": "ok"}],
                  "burnin": burnin, **((extra or {}).get(node, {}))}
        (results / f"{node}.json").write_text(json.dumps(record))
    return resolve({"results_dir": str(results), "phases": "checks"})


def test_an_odd_driver_is_a_job_finding_naming_the_node_and_nothing_is_drained(tmp_path):
    versions = {f"gpu0{i}": dict(VERSIONS) for i in range(1, 5)}
    versions["gpu03"]["driver"] = "535.104.05"
    settings = write_results(tmp_path, versions)
    out = run_allocation(list(versions), settings, None, "90")
    cons = {f.component: f for f in out.collective if f.check == "fabric.consistency"}
    assert cons["driver"].status is Status.WARN
    assert "535.104.05 on gpu03" in cons["driver"].message and "majority 550.54.15 on gpu[01-02,04]" in \
        cons["driver"].message
    assert {cons[i].status for i in ("cuda", "nccl", "kernel")} == {Status.PASS}
    assert out.drain == [] and all(o.status is Status.PASS for o in out.per_node.values())
    verdict = job_verdict(out, "gpu01", "2026-12-03T10:00:00Z")
    assert any(f.check == "fabric.consistency" and f.component == "driver" and f.status is Status.WARN
               for f in verdict.findings)


def test_a_declared_set_names_every_node_that_differs(tmp_path):
    versions = {f"gpu0{i}": dict(VERSIONS) for i in range(1, 4)}
    settings = write_results(tmp_path, versions)
    declared = software_validate({"expected": {"nccl": "2.23.*"}})
    [nccl] = [f for f in compare_software(read_results(settings.results_dir, list(versions)), declared)
              if f.component == "nccl"]
    assert nccl.status is Status.WARN and "2.21.5 on gpu[01-03]" in nccl.message and "expected 2.23.*" in nccl.message


def test_fewer_than_two_nodes_with_facts_compare_nothing_and_bad_facts_are_said(tmp_path):
    settings = write_results(tmp_path, {"gpu01": dict(VERSIONS), "gpu02": None, "gpu03": None})
    assert compare_software(read_results(settings.results_dir, ["gpu01", "gpu02", "gpu03"])) == []
    bad = tmp_path / "bad"
    bad.mkdir()
    for node, v in (("gpu01", VERSIONS), ("gpu02", VERSIONS), ("gpu03", "550")):  # versions not an object
        (bad / f"{node}.json").write_text(json.dumps({"node": node, "results": [], "burnin": {"versions": v}}))
    found = compare_software(read_results(str(bad), ["gpu01", "gpu02", "gpu03"]))
    unreadable = [f for f in found if f.component is None]
    assert len(unreadable) == 1 and unreadable[0].status is Status.WARN and "gpu03" in unreadable[0].message
    assert {f.component for f in found if f.component} == set(VERSIONS)  # the two readable nodes compared


def test_the_rdma_phase_records_each_pair_with_its_bandwidth_for_the_heatmap(tmp_path):
    settings, refs = allocation(tmp_path, max_drain_fraction=0.5)
    out = run_allocation(NODES, settings, refs, "91", rdma_settings=FAST,
                         pair_runner=Fleet(slow_hcas={("gpu03", "mlx5_1")}), counter_runner=Perfquery())
    verdict = job_verdict(out, "batch", "2026-12-03T10:00:00Z")
    pairs = [f for f in verdict.findings if f.check == "fabric.rdma.pair"]
    assert pairs and all(f.component.count("/") == 2 and "," in f.component for f in pairs)
    low = [f for f in pairs if f.status is Status.WARN]
    assert low and all("/mlx5_1/" in f.component and "gpu03" in f.component for f in low)
    assert all(f.metrics["low"] == 1.0 and f.metrics["gbyte_s"] == 210.0 / 8 for f in low)
    fast = [f for f in pairs if f.status is Status.PASS]
    assert fast and all(f.metrics["gbyte_s"] == 385.0 / 8 and f.metrics["low"] == 0.0 for f in fast)
    # one finding per (test, rail, pair): the localisation's repeated runs are not counted twice
    keys = [(f.component.split("/")[0], f.component.split("/")[1], frozenset(f.component.split("/")[2].split(",")))
            for f in pairs]
    assert len(keys) == len(set(keys))


def test_failed_pairs_latency_runs_and_the_cap():
    runs = [{"test": "ib_write_bw", "rail": 0, "device": "mlx5_0", "server": "a", "client": "b", "value": None,
             "error": "Failed to modify QP to RTR"},
            {"test": "ib_write_lat", "rail": 0, "device": "mlx5_0", "server": "a", "client": "b", "value": 1.7}]
    [f] = pair_findings(runs, 360.0)
    assert f.status is Status.WARN and "Failed to modify QP to RTR" in f.message and f.metrics["low"] == 1.0
    many = [{"test": "ib_write_bw", "rail": 0, "device": "mlx5_0", "server": f"n{i}", "client": f"m{i}",
             "value": 390.0} for i in range(MAX_PAIR_FINDINGS + 5)]
    out = pair_findings(many, 360.0)
    assert len(out) == MAX_PAIR_FINDINGS + 1 and out[-1].status is Status.SKIP and "5 more" in out[-1].message


def test_the_job_environment_and_image_are_compared_across_the_allocation():
    """Item 5: the NCCL_*/UCX_* variables a job gets and its container image, from each node's burn-in
    record, join the software comparison: a node with another NCCL_IB_HCA or image is named."""
    from healthcheck.burnin.node_run import job_environment

    env = {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "UCX_TLS": "rc", "PATH": "/usr/bin", "SECRET_TOKEN": "x",
           "APPTAINER_CONTAINER": "/images/pytorch-24.10.sif"}
    got = job_environment(env)
    assert got == {"env": {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "UCX_TLS": "rc"},
                   "container_image": "/images/pytorch-24.10.sif"}
    assert job_environment({"HEALTHCHECK_CONTAINER_IMAGE": "sha256:abc", "APPTAINER_CONTAINER": "/x.sif"}) == {
        "container_image": "sha256:abc"}
    assert job_environment({"PATH": "/bin"}) == {}

    from healthcheck.fabric.software import check_consistency, node_facts

    records = [{"node": f"gpu0{i}", "versions": {"driver": "550.54.14"}, **job_environment(env)} for i in range(1, 4)]
    odd = dict(env, NCCL_IB_HCA="mlx5_0")
    records.append({"node": "gpu04", "versions": {"driver": "550.54.14"}, **job_environment(odd)})
    result = check_consistency([node_facts(r, "rec") for r in records])
    by_item = {item.item: item for item in result.items}
    assert by_item["NCCL_IB_HCA"].odd == [("mlx5_0", "gpu04")]
    assert by_item["NCCL_IB_HCA"].majority == "mlx5_0,mlx5_1"
    assert by_item["container_image"].consistent and by_item["UCX_TLS"].consistent
