"""The nightly sweep on the real local Slurm cluster (4 nodes; each node's hardware a bundle; burn-in
jobs with the NumPy backend, node checks and a short GEMM), the four scenarios of the sweep issue."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from healthcheck.bundles.collect import collect_bundle
from healthcheck.slurm.nodestate import parse_scontrol_nodes
from tests.bundles.test_bundles import make_node

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
NODES = ("node1", "node2", "node3", "node4")
OUR_OLD = "healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC errors [run 0123456789ab]"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep-bundles")
    out = {}
    for name in ("healthy", "ecc-fault"):
        node = make_node(root / f"src-{name}")
        if name == "ecc-fault":
            node.nvml.gpus[3].ecc[(1, 0)] = 2  # uncorrected volatile: gpu.ecc.uncorrected FAIL
        out[name], _ = collect_bundle(str(root / name), options=node)
    return out


class Site:
    def __init__(self, root: Path, cluster, sources, gemm_s: float = 0.5):
        self.root, self.cluster, self.sources = root, cluster, sources
        self.bundles = root / "bundles"
        for node in NODES:
            self.set_bundle(node, "healthy")
        self.db = root / "history.sqlite"
        self.config = root / "site.toml"
        self.config.write_text("\n".join([
            "[class.bundled]", 'nodes = "node[1-4]"', f'bundle = "{self.bundles}/{{node}}"',
            "[slurm]", f'state_dir = "{root / "state"}"', f'spool_dir = "{root / "spool"}"',
            "[burnin]", 'backend = "numpy"', 'phases = ["checks", "gemm"]', f"gemm_duration_s = {gemm_s}",
            "gemm_n = 64",
            "[sweep]", f'results_root = "{root / "sweeps"}"', "max_drain_fraction = 0.25", "poll_s = 0.5",
            'time_limit = "00:10:00"', "wait_timeout_s = 300.0", f'db_url = "{self.db}"', ""]))

    def set_bundle(self, node: str, which: str) -> None:
        target = self.bundles / node
        if target.exists():
            subprocess.run(["rm", "-rf", str(target)], check=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", self.sources[which], str(target)], check=True)

    def env(self) -> dict[str, str]:
        env = dict(self.cluster.env)
        env["HEALTHCHECK"] = str(Path(sys.executable).parent / "healthcheck")
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    def sweep(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "healthcheck.cli", "sweep", "--config", str(self.config),
                               "--format", "json", *args], capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, env=self.env())

    def start_sweep(self) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "healthcheck.cli", "sweep", "--config", str(self.config)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=self.env(),
                                start_new_session=True)

    def reasons(self) -> dict[str, str | None]:
        out = self.cluster.run(["scontrol", "-o", "show", "node"]).stdout
        return {n: s.reason for n, s in parse_scontrol_nodes(out).items()}

    def drained(self) -> set[str]:
        out = self.cluster.run(["scontrol", "-o", "show", "node"]).stdout
        return {n for n, s in parse_scontrol_nodes(out).items() if s.drained}

    def drain(self, node: str, reason: str) -> None:
        self.cluster.run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"])

    def sweep_jobs(self) -> dict[str, int]:
        """job name -> how many jobs of that name slurmctld knows (completed ones included)."""
        out = self.cluster.run(["scontrol", "-o", "show", "job"], check=False).stdout
        names: dict[str, int] = {}
        for line in out.splitlines():
            for field in line.split():
                if field.startswith("JobName=hc-sweep-"):
                    name = field.split("=", 1)[1]
                    names[name] = names.get(name, 0) + 1
        return names

    def reservations(self) -> str:
        return self.cluster.run(["scontrol", "-o", "show", "reservation"], check=False).stdout


def _outcome(proc: subprocess.CompletedProcess) -> dict:
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_sweep_drains_the_faulty_node_leaves_the_admins_and_resumes_ours(tmp_path, slurm_cluster_factory, sources):
    cluster = slurm_cluster_factory()
    site = Site(tmp_path, cluster, sources)
    site.set_bundle("node1", "ecc-fault")
    site.drain("node2", "RMA ticket 4711")
    site.drain("node3", OUR_OLD)  # drained by us earlier; its bundle is healthy again
    proc = site.sweep()
    out = _outcome(proc)
    assert proc.returncode == 1, proc.stderr
    assert [t["node"] for t in out["plan"]["test"]] == ["node3", "node1", "node4"]  # ours first
    assert "node2" in out["plan"]["skipped"] and "not ours" in out["plan"]["skipped"]["node2"]
    assert out["results"] == {"node1": "fail", "node3": "pass", "node4": "pass"}
    reasons = site.reasons()
    assert reasons["node1"].startswith("healthcheck: gpu.ecc.uncorrected") and "[run " in reasons["node1"]
    assert reasons["node2"] == "RMA ticket 4711"
    assert site.drained() == {"node1", "node2"}
    assert not reasons["node3"] and not reasons["node4"]
    assert "healthcheck-sweep" not in site.reservations()
    # results in the history, the readiness report next to the sweep's results
    with sqlite3.connect(site.db) as conn:
        runs = dict(conn.execute("SELECT node, status FROM runs WHERE context = 'burnin'").fetchall())
        actions = sorted(conn.execute("SELECT node, action FROM actions WHERE context = 'sweep'").fetchall())
    assert runs == {"node1": "fail", "node3": "pass", "node4": "pass"}
    assert actions == [("node1", "drain"), ("node3", "resume")]
    assert out["report"] and Path(out["report"]).read_text().startswith("<!DOCTYPE html>")
    cluster.run(["scontrol", "update", "nodename=node[1-2]", "state=resume"])


def test_a_check_failing_on_most_nodes_drains_nobody_and_says_so(tmp_path, slurm_cluster_factory, sources):
    cluster = slurm_cluster_factory()
    site = Site(tmp_path, cluster, sources)
    for node in ("node1", "node2", "node3"):
        site.set_bundle(node, "ecc-fault")
    proc = site.sweep()
    out = _outcome(proc)
    assert proc.returncode == 4, proc.stderr
    assert set(out["suspect"]) == {"gpu.ecc.uncorrected"} and "suspect check or shared cause" in \
        out["suspect"]["gpu.ecc.uncorrected"]
    assert out["results"] == {"node1": "fail", "node2": "fail", "node3": "fail", "node4": "pass"}
    assert site.drained() == set()  # at most the cap (here: none, the check itself is suspect)
    assert "SUSPECT" in proc.stderr


def test_a_killed_sweep_is_continued_without_double_submission(tmp_path, slurm_cluster_factory, sources):
    cluster = slurm_cluster_factory()
    site = Site(tmp_path, cluster, sources, gemm_s=4.0)
    site.set_bundle("node4", "ecc-fault")
    state_file = tmp_path / "state" / "sweep-state.json"
    first = site.start_sweep()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if state_file.exists() and json.loads(state_file.read_text())["phase"] == "submitted":
            break
        time.sleep(0.1)
    else:
        first.kill()
        pytest.fail(f"the sweep never submitted: {first.communicate()[1][-2000:]}")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(10)
    saved = json.loads(state_file.read_text())
    assert set(saved["jobs"]) == set(NODES)
    proc = site.sweep()
    out = _outcome(proc)
    assert out["sweep_id"] == saved["sweep_id"] and "continuing unfinished sweep" in proc.stderr
    jobs = site.sweep_jobs()
    assert jobs == {f"hc-sweep-{saved['sweep_id']}-{n}": 1 for n in NODES}, jobs  # none submitted twice
    assert out["results"] == {"node1": "pass", "node2": "pass", "node3": "pass", "node4": "fail"}
    assert site.drained() == {"node4"}
    assert json.loads(state_file.read_text())["phase"] == "done"
    again = _outcome(site.sweep("--dry-run"))  # a finished sweep is not continued again
    assert again["sweep_id"] is None and "unfinished" not in " ".join(again["notes"])
    cluster.run(["scontrol", "update", "nodename=node4", "state=resume"])


def test_dry_run_changes_nothing(tmp_path, slurm_cluster_factory, sources):
    cluster = slurm_cluster_factory()
    site = Site(tmp_path, cluster, sources)
    site.set_bundle("node1", "ecc-fault")
    site.drain("node2", "RMA ticket 4711")
    site.drain("node3", OUR_OLD)
    before = (cluster.run(["sinfo", "-N", "-h", "-o", "%N %T %E"]).stdout, site.reservations(),
              cluster.run(["squeue", "-h"]).stdout)
    proc = site.sweep("--dry-run")
    out = _outcome(proc)
    assert proc.returncode == 0 and out["dry_run"] is True
    assert [t["node"] for t in out["plan"]["test"]] == ["node3", "node1", "node4"]
    notes = " ".join(out["notes"])
    assert "would resume node3" in notes and "would run: sbatch" in notes and "-w node1" in notes
    after = (cluster.run(["sinfo", "-N", "-h", "-o", "%N %T %E"]).stdout, site.reservations(),
             cluster.run(["squeue", "-h"]).stdout)
    assert after == before
    assert not (tmp_path / "state" / "sweep-state.json").exists() and not site.db.exists()
    assert not (tmp_path / "sweeps").exists()
    cluster.run(["scontrol", "update", "nodename=node[2-3]", "state=resume"])


def test_the_next_sweep_compares_each_node_with_the_fleet(tmp_path, slurm_cluster_factory, sources):
    """One-node burn-in jobs have no peer in their job: from the second sweep on, the history's fleet
    majority (written by the sweep, handed to the jobs) is their peer."""
    from healthcheck.burnin import fleetfile

    cluster = slurm_cluster_factory()
    site = Site(tmp_path, cluster, sources)
    first = site.sweep()
    assert first.returncode == 0, first.stderr
    assert "fleet GEMM digests not written" in first.stderr  # a new history: nothing to compare with yet
    second = site.sweep()
    out = _outcome(second)
    assert second.returncode == 0 and out["results"] == {n: "pass" for n in NODES}, second.stderr
    results = Path(out["results_dir"])
    (key, digest), = fleetfile.read(str(results / "fleet-digests.json")).items()  # 4 GPUs on 4 nodes agreed
    assert "|numpy " in key and "fleet GEMM digests: 1 decided key(s)" in second.stderr
    for node in NODES:
        rec = json.loads((results / f"{node}.json").read_text())
        assert rec["burnin"]["gemm_digests"]["cpu0"] == [key, digest]
        (verify,) = [r for r in rec["results"] if r["check"] == "burnin.gemm.verify"]
        assert verify["status"] == "pass" and verify["message"].endswith("same result as the fleet"), verify
