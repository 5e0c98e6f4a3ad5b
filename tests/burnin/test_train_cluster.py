"""Issue 34, item 6: the training smoke test as a real multi-node job on the local Slurm cluster (2 slurmd
nodes x 2 tasks, gloo on the CPU, torch's CPU build that the test command installs):
`sbatch sbatch_templates/train-smoke.sbatch` unedited passes against the committed CPU reference, its
kill-and-resume within 0.1 %, its record reaches the history and its checkpoints are gone; a corrupted
gradient on one rank fails naming that rank and its node. Cost: about 45 s and 20 s here."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
HEALTHCHECK = Path(sys.executable).parent / "healthcheck"


@pytest.fixture
def site(tmp_path):
    config = tmp_path / "site.toml"
    config.write_text("\n".join([
        "[slurm]", f'state_dir = "{tmp_path / "state"}"', f'spool_dir = "{tmp_path / "spool"}"',
        "[burnin]", "train_tasks_per_node = 2", "train_timeout_s = 300.0",
        'launcher = ["srun", "--overlap", "--kill-on-bad-exit=1", "-N", "{nnodes}", "-w", "{nodelist}", '
        '"--ntasks-per-node", "{tasks_per_node}"]', ""]))
    return tmp_path, config


def test_train_smoke_template_passes_resumes_and_reaches_the_history(site, slurm_cluster_factory):
    root, config = site
    cluster = slurm_cluster_factory()
    out, results = root / "train.out", root / "results"
    job = cluster.sbatch("-N", "2", "-o", str(out), "--chdir", str(root),
                         f"--export=ALL,HEALTHCHECK={HEALTHCHECK},HEALTHCHECK_CONFIG={config},"
                         f"HEALTHCHECK_BURNIN_RESULTS_DIR={results}",
                         str(ROOT / "sbatch_templates" / "train-smoke.sbatch"))
    state = cluster.wait_job(job, "COMPLETED", timeout=300)
    log = out.read_text()
    assert state.get("ExitCode", "0:0") == "0:0", log
    summary = json.loads((results / f"summary-{job}.json").read_text())
    checks = {(f["check"], f.get("component")): f for f in summary["collective"]}
    assert summary["status"] == "pass", log
    conv = checks[("burnin.train.convergence", None)]
    assert conv["status"] == "pass" and "tiny|gloo|fp32|2-8" in conv["message"], log
    # the committed reference (recorded with 4 local ranks) reproduced by the Slurm job to far inside its band
    assert conv["metrics"]["band_used"] < 0.05, conv
    assert checks[("burnin.train.ranks", None)]["message"].startswith("4 ranks agree"), log
    resume = checks[("burnin.train.resume", None)]
    assert resume["status"] == "pass" and resume["metrics"]["deviation_rel"] < 0.001, log
    assert resume["metrics"]["recovery_s"] > 0
    assert {checks[("burnin.train.throughput", f"rank {r}")]["status"] for r in range(4)} == {"pass"}
    ranks = summary["train"]["full"]["ranks"]
    assert sorted(v["node"] for v in ranks.values()) == ["node1", "node1", "node2", "node2"]
    assert not (results / f"train-{job}" / "checkpoints").exists()  # removed at the end
    assert summary["drain"] == []

    db = root / "history.sqlite"
    ingest = subprocess.run([sys.executable, "-m", "healthcheck.cli", "history", "ingest", str(root / "spool"),
                             "--db", str(db)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert ingest.returncode == 0, ingest.stderr
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT status, job_id FROM runs WHERE context = 'burnin-job'").fetchall()
        recovery = conn.execute("SELECT value FROM metrics WHERE name = 'recovery_s'").fetchall()
        curve = conn.execute("SELECT name, value FROM metrics WHERE \"check\" = 'burnin.train.convergence' AND "
                             "name LIKE 'loss%@%' ORDER BY name").fetchall()
        pct = conn.execute("SELECT value FROM metrics WHERE name = 'pct_of_reference'").fetchall()
    assert runs == [("pass", job)] and len(recovery) == 1 and recovery[0][0] > 0
    # the loss curve in the history: 32 of the 40 steps, the reference's beside each (issue 34, the report's plot)
    loss = summary["train"]["full"]["loss"]
    points = {n: v for n, v in curve}
    assert len(points) == 64 and points["loss@0000001"] == loss[0] and points["loss@0000040"] == loss[-1]
    assert len(pct) == 4 and all(v[0] > 10 for v in pct)  # every rank above its floor (10 % of the CPU reference)


def test_a_corrupted_gradient_on_one_rank_fails_naming_it_and_its_node(site, slurm_cluster_factory):
    root, config = site
    cluster = slurm_cluster_factory()
    out = root / "corrupt.out"
    job = cluster.sbatch("-N", "2", "--exclusive", "-o", str(out), "--chdir", str(root), "--wrap",
                         f"{HEALTHCHECK} burnin train --config {config} --results-dir {root / 'results'} --no-resume "
                         "--no-drain --corrupt-rank 3 "
                         "--corrupt-step 12; echo burnin-train-exit=$?")
    cluster.wait_job(job, "COMPLETED", timeout=300)
    log = out.read_text()
    summary = json.loads((root / "results" / f"summary-{job}.json").read_text())
    node2 = summary["per_node"]["node2"]
    assert summary["status"] == "fail" and node2["status"] == "fail", log
    (bad,) = [f for f in node2["findings"] if f["check"] == "burnin.train.ranks"]
    assert bad["component"] == "rank 3" and "rank 3 on node2" in bad["message"] and "step 12" in bad["message"], log
    assert summary["per_node"]["node1"]["status"] == "pass"
    assert "burnin-train-exit=1" in log  # a node failed
    assert "drain: node2" in log and "drained" not in log  # planned, not applied: --no-drain
