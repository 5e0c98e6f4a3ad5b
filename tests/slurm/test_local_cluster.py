"""The local Slurm harness works: nodes register, jobs run, prolog failures drain and requeue,
admin drains resume, GRES and HealthCheckProgram are wired, and stop leaves nothing behind.

With HEALTHCHECK_SLURM_CAPTURE=1 the state test also (re)writes the recorded outputs under
tests/fixtures/slurm/ (file names carry the Slurm version) that the node-state parser tests use.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.slurmcluster import ROOT, SCRIPT, SlurmCluster, parse_node_line

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
CAPTURE = os.environ.get("HEALTHCHECK_SLURM_CAPTURE") == "1"

pytestmark = pytest.mark.slurm


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> SlurmCluster:
    """The session cluster with no jobs and every node idle."""
    slurm_cluster.reset()
    return slurm_cluster


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _pid_running(pid: int) -> bool:
    """Alive and not a zombie (this sandbox's PID 1 does not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")


def test_four_nodes_idle(cluster: SlurmCluster) -> None:
    assert cluster.version >= (22, 5)
    out = cluster.run(["sinfo", "-h", "-N", "-o", "%N %T %P"]).stdout.split("\n")
    rows = sorted(line.split() for line in out if line.strip())
    assert rows == [[n, "idle", "debug*"] for n in cluster.nodes]
    for node in cluster.nodes:
        state = cluster.node_state(node)
        assert state["State"] == "IDLE"
        assert state["NodeHostName"] == "localhost"
        assert "Reason" not in state


def test_batch_job_runs_and_completes(cluster: SlurmCluster) -> None:
    out = cluster.dir / "hostname-%j.out"
    job = cluster.sbatch("-N1", "-o", str(out), "--wrap", "hostname; echo node=$SLURMD_NODENAME")
    state = cluster.wait_job(job)
    assert state["ExitCode"] == "0:0"
    assert state["NodeList"] in cluster.nodes
    text = Path(str(out).replace("%j", job)).read_text()
    assert f"node={state['NodeList']}" in text
    assert cluster.run(["squeue", "-h"]).stdout.strip() == ""


def test_admin_drain_then_resume(cluster: SlurmCluster) -> None:
    cluster.run(["scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=x"])
    state = cluster.node_state("node3")
    assert state["base"] == "IDLE" and state["flags"] == "DRAIN"
    assert state["Reason"].startswith("x [root@")
    listed = cluster.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E"]).stdout.split()
    assert listed == ["node3|x"]
    cluster.run(["scontrol", "update", "NodeName=node3", "State=RESUME"])
    # 22.05 and 24.11: RESUME shows IDLE+NOT_RESPONDING ("idle*") for ~1 s until slurmd re-registers.
    state = cluster.node_state("node3")
    assert state["base"] == "IDLE" and "DRAIN" not in state["flags"]
    if cluster.version >= (24, 11):
        # 24.11 keeps the last reason (and its [root@time]) on the resumed node until a job is allocated
        # there; 22.05 clears it at once. healthcheck.slurm.nodestate calls it stale.
        assert state["Reason"].startswith("x [root@"), state
    else:
        assert "Reason" not in state
    cluster.wait_for(lambda: cluster.node_state("node3")["State"] == "IDLE", 15)
    assert cluster.run(["sinfo", "-R", "-h"]).stdout.strip() == ""  # a stale reason is not listed
    job = cluster.sbatch("-N1", "-w", "node3", "-o", "/dev/null", "--wrap", "true")
    cluster.wait_job(job)
    assert "Reason" not in cluster.node_state("node3")  # the next job clears it (24.11)


def test_prolog_failure_drains_node_and_requeues_job(slurm_cluster_factory, tmp_path) -> None:
    """What Slurm does when the prolog exits 1 on one node (recorded for the docs):
    22.05: node -> IDLE+DRAIN, Reason "Prolog error [root@TIME]"; the batch job is requeued HELD
    (JobState=PENDING Reason=launch_failed_requeued_held Priority=0 Restarts=1); after
    `scontrol release` it waits cred_expire+1 s (Reason=BeginTime) and then runs elsewhere.
    24.11.5 (Debian 13): the same, and the requeued job shows ExitCode=0:54 BatchFlag=2."""
    log = tmp_path / "prolog.log"
    prolog = _script(tmp_path / "prolog.sh",
                     f'echo "$SLURMD_NODENAME $SLURM_JOB_ID" >> {log}\n'
                     '[ "$SLURMD_NODENAME" = node2 ] && exit 1\nexit 0\n')
    cluster = slurm_cluster_factory(prolog=prolog)
    out = tmp_path / "job-%j.out"
    # node1 excluded: the scheduler then picks node2 first (lowest index, equal weights).
    job = cluster.sbatch("-N1", "-x", "node1", "-o", str(out), "--wrap", "echo ran=$SLURMD_NODENAME")
    cluster.wait_for(lambda: cluster.node_state("node2")["flags"].startswith("DRAIN"), 20)
    node2 = cluster.node_state("node2")
    assert node2["Reason"].startswith("Prolog error [root@"), node2
    assert log.read_text().split("\n")[0] == f"node2 {job}"
    cluster.wait_for(lambda: int(cluster.job_state(job).get("Restarts", 0)) >= 1, 20)
    state = cluster.job_state(job)
    assert state["JobState"] in ("PENDING", "REQUEUED", "RUNNING", "COMPLETED"), state
    if cluster.version in ((22, 5), (24, 11)):
        assert state["JobState"] == "PENDING"
        assert state["Reason"] == "launch_failed_requeued_held"
        assert state["Priority"] == "0"
    if state.get("Reason", "").endswith("held") or state.get("Priority") == "0":
        cluster.run(["scontrol", "release", job])
    done = cluster.wait_job(job, timeout=40)
    assert done["NodeList"] in ("node3", "node4")
    assert Path(str(out).replace("%j", job)).read_text().strip() == f"ran={done['NodeList']}"
    assert cluster.node_state("node2")["flags"].startswith("DRAIN")  # stays drained


def test_gres_gpus_and_healthcheck_program(slurm_cluster_factory, tmp_path) -> None:
    marks = tmp_path / "hc"
    marks.mkdir()
    hc = _script(tmp_path / "hc.sh", f'touch {marks}/"$SLURMD_NODENAME"\nexit 0\n')
    cluster = slurm_cluster_factory(healthcheck=hc, healthcheck_interval=5, gres_gpus=2)
    assert cluster.node_state("node1")["Gres"] == "gpu:2"
    # HealthCheckProgram runs on every node when slurmd starts (SLURMD_NODENAME set).
    cluster.wait_for(lambda: sorted(p.name for p in marks.iterdir()) == cluster.nodes, 15)
    job = cluster.sbatch("-N1", "--gres=gpu:2", "-o", "/dev/null",
                         "--wrap", "test -n \"$CUDA_VISIBLE_DEVICES\"")
    cluster.wait_job(job)


def _capture(name: str, text: str) -> None:
    if CAPTURE:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        (FIXTURES / name).write_text(text)


def test_node_states_and_recorded_outputs(slurm_cluster_factory, tmp_path) -> None:
    """Idle, drained (prolog and admin), draining with a job, down: real scontrol/sinfo text."""
    prolog = _script(tmp_path / "prolog.sh", '[ "$SLURMD_NODENAME" = node2 ] && exit 1\nexit 0\n')
    cluster = slurm_cluster_factory(prolog=prolog, gres_gpus=2)
    v = cluster.version_label
    show_o = ["scontrol", "show", "node", "-o"]
    _capture(f"scontrol-show-node-o-{v}-idle.txt", cluster.run(show_o).stdout)

    job = cluster.sbatch("-N1", "-x", "node1", "-o", "/dev/null", "--wrap", "true")
    cluster.wait_for(lambda: cluster.node_state("node2")["flags"].startswith("DRAIN"), 20)
    cluster.run(["scontrol", "update", "NodeName=node3", "State=DRAIN",
                 "Reason=RMA ticket 4711"])
    _capture(f"scontrol-show-node-o-{v}-drained.txt", cluster.run(show_o).stdout)
    assert cluster.node_state("node3")["Reason"].startswith("RMA ticket 4711 [root@")

    cluster.run(["scancel", job])
    sleeper = cluster.sbatch("-N1", "-w", "node1", "-o", "/dev/null", "--wrap", "sleep 60")
    cluster.wait_job(sleeper, "RUNNING", 20)
    cluster.run(["scontrol", "update", "NodeName=node1", "State=DRAIN",
                 "Reason=healthcheck: gpu.ecc uncorrectable errors on GPU 3"])
    cluster.run(["scontrol", "update", "NodeName=node4", "State=DOWN", "Reason=cable pulled"])
    node1, node4 = cluster.node_state("node1"), cluster.node_state("node4")
    assert node1["base"] in ("MIXED", "ALLOCATED") and node1["flags"] == "DRAIN", node1
    assert node4["base"] == "DOWN" and node4["Reason"].startswith("cable pulled [root@"), node4
    sinfo_t = dict(line.split() for line in cluster.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.splitlines())
    assert sinfo_t == {"node1": "draining", "node2": "drained", "node3": "drained",
                       "node4": "down"}
    _capture(f"scontrol-show-node-o-{v}-down.txt", cluster.run(show_o).stdout)
    _capture(f"scontrol-show-node-{v}-node1.txt",
             cluster.run(["scontrol", "show", "node", "node1"]).stdout)
    _capture(f"sinfo-R-{v}.txt", cluster.run(["sinfo", "-R"]).stdout)
    sinfo_r = cluster.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E|%u|%H|%T"]).stdout
    _capture(f"sinfo-R-h-N-o-N-E-u-H-T-{v}.txt", sinfo_r)
    rows = {line.split("|")[0]: line.split("|") for line in sinfo_r.splitlines()}
    assert rows["node3"][1:3] == ["RMA ticket 4711", "root"]
    assert rows["node2"][1] == "Prolog error"
    assert set(rows) == {"node1", "node2", "node3", "node4"}
    lines = cluster.run(show_o).stdout.splitlines()
    assert [parse_node_line(line)["NodeName"] for line in lines] == cluster.nodes

    if CAPTURE:  # slow (SlurmdTimeout): a node whose slurmd died, as "DOWN*"/"Not responding"
        pid = int((cluster.dir / "run" / "slurmd-node3.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        cluster.wait_for(lambda: "*" in cluster.run(["sinfo", "-h", "-n", "node3", "-o", "%T"])
                         .stdout or cluster.node_state("node3")["State"].startswith("DOWN"), 120)
        _capture(f"scontrol-show-node-o-{v}-not-responding.txt", cluster.run(show_o).stdout)


def test_stop_kills_exactly_its_daemons(slurm_cluster: SlurmCluster, tmp_path_factory) -> None:
    other = tmp_path_factory.mktemp("slurm-stop")
    start = subprocess.run([sys.executable, str(SCRIPT), "start", "--dir", str(other),
                            "--nodes", "2"], capture_output=True, text=True, timeout=90)
    assert start.returncode == 0, start.stderr
    assert start.stdout.strip() == f"export SLURM_CONF={other.resolve()}/slurm.conf"
    pids = {p.name: int(p.read_text().split()[0]) for p in (other / "run").glob("*.pid")}
    assert set(pids) == {"munged.pid", "slurmctld.pid", "slurmd-node1.pid", "slurmd-node2.pid"}
    assert all(_pid_running(pid) for pid in pids.values())
    session_pids = [int(p.read_text().split()[0]) for p in (slurm_cluster.dir / "run").glob("*.pid")]
    t0 = time.monotonic()
    stop = subprocess.run([sys.executable, str(SCRIPT), "stop", "--dir", str(other)],
                          capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert time.monotonic() - t0 < 15
    assert not [name for name, pid in pids.items() if _pid_running(pid)]
    status = subprocess.run([sys.executable, str(SCRIPT), "status", "--dir", str(other)],
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 1 and "no daemons running" in status.stdout
    # The session cluster's daemons were not touched.
    assert len(session_pids) == 6 and all(_pid_running(pid) for pid in session_pids)
    assert slurm_cluster.run(["scontrol", "ping"]).stdout.count("UP") == 1
