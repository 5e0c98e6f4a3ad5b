"""End-to-end on a real Slurm cluster (slurmctld + 4 slurmd on localhost): the project's hooks, installed
with `healthcheck slurm install-hooks`, each node's hardware given by a bundle (`bundle = ".../{node}"`).

The slurm-check hook is run the way slurmd runs HealthCheckProgram (the installed wrapper, as root, with
SLURMD_NODENAME), so a test does not wait for HealthCheckInterval; one test shows slurmd itself running it.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from healthcheck.bundles.collect import collect_bundle
from healthcheck.slurm.nodestate import parse_scontrol_nodes
from tests.bundles.test_bundles import make_node

ROOT = Path(__file__).resolve().parents[2]
NODES = ("node1", "node2", "node3", "node4")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Recorded bundles: a healthy node, one with an uncorrected ECC error, one whose corrected ECC grew."""
    root = tmp_path_factory.mktemp("bundle-sources")
    out = {}
    for name, edit in (("healthy", None), ("ecc-fault", "ecc"), ("corrected-grown", "grown")):
        node = make_node(root / f"src-{name}")
        if edit == "ecc":
            node.nvml.gpus[3].ecc[(1, 0)] = 2  # uncorrected volatile
        elif edit == "grown":
            node.nvml.gpus[5].ecc[(0, 0)] = 17  # corrected volatile: grows during a job
        out[name], _ = collect_bundle(str(root / name), options=node)
    return out


class Site:
    """The hooks installed for this cluster, and the per-node bundles they read."""

    def __init__(self, root: Path, cluster, sources, hang_node: str | None = None, **slurm):
        self.root, self.cluster, self.sources = root, cluster, sources
        self.bundles = root / "bundles"
        for node in NODES:
            self.set_bundle(node, "healthy")
        settings = {"state_dir": str(root / "state"), "spool_dir": str(root / "spool"),
                    "prolog_budget_s": 3.0, "slurm_check_budget_s": 5.0, "epilog_budget_s": 10.0, **slurm}
        lines = ["[class.bundled]", f'nodes = "{",".join(n for n in NODES if n != hang_node)}"',
                 f'bundle = "{self.bundles}/{{node}}"']
        if hang_node:
            lines += ["[class.hung]", f'nodes = "{hang_node}"', f'sysfs_root = "{self.hung_sysfs()}"']
        lines += ["[slurm]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
        self.config = root / "site.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.hooks = root / "hooks"
        proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "slurm", "install-hooks",
                               "--prefix", str(self.hooks), "--config", str(self.config),
                               "--slurm-conf", str(cluster.conf), "--python", sys.executable,
                               "--no-enable-agent"],  # never the test machine's systemd
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        assert f"Prolog={self.hooks}/prolog.sh" in proc.stdout

    def hung_sysfs(self) -> Path:
        """A sysfs whose GPU vendor file never answers (a FIFO without writer): a wedged device."""
        dev = self.root / "hung-sys" / "bus" / "pci" / "devices" / "0000:18:00.0"
        dev.mkdir(parents=True, exist_ok=True)
        if not (dev / "vendor").exists():
            os.mkfifo(dev / "vendor")
        (dev / "class").write_text("0x030200\n")
        return self.root / "hung-sys"

    def set_bundle(self, node: str, which: str) -> None:
        target = self.bundles / node
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.sources[which], target)

    def health_check(self, node: str) -> subprocess.CompletedProcess:
        """Run the installed HealthCheckProgram as slurmd does (root, SLURMD_NODENAME, minimal env)."""
        return subprocess.run([str(self.hooks / "healthcheck.sh")], capture_output=True, text=True,
                              timeout=60, env={"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": node}, cwd="/")

    def records(self, kind: str | None = None) -> list[dict]:
        path = self.root / "spool" / "records.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r for r in rows if kind is None or r["kind"] == kind]

    def reason(self, node: str) -> str:
        """The node's reason as our parser reads it (Slurm's " [user@time]" suffix removed)."""
        line = self.cluster.run(["scontrol", "-o", "show", "node", node]).stdout
        return parse_scontrol_nodes(line)[node].reason or ""

    def drained(self, node: str) -> bool:
        return "DRAIN" in self.cluster.node_state(node).get("State", "")


