"""An array burn-in (sbatch_templates/burnin-array.sbatch): each task sees one node, so the tasks drain
nothing; `burnin report ARRAY --drain` decides afterwards over every node result of the array, under
the blast radius and the ownership rules; `burnin report ARRAY` merges the tasks' summaries."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from healthcheck.cli import cli
from tests.conftest import FIXTURES

NODES = ("node1", "node2", "node3", "node4")
ROOT = Path(__file__).resolve().parents[2]


def node_result(node: str, status: str) -> dict:
    return {"kind": "run", "node": node, "status": status, "run_id": f"r-{node}", "burnin": {"gpu_count": 8},
            "results": [{"check": "burnin.gemm.tflops", "status": status, "component": "gpu2", "metrics": {},
                         "message": "gpu2: 512.0 TFLOP/s below reference >= 600" if status == "fail" else "ok"}]}


def site(tmp_path: Path, failing: tuple[str, ...]) -> tuple[Path, Path]:
    results = tmp_path / "burnin-100"
    results.mkdir()
    for i, node in enumerate(NODES, 1):
        status = "fail" if node in failing else "pass"
        (results / f"{node}.json").write_text(json.dumps(node_result(node, status)))
        # what each task's allocation step (--no-drain) leaves: its one node, nothing drained
        (results / f"summary-{100 + i}_{i}.json").write_text(json.dumps({
            "job_id": str(100 + i), "nodes": [node], "status": status, "drain": [], "actions": [],
            "collective": [], "localisation": None, "suspect_shared_cause": None,
            "per_node": {node: {"status": status, "findings": node_result(node, status)["results"]}}}))
    (results / "fleet-digests.json").write_text('{"schema": 1, "digests": {}}')  # not a node result
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/scontrol.calls\n'
                        f'case "$*" in *show*) cat {FIXTURES / "slurm" / "scontrol-show-node-o-22.05-idle.txt"};; '
                        'esac\nexit 0\n')
    scontrol.chmod(0o755)
    config = tmp_path / "site.toml"
    config.write_text(f'[slurm]\nscontrol = "{scontrol}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'spool_dir = "{tmp_path / "spool"}"\n[burnin]\nmax_drain_fraction = 0.25\n')
    return results, config


def drains(tmp_path: Path) -> list[str]:
    calls = tmp_path / "scontrol.calls"
    return [c for c in calls.read_text().splitlines() if "State=DRAIN" in c] if calls.exists() else []


def test_the_array_template_drains_nothing_per_task():
    text = (ROOT / "sbatch_templates" / "burnin-array.sbatch").read_text()
    steps = [ln for ln in text.splitlines() if "burnin run --allocation" in ln and not ln.lstrip().startswith("#")]
    assert steps and all("--no-drain" in ln for ln in steps)


def test_report_merges_the_tasks_summaries(tmp_path):
    results, _ = site(tmp_path, failing=("node2",))
    out = CliRunner().invoke(cli, ["burnin", "report", "100", "--results-dir", str(results), "--format", "json"])
    data = json.loads(out.output)
    assert data["nodes"] == list(NODES) and data["status"] == "fail" and data["drain"] == []
    assert data["per_node"]["node2"]["status"] == "fail" and data["per_node"]["node4"]["status"] == "pass"


def test_report_drain_drains_the_failed_node_once_under_our_rules(tmp_path):
    results, config = site(tmp_path, failing=("node2",))
    out = CliRunner().invoke(cli, ["burnin", "report", "100", "--results-dir", str(results), "--drain",
                                   "--config", str(config)])
    assert out.exit_code == 1, out.output
    (call,) = drains(tmp_path)
    assert "NodeName=node2" in call and "healthcheck: burnin.gemm.tflops gpu2" in call
    assert "drain: node2" in out.output
    # the decision is kept: the report now reads the array's own summary, actions included
    data = json.loads(CliRunner().invoke(cli, ["burnin", "report", "100", "--results-dir", str(results),
                                               "--format", "json"]).output)
    assert data["drain"] == ["node2"] and [a["action"] for a in data["actions"]] == ["drain"]
    assert (tmp_path / "spool" / "records.jsonl").read_text().count('"kind":"action"') == 1


def test_report_drain_respects_the_blast_radius(tmp_path):
    results, config = site(tmp_path, failing=("node1", "node2", "node3"))
    out = CliRunner().invoke(cli, ["burnin", "report", "100", "--results-dir", str(results), "--drain",
                                   "--config", str(config)])
    assert out.exit_code == 4, out.output  # a shared cause is more likely than 3 of 4 broken nodes
    assert drains(tmp_path) == [] and "more than the blast-radius cap of 1" in out.output


def test_report_drain_without_results_is_a_usage_error(tmp_path):
    out = CliRunner().invoke(cli, ["burnin", "report", "7", "--results-dir", str(tmp_path / "none"), "--drain"])
    assert out.exit_code == 2 and "no results directory" in out.output
