"""A burst of hooks at the agent's door: N prologs started at once, as when a node takes N jobs together.

Setup as benchmarks/bench_prolog.py (its default config, host checks live, its warm agent). Prints the
wall time until the last hook exits, each hook's time, and how many were taken at the door: a hook the
agent did not take within its second logs "agent not used" and runs its Python client. Repeats
``--rounds`` times, a pause between. Not part of the test run.

    .venv/bin/python benchmarks/burst_door.py [--hooks 16] [--rounds 3]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prolog import setup, start_agent  # noqa: E402
from _measure import median  # noqa: E402


def burst(hook: str, env: dict[str, str], n: int, first_job: int) -> tuple[float, list[float], int]:
    """(wall ms until the last exits, each hook's ms, how many fell back to the Python client)."""
    start = time.perf_counter()
    procs = [(subprocess.Popen([hook], env={**env, "SLURM_JOB_ID": str(first_job + i)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, cwd="/", process_group=0), time.perf_counter())
             for i in range(n)]
    each, fell_back = [], 0
    for proc, began in procs:
        err = proc.communicate(timeout=120)[1]
        each.append((time.perf_counter() - began) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"a hook exited {proc.returncode}: {err[-2000:]}")
        fell_back += "agent not used" in err
    return (time.perf_counter() - start) * 1000, each, fell_back


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hooks", type=int, default=16, help="prologs started at once (default 16)")
    parser.add_argument("--rounds", type=int, default=3, help="bursts, a second apart (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="burst-door-") as tmp:
        work = Path(tmp)
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "bench1", "SLURM_JOB_UID": "1000",
               "SLURM_JOB_USER": "alice", "HEALTHCHECK_CACHE_DIR": f"{tmp}/cache"}
        wrappers = setup(work)
        agent, _ = start_agent(work, "default", env)
        try:
            for r in range(args.rounds):
                time.sleep(1.0)  # the agent's spares replaced after the last burst
                wall, each, fell_back = burst(str(wrappers["default-agent"]), env, args.hooks, 1000 * (r + 1))
                print(f"burst {r + 1}: {args.hooks} prologs at once: all done in {wall:.0f} ms; each "
                      f"{min(each):.0f}-{max(each):.0f} ms (median {median(each):.0f}); taken at the door "
                      f"{args.hooks - fell_back}, fell back to the Python client {fell_back}")
        finally:
            agent.terminate()
            agent.wait(timeout=30)


if __name__ == "__main__":
    main()
