"""Admin inputs of `healthcheck parse` (issue 30, item 8): output and memory linear in the input.

Each case runs the real command (``python -m healthcheck.cli parse KIND FILE``) once, in a fresh
interpreter, its stdout read through a pipe and counted (not kept); figures: exit status, input and
output size, wall seconds, peak RSS (GNU time's ``%M`` of the command; blank without /usr/bin/time).

- ``perfquery``: one port's saturated plain block (tests/fixtures/fabric/perf/...) repeated to ~10.5 MB
  (~12,800 blocks: a `watch perfquery` log, or the same port queried from many scripts), text and JSON;
- ``perfquery-5000-digit-lid`` / ``ibqueryerrors-5000-digit-counter``: one number over int()'s 4,300-digit
  limit (exit 2 with the line named; 3, "internal error", before);
- ``nccl-tests``: ~60 MB of result rows (benchmarks/bench_nccl_parser.py's "rows" shape, 820,000 lines),
  the one-line text summary and the JSON document.

    .venv/bin/python benchmarks/bench_admin_inputs.py            # full sizes (~2 min)
    .venv/bin/python benchmarks/bench_admin_inputs.py --quick    # a tenth of the sizes (~5 s)
    .venv/bin/python benchmarks/bench_admin_inputs.py --tree /tmp/wt-old --quick   # another checkout

``--tree`` runs another checkout's package (e.g. ``git worktree add /tmp/wt-old <commit>``) on the same
inputs: the before/after figures of docs/performance.md come from the same machine. ``--timeout``
stops a case that runs longer (reported as such). Not part of the test run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

GNU_TIME = "/usr/bin/time"
SATURATED = os.path.join(ROOT, "tests", "fixtures", "fabric", "perf", "perfquery-basic-symbol-saturated.txt")
BIG = "7" * 5000


def _inputs(folder: str, scale: float) -> list[tuple[str, str, str, list[str]]]:
    """(label, kind, file, extra args) of every case, their files written into ``folder``."""
    from bench_nccl_parser import build

    with open(SATURATED) as fh:
        block = fh.read()
    files = {
        "perfquery.txt": block * max(1, int(12_800 * scale)),
        "big-lid.txt": f"# Port counters: Lid {BIG} port 1\nSymbolErrorCounter:..............3\n",
        "big-counter.txt": (f'Errors for "gpu05 mlx5_0"\n'
                            f"   GUID 0x506b4b03005c2750 port 1: [LinkDownedCounter == {BIG}]\n"),
        "nccl.txt": build("rows", max(1000, int(820_000 * scale))),
    }
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as fh:
            fh.write(text)
    path = lambda name: os.path.join(folder, name)  # noqa: E731
    return [
        ("perfquery, one port x blocks, text", "perfquery", path("perfquery.txt"), []),
        ("perfquery, one port x blocks, json", "perfquery", path("perfquery.txt"), ["--format", "json"]),
        ("perfquery, 5000-digit Lid", "perfquery", path("big-lid.txt"), []),
        ("ibqueryerrors, 5000-digit counter", "ibqueryerrors", path("big-counter.txt"), []),
        ("nccl-tests rows, text summary", "nccl-tests", path("nccl.txt"), []),
        ("nccl-tests rows, json", "nccl-tests", path("nccl.txt"), ["--format", "json"]),
    ]


def run_case(tree: str, kind: str, path: str, extra: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, HEALTHCHECK_DEBUG="")
    argv = [sys.executable, "-m", "healthcheck.cli", "parse", kind, path, *extra]
    with tempfile.NamedTemporaryFile("r") as rss_file, tempfile.TemporaryFile() as err:
        timed = os.access(GNU_TIME, os.X_OK)
        if timed:
            argv = [GNU_TIME, "-q", "-f", "%M", "-o", rss_file.name, *argv]
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err, process_group=0)
        out_bytes, timed_out = 0, False
        while chunk := proc.stdout.read(1 << 20):
            out_bytes += len(chunk)
            if time.perf_counter() - start > timeout:
                os.killpg(proc.pid, 9)
                timed_out = True
                break
        proc.stdout.close()
        code = proc.wait()
        seconds = time.perf_counter() - start
        err.seek(0)
        message = err.read().decode(errors="replace").strip().splitlines()
        rss = rss_file.read().split() if timed and not timed_out else []
    return {"exit": "timeout" if timed_out else code, "out": out_bytes, "s": seconds,
            "rss_mb": int(rss[-1]) / 1024 if rss and rss[-1].isdigit() else None,
            "stderr": (message[-1] if message else "")[:110]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the input sizes")
    parser.add_argument("--tree", default=ROOT, help="the checkout whose package runs (default: this one)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a case may run")
    parser.add_argument("--only", default="", help="only the cases whose label holds this text")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    tree = os.path.abspath(args.tree)
    print(f"tree {tree}, scale {scale}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("| case | input MB | exit | output | output / input | wall s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="hc-bench-admin-") as folder:
        for label, kind, path, extra in _inputs(folder, scale):
            if args.only not in label:
                continue
            size = os.path.getsize(path)
            r = run_case(tree, kind, path, extra, args.timeout)
            out = f"{r['out'] / 1e6:,.1f} MB" if r["out"] >= 100_000 else f"{r['out']:,} B"
            rss = f"{r['rss_mb']:,.0f}" if r["rss_mb"] is not None else ""
            print(f"| {label} | {size / 1e6:.2f} | {r['exit']} | {out} | {r['out'] / size:.3g} | {r['s']:.2f} | "
                  f"{rss} |", flush=True)
            if r["exit"] not in (0, "timeout") and r["stderr"]:
                print(f"|   stderr: {r['stderr'].replace('|', '/')} | | | | | | |", flush=True)


if __name__ == "__main__":
    main()
