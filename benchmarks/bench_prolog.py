"""Measure the prolog hook as slurmd runs it, interleaved with the bare interpreter.

Setup (reproducible, from the project's fixtures): an 8-GPU H100 bundle holding only the hardware
(GPUs through nvml.json, PCIe and InfiniBand sysfs, kernel log), so the host checks (memory, disks,
mounts, services) run live on this machine, as they would on a node. The drain backend is never called
on a healthy node; the spool record is written (with fsync) as in production.

Cases, run round-robin so machine noise hits all equally:
  python -I -c pass                 the interpreter floor
  prolog hook                       the installed wrapper's command: python -I -c '...guarded_main()' prolog
                                    --config site.toml
  NHC-equivalent host checks        the same hook, host checks only (no GPU bundle): what NHC's
                                    default node checks cover (memory, mounts, disks, services)
  prolog hook, fast mode            prolog_mode = "fast": the gate of a healthy HealthCheckProgram run
                                    (run once before the samples) re-verified live, baseline saved,
                                    run recorded (see healthcheck/slurm/gate.py)

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
# exactly what the installed wrappers exec (healthcheck/slurm/templates/prolog.sh)
ENTRY = ["-I", "-c", "import sys; from healthcheck.slurm.hooks import guarded_main; sys.exit(guarded_main())"]
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
                       ("host-only", '[defaults.checks]\nprolog = ["host.*"]\n'),
                       ("fast", f'[defaults]\nbundle = "{work}/bundles/{{node}}"\n')):
        path = work / f"{name}.toml"
        extra = 'prolog_mode = "fast"\n' if name == "fast" else ""
        path.write_text(body + f'\n[slurm]\nstate_dir = "{work}/state"\nspool_dir = "{work}/spool"\n{extra}')
        configs[name] = path
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "bench1", "SLURM_JOB_ID": "1",
               "HEALTHCHECK_CACHE_DIR": f"{tmp}/cache"}
        configs = setup(Path(tmp))
        check = subprocess.run([py, *ENTRY, "slurm-check", "--config",
                                str(configs["fast"])], env=env, cwd="/", capture_output=True, text=True)
        if check.returncode != 0 or not (Path(tmp) / "cache" / "prolog-gate-bench1").exists():
            raise SystemExit(f"slurm-check did not write the gate: {check.stderr}")
        cases = {
            "python -I -c pass (floor)": [py, "-I", "-c", "pass"],
            "prolog hook, 8-GPU bundle + live host": [py, *ENTRY, "prolog",
                                                      "--config", str(configs["prolog"])],
            "prolog hook, host checks only (NHC-like)": [py, *ENTRY, "prolog",
                                                         "--config", str(configs["host-only"])],
            "prolog hook, fast mode (gate of the last health check)": [
                py, *ENTRY, "prolog", "--config", str(configs["fast"])],
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
