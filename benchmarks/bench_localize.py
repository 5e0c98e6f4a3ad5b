"""Benchmark: bad-node localisation on simulated fleets (goal: 256 nodes, <= 5 % bad -> exact in <= 3 rounds).

Uniform fleets (every healthy node at factor 1.0, every bad node at 0.6): sweeps 64/256/1024 nodes x
1 %/5 % bad nodes (noise sd 0.03, threshold 0.8 x nominal, margin 5 %), one row of group-only faults
(bad only in groups of >= 8 nodes) and three rows at the limits (noise sd 0.10; bad nodes inside the margin
band; 40 % bad).

Heterogeneous fleets (``--good-spread``, ``--bad-range``, ``--het-noise``; defaults 0.05, 0.5-0.72, 0.03):
each healthy node has its own factor in [1 - spread, 1], each bad node its own factor in the range (by
default every bad node below the threshold's margin band; ``--bad-range 0.5 0.85`` puts some inside and
above it, where no threshold test can call them bad). The
same 64/256/1024 x 1 %/5 % sweep runs twice: at the benchmark's usual threshold (0.8 x nominal, margin
5 %), and at a threshold placed in the gap between the slowest healthy and the fastest bad node
(``--gap-threshold``, ``--gap-margin``; defaults 0.88 x nominal, 4 %). The baselines use the same
threshold (they have no margin).

For each row, ``--seeds`` fleets; every strategy sees the same fleet (same bad nodes, same factors, same
noise stream). localise is given the full allocation's result, as burn-in would (the run that failed).
Prints one table: rounds (parallel srun rounds), precision, recall; then whether the goal is met.

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

# (nodes, bad fraction, fleet options, note, (threshold x nominal, margin))
USUAL = (0.8, 0.05)
SWEEP = [(n, frac, {}, "", USUAL) for n in (64, 256, 1024) for frac in (0.01, 0.05)]
GROUP_ONLY = [(256, 0.01, {"group_only_fraction": 1.0, "group_only_min_size": 8}, "group-only (>= 8 nodes)", USUAL)]
LIMITS = [(256, 0.05, {"noise_sd": 0.10}, "noise sd 0.10", USUAL),
          (256, 0.05, {"bad_factor": 0.78}, "bad at 0.78: inside the ±5 % band", USUAL),
          (64, 0.40, {}, "40 % bad", USUAL)]


def heterogeneous(args: argparse.Namespace) -> list:
    opts = {"good_spread": args.good_spread, "bad_factor_range": tuple(args.bad_range), "noise_sd": args.het_noise}
    note = "heterogeneous"
    gap = (args.gap_threshold, args.gap_margin)
    gap_note = f"{note}, threshold {args.gap_threshold:g} x nominal, margin {args.gap_margin:.0%}"
    return ([(n, frac, opts, note, USUAL) for n in (64, 256, 1024) for frac in (0.01, 0.05)]
            + [(n, frac, opts, gap_note, gap) for n in (64, 256, 1024) for frac in (0.01, 0.05)])


def strategies(group_only: bool, threshold: float, margin: float):
    def loc(max_rounds):
        def run(fleet: Fleet, seed: int):
            result = localise(fleet.nodes, fleet.measure, threshold * fleet.nominal, seed=seed, margin=margin,
                              max_rounds=max_rounds, full_group_value=fleet.full_value())
            return result.bad, len(result.rounds), len(result.suspects)
        return run

    def pairs2(fleet: Fleet, seed: int):
        return (*baseline_random_pairs_second_pass(fleet.nodes, fleet.measure, threshold * fleet.nominal, seed),
                None)

    def shuffles(rounds):
        def run(fleet: Fleet, seed: int):
            return (*baseline_shuffles(fleet.nodes, fleet.measure, threshold * fleet.nominal, rounds, seed), None)
        return run

    yield "localise", loc(6)
    if group_only:
        yield "localise max_rounds=8", loc(8)
    yield "random pairs + 2nd pass", pairs2
    yield "shuffles x3", shuffles(3)
    yield "shuffles x6", shuffles(6)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--good-spread", type=float, default=0.05,
                    help="heterogeneous rows: healthy factor uniform in [1 - SPREAD, 1] (default 0.05)")
    ap.add_argument("--bad-range", type=float, nargs=2, default=[0.5, 0.72], metavar=("LOW", "HIGH"),
                    help="heterogeneous rows: bad factor uniform in [LOW, HIGH] (default 0.5 0.72)")
    ap.add_argument("--het-noise", type=float, default=0.03, help="heterogeneous rows: noise sd (default 0.03)")
    ap.add_argument("--gap-threshold", type=float, default=0.88,
                    help="second heterogeneous sweep: threshold as a fraction of nominal (default 0.88)")
    ap.add_argument("--gap-margin", type=float, default=0.04,
                    help="second heterogeneous sweep: localise's margin (default 0.04)")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    if not 0 < args.gap_threshold or not 0 <= args.gap_margin < 1:
        ap.error("--gap-threshold must be > 0 and --gap-margin in [0, 1)")
    try:
        Fleet(2, 0.5, good_spread=args.good_spread, bad_factor_range=tuple(args.bad_range), noise_sd=args.het_noise)
    except ValueError as exc:
        ap.error(str(exc))
    return args


def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    lo, hi = args.bad_range
    print(f"command: .venv/bin/python benchmarks/bench_localize.py --seeds {args.seeds} "
          f"--good-spread {args.good_spread:g} --bad-range {lo:g} {hi:g} --het-noise {args.het_noise:g} "
          f"--gap-threshold {args.gap_threshold:g} --gap-margin {args.gap_margin:g}")
    print(f"seeds per row: {args.seeds}; cpus: {os.cpu_count()}; python {sys.version.split()[0]}; "
          "threshold 0.8 x 400 GB/s, margin 5 %, bad_factor 0.6, noise sd 0.03 unless noted; heterogeneous: "
          f"healthy factor {1 - args.good_spread:g}-1, bad factor {lo:g}-{hi:g}, noise sd {args.het_noise:g}\n")
    print("| strategy | nodes | bad % | case | rounds mean | rounds max | precision mean | precision min "
          "| recall mean | recall min | suspects mean |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    goals: dict[str, bool] = {}
    for n, frac, opts, note, (threshold, margin) in SWEEP + GROUP_ONLY + LIMITS + heterogeneous(args):
        for name, run in strategies(bool(opts.get("group_only_fraction")), threshold, margin):
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
            if name == "localise" and n == 256 and (not opts or "good_spread" in opts):
                key = f"threshold {threshold:g} x nominal, margin {margin:.0%}, " + \
                      ("heterogeneous" if opts else "uniform")
                goals[key] = goals.get(key, True) and min(precision) == min(recall) == 1.0 and max(rounds) <= 3
            sus = f"{statistics.mean(suspects):.1f}" if suspects else "–"
            print(f"| {name} | {n} | {frac:.0%} | {note or 'pair faults'} | {statistics.mean(rounds):.2f} "
                  f"| {max(rounds)} | {statistics.mean(precision):.3f} | {min(precision):.3f} "
                  f"| {statistics.mean(recall):.3f} | {min(recall):.3f} | {sus} |")
    print()
    for key, ok in goals.items():
        print(f"goal (localise, 256 nodes, 1 % and 5 % bad: precision = recall = 1 on every seed, <= 3 rounds), "
              f"{key}: {'met' if ok else 'NOT met'}")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
