"""A job submitted without ``-o`` writes Slurm's default ``slurm-JOBID.out`` into the directory it was
submitted from: the cluster fixture submits from the cluster's own tmp directory, so no test leaves a
job output in the repository or wherever pytest was started (issue 18: a ``slurm-1.out`` had appeared
at the repository root)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_job_without_an_output_option_writes_into_the_clusters_directory(slurm_cluster):
    job = slurm_cluster.sbatch("-N1", "--wrap", "echo written-by-the-job")
    state = slurm_cluster.wait_job(job, timeout=60)
    assert state["ExitCode"] == "0:0", state
    out = slurm_cluster.dir / f"slurm-{job}.out"
    slurm_cluster.wait_for(out.exists, 10, message=f"{out} was not written")
    assert out.read_text().strip() == "written-by-the-job"
    assert not (ROOT / f"slurm-{job}.out").exists()
    assert not Path(os.getcwd(), f"slurm-{job}.out").exists()
