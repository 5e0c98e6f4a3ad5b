"""The RDMA pair phase inside the burn-in's allocation step: which nodes and rails take part (from the
nodes' own records), the counter sampler around the rounds (perfquery through an injected runner),
findings joining the node verdicts, drains under the blast radius, and the suites that include it."""
from __future__ import annotations

import json

import pytest

from healthcheck.burnin.allocation import job_verdict, rdma_targets, read_results, run_allocation
from healthcheck.burnin.rdma import validate as rdma_validate
from healthcheck.policies.references import load as load_references
from healthcheck.burnin.settings import ALL_PHASES, PHASES, resolve
from healthcheck.fabric.sampler import CounterSampler, perfquery_argv
from healthcheck.core.model import Status
from tests.fabric.test_rdma_phase import Fleet

NODES = [f"gpu0{i}" for i in range(1, 7)]
RAILS = ["mlx5_0", "mlx5_1"]
FAST = rdma_validate({"latency_test": "", "max_rounds": 4, "launcher": ["run-on", "{node}"]})


def perfquery_text(symbol: int = 0, downed: int = 0) -> str:
    return ("# Port extended counters: Lid 7 port 1 (CapMask: 0x5A00)\nPortSelect:......................1\n"
            "CounterSelect:...................0x0000\n"
            f"SymbolErrorCounter:..............{symbol}\nLinkErrorRecoveryCounter:........0\n"
            f"LinkDownedCounter:...............{downed}\nPortRcvErrors:...................0\n"
            "PortXmitDiscards:................0\nPortXmitData:....................123456\n")


class Perfquery:
    """perfquery on each node: counters of ``grow`` ports rise between the first and second call."""

    def __init__(self, grow=(), missing=()):
        self.grow, self.missing, self.calls = set(grow), set(missing), []

    def __call__(self, argv, timeout_s):
        self.calls.append(list(argv))
        node, hca = argv[1], argv[argv.index("-C") + 1]
        if (node, hca) in self.missing:
            return "", "perfquery: not found"
        later = sum(1 for c in self.calls if c == argv) > 1
        return perfquery_text(downed=2 if later and (node, hca) in self.grow else 0), None


def allocation(tmp_path, nodes=NODES, hcas=None, phases="checks,rdma", **extra):
    results = tmp_path / "results"
    results.mkdir()
    for node in nodes:
        ports = (hcas or {}).get(node, [{"device": d, "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand",
                                         "rate_gbps": 400.0} for d in RAILS])
        record = {"node": node, "results": [{"check": "burnin.checks", "status": "pass", "message": "ok"}],
                  "burnin": {"gpu_count": 8, "hcas": ports}}
        (results / f"{node}.json").write_text(json.dumps(record))
    settings = resolve({"results_dir": str(results), "phases": phases, **extra})
    return settings, load_references()


def test_the_full_suite_runs_rdma_and_quick_does_not():
    assert "rdma" in ALL_PHASES and "rdma" not in PHASES  # not a node phase
    assert resolve({"suite": "full"}).phase_on("rdma")
    assert not resolve({"suite": "quick"}).phase_on("rdma")
    assert not resolve({}).phase_on("rdma")  # standard: asked for explicitly
    assert resolve({"suite": "quick", "phases": "checks,rdma"}).phase_on("rdma")


def test_targets_are_the_nodes_with_an_active_ib_or_roce_port_and_their_common_hcas(tmp_path):
    hcas = {"gpu01": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "Ethernet"},
                      {"device": "mlx5_1", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"}],
            "gpu02": [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"},
                      {"device": "mlx5_1", "port": 1, "state": "DOWN", "link_layer": "InfiniBand"}],
            "gpu03": [{"device": "eth0", "port": 1, "state": "ACTIVE", "link_layer": "Unknown"}]}
    settings, _refs = allocation(tmp_path, ["gpu01", "gpu02", "gpu03"], hcas)
    nodes, rails, ports = rdma_targets(read_results(settings.results_dir, ["gpu01", "gpu02", "gpu03"]))
    assert nodes == ["gpu01", "gpu02"] and rails == ["mlx5_0"]
    assert ports == {"gpu01": [("mlx5_0", 1)], "gpu02": [("mlx5_0", 1)]}


