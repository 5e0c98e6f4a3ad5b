"""`healthcheck burnin run|report|submit` and `healthcheck parse nccl-tests|dcgmi|fio` at the CLI."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from healthcheck.burnin.submit import SubmitError, sbatch_argv
from healthcheck.cli import cli
from tests.conftest import FIXTURES


def invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_node_run_with_numpy_backend_records_and_judges(tmp_path, monkeypatch):
    for key in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(key, raising=False)
    config = tmp_path / "site.toml"
    config.write_text('[burnin]\nbackend = "numpy"\nphases = ["gemm", "bandwidth", "nccl"]\ngemm_duration_s = 0.3\n'
                      f'gemm_n = 64\nbandwidth_repeats = 2\nnccl_dir = "{tmp_path / "none"}"\n')
    spool = tmp_path / "spool"
    result = CliRunner().invoke(cli, ["burnin", "run", "--config", str(config), "--node", "n1", "--spool", str(spool),
                                      "--results-dir", str(tmp_path / "res"), "--format", "json"])
    record = json.loads(result.stdout[result.stdout.index("{"):])
    assert record["node"] == "n1" and record["context"] == "burnin" and record["job_id"] is None
    checks = {r["check"]: r["status"] for r in record["results"]}
    assert checks["burnin.gemm.verify"] == "pass" and checks["burnin.nccl"] == "skip"
    assert any(r["check"] == "burnin.gemm.tflops" and r["metrics"].get("gemm_tflops", 0) > 0 for r in record["results"])
    assert record["burnin"]["backend"] == "numpy" and set(record["burnin"]["phase_seconds"]) == {"gemm", "bandwidth",
                                                                                                 "nccl"}
    assert result.exit_code == (1 if record["status"] == "fail" else 0)
    assert json.loads((tmp_path / "res" / "n1.json").read_text())["run_id"] == record["run_id"]
    assert record["run_id"] in (spool / "records.jsonl").read_text()


def test_allocation_outside_a_job_is_a_usage_error(monkeypatch):
    for key in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(cli, ["burnin", "run", "--allocation"])
    assert result.exit_code == 2 and "SLURM_JOB_NODELIST is not set" in result.output


def test_bad_settings_and_references_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["burnin", "run", "--duration", "-1"])
    assert result.exit_code == 2 and "gemm_duration_s" in result.output
    refs = tmp_path / "refs.toml"
    refs.write_text("[sku.x]\nfoo = 1\n")
    result = CliRunner().invoke(cli, ["burnin", "run", "--references", str(refs)])
    assert result.exit_code == 2 and "refs.toml" in result.output


def test_report_reads_node_results_without_a_summary(tmp_path):
    for node, status in (("a1", "pass"), ("a2", "fail")):
        (tmp_path / f"{node}.json").write_text(json.dumps({"kind": "run", "node": node, "status": status, "results": [
            {"check": "burnin.gemm.tflops", "status": status, "message": "gpu1: 500 TFLOP/s below reference",
             "component": "gpu1", "metrics": {}}]}))
    result = invoke("burnin", "report", "77", "--results-dir", str(tmp_path))
    assert result.exit_code == 0
    assert "burn-in job 77: FAIL (2 nodes)" in result.output and "a2: FAIL" in result.output
    assert "per GPU: gpu1=fail" in result.output
    missing = CliRunner().invoke(cli, ["burnin", "report", "78", "--results-dir", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no results directory" in missing.output


def test_submit_renders_checked_flags():
    argv = sbatch_argv("/t/burnin.sbatch", nnodes=4, nodelist="gpu[01-04]", partition="gpu", gpus_per_node=8,
                       suite="quick", time_limit="1:00:00")
    assert argv == ["sbatch", "--parsable", "-N", "4", "-w", "gpu[01-04]", "-p", "gpu", "--gpus-per-node=8",
                    "--time=1:00:00", "--export=ALL,HEALTHCHECK_BURNIN_SUITE=quick", "/t/burnin.sbatch"]
    # no --suite: the job runs the site's [burnin] suite (nothing exported to override it)
    assert sbatch_argv("/t/b.sbatch", nnodes=2)[-2:] == ["--export=ALL", "/t/b.sbatch"]
    for bad in ({"nodelist": "gpu01; rm -rf /"}, {"partition": "a b"}, {"time_limit": "soon"}, {"nnodes": 0},
                {"suite": "fast"}):
        with pytest.raises(SubmitError):
            sbatch_argv("/t/b.sbatch", **bad)
    result = invoke("burnin", "submit", "-N", "2", "--dry-run")
    assert result.exit_code == 0 and result.output.startswith("sbatch --parsable -N 2 --export=ALL ")
    assert result.output.strip().endswith("sbatch_templates/burnin.sbatch")


def test_parse_nccl_tests_json_contract():
    path = FIXTURES / "nccl-tests" / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt"
    result = invoke("parse", "nccl-tests", str(path), "--json")
    data = json.loads(result.output)
    for key in ("avg_busbw_gbps", "out_of_bounds", "rows", "ranks", "errors"):
        assert key in data
    row = data["rows"][-1]
    assert set(row) >= {"size_bytes", "count", "type", "redop", "root", "oop", "ip"}
    assert set(row["oop"]) >= {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}
    assert set(data["ranks"][0]) >= {"rank", "host", "device", "busid", "name"}
    assert data["alpha_beta"]["beta_gbps"] > 0
    summary = invoke("parse", "nccl-tests", str(path))
    assert "ranks" in summary.output and "avg busbw" in summary.output


@pytest.mark.parametrize("kind", ["nccl-tests", "dcgmi", "fio"])
def test_parse_garbage_exits_2(tmp_path, kind):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    result = CliRunner().invoke(cli, ["parse", kind, str(junk)])
    assert result.exit_code == 2 and "junk.txt" in result.output and "Traceback" not in result.output


def test_every_sbatch_template_is_installed_where_submit_finds_it(tmp_path, monkeypatch):
    """A non-editable install has no source tree: the templates travel as data files to
    <prefix>/share/healthcheck/sbatch_templates, the place default_template looks last."""
    import sys
    import tomllib
    from pathlib import Path

    from healthcheck.burnin import submit

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    installed = set(data["share/healthcheck/sbatch_templates"])
    assert {f"sbatch_templates/{p.name}" for p in (root / "sbatch_templates").glob("*.sbatch")} <= installed
    share = tmp_path / "share" / "healthcheck" / "sbatch_templates"
    share.mkdir(parents=True)
    (share / "burnin.sbatch").write_text("#!/bin/bash\n")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(submit, "__file__", str(tmp_path / "site-packages" / "healthcheck" / "burnin" / "submit.py"))
    monkeypatch.delenv("HEALTHCHECK_SBATCH_DIR", raising=False)
    assert submit.default_template() == str(share / "burnin.sbatch")
