"""What the job sampler costs (issue 32.6): CPU time of one sample, in the process that runs it (the
agent's forked child), with the pynvml fake standing in for the driver, and what forking that child from
a warm agent-like process adds. Not part of the test run.

    .venv/bin/python benchmarks/bench_job_sampler.py [--samples 300] [--gpus 8]

Three cases: a node with no Slurm job (the cgroup listing only, NVML not opened), a node with a busy
healthy job (NVML read, pids mapped to the job, state file rewritten), and a stalled job after it was
reported (the same, judged pinned; the spool record is written once, at the first report, and is left
out of the steady state). The fake answers at memory speed: on a real driver the NVML calls add the
driver's own time (docs/performance.md gives the H200's figures for a session's first queries).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from healthcheck.checks import registry  # noqa: E402
from healthcheck.config import default_expectations  # noqa: E402
from healthcheck.hook import job_sampler  # noqa: E402
from tests.fakes.fake_pynvml import FakeNvml, h100_node  # noqa: E402

JOB = "81234"


def node(root: Path, gpus: int, job: bool) -> dict:
    scope = root / "cgroup" / "system.slice" / "slurmstepd.scope"
    scope.mkdir(parents=True)
    nvml = FakeNvml(h100_node(gpus))
    if job:
        (scope / f"job_{JOB}").mkdir()
        for i, gpu in enumerate(nvml.gpus):
            folder = root / "proc" / str(5000 + i)
            folder.mkdir(parents=True)
            (folder / "cgroup").write_text(f"0::/system.slice/slurmstepd.scope/job_{JOB}/step_0/user/task_{i}\n")
            gpu.processes = [(5000 + i, 1 << 30, "python")]
    return {"nvml": nvml, "state": str(root / "state"), "spool": str(root / "spool"), "proc": str(root / "proc"),
            "cgroup": str(root / "cgroup")}


def measure(n: dict, samples: int, util: int, watts: float) -> list[float]:
    t = default_expectations().thresholds_for("gpu.stalled", registry.index()["gpu.stalled"].thresholds)
    for gpu in n["nvml"].gpus:
        gpu.utilization, gpu.power_mw = (util, 0), int(watts * 1000)
    out = []
    now = 1_796_000_000.0
    for k in range(samples + 5):
        start = time.process_time()
        job_sampler.sample(n["state"], "gpu01", n["spool"], t, now=now + 30 * k, nvml=n["nvml"], proc_root=n["proc"],
                           cgroup_root=n["cgroup"])
        if k >= 5:  # past the first report
            out.append((time.process_time() - start) * 1000)
    return out


def fork_cost(rounds: int) -> list[float]:
    """Wall ms of forking a child that exits at once and reaping it, from this process (the agent's size)."""
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    import healthcheck.agent.main  # noqa: F401 - the fork below from a process of the agent's imports

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, job, util, watts in (("no job (cgroup listing only)", False, 0, 70.0),
                                       ("busy healthy job", True, 100, 650.0),
                                       ("stalled job (reported)", True, 100, 71.0)):
            root = Path(tmp) / name.split()[0] / name.split()[1]
            ms = measure(node(root, args.gpus, job), args.samples, util, watts)
            rows.append((name, statistics.median(ms), sorted(ms)[int(len(ms) * 0.95)]))
    forks = fork_cost(100)
    print(f"job sampler, {args.gpus} fake GPUs, {args.samples} samples each (CPU ms per sample):")
    for name, median, p95 in rows:
        print(f"  {name:32s} median {median:6.3f} ms  p95 {p95:6.3f} ms  "
              f"= {median / 30_000 * 100:.4f} % of one core at one sample per 30 s")
    print(f"  fork + reap of the sampler child from an agent-sized process: median "
          f"{statistics.median(forks):.3f} ms wall")


if __name__ == "__main__":
    main()
