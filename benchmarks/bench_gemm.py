"""Our verified GEMM (healthcheck.burnin.gemm.run_gemm) against a bare matmul loop, per device.

Runs the burn-in GEMM on every device of the chosen backend at once for ``--duration`` seconds, then
the bare loop (``plain_matmul_tflops``: the backend's matmul, no verification, best 8-product chunk
and whole-loop average) on every device at once for as long, and prints one row per device: what
verification costs in throughput, as ours against the bare loop's average over the same time (its
best chunk is shown too: it catches the clocks between two power-cap steps, which no sustained run
keeps; an H200 at 700 W spends most of a 10 s bf16 loop capped). On a CPU-only machine the NumPy
backend runs (fp32, small n).

    .venv/bin/python benchmarks/bench_gemm.py [--backend auto|torch|cupy|numpy] [--n 8192]
                                              [--dtype bf16] [--duration 10]

Not part of the test run (tests/gpu/test_burnin_gpu.py asserts >= 90 % on a GPU).
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from healthcheck.burnin.backends import BackendUnavailable, select_backend  # noqa: E402
from healthcheck.burnin.gemm import plain_matmul_tflops, run_gemm  # noqa: E402
from healthcheck.burnin.judge_compute import judge_gemm  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--n", type=int, default=None, help="matrix size (default 8192 on a GPU, 512 on the CPU)")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--duration", type=float, default=None, help="seconds (default 10 on a GPU, 2 on the CPU)")
    args = parser.parse_args(argv)
    try:
        backend = select_backend(args.backend)
    except BackendUnavailable as exc:
        print(f"bench_gemm: {exc}", file=sys.stderr)
        return 2
    n = args.n or (512 if backend.host_only else 8192)
    duration = args.duration or (2.0 if backend.host_only else 10.0)
    devices = [d.index for d in backend.devices()]
    results = run_gemm(backend, devices, duration_s=duration, n=n, dtype=args.dtype)
    with ThreadPoolExecutor(max_workers=len(devices)) as pool:
        plain = dict(zip(devices, pool.map(
            lambda d: plain_matmul_tflops(backend, d, n=n, dtype=args.dtype, duration_s=duration),
            devices)))
    verify = {f.component: f for f in judge_gemm(results, None) if f.check == "burnin.gemm.verify"}
    dtype = results[0].dtype if results else backend.device_dtype(args.dtype)
    print(f"backend {backend.name}, {dtype}, n={n}, {duration:g} s per device, the plain loop as long")
    header = (f"{'device':<7} {'name':<28} {'ours TFLOP/s':>12} {'plain best':>10} {'plain avg':>9} "
              f"{'ours/avg':>9}  verify")
    print(header)
    print("-" * len(header))
    for r in results:
        best, avg = plain[r.device]
        ours = "-" if r.tflops is None else f"{r.tflops:.3f}"
        ratio = "-" if r.tflops is None or avg <= 0 else f"{100 * r.tflops / avg:.1f}%"
        f = verify[r.component]
        detail = (f"{r.iterations} products, {r.mismatches} differed, error {r.reference_error:.1e}"
                  if f.status.value == "pass" else f.message)
        print(f"{r.component:<7} {r.name[:28]:<28} {ours:>12} {best:>10.3f} {avg:>9.3f} {ratio:>9}  "
              f"{f.status.value.upper()} ({detail})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
