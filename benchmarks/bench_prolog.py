"""Measure the prolog hook as slurmd runs it, interleaved with the bare interpreter.

Setup (reproducible, from the project's fixtures): an 8-GPU H100 bundle holding only the hardware
(GPUs through nvml.json, PCIe and InfiniBand sysfs, kernel log), so the host checks (memory, disks,
mounts, services) run live on this machine, as they would on a node. The drain backend is never called
on a healthy node; the spool record is written (with fsync) as in production.

Cases, run round-robin so machine noise hits all equally:
  python -I -c pass                 the interpreter floor
  prolog hook                       python -I -m healthcheck.slurm.hooks prolog --config site.toml
  NHC-equivalent host checks        the same hook, host checks only (no GPU bundle): what NHC's
                                    default node checks cover (memory, mounts, disks, services)

    .venv/bin/python benchmarks/bench_prolog.py [--runs 40]

Figures are recorded in docs/performance.md; this is not part of the test run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup(work: Path) -> dict[str, Path]:
    from healthcheck.collect import collect_bundle
    from tests.integration.test_bundles import make_node

    node = make_node(work / "node")
    full, _ = collect_bundle(str(work / "full"), options=node)
    hardware = work / "bundles" / "bench1"
    shutil.copytree(full, hardware)
    shutil.rmtree(hardware / "proc")  # host facts come from this machine, live
    (hardware / "statvfs.json").unlink()
    configs = {}
    for name, body in (("prolog", f'[defaults]\nbundle = "{work}/bundles/{{node}}"\n'),
                       ("host-only", '[defaults.checks]\nprolog = ["host.*"]\n')):
        path = work / f"{name}.toml"
        path.write_text(body + f'\n[slurm]\nstate_dir = "{work}/state"\nspool_dir = "{work}/spool"\n')
        configs[name] = path
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    py = sys.executable
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "bench1", "SLURM_JOB_ID": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        configs = setup(Path(tmp))
        cases = {
            "python -I -c pass (floor)": [py, "-I", "-c", "pass"],
            "prolog hook, 8-GPU bundle + live host": [py, "-I", "-m", "healthcheck.slurm.hooks", "prolog",
                                                      "--config", str(configs["prolog"])],
            "prolog hook, host checks only (NHC-like)": [py, "-I", "-m", "healthcheck.slurm.hooks", "prolog",
                                                         "--config", str(configs["host-only"])],
        }
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for argv in cases.values():  # warm-up
            subprocess.run(argv, env=env, cwd="/", capture_output=True)
        for _ in range(args.runs):
            for label, argv in cases.items():
                start = time.perf_counter()
                proc = subprocess.run(argv, env=env, cwd="/", capture_output=True)
                samples[label].append((time.perf_counter() - start) * 1000)
                if proc.returncode != 0:
                    raise SystemExit(f"{label}: exit {proc.returncode}: {proc.stderr.decode()}")
        floor = statistics.median(samples["python -I -c pass (floor)"])
        print(f"runs per case: {args.runs} (interleaved); cpus: {os.cpu_count()}; python {sys.version.split()[0]}\n")
        print("| case | median ms | p90 ms | × floor |")
        print("|---|---|---|---|")
        for label, values in samples.items():
            values.sort()
            med = statistics.median(values)
            print(f"| {label} | {med:.1f} | {values[int(len(values) * 0.9) - 1]:.1f} | {med / floor:.2f} |")


if __name__ == "__main__":
    main()
