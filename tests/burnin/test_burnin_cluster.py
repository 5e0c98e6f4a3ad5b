"""Burn-in end to end on the real local Slurm cluster: `sbatch sbatch_templates/burnin.sbatch` unedited,
tuned only by sbatch flags and environment, with the NumPy GEMM backend and a test double of the
nccl-tests binaries that replays a real recorded output scaled per node (node3 40 % slow).

The job completes; every node's result is in the history with the job id and its node list; the slow
node is named (per-node nccl figure and the cross-node localisation) and drained with our reason; the
others are not.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from healthcheck.burnin.judge_nccl import large_busbw
from healthcheck.burnin.nccl_run import NcclRun
from healthcheck.bundles.collect import collect_bundle
from healthcheck.parsers import nccl_tests
from tests.burnin import nccl_double
from tests.conftest import CORPUS, FIXTURES
from tests.bundles.test_bundles import make_node

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
NODES = ("node1", "node2", "node3", "node4")
SLOW = "node3"


def recording() -> Path:
    """The real healthy 8x A100 all_reduce when the corpus is here; the project's own recording else."""
    corpus = CORPUS / "nccl-tests" / "all_reduce-a100-sxm4-8gpu-single-process.txt"
    if corpus.is_file():
        return corpus
    return FIXTURES / "nccl-tests" / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt"


def baseline_busbw(path: Path) -> float:
    run = NcclRun("all_reduce", "node", ["x"], [], result=nccl_tests.parse(path.read_text()))
    value = large_busbw(run)
    assert value and value > 1.0
    return value


@pytest.fixture
def site(tmp_path):
    node = make_node(tmp_path / "src")
    healthy, _ = collect_bundle(str(tmp_path / "healthy"), options=node)
    bundles = tmp_path / "bundles"
    for name in NODES:
        (bundles / name).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", healthy, str(bundles / name)], check=True)
    rec = recording()
    base = baseline_busbw(rec)
    double = nccl_double.install(tmp_path / "nccl-tests", rec, {SLOW: 0.6}, gpus=8)
    refs = tmp_path / "refs.toml"
    entry = f'{{ value = {base:.2f}, lower = -0.2, upper = 0.5, unit = "GB/s", source = "the recording itself" }}'
    # the recording is an 8x A100-SXM4 run (NVLink 3) replayed on the H100 bundles: its line rate and the
    # efficiency references of its link, so the healthy nodes pass the line-rate judgement as they should
    refs.write_text(f"[sku.h100_sxm]\nnccl_all_reduce_busbw_gbps = {entry}\nlink = \"nvlink3\"\n"
                    'line_rate_gbps = { value = 300.0, unit = "GB/s", source = "NVLink 3: the recording\'s A100" }\n'
                    f"[fabric.test]\nnccl_all_reduce_busbw_gbps = {entry}\n")
    config = tmp_path / "site.toml"
    config.write_text("\n".join([
        "[class.bundled]", 'nodes = "node[1-4]"', f'bundle = "{bundles}/{{node}}"',
        "[slurm]", f'state_dir = "{tmp_path / "state"}"', f'spool_dir = "{tmp_path / "spool"}"',
        "[burnin]", 'suite = "quick"', 'backend = "numpy"', 'phases = ["checks", "gemm", "bandwidth", "nccl"]',
        "gemm_duration_s = 1.0", "gemm_n = 128", "bandwidth_repeats = 2", 'nccl_collectives = ["all_reduce"]',
        f'nccl_dir = "{double}"', "nccl_timeout_s = 60.0", 'fabric = "test"', f'references = "{refs}"',
        'launcher = ["srun", "--overlap", "-N", "{nnodes}", "-w", "{nodelist}", "--ntasks-per-node", "1"]',
        ""]))
    return tmp_path, config


def test_burnin_names_and_drains_the_slow_node(site, slurm_cluster_factory):
    root, config = site
    cluster = slurm_cluster_factory()
    out = root / "burnin.out"
    results = root / "results"
    healthcheck = Path(sys.executable).parent / "healthcheck"
    job = cluster.sbatch("-N", "4", "-o", str(out), "--chdir", str(root),
                         f"--export=ALL,HEALTHCHECK={healthcheck},HEALTHCHECK_CONFIG={config},"
                         f"HEALTHCHECK_BURNIN_RESULTS_DIR={results}",
                         str(ROOT / "sbatch_templates" / "burnin.sbatch"))
    state = cluster.wait_job(job, "COMPLETED", timeout=240)
    log = out.read_text()
    assert state.get("ExitCode", "0:0") == "0:0", log

    summary = json.loads((results / f"summary-{job}.json").read_text())
    assert summary["job_id"] == job and summary["nodes"] == list(NODES), log
    assert summary["drain"] == [SLOW], log
    assert summary["localisation"]["bad"] == [SLOW] and summary["localisation"]["suspects"] == [], log
    assert len(summary["localisation"]["rounds"]) <= 3, summary["localisation"]["rounds"]  # docs/burnin.md
    assert summary["per_node"][SLOW]["status"] == "fail"
    slow_checks = {f["check"] for f in summary["per_node"][SLOW]["findings"] if f["status"] == "fail"}
    assert slow_checks == {"burnin.nccl", "burnin.localise"}, summary["per_node"][SLOW]
    for node in set(NODES) - {SLOW}:
        assert summary["per_node"][node]["status"] in ("pass", "warn"), summary["per_node"][node]
    assert f"{SLOW}: drained" in log and "slow: node3" in log

    # drained with our reason, the others untouched
    reasons = cluster.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E"]).stdout
    drained = {line.split("|")[0]: line.split("|", 1)[1] for line in reasons.splitlines() if "|" in line}
    assert set(drained) == {SLOW}, reasons
    assert drained[SLOW].startswith("healthcheck: burnin.") and "run " in drained[SLOW], drained

    # every node's run is in the history with the job id and the job's node list
    db = root / "history.sqlite"
    ingest = subprocess.run([sys.executable, "-m", "healthcheck.cli", "history", "ingest", str(root / "spool"),
                             "--db", str(db)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert ingest.returncode == 0, ingest.stderr
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT node, status, job_id, job_nodes FROM runs WHERE context = 'burnin'").fetchall()
        busbw = dict(conn.execute("SELECT m.node, m.value FROM metrics m JOIN runs r ON r.run_id = m.run_id "
                                  "WHERE m.name = 'busbw_gbps' AND r.context = 'burnin'").fetchall())
        job_run = conn.execute("SELECT status, job_id FROM runs WHERE context = 'burnin-job'").fetchall()
        localised = conn.execute('SELECT component FROM results WHERE "check" = \'burnin.localise\'').fetchall()
        actions = conn.execute("SELECT node, action, job_id FROM actions").fetchall()
    assert sorted(r[0] for r in rows) == list(NODES)
    assert {r[2] for r in rows} == {job} and {r[3] for r in rows} == {"node[1-4]"}
    assert {r[0]: r[1] for r in rows}[SLOW] == "fail"
    assert busbw[SLOW] == pytest.approx(0.6 * busbw["node1"], rel=0.02)
    assert job_run == [("fail", job)] and localised == [(SLOW,)] and actions == [(SLOW, "drain", job)]

    # the report reads the same verdict back
    report = subprocess.run([sys.executable, "-m", "healthcheck.cli", "burnin", "report", job, "--results-dir",
                             str(results)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert report.returncode == 0 and "node3: FAIL" in report.stdout and "drain: node3" in report.stdout
    cluster.run(["scontrol", "update", f"nodename={SLOW}", "state=resume"])
