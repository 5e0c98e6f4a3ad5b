"""Issue 32.6 on the real Slurm cluster: `healthcheck job stalls JOB` finds a running job's nodes with
squeue, reads every node's sampler summary through one `srun --overlap` step beside the job's own
(SLURMD_NODENAME names each node), and says what it can: here no node has samples of the job (no GPU),
so none is named and every node is "unknown", never blamed."""
from __future__ import annotations

import os

import pytest

from healthcheck.slurm import jobstalls

pytestmark = pytest.mark.slurm


def test_job_stalls_gathers_every_node_of_a_running_job_through_srun(slurm_cluster, monkeypatch, tmp_path):
    job = slurm_cluster.sbatch("-N", "2", "--wrap", "sleep 60")
    try:
        slurm_cluster.wait_job(job, "RUNNING", timeout=60)
        monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
        config = tmp_path / "hc.toml"  # a state folder of its own: the sampler's file is not there
        config.write_text(f'[slurm]\nstate_dir = "{tmp_path / "state"}"\n')
        summaries, hostlist = jobstalls.gather(job, config_path=str(config), timeout=60)
        nodes = jobstalls.hostnames(hostlist)
        assert nodes is not None and len(nodes) == 2, hostlist
        assert sorted(s["node"] for s in summaries) == sorted(nodes), summaries
        result = jobstalls.verdict(job, summaries, nodes)
        assert result["job"] == job and not result.get("odd"), result
        assert sorted(result.get("unknown") or []) == sorted(nodes), result
    finally:
        slurm_cluster.run(["scancel", job], check=False)


def test_job_stalls_names_a_job_that_is_not_running(slurm_cluster, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    with pytest.raises(jobstalls.GatherError, match="not found"):
        jobstalls.gather("999999", timeout=30)
    assert os.environ["SLURM_CONF"] == str(slurm_cluster.conf)
