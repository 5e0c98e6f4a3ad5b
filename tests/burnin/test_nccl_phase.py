"""nccl-tests runs through the subprocess seam (the nccl double replays a recorded output), their
judgement against references, and the allocation step's localisation — without Slurm: the launcher
is `env` setting the step variables srun would set."""
from __future__ import annotations

import json

import pytest

from healthcheck.burnin import allocation, nccl_run
from healthcheck.burnin.judge_nccl import judge_run, large_busbw
from healthcheck.policies.references import Reference, load, merge
from healthcheck.burnin.settings import resolve
from healthcheck.core.model import Status
from healthcheck.parsers import nccl_tests
from tests.burnin import nccl_double
from tests.conftest import FIXTURES

REC = FIXTURES / "nccl-tests" / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt"
FAILED = FIXTURES / "nccl-tests" / "all_reduce-h100-2node-ib-completion-error12-mid-sweep-failure.txt"
ENV_LAUNCHER = ["env", "SLURM_STEP_NODELIST={nodelist}", "SLURM_PROCID=0"]
SWEEP = nccl_run.Sweep(max_bytes=1 << 30, iters=5)


def base() -> float:
    return large_busbw(nccl_run.NcclRun("all_reduce", "node", ["x"], [], result=nccl_tests.parse(REC.read_text())))


@pytest.fixture
def double(tmp_path):
    return nccl_double.install(tmp_path / "nccl", REC, {"n3": 0.6, "n6": 0.5}, gpus=8)


def test_run_on_node_scales_by_the_node_and_keeps_the_step_context_out(double):
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "n3"}
    run = nccl_run.run_on_node(str(double), "all_reduce", 8, SWEEP, 30, "n3", env=env)
    assert run.error is None and run.result.rows and len(run.result.ranks) == 8
    assert {r.host for r in run.result.ranks} == {"n3"}
    assert large_busbw(run) == pytest.approx(0.6 * base(), rel=0.01)
    assert run.argv[1:] == SWEEP.args() + ["-g", "8"]


def test_node_env_drops_the_enclosing_step_rank():
    from healthcheck.safeio.subproc import node_env

    env = node_env({"SLURM_JOB_ID": "7", "SLURM_PROCID": "3", "PMIX_RANK": "3", "SLURM_STEP_ID": "0",
                    "NCCL_DEBUG": "WARN", "LD_PRELOAD": "/evil.so", "SLURMD_NODENAME": "n1"})
    assert env["SLURM_JOB_ID"] == "7" and env["NCCL_DEBUG"] == "WARN" and env["SLURMD_NODENAME"] == "n1"
    assert not {"SLURM_PROCID", "PMIX_RANK", "SLURM_STEP_ID", "LD_PRELOAD"} & set(env)


def test_run_across_fills_the_launcher_and_names_the_nodes(double):
    run = nccl_run.run_across(ENV_LAUNCHER, str(double), "all_reduce", ["n1", "n2"], 1, SWEEP, 30,
                              env={"PATH": "/usr/bin:/bin"})
    assert run.argv[:3] == ["env", "SLURM_STEP_NODELIST=n1,n2", "SLURM_PROCID=0"]
    assert [r.host for r in run.result.ranks] == ["n1", "n2"]
    assert large_busbw(run) == pytest.approx(base(), rel=0.01)
    slow = nccl_run.run_across(ENV_LAUNCHER, str(double), "all_reduce", ["n1", "n6"], 1, SWEEP, 30,
                               env={"PATH": "/usr/bin:/bin"})
    assert large_busbw(slow) == pytest.approx(0.5 * base(), rel=0.01)


def test_launcher_without_nodes_is_refused():
    with pytest.raises(nccl_run.LauncherError, match="names no"):
        nccl_run.launcher_argv(["mpirun", "-np", "16"], ["a"], 8)
    assert nccl_run.launcher_argv(["srun", "-N", "{nnodes}", "-w", "{nodelist}", "--ntasks-per-node",
                                   "{tasks_per_node}"], ["a", "b"], 8) == \
        ["srun", "-N", "2", "-w", "a,b", "--ntasks-per-node", "8"]


def test_missing_binary_is_a_skip_not_a_failure(tmp_path):
    run = nccl_run.run_on_node(str(tmp_path), "all_reduce", 8, SWEEP, 5, "n1")
    assert run.missing
    f = judge_run(run, None, None, None)
    assert f.status is Status.SKIP and "not found" in f.message


def _judged(text: str, ref=None, line=None):
    run = nccl_run.NcclRun("all_reduce", "node", ["n1"], ["x"], result=nccl_tests.parse(text))
    return judge_run(run, ref, line, "h100_sxm")


def test_judge_against_reference_and_line_rate():
    value = base()
    ok = _judged(REC.read_text(), Reference(value, "GB/s", -0.1, 0.2), Reference(value * 2, "GB/s"))
    assert ok.status is Status.PASS and ok.component == "all_reduce@node"
    assert ok.metrics["efficiency_pct"] == pytest.approx(50.0, abs=0.5)
    assert ok.metrics["alpha_us"] > 0 and ok.metrics["beta_gbps"] > 0
    low = _judged(REC.read_text(), Reference(value * 1.5, "GB/s", -0.1, 0.2))
    assert low.status is Status.FAIL and "below h100_sxm reference" in low.message
    high = _judged(REC.read_text(), Reference(value / 2, "GB/s", -0.1, 0.2))
    assert high.status is Status.WARN
    none = _judged(REC.read_text())
    assert none.status is Status.PASS and "no reference for h100_sxm" in none.message


