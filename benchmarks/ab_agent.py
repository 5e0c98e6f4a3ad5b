"""A/B of the warm agent's code: the same prolog hook at the door of two agents side by side, one running
an earlier commit's package, interleaved.

    .venv/bin/python benchmarks/ab_agent.py --base REV [--new REV] [--pairs 40] [--gap-ms 150]

Each side's package is a checkout of its commit in a scratch git worktree (``--new`` omitted: this tree).
Both agents start as bench_prolog.py starts one (its config: default prolog checks, host live), each on
its own socket; the hook is the one this tree renders (the door's protocol is the same on both sides).
Per side it prints the median wall time of the hook (as slurmd runs it) and the median of what the
agent's journal reports from the hook's start to its answer ("exit 0 after X ms"), and how many hooks
were taken at the door. Not part of the test run; figures go to docs/performance.md.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_prolog  # noqa: E402
from _measure import median, run_once  # noqa: E402

WARMUP = 2
ANSWERED = re.compile(r"exit \d+ after ([0-9.]+) ms \(recorded")


def worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(where), rev], check=True,
                   capture_output=True, text=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the earlier commit")
    parser.add_argument("--new", help="the later commit (default: this tree as it is)")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=150.0, help="pause before each run (default 150)")
    args = parser.parse_args()
    if args.pairs < 20:
        parser.error("--pairs: at least 20")
    with tempfile.TemporaryDirectory(prefix="ab-agent-") as tmp:
        work = Path(tmp)
        trees = {"base": worktree(args.base, work / "tree-base")}
        trees["new"] = worktree(args.new, work / "tree-new") if args.new else ROOT
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "bench1", "SLURM_JOB_ID": "1", "SLURM_JOB_UID": "1000",
               "SLURM_JOB_USER": "alice", "HEALTHCHECK_CACHE_DIR": f"{tmp}/cache"}
        bench_prolog.setup(work)
        agents, hooks, logs = {}, {}, {}
        try:
            for side, tree in trees.items():
                (work / f"{side}.toml").write_text((work / "default.toml").read_text())
                logs[side] = open(work / f"{side}.log", "w")
                code = (f"import sys; sys.path.insert(0, {str(tree)!r}); "
                        "from healthcheck.agent.main import main; sys.exit(main())")
                agents[side], sock = bench_prolog.start_agent(work, side, env, argv=[sys.executable, "-I", "-c", code],
                                                              stderr=logs[side])
                hooks[side] = bench_prolog.wrapper(work, f"ab-{side}", work / f"{side}.toml", sock)
            walls: dict[str, list[float]] = {side: [] for side in trees}
            for round_no in range(WARMUP + args.pairs):
                for side in (("base", "new") if round_no % 2 else ("new", "base")):
                    time.sleep(max(0.0, args.gap_ms) / 1000)
                    ms, _ = run_once([str(hooks[side])], env)
                    if round_no >= WARMUP:
                        walls[side].append(ms)
        finally:
            for proc in agents.values():
                proc.terminate()
                proc.wait(timeout=30)
            for fh in logs.values():
                fh.close()
            for side in ("base", "new"):
                if trees.get(side) not in (None, ROOT):
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[side])],
                                   capture_output=True)
        new = args.new or "this tree"
        print(f"{args.pairs} interleaved pairs, pause {args.gap_ms:g} ms; base {args.base}, new {new}")
        for side in ("base", "new"):
            journal = (work / f"{side}.log").read_text() if (work / f"{side}.log").exists() else ""
            answered = [float(x) for x in ANSWERED.findall(journal)][WARMUP:]
            at_door = journal.count(", at the door")
            print(f"  {side}: hook {median(walls[side]):.2f} ms; start to answer (journal) "
                  f"{median(answered) if answered else float('nan'):.2f} ms; at the door {at_door} of "
                  f"{WARMUP + args.pairs}")


if __name__ == "__main__":
    main()