def sinfo_reasons(cluster) -> str:
    return cluster.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E"]).stdout


def test_prolog_drains_a_faulty_node_and_the_job_completes_elsewhere(tmp_path, slurm_cluster_factory, sources):
    probe = slurm_cluster_factory()  # the session cluster, restarted fresh, to learn its conf path
    site = Site(tmp_path, probe, sources)
    site.set_bundle("node2", "ecc-fault")
    cluster = slurm_cluster_factory(prolog=str(site.hooks / "prolog.sh"), epilog=str(site.hooks / "epilog.sh"))
    out = tmp_path / "job.out"
    job = cluster.sbatch("-N1", "--exclude=node1", "-o", str(out), "--wrap", "hostname; echo ran-on=$SLURMD_NODENAME")
    cluster.wait_for(lambda: site.drained("node2"), 30, message="node2 not drained by the prolog")
    # Slurm requeues the job; 22.05 holds it (launch_failed_requeued_held): release it, as an admin would
    def settle():
        fields = cluster.job_state(job)
        if fields.get("JobState") == "PENDING" and "held" in fields.get("Reason", ""):
            cluster.run(["scontrol", "release", job])
        return fields.get("JobState") == "COMPLETED"
    cluster.wait_for(settle, 90, interval=1.0, message="requeued job did not complete")
    ran_on = out.read_text().split("ran-on=")[-1].strip()
    assert ran_on in ("node3", "node4"), ran_on
    actions = cluster.wait_for(lambda: [a for a in site.records("action") if a["node"] == "node2"], 15,
                               message="no action record for node2")
    assert actions[0]["action"] == "drain" and actions[0]["context"] == "prolog"
    assert "gpu.ecc.uncorrected" in actions[0]["checks"] and actions[0]["job_id"] == job
    # Slurm replaced our reason with "Prolog error"; the next health check restores the precise one
    site.health_check("node2")
    reason = site.reason("node2")
    assert reason.startswith("healthcheck: gpu.ecc.uncorrected gpu3"), reason
    assert "node2|healthcheck: gpu.ecc.uncorrected" in sinfo_reasons(cluster)


def test_admin_drain_is_never_touched_and_a_repaired_node_is_resumed(tmp_path, slurm_cluster, sources):
    cluster = slurm_cluster
    cluster.reset()
    site = Site(tmp_path, cluster, sources)
    cluster.run(["scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=RMA ticket 4711"])
    site.set_bundle("node2", "ecc-fault")
    for node in NODES:
        assert site.health_check(node).returncode == 0
    assert site.reason("node3") == "RMA ticket 4711"  # healthy run: not resumed
    assert site.drained("node2") and site.reason("node2").startswith("healthcheck: gpu.ecc.uncorrected")
    assert not site.drained("node1") and not site.drained("node4")

    site.set_bundle("node3", "ecc-fault")
    site.health_check("node3")
    assert site.reason("node3") == "RMA ticket 4711"  # failing run: the admin's reason stays

    site.set_bundle("node2", "healthy")  # repaired
    site.health_check("node2")
    cluster.wait_for(lambda: not site.drained("node2"), 15, message="node2 not resumed")
    assert "node2" not in sinfo_reasons(cluster)
    assert "node3|RMA ticket 4711" in sinfo_reasons(cluster)
    resumes = [a for a in site.records("action") if a["action"] == "resume"]
    assert [a["node"] for a in resumes] == ["node2"]


def test_a_node_the_admin_resumed_is_drained_by_us_when_it_fails(tmp_path, slurm_cluster, sources):
    """Slurm 24.11 keeps the admin's reason on a node it resumed until the node's next job (22.05 clears
    it at once). That stale reason must not make the node look held by the admin, or a fault found
    before its next job would never drain it."""
    cluster = slurm_cluster
    cluster.reset()
    site = Site(tmp_path, cluster, sources)
    cluster.run(["scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=RMA ticket 4711"])
    cluster.run(["scontrol", "update", "NodeName=node1", "State=RESUME"])
    cluster.wait_for(lambda: cluster.node_state("node1")["State"] == "IDLE", 15)
    raw = parse_scontrol_nodes(cluster.run(["scontrol", "-o", "show", "node", "node1"]).stdout)["node1"]
    if cluster.version >= (24, 11):
        assert raw.reason == "RMA ticket 4711" and raw.reason_user == "root" and raw.reason_stale
    else:
        assert raw.reason is None and not raw.reason_stale
    assert "node1" not in sinfo_reasons(cluster)
    site.set_bundle("node1", "ecc-fault")
    assert site.health_check("node1").returncode == 0
    assert site.drained("node1"), cluster.node_state("node1")
    assert site.reason("node1").startswith("healthcheck: gpu.ecc.uncorrected gpu3")
    drains = [a for a in site.records("action") if a["node"] == "node1" and a["action"] == "drain"]
    assert len(drains) == 1 and drains[0]["context"] == "slurm-check"


