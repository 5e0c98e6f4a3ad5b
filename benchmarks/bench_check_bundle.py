"""Measure `healthcheck check --bundle` on an 8-GPU bundle against the interpreter floor.

Reproducible: the bundle is built from the project's own fixtures (8x H100 SXM, 8x ConnectX-7 NDR,
4 NVSwitches, a 2-socket host), once with NVML data (nvml.json, what `healthcheck collect` writes on a
live node) and once with only `nvidia-smi -q -x` (the XML parser path). Each command runs N times in a
fresh process; we report the median and 90th percentile wall time.

    .venv/bin/python benchmarks/bench_check_bundle.py [--runs 30]

Figures are recorded in docs/performance.md. This is not part of the test run.
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


def build_bundles(work: Path) -> dict[str, Path]:
    from healthcheck.collect import collect_bundle
    from tests.integration.test_bundles import HEALTHY_XML, make_node

    node = make_node(work / "node")
    nvml_bundle, _ = collect_bundle(str(work / "bundle-nvml"), options=node)
    xml_bundle = work / "bundle-xml"
    shutil.copytree(nvml_bundle, xml_bundle)
    (xml_bundle / "nvml.json").unlink()
    shutil.copy(HEALTHY_XML, xml_bundle / "nvidia-smi-q-x.xml")
    return {"nvml": nvml_bundle, "xml": xml_bundle}


def timed(argv: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples.append((time.perf_counter() - start) * 1000)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.decode()}")
    return samples


STAGES = """
import time, json, sys
t0 = time.perf_counter()
from healthcheck.bundle import snapshot_from_bundle
from healthcheck.config import default_expectations
from healthcheck.runner import judge
from healthcheck.output import render
t1 = time.perf_counter()
snap = snapshot_from_bundle(sys.argv[1])
t2 = time.perf_counter()
exp = default_expectations()
verdict = judge(snap, exp)
t3 = time.perf_counter()
render(verdict, "json")
t4 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1, t3 - t2, t4 - t3]))
"""


def stages(bundle: Path, runs: int) -> list[float]:
    """Median seconds of: imports, reading the bundle, judging, rendering (fresh process each run)."""
    import json

    rows = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", STAGES, str(bundle)], capture_output=True, text=True,
                             check=True, cwd=ROOT)
        rows.append(json.loads(out.stdout))
    return [statistics.median(col) * 1000 for col in zip(*rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    exe = Path(sys.executable)
    healthcheck = exe.with_name("healthcheck")
    with tempfile.TemporaryDirectory() as tmp:
        bundles = build_bundles(Path(tmp))
        cases = {
            "python -I -c pass (floor)": [str(exe), "-I", "-c", "pass"],
            "python -c 'import healthcheck.cli'": [str(exe), "-c", "import healthcheck.cli"],
            "healthcheck check --bundle (nvml.json)": [str(healthcheck), "check", "--bundle",
                                                       str(bundles["nvml"]), "--format", "json"],
            "healthcheck check --bundle (nvidia-smi XML)": [str(healthcheck), "check", "--bundle",
                                                            str(bundles["xml"]), "--format", "json"],
        }
        timed(cases["python -I -c pass (floor)"], 3)  # warm the page cache
        print(f"runs per case: {args.runs}; cpus: {os.cpu_count()}; python {sys.version.split()[0]}\n")
        print("| command | median ms | p90 ms |")
        print("|---|---|---|")
        for label, argv in cases.items():
            samples = sorted(timed(argv, args.runs))
            p90 = samples[int(len(samples) * 0.9) - 1]
            print(f"| {label} | {statistics.median(samples):.1f} | {p90:.1f} |")
        print("\nIn-process stages of one `check --bundle` (nvidia-smi XML bundle), median ms:\n")
        print("| imports | read bundle | judge (all checks) | render JSON |")
        print("|---|---|---|---|")
        print("| " + " | ".join(f"{v:.1f}" for v in stages(bundles["xml"], args.runs)) + " |")


if __name__ == "__main__":
    main()
