"""Where the prolog's import time goes: ``python -X importtime`` on the hook, as the wrapper runs it.

Runs the prolog (default check set, host checks live, no GPU bundle: bench_prolog.py's NHC-equivalent
case) N times with ``-X importtime`` and prints the top modules by cumulative import time (median over
the runs, microseconds as Python reports them), with their self time, and the sum of self times (all
imports of the run, the hook's forked child included).

    .venv/bin/python benchmarks/importtime_prolog.py [--runs 10] [--top 15] [--context prolog]

Not part of the test run; figures go to docs/performance.md.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENTRY = "from healthcheck.hook.run import run; run()"


def parse(stderr: str) -> dict[str, tuple[int, int]]:
    """{module: (self µs, cumulative µs)} of one run's ``-X importtime`` lines."""
    out: dict[str, tuple[int, int]] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        fields = line[len("import time:"):].split("|")
        if len(fields) != 3:
            continue
        module = fields[2].strip()
        own, cum = int(fields[0]), int(fields[1])
        prev = out.get(module, (0, 0))
        out[module] = (prev[0] + own, prev[1] + cum)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--context", choices=["prolog", "epilog", "slurm-check"], default="prolog")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="importtime-") as tmp:
        config = Path(tmp) / "site.toml"
        config.write_text(f'[slurm]\nstate_dir = "{tmp}/state"\nspool_dir = "{tmp}/spool"\n')
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "bench1", "SLURM_JOB_ID": "1",
               "HEALTHCHECK_CACHE_DIR": f"{tmp}/cache"}
        argv = [sys.executable, "-I", "-X", "importtime", "-c", ENTRY, args.context, "--config", str(config)]
        subprocess.run(argv, env=env, cwd="/", capture_output=True)  # warm: bytecode, page cache, TOML cache
        own, cum = defaultdict(list), defaultdict(list)
        totals = []
        for _ in range(args.runs):
            proc = subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"{args.context} exited {proc.returncode}: {proc.stderr[-2000:]}")
            run = parse(proc.stderr)
            totals.append(sum(s for s, _ in run.values()))
            for module, (s, c) in run.items():
                own[module].append(s)
                cum[module].append(c)
    ranked = sorted(cum, key=lambda m: statistics.median(cum[m]), reverse=True)[:args.top]
    print(f"{args.context}: {args.runs} runs; modules imported: {len(cum)}; "
          f"sum of self times (median): {statistics.median(totals) / 1000:.1f} ms\n")
    print("| module | cumulative ms | self ms |")
    print("|---|---|---|")
    for module in ranked:
        print(f"| `{module}` | {statistics.median(cum[module]) / 1000:.1f} | {statistics.median(own[module]) / 1000:.1f} |")


if __name__ == "__main__":
    main()