def test_judge_failures():
    failed = _judged(FAILED.read_text())
    assert failed.status is Status.FAIL and "failed" in failed.message
    corrupt = nccl_run.NcclRun("all_reduce", "node", ["n1"], ["x"], result=nccl_tests.parse(REC.read_text()))
    corrupt.result.rows[-1].oop.wrong = 7  # one size came back with 7 wrong elements
    f = judge_run(corrupt, Reference(base(), "GB/s", -0.1, 0.2), None, "h100_sxm")
    assert f.status is Status.FAIL and "7 wrong values" in f.message and f.metrics["wrong_values"] == 7
    timeout = nccl_run.NcclRun("all_reduce", "node", ["n1"], ["x"], result=nccl_tests.parse(REC.read_text()),
                               error="did not finish within 5 s (killed)", timed_out=True)
    assert judge_run(timeout, None, None, None).status is Status.FAIL


def _node_record(node: str, status: str, gpu_count: int = 1) -> dict:
    return {"node": node, "status": status, "burnin": {"gpu_count": gpu_count},
            "results": [{"check": "burnin.gemm.tflops", "status": status, "message": "m", "component": "gpu0",
                         "metrics": {"tflops": 1.0}}]}


def _results(tmp_path, nodes: list[str], gpu_count: int = 1) -> str:
    """A results directory holding a passing result of each node, as the per-node runs leave it."""
    results = tmp_path / "results"
    results.mkdir()
    for n in nodes:
        (results / f"{n}.json").write_text(json.dumps(_node_record(n, "pass", gpu_count=gpu_count)))
    return str(results)


def _fabric(busbw: float):
    """The built-in references plus a fabric "t" whose all_reduce reference is ``busbw`` GB/s (-20 %)."""
    return merge(load(), f'[fabric.t]\nnccl_all_reduce_busbw_gbps = {{ value = {busbw:.2f}, lower = -0.2, '
                         f'unit = "GB/s" }}\n', "test")


def test_allocation_localises_the_slow_nodes_and_plans_their_drain(tmp_path, double):
    nodes = [f"n{i}" for i in range(1, 9)]
    results = _results(tmp_path, nodes)
    refs = _fabric(base())
    settings = resolve({"results_dir": results, "nccl_dir": str(double), "fabric": "t",
                        "launcher": ENV_LAUNCHER, "max_drain_fraction": 0.25})
    out = allocation.run_allocation(nodes, settings, refs, "42")
    assert out.collective[0].status is Status.FAIL
    assert out.localisation["bad"] == ["n3", "n6"]
    assert out.drain == ["n3", "n6"] and out.suspect_shared_cause is None
    assert out.per_node["n3"].findings[-1].check == "burnin.localise"
    assert out.status is Status.FAIL and out.to_dict()["per_node"]["n1"]["status"] == "pass"


def test_every_configured_collective_runs_across_the_allocation_all_reduce_first(tmp_path, double):
    nodes = [f"n{i}" for i in range(1, 5)]
    results = _results(tmp_path, nodes, gpu_count=8)
    refs = _fabric(base() * 0.5)
    settings = resolve({"results_dir": results, "nccl_dir": str(double), "fabric": "t", "launcher": ENV_LAUNCHER,
                        "nccl_collectives": ["reduce_scatter", "all_gather"]})
    out = allocation.run_allocation(nodes, settings, refs, "44")
    assert [f.component.split("@")[0] for f in out.collective] == ["all_reduce", "reduce_scatter", "all_gather"]
    assert out.collective[0].status is Status.PASS and "reference" in out.collective[0].message
    # no fabric reference for the others: measured and recorded, said unjudged for that fabric
    assert all(f.status is Status.PASS and "no reference for fabric t" in f.message for f in out.collective[1:])
    assert all(f.metrics["busbw_gbps"] > 0 for f in out.collective)


def test_without_a_fabric_the_collective_is_measured_but_said_unjudged(tmp_path, double):
    nodes = [f"n{i}" for i in range(1, 5)]
    results = _results(tmp_path, nodes)
    settings = resolve({"results_dir": results, "nccl_dir": str(double), "launcher": ENV_LAUNCHER,
                        "nccl_collectives": ["all_reduce"]})
    out = allocation.run_allocation(nodes, settings, load(), "43")
    (f,) = out.collective
    assert f.status is Status.WARN and f.metrics["busbw_gbps"] > 0  # measured (n3 at 60 % would go unnoticed)
    assert "not judged and no slow node searched: set [burnin] fabric to one of" in f.message
    assert out.localisation is None and out.drain == []


