"""Burn-in paths without a test of their own: an unusable node skips its GPU phases, a crashing phase is
one ERROR and the others still run, nccl-tests outputs with corrupt data fail, `parse dcgmi` at the CLI,
and the allocation step's blast radius (exit 4, scontrol never called).

Settings always force ``backend = "numpy"``: the CPU runs the compute phases on purpose, whatever GPUs
or GPU libraries the machine running the tests has."""
from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner

from healthcheck.burnin import node_run
from healthcheck.burnin.judge_nccl import judge_run
from healthcheck.burnin.nccl_run import NcclRun
from healthcheck.policies.references import load
from healthcheck.burnin.settings import PHASES, resolve
from healthcheck.cli import cli
from healthcheck.cli.burnin import SHARED_CAUSE_EXIT
from healthcheck.core.model import Finding, Status, Verdict
from healthcheck.parsers import nccl_tests
from tests.conftest import FIXTURES, corpus_params

NCCL = FIXTURES / "nccl-tests"
OOB_ONLY = NCCL / "all_reduce-v100-8gpu-old-format-error-column-oob-3-failed.txt"
WRONG = NCCL / "all_reduce-h100-8gpu-wrong-values-2-sizes-oob-4-failed.txt"
HEALTHY = NCCL / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt"
DCGMI = FIXTURES / "dcgmi"
LOST = "gpu.lost: GPU 3 fell off the bus"


def _settings(tmp_path, **table):
    """Cheap, tool-less settings: NumPy, tiny GEMM/copies, absent dcgmi and nccl-tests, no storage."""
    base = {"backend": "numpy", "gemm_duration_s": 0.2, "gemm_n": 64, "bandwidth_bytes": 1 << 20,
            "bandwidth_repeats": 2, "dcgmi": str(tmp_path / "no-dcgmi"), "nccl_dir": str(tmp_path / "no-nccl"),
            "nccl_collectives": ["all_reduce"]}
    base.update(table)
    return resolve(base, environ={})


def _ctx(tmp_path, **table) -> node_run.NodeContext:
    return node_run.NodeContext("n1", _settings(tmp_path, **table), load())


def _by_check(verdict: Verdict) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in verdict.findings:
        out.setdefault(f.check, []).append(f)
    return out


def _of_phase(verdict: Verdict, phase: str) -> list[Finding]:
    return [f for f in verdict.findings if f.check == f"burnin.{phase}" or f.check.startswith(f"burnin.{phase}.")]


# -- 1. an unusable node ------------------------------------------------------------------------------

def test_unusable_node_skips_every_gpu_phase_with_the_reason_and_still_runs_storage(tmp_path, monkeypatch):
    ran: list[str] = []

    def lost_gpu(ctx):
        ran.append("checks")
        ctx.unusable = LOST
        return [Finding("gpu.lost", Status.FAIL, "GPU 3 fell off the bus", "gpu3")]

    monkeypatch.setitem(node_run.PHASES, "checks", lost_gpu)
    for name in node_run.GPU_PHASES:  # had one run, it would be in `ran` (and on a GPU box, it would hang)
        monkeypatch.setitem(node_run.PHASES, name, lambda ctx, name=name: ran.append(name) or [])
    ctx = _ctx(tmp_path)
    verdict = node_run.run_node(ctx, "2026-01-01T00:00:00+00:00")

    assert ran == ["checks"]
    checks = _by_check(verdict)
    assert [f.status for f in checks["gpu.lost"]] == [Status.FAIL]
    for name in ("gemm", "bandwidth", "dcgm", "nccl"):
        (skip,) = checks[f"burnin.{name}"]
        assert skip.status is Status.SKIP
        assert skip.message == f"node unusable ({LOST})"
    (storage,) = checks["burnin.storage"]
    assert storage.status is Status.SKIP and storage.message == "no storage_paths configured"
    assert verdict.status is Status.FAIL and verdict.context == "burnin"
    assert set(ctx.extra["phase_seconds"]) == {"checks", "storage"}  # the skipped phases never started
    record = node_run.node_record(ctx, verdict, "r1", None)
    assert record["burnin"]["unusable"] == LOST