def test_hung_probe_prolog_returns_in_budget_drains_and_leaves_nothing(tmp_path, slurm_cluster_factory, sources):
    probe = slurm_cluster_factory()
    site = Site(tmp_path, probe, sources, hang_node="node4", prolog_budget_s=2.0)
    cluster = slurm_cluster_factory(prolog=str(site.hooks / "prolog.sh"))
    start = time.monotonic()
    job = cluster.sbatch("-N1", "-w", "node4", "--wrap", "true")
    cluster.wait_for(lambda: site.drained("node4"), 30, message="node4 not drained")
    # the hook drains first, then writes its record: wait for the record too
    runs = cluster.wait_for(lambda: [r for r in site.records("run") if r["node"] == "node4"
                                     and r["context"] == "prolog"], 15, message="no prolog record")
    assert runs and runs[0]["results"][0]["check"] == "node.responsive"
    assert runs[0]["duration_s"] < 2.0 + 0.5, runs[0]["duration_s"]
    assert time.monotonic() - start < 30
    # no hook process is left once the hook has returned (zombies excepted: this sandbox's init does
    # not reap); the hook writes its record just before it exits, so allow it to finish exiting
    cluster.wait_for(lambda: not _live_processes("healthcheck.hook.run"), 10,
                     message=lambda: f"hook processes left: {_live_processes('healthcheck.hook.run')}")
    cluster.run(["scancel", job], check=False)


def test_epilog_kills_leftovers_and_attributes_counter_growth_to_the_job(tmp_path, slurm_cluster_factory, sources):
    probe = slurm_cluster_factory()
    site = Site(tmp_path, probe, sources)
    cluster = slurm_cluster_factory(prolog=str(site.hooks / "prolog.sh"), epilog=str(site.hooks / "epilog.sh"))
    marker = tmp_path / "started"
    # the job leaves a detached process behind and, while it runs, node1's corrected ECC count grows
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\nsetsid sleep 600 </dev/null >/dev/null 2>&1 &\ntouch {marker}\nsleep 3\n")
    script.chmod(0o755)
    job = cluster.sbatch("-N1", "-w", "node1", str(script))
    cluster.wait_for(marker.exists, 30, message="job did not start")
    site.set_bundle("node1", "corrected-grown")
    cluster.wait_job(job, timeout=60)
    cluster.wait_for(lambda: [r for r in site.records("run") if r["context"] == "epilog" and r["job_id"] == job],
                     30, message="no epilog record")
    epilog = [r for r in site.records("run") if r["context"] == "epilog" and r["job_id"] == job][0]
    results = {r["check"]: r for r in epilog["results"] if r["check"].startswith("job.")}
    assert results["job.stray_processes"]["metrics"]["killed"] >= 1, results
    assert results["job.stray_processes"]["status"] == "pass"
    growth = results["job.counter_growth"]
    assert growth["status"] == "warn" and f"during job {job}" in growth["message"]
    assert "ecc_corrected_volatile +17" in growth["message"] and growth["component"] == "gpu5"
    cluster.wait_for(lambda: not _live_processes("sleep 600"), 10, message="the leftover survived")


