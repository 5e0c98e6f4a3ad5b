"""The NVML probe's cost model: how many NVML calls it makes per node, by function, and the Python time
around them (over the tests' fake pynvml, so without a driver's own time).

    .venv/bin/python benchmarks/nvml_calls.py [--gpus 8] [--runs 20]

The driver's time per call is not measurable without a GPU; docs/performance.md multiplies these counts
by published per-call figures. Not part of the test run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from healthcheck.probes.nvml import probe_gpus  # noqa: E402
from tests.fakes.fake_pynvml import FakeNvml, h100_node  # noqa: E402


class Counting:
    """A pynvml stand-in that counts each ``nvml*`` call it forwards."""

    def __init__(self, inner, counts: Counter):
        self._inner, self._counts = inner, counts

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if not (name.startswith("nvml") and callable(value)):
            return value

        def call(*args, **kwargs):
            self._counts[name] += 1
            return value(*args, **kwargs)
        return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    counts: Counter = Counter()
    gpus = probe_gpus(Counting(FakeNvml(h100_node(args.gpus)), counts))
    assert len(gpus) == args.gpus and not any(g.lost for g in gpus)
    times = []
    for _ in range(args.runs):
        fake = FakeNvml(h100_node(args.gpus))
        start = time.perf_counter()
        probe_gpus(fake)
        times.append((time.perf_counter() - start) * 1000)
    total = sum(counts.values())
    print(f"{args.gpus} GPUs (H100 SXM, 18 NVLinks each): {total} NVML calls, {total / args.gpus:.0f} per GPU; "
          f"Python around them over the fake: {statistics.median(times):.1f} ms median of {args.runs}\n")
    print("| calls | function |\n|---|---|")
    for name, n in counts.most_common():
        print(f"| {n} | `{name}` |")


if __name__ == "__main__":
    main()