def test_unusable_node_skips_only_the_enabled_gpu_phases(tmp_path, monkeypatch):
    def lost_gpu(ctx):
        ctx.unusable = LOST
        return [Finding("gpu.lost", Status.FAIL, "GPU 3 fell off the bus", "gpu3")]

    monkeypatch.setitem(node_run.PHASES, "checks", lost_gpu)
    verdict = node_run.run_node(_ctx(tmp_path, phases=["checks", "dcgm"]), "2026-01-01T00:00:00+00:00")
    assert [(f.check, f.status) for f in verdict.findings] == [("gpu.lost", Status.FAIL),
                                                              ("burnin.dcgm", Status.SKIP)]


# -- 2. a phase that crashes ------------------------------------------------------------------------------

@pytest.mark.parametrize("broken", PHASES)
def test_a_crashing_phase_is_one_error_and_the_others_still_run(tmp_path, monkeypatch, broken):
    def boom(_ctx):
        raise RuntimeError("boom")

    monkeypatch.setitem(node_run.PHASES, broken, boom)
    ctx = _ctx(tmp_path)
    verdict = node_run.run_node(ctx, "2026-01-01T00:00:00+00:00")

    crashed = _of_phase(verdict, broken)
    assert [(f.check, f.status, f.message) for f in crashed] == [
        (f"burnin.{broken}", Status.ERROR, "phase crashed: RuntimeError: boom")]
    for other in PHASES:
        if other != broken:
            found = _of_phase(verdict, other)
            assert found, f"phase {other} left no finding after {broken} crashed"
            assert all(f.status is not Status.ERROR for f in found)
    assert set(ctx.extra["phase_seconds"]) == set(PHASES)
    assert all(s >= 0 for s in ctx.extra["phase_seconds"].values())
    # the tool-less phases said what they are, not a crash
    if broken != "dcgm":
        assert _of_phase(verdict, "dcgm")[0].message == "dcgmi not installed (DCGM diagnostics not run)"
    if broken != "storage":
        assert _of_phase(verdict, "storage")[0].message == "no storage_paths configured"
    assert verdict.status in (Status.ERROR, Status.FAIL)


def test_crash_message_is_bounded(tmp_path, monkeypatch):
    def long_boom(_ctx):
        raise ValueError("x" * 1000)

    monkeypatch.setitem(node_run.PHASES, "nccl", long_boom)
    verdict = node_run.run_node(_ctx(tmp_path, phases=["nccl", "storage"]), "2026-01-01T00:00:00+00:00")
    (crash,) = _of_phase(verdict, "nccl")
    assert crash.status is Status.ERROR and crash.message.startswith("phase crashed: ValueError: xxx")
    assert len(crash.message) == 300
    assert _of_phase(verdict, "storage")[0].status is Status.SKIP


# -- 3. nccl-tests outputs with corrupt data ----------------------------------------------------------

def _judged(path):
    run = NcclRun("all_reduce", "node", ["n1"], ["all_reduce_perf"], result=nccl_tests.parse(path.read_text()))
    return run, judge_run(run, None, None, "h100_sxm")


def test_out_of_bounds_summary_fails_the_run():
    run, f = _judged(OOB_ONLY)
    assert run.result.wrong_total == 0 and run.result.out_of_bounds == 3 and run.result.out_of_bounds_ok is False
    assert f.status is Status.FAIL and f.component == "all_reduce@node"
    assert "out of bounds" in f.message.lower().replace("-", " ") and "3" in f.message
    assert f.metrics["avg_busbw_gbps"] == pytest.approx(107.449)


def test_wrong_values_fail_the_run_and_are_named_with_their_count():
    """A real output with #wrong values also prints '# Out of bounds values : N FAILED': the judgement
    names the data corruption and its count, not the summary line."""
    run, f = _judged(WRONG)
    assert run.result.wrong_total == 2 * (4096 + 16384)
    assert f.status is Status.FAIL and f.component == "all_reduce@node"
    assert "40960 wrong values (data corruption in the collective)" in f.message
    assert f.metrics["wrong_values"] == 40960


@pytest.mark.parametrize("path", corpus_params("nccl-tests", "*wrong*"))
def test_corpus_wrong_values_fail(path):
    run, f = _judged(path)
    assert run.result.wrong_total > 0
    assert f.status is Status.FAIL and f.metrics["busbw_gbps"] > 0


def test_healthy_output_still_passes_without_a_reference():
    run, f = _judged(HEALTHY)
    assert run.result.wrong_total == 0 and run.result.out_of_bounds == 0
    assert f.status is Status.PASS and "no reference for h100_sxm" in f.message