def test_an_unknown_fabric_is_a_usage_error_before_anything_runs(tmp_path):
    from click.testing import CliRunner

    from healthcheck.cli import cli

    result = CliRunner().invoke(cli, ["burnin", "run", "--node", "n1"], env={"HEALTHCHECK_BURNIN_FABRIC": "ndr4OO"})
    assert result.exit_code == 2 and "fabric 'ndr4OO' is not in the references (known: " in result.output


def test_blast_radius_drains_nothing_when_too_many_fail(tmp_path):
    nodes = [f"n{i}" for i in range(1, 5)]
    outcomes = {n: allocation.NodeOutcome(n, Status.FAIL if n != "n4" else Status.PASS, [], None) for n in nodes}
    for n in ("n1", "n2", "n3"):
        outcomes[n].findings.append(allocation.Finding("burnin.gemm.tflops", Status.FAIL, "low"))
    drain, flag = allocation.plan_drains(outcomes, resolve({"max_drain_fraction": 0.5}))
    assert drain == [] and "3 of 4 nodes failed (burnin.gemm.tflops)" in flag and "cap of 2" in flag
    outcomes["n3"].status = Status.PASS
    assert allocation.plan_drains(outcomes, resolve({"max_drain_fraction": 0.5})) == (["n1", "n2"], None)
    assert allocation.plan_drains(outcomes, resolve({"max_drain_fraction": 0.5, "max_drain_nodes": 1}))[0] == []


def test_a_node_without_result_is_an_error_never_a_drain(tmp_path):
    (tmp_path / "n1.json").write_text(json.dumps(_node_record("n1", "pass")))
    (tmp_path / "n2.json").write_text("{truncated")
    got = allocation.read_results(str(tmp_path), ["n1", "n2", "n3"])
    assert got["n1"].status is Status.PASS
    assert got["n2"].status is Status.ERROR and got["n3"].status is Status.ERROR
    assert "no burn-in result from n3" in got["n3"].findings[0].message
    assert allocation.plan_drains(got, resolve({}))[0] == []


def _digest_record(node: str, digest: str) -> allocation.NodeOutcome:
    rec = {"node": node, "burnin": {"gemm_digests": {"gpu0": ["NVIDIA H100 80GB HBM3|torch|bf16|n=8192", digest],
                                                     "gpu1": ["NVIDIA H100 80GB HBM3|torch|bf16|n=8192", "aa" * 16]}}}
    return allocation.NodeOutcome(node, Status.PASS, [], rec)


def test_gemm_digests_are_compared_across_the_job():
    per = {f"n{i}": _digest_record(f"n{i}", "aa" * 16) for i in range(1, 5)}
    per["n3"] = _digest_record("n3", "bb" * 16)
    allocation.compare_digests(per)
    assert per["n3"].status is Status.FAIL
    (f,) = per["n3"].findings
    assert f.check == "burnin.gemm.fleet" and f.component == "gpu0" and "silent data corruption" in f.message
    assert all(per[n].status is Status.PASS and not per[n].findings for n in ("n1", "n2", "n4"))
    tie = {"a": _digest_record("a", "cc" * 16), "b": _digest_record("b", "dd" * 16)}
    for rec in tie.values():  # only gpu0 left: one digest each, a 1:1 tie
        rec.record["burnin"]["gemm_digests"].pop("gpu1")
    allocation.compare_digests(tie)
    assert tie["a"].status is Status.WARN and tie["b"].status is Status.WARN


def test_as_root_a_binary_others_can_replace_is_refused_not_run(tmp_path, double):
    import os

    if os.geteuid() != 0:
        pytest.skip("the refusal applies to root only")
    exe = double / "all_reduce_perf"
    exe.chmod(0o777)  # world-writable: anyone could swap what root runs
    run = nccl_run.run_on_node(str(double), "all_reduce", 8, SWEEP, 30, "n1", env={"PATH": "/usr/bin:/bin"})
    assert run.missing and "writable by group or others" in run.error and run.result is None
    assert judge_run(run, None, None, None).status is Status.SKIP


def test_known_good_nodes_of_the_job_are_the_localisation_partners(tmp_path, double, monkeypatch):
    from healthcheck.burnin import localize
    from healthcheck.burnin.settings import SettingsError

    seen = {}
    real = localize.localise

    def spy(*args, **kwargs):
        seen["known_good"] = kwargs.get("known_good")
        return real(*args, **kwargs)

    monkeypatch.setattr(localize, "localise", spy)
    nodes = [f"n{i}" for i in range(1, 9)]
    results = _results(tmp_path, nodes)
    refs = _fabric(base())
    settings = resolve({"results_dir": results, "nccl_dir": str(double), "fabric": "t", "launcher": ENV_LAUNCHER,
                        "nccl_collectives": ["all_reduce"], "known_good": "n[1-2],spare[01-02]"})
    out = allocation.run_allocation(nodes, settings, refs, "45")
    assert seen["known_good"] == ["n1", "n2"]  # the spares are not in the job: a step cannot use them
    assert out.localisation["bad"] == ["n3", "n6"]
    with pytest.raises(SettingsError, match="known_good 'n\\[1-' is not a Slurm hostlist"):
        resolve({"known_good": "n[1-"})
