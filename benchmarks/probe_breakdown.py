"""Where a hook's probing goes on this node: each probe's duration in a context's live snapshot, in fresh
processes, the way the hooks' child takes it (``snapshot_for`` with the context's sources, no process
table, NVML's session left to the exit).

    .venv/bin/python benchmarks/probe_breakdown.py [--context prolog] [--runs 12]
        [--pynvml-first]     import pynvml before the timing, as the agent does on a GPU node
        [--warm N]           time each process's snapshot after N more in it, as the agent's prepared
                             child takes it: warmed, the kernel log's events cached (the hooks' kernel
                             cache, in a scratch directory) and its reader kept open (kmsg.keep_reading)
        [--ab-early]         interleave runs with the GPU probe's thread started first (live.EARLY_PROBES,
                             the default) and after the inline probes, and compare the snapshots' medians

Prints the median of each probe's duration and of the whole snapshot (the first two runs of each kind
not counted). On a machine without an NVIDIA GPU there is no GPU probe, and --ab-early compares two
identical runs. Not part of the test run; figures go to docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CODE = r'''
import json, sys, time
context, pynvml_first, late, warm = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", int(sys.argv[4])
t0 = time.perf_counter()
if pynvml_first:
    try:
        import pynvml  # noqa: F401
    except ImportError:
        pass
from healthcheck.pipeline.acquire import snapshot_for
from healthcheck.config.model import default_expectations
from healthcheck.pipeline.judge import sources_needed
from healthcheck.core.clock import utc_now_iso
from healthcheck.probes import live
if late:
    live.EARLY_PROBES = ()
exp = default_expectations()
t1 = time.perf_counter()
imports_ms = (t1 - t0) * 1000
cache = None
if warm:
    import os, tempfile
    from healthcheck.probes.kmsg import KMSG, keep_reading
    cache = os.path.join(tempfile.mkdtemp(prefix="probe-breakdown-"), "kernel-cache")
    for _ in range(warm):
        snapshot_for("bench1", exp, utc_now_iso(), sources=sources_needed(exp, context), processes=False,
                     nvml_close=False, kernel_cache=cache)
    try:
        keep_reading(KMSG, time.monotonic() + 2.5)
    except OSError:
        pass
    t1 = time.perf_counter()
snap = snapshot_for("bench1", exp, utc_now_iso(), sources=sources_needed(exp, context), processes=False,
                    nvml_close=False, kernel_cache=cache)
t2 = time.perf_counter()
print(json.dumps({"imports_ms": imports_ms, "snapshot_ms": (t2 - t1) * 1000,
                  "probes_ms": {k: v * 1000 for k, v in snap.probe_durations_s.items()}}))
'''

WARMUP = 2


def run(context: str, pynvml_first: bool, late: bool, warm: int = 0) -> dict:
    proc = subprocess.run([sys.executable, "-c", CODE, context, str(int(pynvml_first)), str(int(late)), str(warm)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"probe_breakdown: a run failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def summary(rows: list[dict]) -> str:
    probes = sorted({name for row in rows for name in row["probes_ms"]})
    parts = [f"{name} {statistics.median(row['probes_ms'].get(name, 0.0) for row in rows):.1f}" for name in probes]
    return (f"snapshot {statistics.median(r['snapshot_ms'] for r in rows):.1f} ms, imports "
            f"{statistics.median(r['imports_ms'] for r in rows):.1f} ms; probes (ms): " + ", ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", default="prolog", choices=("prolog", "epilog", "slurm-check"))
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--pynvml-first", action="store_true")
    parser.add_argument("--ab-early", action="store_true")
    parser.add_argument("--warm", type=int, default=0, metavar="N")
    args = parser.parse_args()
    kinds = (False, True) if args.ab_early else (False,)
    rows: dict[bool, list[dict]] = {kind: [] for kind in kinds}
    for i in range(args.runs + WARMUP):
        for late in (kinds if i % 2 else kinds[::-1]):
            row = run(args.context, args.pynvml_first, late, max(0, args.warm))
            if i >= WARMUP:
                rows[late].append(row)
    print(f"{args.context}, {args.runs} runs of each in fresh processes"
          + (f", each timed after {args.warm} snapshots in the same process" if args.warm > 0 else "")
          + (", pynvml imported first" if args.pynvml_first else ""))
    for late, label in ((False, "GPU probe started first"), (True, "GPU probe after the inline probes")):
        if late in rows:
            print(f"  {label}: {summary(rows[late])}")


if __name__ == "__main__":
    main()