# -- 4. `healthcheck parse dcgmi` ----------------------------------------------------------------

def _parse_dcgmi(path):
    return CliRunner().invoke(cli, ["parse", "dcgmi", str(path), "--json"])


def test_parse_dcgmi_json_names_the_failed_test_and_gpu():
    result = _parse_dcgmi(DCGMI / "diag-r2-dcgm3.3.8-h100x8-pcie-fail-gpu5-verbose.txt")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert set(data) == {"schema_version", "overall", "runs", "metadata", "errors", "tests"}
    assert data["overall"] == "fail" and data["runs"] == 1 and data["errors"] == []
    assert data["metadata"]["DCGM Version"] == "3.3.8"
    tests = {t["name"]: t for t in data["tests"]}
    pcie = tests["PCIe"]
    assert pcie["category"] == "Integration" and pcie["status"] == "fail"
    assert pcie["gpus"]["5"] == "fail" and {g for g, s in pcie["gpus"].items() if s == "pass"} == \
        {"0", "1", "2", "3", "4", "6", "7"}
    assert tests["Denylist"] == {"category": "Deployment", "name": "Denylist", "status": "pass", "gpus": {},
                                 "messages": []}


def test_parse_dcgmi_json_of_a_passing_diag():
    result = _parse_dcgmi(DCGMI / "diag-r3-dcgm3.3.8-h100x8-pass.txt")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["overall"] == "pass"
    statuses = {t["name"]: t["status"] for t in data["tests"]}
    assert statuses["EUD Test"] == "skip" and statuses["Memory Bandwidth"] == "pass"
    assert set(statuses.values()) == {"pass", "skip"}
    json_run = json.loads(_parse_dcgmi(DCGMI / "diag-r2-dcgm4.2.3-h100nvl-x4-json-memory-fail-gpu1.json").output)
    memory = next(t for t in json_run["tests"] if t["name"] == "memory")
    assert memory["status"] == "fail" and memory["gpus"] == {"0": "pass", "1": "fail", "2": "pass", "3": "pass"}
    assert any("memory mismatch" in m for m in memory["messages"])


@pytest.mark.parametrize("path", corpus_params("dcgmi", "diag-*"))
def test_parse_dcgmi_corpus(path):
    result = _parse_dcgmi(path)
    assert result.exit_code == 0
    data = json.loads(result.output)
    name = path.name
    expected = "fail" if ("fail" in name or "error" in name) else "skip" if "skip" in name else "pass"
    assert data["overall"] == expected and data["tests"]
    assert all(t["status"] in ("pass", "fail", "warn", "skip", "info", "unknown") for t in data["tests"])


@pytest.mark.parametrize("content", [b"hello world\n", b'{"foo": 1}\n', b"\x00\x01\x02binary"])
def test_parse_dcgmi_garbage_exits_2(tmp_path, content):
    junk = tmp_path / "junk.out"
    junk.write_bytes(content)
    result = _parse_dcgmi(junk)
    assert result.exit_code == 2
    assert f"{junk}: not dcgmi diag output" in result.output and "Traceback" not in result.output
    assert result.output.lstrip().startswith("Error:")


# -- 5. the allocation step's blast radius ------------------------------------------------------------

def _fake_scontrol(tmp_path):
    """An scontrol that records its arguments and answers `show node NAME` with an idle node."""
    idle = (FIXTURES / "slurm" / "scontrol-show-node-o-22.05-idle.txt").read_text().splitlines()[0]
    (tmp_path / "idle-node.txt").write_text(idle + "\n")
    calls = tmp_path / "scontrol-calls.txt"
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n"
                    f"printf '%s\\n' \"$*\" >> '{calls}'\n"
                    "for a; do last=$a; done\n"
                    f"case \"$*\" in *show*) sed \"s/^NodeName=node1 /NodeName=$last /\" '{tmp_path / 'idle-node.txt'}';; "
                    "esac\n")
    fake.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return fake, calls


