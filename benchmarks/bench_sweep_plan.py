"""The nightly sweep's planning at fleet scale: `scontrol show node -o` text of N nodes parsed, then the
plan (which nodes, why the others are left), and how it grows from 1,000 to 10,000 nodes.

    .venv/bin/python benchmarks/bench_sweep_plan.py [--nodes 1000 10000] [--runs 5]

The node list is synthetic (idle, allocated, mixed, down, drained by us and by others, reservations),
shaped like real `scontrol show node -o` lines; figures go to docs/performance.md.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc

from healthcheck.slurm.nodestate import parse_scontrol_nodes
from healthcheck.sweep.plan import make_plan
from healthcheck.sweep.settings import SweepSettings

STATES = [("IDLE", None, 50), ("ALLOCATED", None, 30), ("MIXED", None, 10), ("DOWN+NOT_RESPONDING", "Not responding", 2),
          ("IDLE+DRAIN", "healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC errors [run 1a2b]", 4),
          ("IDLE+DRAIN", "replaced DIMM, waiting for burn-in", 3), ("ALLOCATED+DRAIN", "maintenance", 1)]


def scontrol_text(n: int, seed: int = 16) -> str:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        state, reason, _ = rng.choices(STATES, weights=[w for _, _, w in STATES])[0]
        fields = [f"NodeName=gpu{i:05d}", "Arch=x86_64", "CoresPerSocket=48", "CPUAlloc=0", "CPUTot=192",
                  "CPULoad=0.50", "AvailableFeatures=h100,ib", "ActiveFeatures=h100,ib", "Gres=gpu:h100:8",
                  f"NodeAddr=gpu{i:05d}", f"NodeHostName=gpu{i:05d}", "Version=24.11.5", "OS=Linux 6.1.0",
                  "RealMemory=2000000", "AllocMem=0", "FreeMem=1900000", "Sockets=2", "Boards=1",
                  f"State={state}", "ThreadsPerCore=2", "TmpDisk=0", "Weight=1", "Owner=N/A", "MCS_label=N/A",
                  f"Partitions=gpu,{'debug' if i % 10 == 0 else 'batch'}", "BootTime=2026-11-30T08:00:00",
                  "SlurmdStartTime=2026-11-30T08:01:00", "LastBusyTime=2026-12-03T01:00:00",
                  "CfgTRES=cpu=192,mem=2000000M,billing=192,gres/gpu=8", "AllocTRES=", "CapWatts=n/a",
                  "CurrentWatts=0", "AveWatts=0", "ExtSensorsJoules=n/s"]
        if reason:
            fields.append(f"Reason={reason} [root@2026-12-02T10:00:00]")
        lines.append(" ".join(fields))
    return "\n".join(lines) + "\n"


def measure(n: int, runs: int) -> dict:
    text = scontrol_text(n)
    settings = SweepSettings(max_nodes=32, include_ours=True, reservation=True)
    parse_s, plan_s = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        states = parse_scontrol_nodes(text)
        t1 = time.perf_counter()
        plan = make_plan(states, settings)
        plan_s.append(time.perf_counter() - t1)
        parse_s.append(t1 - t0)
    tracemalloc.start()
    states = parse_scontrol_nodes(text)
    make_plan(states, settings)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"nodes": n, "mib_text": len(text) / 2**20, "parse_s": statistics.median(parse_s),
            "plan_s": statistics.median(plan_s), "peak_mib": peak / 2**20,
            "chosen": len(plan.nodes) if hasattr(plan, "nodes") else None, "skipped": len(plan.skipped)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print("| nodes | scontrol text MiB | parse s | plan s | peak MiB (tracemalloc) | skipped |")
    print("|---|---|---|---|---|---|")
    for n in args.nodes:
        r = measure(n, args.runs)
        print(f"| {r['nodes']:,} | {r['mib_text']:.1f} | {r['parse_s']:.3f} | {r['plan_s']:.4f} | {r['peak_mib']:.1f} "
              f"| {r['skipped']:,} |")


if __name__ == "__main__":
    main()