def test_a_bad_hca_and_a_growing_port_fail_their_nodes_and_are_drained(tmp_path):
    settings, refs = allocation(tmp_path, max_drain_fraction=0.5)
    pairs = Fleet(slow_hcas={("gpu03", "mlx5_1")})
    counters = Perfquery(grow={("gpu05", "mlx5_0")})
    out = run_allocation(NODES, settings, refs, "77", rdma_settings=FAST, pair_runner=pairs, counter_runner=counters)
    assert out.per_node["gpu03"].status is Status.FAIL
    rdma = [f for f in out.per_node["gpu03"].findings if f.check == "burnin.rdma"]
    assert rdma and "mlx5_1" in rdma[0].message and rdma[0].component == "gpu03/mlx5_1"
    grown = [f for f in out.per_node["gpu05"].findings if f.check == "fabric.counters"]
    assert grown[0].status is Status.FAIL and "LinkDownedCounter" in grown[0].message
    assert out.drain == ["gpu03", "gpu05"]
    assert all(out.per_node[n].status is Status.PASS for n in ("gpu01", "gpu02", "gpu04", "gpu06"))
    # counters read on every port of every node, before and after the rounds, through the launcher
    assert len(counters.calls) == 2 * len(NODES) * len(RAILS)
    assert counters.calls[0][:2] == ["run-on", counters.calls[0][1]] and "-x" in counters.calls[0]
    assert pairs.commands and all(c.server_argv[0] == "run-on" for c in pairs.commands)
    assert out.to_dict()["rdma"]["status"] == "fail"
    verdict = job_verdict(out, "batch", "2026-12-03T10:00:00Z")
    assert {f.check for f in verdict.findings if f.status is Status.FAIL} == {"burnin.rdma", "fabric.counters"}


def test_the_blast_radius_holds_for_rdma_findings(tmp_path):
    settings, refs = allocation(tmp_path)  # 25 % of 6 nodes: at most 1 drained
    pairs = Fleet(fail_hcas={(n, "mlx5_0") for n in NODES[:3]})
    out = run_allocation(NODES, settings, refs, "78", rdma_settings=FAST, pair_runner=pairs,
                         counter_runner=Perfquery())
    failing = [n for n, o in out.per_node.items() if o.status is Status.FAIL]
    assert len(failing) >= 2 and out.drain == []
    assert "blast-radius" in out.suspect_shared_cause and "burnin.rdma" in out.suspect_shared_cause


def test_a_clean_fabric_passes_and_unread_counters_are_said_not_passed(tmp_path):
    settings, refs = allocation(tmp_path)
    out = run_allocation(NODES, settings, refs, "79", rdma_settings=FAST, pair_runner=Fleet(),
                         counter_runner=Perfquery(missing={(n, d) for n in NODES for d in RAILS}))
    assert out.drain == [] and out.status is Status.WARN
    job = {f.check: f for f in out.collective}
    assert job["burnin.rdma"].status is Status.PASS
    assert job["fabric.counters"].status is Status.WARN and "could not be read on any port" in job[
        "fabric.counters"].message and "perfquery: not found" in job["fabric.counters"].message


def test_failed_perftest_runs_are_findings_not_crashes(tmp_path):
    settings, refs = allocation(tmp_path, max_drain_fraction=0.5)
    pairs = Fleet(fail_hcas={("gpu02", "mlx5_0")})
    out = run_allocation(NODES, settings, refs, "80", rdma_settings=FAST, pair_runner=pairs,
                         counter_runner=Perfquery())
    msgs = [f.message for f in out.per_node["gpu02"].findings if f.check == "burnin.rdma"]
    assert msgs and "mlx5_0" in msgs[0]
    assert any("to RTR" in p["error"] for p in out.rdma["pairs"] if p["error"])


def test_fewer_than_two_rdma_nodes_is_a_skip_and_nothing_runs(tmp_path):
    hcas = {n: [] for n in NODES[1:]}
    settings, refs = allocation(tmp_path, hcas=hcas)
    pairs = Fleet()
    out = run_allocation(NODES, settings, refs, "81", rdma_settings=FAST, pair_runner=pairs,
                         counter_runner=Perfquery())
    assert not pairs.commands and out.rdma is None
    assert [(f.check, f.status) for f in out.collective] == [("burnin.rdma", Status.SKIP)]


def test_without_the_phase_nothing_runs(tmp_path):
    settings, refs = allocation(tmp_path, phases="checks")
    pairs = Fleet()
    out = run_allocation(NODES, settings, refs, "82", rdma_settings=FAST, pair_runner=pairs)
    assert not pairs.commands and not out.collective and out.rdma is None


def test_sampler_bad_input_and_bad_output_are_clear(tmp_path):
    with pytest.raises(ValueError, match="port must be"):
        perfquery_argv(["srun", "-w", "{node}"], "gpu01", "mlx5_0", 0)
    with pytest.raises(ValueError, match="bad node"):
        CounterSampler([("-x", "mlx5_0", 1)])
    with pytest.raises(ValueError, match="must name"):
        CounterSampler([("gpu01", "mlx5_0", 1)], launcher=["srun"])
    sampler = CounterSampler([("gpu01", "mlx5_0", 1), ("gpu02", "mlx5_0", 1)], ["on", "{node}"],
                             lambda argv, t: ("this is not perfquery\n", None) if argv[1] == "gpu02"
                             else (perfquery_text(symbol=4), None), clock=lambda: 100.0)
    samples = sampler()
    assert [(s.key.node, s.counters["SymbolErrorCounter"], s.taken_at) for s in samples] == [("gpu01", 4, 100.0)]
    assert len(sampler.errors) == 1 and sampler.errors[0].startswith("gpu02 mlx5_0 port 1:")
