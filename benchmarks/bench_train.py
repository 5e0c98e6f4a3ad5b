"""What the training smoke test costs on this host: the phase (the run, the killed run, the restart) on
``--ranks`` local ranks of ``--model`` (gloo on the CPU, torch's CPU build; NCCL with ``--gpu``), with each
launch's wall time, the recovery time, the step time and tokens/s. docs/train.md quotes its figures.

    .venv/bin/python benchmarks/bench_train.py [--ranks 2] [--model tiny] [--no-resume] [--gpu]

Not part of the test run (tests/burnin/test_train_local.py asserts verdicts, not times).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from healthcheck.burnin.train.phase import Launch, run_phase  # noqa: E402
from healthcheck.burnin.train.spec import load  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--no-resume", action="store_true")
    ap.add_argument("--gpu", action="store_true", help="NCCL and bf16 (one rank per local GPU)")
    args = ap.parse_args()
    data = load()
    spec = data.spec(args.model)
    if args.gpu:
        spec = replace(spec, backend="nccl", dtype="bf16")
    with tempfile.TemporaryDirectory(prefix="bench-train-") as work:
        t0 = time.monotonic()
        out = run_phase(spec, data, Launch(["local"], local_ranks=args.ranks), work, resume=not args.no_resume,
                        log=lambda m: print(f"  {time.monotonic() - t0:6.1f} s  {m}"))
        total = time.monotonic() - t0
    full = out.record.get("full") or {}
    steps = full.get("step_s") or [0.0]
    print(f"model {args.model}, {args.ranks} ranks, params {full.get('params')}, torch {full.get('torch')}")
    print(f"phase {total:.1f} s; uninterrupted launch {full.get('seconds')} s; killed + restart "
          f"{(out.record.get('resume') or {}).get('seconds')} s; recovery "
          f"{(out.record.get('resume') or {}).get('recovery_s')} s")
    print(f"median step {1000 * statistics.median(steps[3:] or steps):.1f} ms (slowest rank), "
          f"median job tokens/s {statistics.median((full.get('tokens_per_s') or [0])[3:] or [0]):.0f}")
    for f in out.findings:
        print(f"  {f.status.value:5} {f.check} {f.component or ''}: {f.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