def _allocation_env(tmp_path, monkeypatch, failing: list[str]):
    """A job of n[1-4] whose nodes left their records (FAIL for ``failing``), a config pointing the
    Slurm backend at the fake scontrol; returns (config path, calls file, spool dir)."""
    for key in list(os.environ):
        if key.startswith("HEALTHCHECK_") or key in ("SLURM_NODELIST", "SLURM_ARRAY_TASK_ID", "SLURM_SUBMIT_DIR"):
            monkeypatch.delenv(key, raising=False)
    fake, calls = _fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    results = tmp_path / "results"
    settings = resolve({"backend": "numpy"}, environ={})
    for i in range(1, 5):
        node = f"n{i}"
        status = Status.FAIL if node in failing else Status.PASS
        finding = Finding("burnin.gemm.tflops", status, "gpu0: 310 TFLOP/s below h100_sxm reference", "gpu0",
                          {"gemm_tflops": 310.0})
        ctx = node_run.NodeContext(node, settings, load(), "4711", "n[1-4]")
        verdict = Verdict.of(node, [finding], "2026-01-01T00:00:00+00:00", 12.0, "burnin")
        node_run.write_result(str(results), node, node_run.node_record(ctx, verdict, f"run-{node}", None))
    spool = tmp_path / "spool"
    config = tmp_path / "site.toml"
    config.write_text(f'[slurm]\nscontrol = "{fake}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'spool_dir = "{spool}"\n')
    monkeypatch.setenv("SLURM_JOB_ID", "4711")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-4]")
    monkeypatch.setenv("HEALTHCHECK_BURNIN_PHASES", "gemm")
    monkeypatch.setenv("HEALTHCHECK_BURNIN_BACKEND", "numpy")
    monkeypatch.setenv("HEALTHCHECK_BURNIN_DRAIN", "true")
    monkeypatch.setenv("HEALTHCHECK_BURNIN_RESULTS_DIR", str(results))
    return config, calls, spool


def _spool_records(spool) -> list[dict]:
    return [json.loads(line) for p in sorted(spool.rglob("*.jsonl")) for line in p.read_text().splitlines()
            if line.strip()]


def test_allocation_beyond_the_blast_radius_drains_nothing_and_exits_4(tmp_path, monkeypatch):
    nodes = ["n1", "n2", "n3", "n4"]
    config, calls, spool = _allocation_env(tmp_path, monkeypatch, failing=nodes)
    result = CliRunner().invoke(cli, ["burnin", "run", "--allocation", "--config", str(config), "--format", "json"])

    assert result.exit_code == SHARED_CAUSE_EXIT == 4
    out = json.loads(result.stdout[result.stdout.index("{"):])
    assert out["drain"] == [] and out["actions"] == [] and out["status"] == "fail"
    assert out["suspect_shared_cause"].startswith("4 of 4 nodes failed (burnin.gemm.tflops)")
    assert "cap of 1" in out["suspect_shared_cause"] and "nothing drained" in out["suspect_shared_cause"]
    assert {n: v["status"] for n, v in out["per_node"].items()} == dict.fromkeys(nodes, "fail")
    assert not calls.exists() or calls.read_text() == ""  # scontrol was never run: no state read, no drain
    summary = json.loads((tmp_path / "results" / "summary-4711.json").read_text())
    assert summary["suspect_shared_cause"] == out["suspect_shared_cause"] and summary["drain"] == []
    records = _spool_records(spool)
    assert not [r for r in records if r.get("kind") == "action"]
    job = [r for r in records if r.get("context") == "burnin-job"]
    assert job and any(r["check"] == "burnin.blast_radius" and r["status"] == "warn" for r in job[0]["results"])


def test_allocation_within_the_blast_radius_drains_through_the_configured_scontrol(tmp_path, monkeypatch):
    """The control of the test above: the same set-up with one failing node does reach the fake
    scontrol, so its silence there is the blast radius at work, not a fake nobody calls."""
    config, calls, _spool = _allocation_env(tmp_path, monkeypatch, failing=["n2"])
    result = CliRunner().invoke(cli, ["burnin", "run", "--allocation", "--config", str(config), "--format", "json"])

    assert result.exit_code == 1
    out = json.loads(result.stdout[result.stdout.index("{"):])
    assert out["drain"] == ["n2"] and out["suspect_shared_cause"] is None
    assert [a["node"] for a in out["actions"]] == ["n2"] and out["actions"][0]["action"] == "drain"
    lines = calls.read_text().splitlines()
    assert lines[0] == "-o show node n2"
    assert any(line.startswith("update NodeName=n2 State=DRAIN Reason=") for line in lines[1:])
    assert not [line for line in lines if "n1" in line or "n3" in line or "n4" in line]