def test_drain_due_while_slurmctld_is_down_is_applied_once_it_is_back(tmp_path, slurm_cluster, sources):
    cluster = slurm_cluster
    cluster.reset()
    site = Site(tmp_path, cluster, sources)
    site.set_bundle("node1", "ecc-fault")
    pid = int((cluster.dir / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGTERM)
    cluster.wait_for(lambda: cluster.run(["scontrol", "ping"], check=False).stdout.count("DOWN"), 20,
                     message="slurmctld still up")
    proc = site.health_check("node1")
    assert proc.returncode == 0
    queued = (tmp_path / "state" / "node1" / "pending-actions.jsonl").read_text()
    assert "gpu.ecc.uncorrected" in queued
    subprocess.run(["slurmctld", "-f", str(cluster.conf)], env=cluster.env, check=True, timeout=30)
    cluster.wait_for(lambda: "UP" in cluster.run(["scontrol", "ping"], check=False).stdout, 30,
                     message="slurmctld did not come back")
    site.health_check("node1")  # the next run applies the queue first, then judges
    site.health_check("node1")  # and a second run finds nothing left to apply
    assert not (tmp_path / "state" / "node1" / "pending-actions.jsonl").exists()
    assert site.drained("node1") and site.reason("node1").startswith("healthcheck: gpu.ecc.uncorrected")
    drains = [a for a in site.records("action") if a["node"] == "node1" and a["action"] == "drain"]
    assert "queued" in drains[0]["why"]
    applied = [a for a in drains if a["why"].startswith("applied from the queue")]
    assert len(applied) == 1


def test_slurmd_runs_the_health_check_program_itself(tmp_path, slurm_cluster_factory, sources):
    probe = slurm_cluster_factory()
    site = Site(tmp_path, probe, sources)
    site.set_bundle("node3", "ecc-fault")
    cluster = slurm_cluster_factory(healthcheck=str(site.hooks / "healthcheck.sh"), healthcheck_interval=2,
                                    wait="registered")
    cluster.wait_for(lambda: site.drained("node3"), 40, message="slurmd's HealthCheckProgram did not drain node3")
    assert site.reason("node3").startswith("healthcheck: gpu.ecc.uncorrected")
    assert not site.drained("node1")


def _live_processes(needle: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state not in ("Z", "X") and int(pid) != os.getpid():
            found.append(f"{pid} {cmdline}")
    return found


def test_fast_prolog_starts_jobs_on_the_health_checks_word(tmp_path, slurm_cluster_factory, sources):
    """prolog_mode = "fast" under a real slurmd: HealthCheckProgram writes the gate, the job's prolog
    starts it in milliseconds (record "prolog.gate"), the epilog measures growth from that check; a
    faulty node's failing health check removes the gate, and its prolog is the full one again."""
    probe = slurm_cluster_factory()
    site = Site(tmp_path, probe, sources, prolog_mode="fast")
    cluster = slurm_cluster_factory(prolog=str(site.hooks / "prolog.sh"), epilog=str(site.hooks / "epilog.sh"))
    assert site.health_check("node1").returncode == 0
    job = cluster.sbatch("-N1", "-w", "node1", "--wrap", "sleep 2")
    cluster.wait_job(job, timeout=60)
    cluster.wait_for(lambda: [r for r in site.records("run") if r["context"] == "epilog" and r["job_id"] == job],
                     30, message="no epilog record")
    prolog = [r for r in site.records("run") if r["context"] == "prolog" and r["job_id"] == job]
    assert [r["results"][0]["check"] for r in prolog] == ["prolog.gate"], prolog
    assert prolog[0]["duration_s"] < 0.5
    epilog = [r for r in site.records("run") if r["context"] == "epilog" and r["job_id"] == job][0]
    (growth,) = [r for r in epilog["results"] if r["check"] == "job.counter_growth"]
    assert growth["status"] == "pass"
    # node2 turns faulty: its health check fails (drains it) and removes the gate
    assert site.health_check("node2").returncode == 0
    site.set_bundle("node2", "ecc-fault")
    site.health_check("node2")
    assert site.drained("node2")
    from healthcheck.hook.gate import gate_path

    assert gate_path("node1") and os.path.exists(gate_path("node1")) and not os.path.exists(gate_path("node2"))
    cluster.run(["scontrol", "update", "nodename=node2", "state=resume"])
    job2 = cluster.sbatch("-N1", "-w", "node2", "--wrap", "true")
    cluster.wait_for(lambda: site.drained("node2"), 30, message="the full prolog did not catch node2")
    full = [r for r in site.records("run") if r["context"] == "prolog" and r["job_id"] == job2]
    assert full and full[0]["results"][0]["check"] != "prolog.gate" and full[0]["status"] == "fail"
    cluster.run(["scancel", job2], check=False)
