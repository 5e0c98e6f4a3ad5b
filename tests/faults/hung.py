"""A hung probe in the prolog: run the real hook (``python -I -m healthcheck.hook.run prolog``) as
slurmd would, against a sysfs tree whose GPU ``vendor`` file is a FIFO (a read that never returns, as
a wedged device's sysfs file does), and return the findings it recorded in its spool."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from healthcheck.core.model import Finding, Status

BUDGET_S = 1.0
# The hook must answer within its budget plus interpreter start-up, never wait for the hang.
MAX_ELAPSED_S = BUDGET_S + 1.5


def hung_prolog(root: Path) -> list[Finding]:
    sysfs = root / "sys"
    dev = sysfs / "bus" / "pci" / "devices" / "0000:18:00.0"
    dev.mkdir(parents=True)
    os.mkfifo(dev / "vendor")
    (dev / "class").write_text("0x030200\n")
    config = root / "site.toml"
    config.write_text(f'[defaults]\nsysfs_root = "{sysfs}"\n[slurm]\nstate_dir = "{root}/state"\n'
                      f'spool_dir = "{root}/spool"\nscontrol = "/bin/false"\nprolog_budget_s = {BUDGET_S}\n')
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "gpu017", "SLURM_JOB_ID": "4242",
           "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "51234"}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", "-m", "healthcheck.hook.run", "prolog", "--config",
                           str(config)], capture_output=True, text=True, env=env, timeout=60, cwd="/")
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, (proc.returncode, proc.stderr)  # drained: Slurm requeues the job
    assert elapsed < MAX_ELAPSED_S, f"prolog took {elapsed:.2f} s with a {BUDGET_S} s budget"
    records = [json.loads(line) for line in (root / "spool" / "records.jsonl").read_text().splitlines()]
    run = [r for r in records if r["kind"] == "run"][-1]
    assert run["context"] == "prolog"
    return [Finding(r["check"], Status(r["status"]), r["message"], r.get("component"))
            for r in run["results"]]
