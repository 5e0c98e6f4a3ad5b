"""Benchmark: the nccl-tests parser at its limits (64 MiB, 1,000,000 lines), the worst shapes we know.

Each shape is built and parsed in a fresh interpreter; the peak memory is the process's peak resident
size during the parse above its size just before it (the input already built; the peak is reset
through /proc/self/clear_refs first), so it is what the parse itself costs. Prints one table: lines,
MiB, rows kept, seconds (CPU), microseconds per line, peak MB above the input.

    .venv/bin/python benchmarks/bench_nccl_parser.py [--shapes rows,rows-distinct] [--scale 1.0]

``--scale 0.1`` builds a tenth of each input (a quick look; the figures in docs/performance.md are at 1.0).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

HEADER = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
          "agg iters: 1 validation: 1 graph: 0\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
          "algbw   busbw #wrong\n")
SUMMARY = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 66.2058\n"



def _rows(n: int) -> str:
    return HEADER + "".join(f"{8 << (i % 30):>12} {2 << (i % 30):>10} float sum -1 40.12 0.00 0.00 0 "
                            "38.85 0.00 0.00 0\n" for i in range(n - 4)) + SUMMARY


def _rows_distinct(n: int) -> str:
    return HEADER + "".join(f"{i} {i} float sum -1 {i}.1 {i}.2 {i}.3 {i % 7} {i}.4 {i}.5 {i}.6 {i % 5}\n"
                            for i in range(n - 4)) + SUMMARY


def _rows_split(n: int) -> str:
    return HEADER + "".join(f"{i} {i} float sum -1 {i}.1 {i}.2 {i}.3 0\n{i}.4 {i}.5 {i}.6 0\n"
                            for i in range((n - 4) // 2)) + SUMMARY


def _rows_256(n: int) -> str:
    numbers = " ".join(str(j % 97) for j in range(256))
    return "".join(f"{i} {i} float sum {numbers}\n" for i in range(n // 8))


def _info_glued(n: int) -> str:
    return HEADER + "".join(f"{i} {i} float sum -1 1.1 2.2 3.3 0h:1:2 [0] NCCL INFO x\n4.4 5.5 6.6 0\n"
                            for i in range((n - 4) // 2)) + SUMMARY


def _unreadable(n: int) -> str:
    return HEADER + "".join(f"{i} {i} float sum -1 x{i} 0.00 0.00 0 38.85 0.00 0.00 0\n" for i in range(n - 4))


def _loose_ranks(n: int) -> str:
    return "".join(f"#  Rank {i}\n" for i in range(n))


# name -> (what it is, builder of about n lines; one line <= 64 characters where the shape allows, so a
# million lines stay under the 64 MiB limit; the text is cut at the limit in any case)
SHAPES = {
    "rows": ("result rows, values repeated as in real outputs", _rows),
    "rows-distinct": ("result rows, every number different (no token is seen twice)", _rows_distinct),
    "rows-split": ("rows printed over two lines each (the in-place half on the next line)", _rows_split),
    "rows-256-numbers": ("untitled rows of 256 numbers each", _rows_256),
    "info-glued": ("rows with an NCCL INFO line glued after the first half", _info_glued),
    "unreadable-rows": ("rows with a word where a number belongs (a warning each, 1,000 kept)", _unreadable),
    "loose-ranks": ("'# Rank N' lines (a rank each)", _loose_ranks),
}


def build(shape: str, lines: int) -> str:
    from healthcheck.parsers import nccl_tests

    return SHAPES[shape][1](lines)[:nccl_tests.MAX_INPUT_CHARS]


CHILD = r"""
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import bench_nccl_parser
from healthcheck.parsers import nccl_tests
text = bench_nccl_parser.build(sys.argv[3], int(sys.argv[4]))
def rss_kb(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
before = rss_kb("VmRSS:")
start = time.process_time()
result = nccl_tests.parse(text)
seconds = time.process_time() - start
peak = rss_kb("VmHWM:")
print(json.dumps({"lines": text.count("\n"), "mib": len(text) / 2**20, "rows": len(result.rows),
                  "seconds": seconds, "peak_mb": (peak - before) / 1024}))
"""


def run(shape: str, lines: int) -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", CHILD, ROOT, here, shape, str(lines)], capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of: " + ", ".join(SHAPES))
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the 1,000,000-line inputs")
    args = parser.parse_args()
    lines = int(1_000_000 * args.scale)
    print("| shape | lines | MiB | rows kept | CPU s | µs per line | peak MB above the input |")
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        r = run(shape, lines)
        print(f"| {shape}: {SHAPES[shape][0]} | {r['lines']:,} | {r['mib']:.1f} | {r['rows']:,} | "
              f"{r['seconds']:.1f} | {r['seconds'] / max(r['lines'], 1) * 1e6:.1f} | {r['peak_mb']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
