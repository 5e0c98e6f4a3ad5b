"""Shared helpers for the safety tests that run the Slurm hook as slurmd does (a subprocess)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_config(path: Path, bundle: str, state_dir: str, spool_dir: str, **slurm) -> Path:
    settings = {"state_dir": state_dir, "spool_dir": spool_dir, "scontrol": "/bin/false", **slurm}
    lines = ["[defaults]", f'bundle = "{bundle}"', "[slurm]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def hook(context: str, config: Path, cache_dir: Path, job: str | None = "4242", umask: int = 0o022):
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node1", "HEALTHCHECK_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": str(ROOT)}
    if job:
        env.update(SLURM_JOB_ID=job, SLURM_JOB_USER="alice", SLURM_JOB_UID="1000")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-m", "healthcheck.hook.run", context, "--config",
                           str(config)], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT,
                          umask=umask)
    return proc, time.monotonic() - start
