"""Our epilog called from a site's own Epilog= script: the caller survives, the job's leftover does not.

slurmd runs the site script as root with the job's environment (SLURM_JOB_ID, SLURM_JOB_UID); the
script calls our hook and then does the rest of its own work. If the hook's leftover-process scan
took the script for the job's and killed it, the rest would never run and Slurm would drain the node
"Epilog error" after every job.
"""
from __future__ import annotations

from tests.slurm.test_scenarios import Site, _live_processes, sources  # noqa: F401 - fixture

SLEEP = "sleep 611"  # a command line no other test uses


def test_site_epilog_calling_our_hook_runs_to_its_end_and_the_node_stays_up(tmp_path, slurm_cluster_factory,
                                                                             sources):  # noqa: F811
    probe = slurm_cluster_factory()
    site = Site(tmp_path, probe, sources)
    marker = tmp_path / "site-epilog-finished"
    wrapper = tmp_path / "site-epilog.sh"
    wrapper.write_text(f'#!/bin/sh\n"{site.hooks}/epilog.sh" || exit $?\necho "$SLURM_JOB_ID" > "{marker}"\n')
    wrapper.chmod(0o755)
    cluster = slurm_cluster_factory(epilog=str(wrapper))
    started = tmp_path / "started"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\nsetsid {SLEEP} </dev/null >/dev/null 2>&1 &\ntouch {started}\n")
    script.chmod(0o755)
    job = cluster.sbatch("-N1", "-w", "node2", str(script))
    cluster.wait_job(job, timeout=60)
    cluster.wait_for(marker.exists, 30, message=lambda: f"the site epilog did not finish: {cluster.diagnostics()}")
    assert marker.read_text().strip() == job
    epilog = [r for r in site.records("run") if r["context"] == "epilog" and r["job_id"] == job]
    assert len(epilog) == 1, site.records("run")
    strays = [r for r in epilog[0]["results"] if r["check"] == "job.stray_processes"]
    assert strays and strays[0]["status"] == "pass" and strays[0]["metrics"]["killed"] >= 1, strays
    cluster.wait_for(lambda: not _live_processes(SLEEP), 10, message="the job's leftover survived")
    state = cluster.node_state("node2")
    assert "DRAIN" not in state["flags"] and state["base"] != "DOWN", state
