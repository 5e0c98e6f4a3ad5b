"""The warm agent on a real Slurm cluster: slurmd runs the installed wrappers, they hand each hook to the
agent, and what Slurm sees (the drain with its reason, the requeued job completing elsewhere, the spool)
is what it sees without the agent (tests/slurm/test_scenarios.py)."""
from __future__ import annotations

import subprocess
import sys
import time

from tests.slurm.test_scenarios import ROOT, Site, sources  # noqa: F401 - the sources fixture


def agent_drains_node2(tmp_path, site: Site, slurm_cluster_factory, command: list[str], sock, prolog, epilog):
    """Start the agent with ``command``, let slurmd run ``prolog``/``epilog`` with node2 faulty: the prolog
    drains node2 and the requeued job completes on node3 or node4. Returns (cluster, job id, the agent's
    log); the agent is stopped."""
    log = tmp_path / "agent.log"
    with open(log, "w") as err:
        agent = subprocess.Popen(command, stderr=err, cwd="/")
    try:
        deadline = time.monotonic() + 60
        while not sock.exists() and agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), log.read_text()
        site.set_bundle("node2", "ecc-fault")
        cluster = slurm_cluster_factory(prolog=str(prolog), epilog=str(epilog))
        out = tmp_path / "job.out"
        job = cluster.sbatch("-N1", "--exclude=node1", "-o", str(out), "--wrap",
                             "hostname; echo ran-on=$SLURMD_NODENAME")
        cluster.wait_for(lambda: site.drained("node2"), 30, message="node2 not drained by the prolog")

        def settle():  # 22.05 holds a requeued job (launch_failed_requeued_held): release it, as an admin would
            fields = cluster.job_state(job)
            if fields.get("JobState") == "PENDING" and "held" in fields.get("Reason", ""):
                cluster.run(["scontrol", "release", job])
            return fields.get("JobState") == "COMPLETED"
        cluster.wait_for(settle, 90, interval=1.0, message="requeued job did not complete")
        assert out.read_text().split("ran-on=")[-1].strip() in ("node3", "node4")
    finally:
        agent.terminate()
        agent.wait(timeout=30)
    return cluster, job, log.read_text()


def test_through_the_agent_the_prolog_drains_a_faulty_node_and_the_job_completes_elsewhere(
        tmp_path, slurm_cluster_factory, sources):  # noqa: F811
    probe = slurm_cluster_factory()  # the session cluster, restarted fresh, to learn its conf path
    site = Site(tmp_path, probe, sources)
    sock = tmp_path / "run" / "agent.sock"
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "slurm", "install-hooks", "--prefix",
                           str(site.hooks), "--config", str(site.config), "--slurm-conf", str(probe.conf),
                           "--python", sys.executable, "--agent-socket", str(sock),
                           "--no-enable-agent"],  # this test starts its agent; never the test machine's systemd
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert f'"--agent", "{sock}"' in (site.hooks / "prolog.sh").read_text()
    command = [sys.executable, "-I", "-m", "healthcheck.agent.main", "--socket", str(sock), "--config", str(site.config)]
    cluster, job, served = agent_drains_node2(tmp_path, site, slurm_cluster_factory, command, sock,
                                              site.hooks / "prolog.sh", site.hooks / "epilog.sh")
    actions = cluster.wait_for(lambda: [a for a in site.records("action") if a["node"] == "node2"], 15,
                               message="no action record for node2")
    assert actions[0]["action"] == "drain" and actions[0]["context"] == "prolog"
    assert "gpu.ecc.uncorrected" in actions[0]["checks"] and actions[0]["job_id"] == job
    # slurmd's prolog for node2 was the agent's work, handed over at its door (the installed hooks are bash),
    # and so were the runs on the node that took the job
    assert f"prolog on node2 for job {job}: exit 1 after" in served, served
    assert [line for line in served.splitlines() if f"for job {job}: exit 1" in line][0].endswith(", at the door")
    assert "prolog on node3" in served or "prolog on node4" in served, served
    assert not sock.exists()
