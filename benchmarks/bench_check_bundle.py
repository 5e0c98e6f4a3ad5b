"""Measure `healthcheck check --bundle` on an 8-GPU bundle against the interpreter floor.

Reproducible: the bundle is built from the project's own fixtures (8x H100 SXM, 8x ConnectX-7 NDR,
4 NVSwitches, a 2-socket host), once with NVML data (nvml.json, what `healthcheck collect` writes on a
live node) and once with only `nvidia-smi -q -x` (the XML parser path). Each command runs N times in a
fresh process; we report the median and 90th percentile wall time.

    .venv/bin/python benchmarks/bench_check_bundle.py [--runs 30] [--fleet 10,100,1000] [--tar-max 100]

Fleet (judging a fleet's recordings offline): a directory of 1,000 bundles, each a plain copy of the
8-GPU nvml.json bundle (the bundle reader refuses hard links; ~2.5 GB of 4 KiB blocks for 1,000
directories, in a temporary directory removed at the end; the copies are in the page cache once
written, so this measures the CPU cost per bundle, not the disk). `healthcheck check --bundle` takes one bundle, so two ways are
measured, over the first 10, 100 and 1,000 bundles:
  in one process   a loop over the library calls the CLI makes (snapshot_from_bundle, the expectations,
                   judge, render JSON), one fresh process per size: time per bundle (median, p90,
                   first) and the process's peak RSS, to see whether cost or memory grows with the count;
                   the same over 1,000 copies of the bundle as .tar.gz (what `collect -o x.tar.gz`
                   writes)
  CLI per bundle   `healthcheck check --bundle DIR --format json` once per bundle, in a sequential loop

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
    from healthcheck.bundles.collect import collect_bundle
    from tests.bundles.test_bundles import HEALTHY_XML, make_node

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
from healthcheck.bundles.archive import snapshot_from_bundle
from healthcheck.config import default_expectations
from healthcheck.pipeline.judge import judge
from healthcheck.output.render import render
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


FLEET_LOOP = """
import json, os, resource, sys, time
t0 = time.perf_counter()
from healthcheck.bundles.archive import snapshot_from_bundle
from healthcheck.config import default_expectations
from healthcheck.output.render import exit_code, render
from healthcheck.pipeline.judge import judge
from healthcheck.core.clock import utc_now_iso
imports = time.perf_counter() - t0
fleet, count = sys.argv[1], int(sys.argv[2])
names = sorted(os.listdir(fleet))[:count]
per, codes = [], set()
t1 = time.perf_counter()
for name in names:  # what `healthcheck check --bundle PATH --format json` does, without a config
    start = time.perf_counter()
    started, mono = utc_now_iso(), time.monotonic()
    snap = snapshot_from_bundle(os.path.join(fleet, name), services_for=lambda node: default_expectations().services)
    exp = default_expectations()
    verdict = judge(snap, exp, "check", None, started_at=started, started_monotonic=mono)
    render(verdict, "json")
    codes.add(exit_code(verdict))
    per.append(time.perf_counter() - start)
print(json.dumps({"imports": imports, "total": time.perf_counter() - t1, "per": per, "codes": sorted(codes),
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def build_fleet(bundle: Path, tarball: Path, work: Path, count: int) -> tuple[Path, Path]:
    """``count`` plain copies of the bundle directory and of its .tar.gz (the bundle reader refuses hard
    links: a bundle holds plain copies)."""
    dirs, tars = work / "fleet-dirs", work / "fleet-tar"
    dirs.mkdir()
    tars.mkdir()
    for i in range(count):
        shutil.copytree(bundle, dirs / f"node{i:04d}")
        shutil.copyfile(tarball, tars / f"node{i:04d}.tar.gz")
    return dirs, tars


def fleet_loop(fleet: Path, count: int) -> dict:
    import json

    out = subprocess.run([sys.executable, "-c", FLEET_LOOP, str(fleet), str(count)], capture_output=True,
                         text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"fleet loop over {count}: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def fleet(bundle: Path, work: Path, sizes: list[int], repeats: int, cli_max: int, tar_max: int) -> None:
    import tarfile

    tarball = work / "bundle.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(bundle, arcname=bundle.name)
    start = time.perf_counter()
    dirs, tars = build_fleet(bundle, tarball, work, max(sizes))
    print(f"\nFleet: {max(sizes)} bundles (copies; {sum(1 for _ in bundle.rglob('*'))} entries a bundle, "
          f"tar.gz {tarball.stat().st_size // 1024} KiB), built in {time.perf_counter() - start:.1f} s\n")
    print("In one process (library calls of `check --bundle`, fresh process per size, best of "
          f"{repeats} by total):\n")
    print("| bundles | form | imports ms | total s | per bundle ms (median) | p90 ms | first ms | peak RSS MiB |"
          " verdict exit codes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for form, path in (("directory", dirs), ("tar.gz", tars)):
        for n in (n for n in sizes if form == "directory" or n <= tar_max):
            best = min((fleet_loop(path, n) for _ in range(repeats)), key=lambda r: r["total"])
            per = sorted(best["per"])
            print(f"| {n} | {form} | {best['imports'] * 1000:.1f} | {best['total']:.2f} | "
                  f"{statistics.median(per) * 1000:.2f} | {per[max(0, int(len(per) * 0.9) - 1)] * 1000:.2f} | "
                  f"{best['per'][0] * 1000:.1f} | {best['maxrss_kib'] / 1024:.1f} | {best['codes']} |", flush=True)
    healthcheck = Path(sys.executable).with_name("healthcheck")
    names = sorted(os.listdir(dirs))
    print("\nCLI per bundle (`healthcheck check --bundle DIR --format json`, a sequential loop):\n")
    print("| bundles | total s | per bundle ms (median) | p90 ms |")
    print("|---|---|---|---|")
    for n in (n for n in sizes if n <= cli_max):
        start = time.perf_counter()
        per = []
        for name in names[:n]:
            per += timed([str(healthcheck), "check", "--bundle", str(dirs / name), "--format", "json"], 1)
        per.sort()
        print(f"| {n} | {time.perf_counter() - start:.1f} | {statistics.median(per):.1f} | "
              f"{per[max(0, int(len(per) * 0.9) - 1)]:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--fleet", default="10,100,1000", help="fleet sizes, comma-separated ('' to skip)")
    parser.add_argument("--fleet-repeats", type=int, default=3, help="in-process runs per size (best kept)")
    parser.add_argument("--cli-max", type=int, default=1000, help="largest fleet size run through the CLI")
    parser.add_argument("--tar-max", type=int, default=100,
                        help="largest fleet size judged as .tar.gz (each is unpacked first: ~0.3 s a bundle)")
    parser.add_argument("--only-fleet", action="store_true", help="skip the single-bundle cases")
    args = parser.parse_args()
    try:
        sizes = sorted({int(x) for x in args.fleet.split(",") if x.strip()})
    except ValueError:
        parser.error(f"--fleet: comma-separated counts, got {args.fleet!r}")
    if any(n < 1 for n in sizes):
        parser.error("--fleet: counts must be >= 1")
    exe = Path(sys.executable)
    healthcheck = exe.with_name("healthcheck")
    with tempfile.TemporaryDirectory() as tmp:
        bundles = build_bundles(Path(tmp))
        if sizes:
            fleet(bundles["nvml"], Path(tmp), sizes, args.fleet_repeats, args.cli_max, args.tar_max)
        if args.only_fleet:
            return
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
