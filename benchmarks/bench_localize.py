"""Benchmark: bad-node localisation on simulated fleets (goal: 256 nodes, <= 5 % bad -> exact in <= 3 rounds).

Sweeps 64/256/1024 nodes x 1 %/5 % bad nodes (bad_factor 0.6, noise sd 0.03, threshold 0.8 x nominal),
one row of group-only faults (bad only in groups of >= 8 nodes) and three rows at the limits (noise sd
0.10; bad nodes inside the margin band; 40 % bad). For each, ``--seeds`` fleets; every strategy sees the
same fleet (same bad nodes, same noise stream). localise is given the full allocation's result, as
burn-in would (the run that failed). Prints one table: rounds (parallel srun rounds), precision, recall.

    .venv/bin/python benchmarks/bench_localize.py [--seeds 50]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from healthcheck.burnin.localize import localise  # noqa: E402
from healthcheck.burnin.simulate import (Fleet, baseline_random_pairs_second_pass,  # noqa: E402
                                         baseline_shuffles, score)

# (nodes, bad fraction, fleet options, note)
SWEEP = [(n, frac, {}, "") for n in (64, 256, 1024) for frac in (0.01, 0.05)]
GROUP_ONLY = [(256, 0.01, {"group_only_fraction": 1.0, "group_only_min_size": 8}, "group-only (>= 8 nodes)")]
LIMITS = [(256, 0.05, {"noise_sd": 0.10}, "noise sd 0.10"),
          (256, 0.05, {"bad_factor": 0.78}, "bad at 0.78: inside the ±5 % band"),
          (64, 0.40, {}, "40 % bad")]


def strategies(group_only: bool):
    def loc(max_rounds):
        def run(fleet: Fleet, seed: int):
            result = localise(fleet.nodes, fleet.measure, 0.8 * fleet.nominal, seed=seed, max_rounds=max_rounds,
                              full_group_value=fleet.full_value())
            return result.bad, len(result.rounds), len(result.suspects)
        return run

    def pairs2(fleet: Fleet, seed: int):
        return (*baseline_random_pairs_second_pass(fleet.nodes, fleet.measure, 0.8 * fleet.nominal, seed), None)

    def shuffles(rounds):
        def run(fleet: Fleet, seed: int):
            return (*baseline_shuffles(fleet.nodes, fleet.measure, 0.8 * fleet.nominal, rounds, seed), None)
        return run

    yield "localise", loc(6)
    if group_only:
        yield "localise max_rounds=8", loc(8)
    yield "random pairs + 2nd pass", pairs2
    yield "shuffles x3", shuffles(3)
    yield "shuffles x6", shuffles(6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"command: .venv/bin/python benchmarks/bench_localize.py --seeds {args.seeds}")
    print(f"seeds per row: {args.seeds}; cpus: {os.cpu_count()}; python {sys.version.split()[0]}; "
          "threshold 0.8 x 400 GB/s, margin 5 %, bad_factor 0.6, noise sd 0.03 unless noted\n")
    print("| strategy | nodes | bad % | case | rounds mean | rounds max | precision mean | precision min "
          "| recall mean | recall min | suspects mean |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    goal_ok = True
    for n, frac, opts, note in SWEEP + GROUP_ONLY + LIMITS:
        for name, run in strategies(bool(opts.get("group_only_fraction"))):
            rounds, precision, recall, suspects = [], [], [], []
            for seed in range(args.seeds):
                fleet = Fleet(n, frac, seed=seed, **opts)
                bad, used, unresolved = run(fleet, seed)
                assert used == fleet.rounds
                p, r = score(bad, fleet.bad)
                rounds.append(used)
                precision.append(p)
                recall.append(r)
                if unresolved is not None:
                    suspects.append(unresolved)
            if name == "localise" and n == 256 and not opts:
                goal_ok &= min(precision) == min(recall) == 1.0 and max(rounds) <= 3
            sus = f"{statistics.mean(suspects):.1f}" if suspects else "–"
            print(f"| {name} | {n} | {frac:.0%} | {note or 'pair faults'} | {statistics.mean(rounds):.2f} "
                  f"| {max(rounds)} | {statistics.mean(precision):.3f} | {min(precision):.3f} "
                  f"| {statistics.mean(recall):.3f} | {min(recall):.3f} | {sus} |")
    print(f"\ngoal (localise, 256 nodes, 1 % and 5 % bad: precision = recall = 1 on every seed, <= 3 rounds): "
          f"{'met' if goal_ok else 'NOT met'}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
