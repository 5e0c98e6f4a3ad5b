"""Shared helpers of the benchmarks: run a command once as a child (wall time, peak RSS), summarise.

Peak RSS is ``ru_maxrss`` of a wait4: the largest resident set of the child and of the descendants it
reaped (its watchdog, NHC's subshells), not their sum. Linux counts the memory a child had before its
exec (``exec_mmap`` keeps the old mm's high-water mark): a child forked from this benchmark (tens of MiB
once it imported the package) would report at least that. So peak RSS is read in separate rounds under
GNU time (``/usr/bin/time -f %M``, a process of ~2 MiB that forks the command and wait4s it), and wall
time in rounds without it (no extra fork in the figures). Not part of the test run.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time


class RunFailed(RuntimeError):
    pass


def run_once(argv: list[str], env: dict[str, str] | None = None, cwd: str = "/",
             ok: tuple[int, ...] = (0,)) -> tuple[float, int]:
    """Run ``argv`` once as slurmd runs a hook (own process group, stdout discarded); return (wall ms,
    peak RSS KiB). A run whose exit status is not in ``ok`` raises RunFailed with its stderr."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, process_group=0)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = (time.perf_counter() - start) * 1000
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        if proc.returncode not in ok:
            err.seek(0)
            raise RunFailed(f"{' '.join(argv[:3])} …: exit {proc.returncode}: "
                            f"{err.read().decode(errors='replace')[-2000:]}")
    return elapsed, usage.ru_maxrss


GNU_TIME = "/usr/bin/time"


def peak_rss_kib(argv: list[str], env: dict[str, str] | None = None, cwd: str = "/",
                 ok: tuple[int, ...] = (0,)) -> int | None:
    """Peak RSS (KiB) of one run of ``argv`` under GNU time; None when GNU time is not installed."""
    if not os.access(GNU_TIME, os.X_OK):
        return None
    with tempfile.NamedTemporaryFile("r") as out:
        run_once([GNU_TIME, "-q", "-f", "%M", "-o", out.name, *argv], env, cwd, ok)
        return int(out.read().split()[-1])


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(round(len(ordered) * 0.9)) - 1)]


def interleaved(cases: dict[str, tuple[list[str], dict[str, str]]], pairs: int, warmup: int = 2,
                rss_rounds: int = 5, progress: bool = True, gap_s: float = 0.0) -> dict[str, dict[str, list[float]]]:
    """Run every case once per round, ``pairs`` rounds, round-robin (machine noise hits all cases alike),
    after ``warmup`` unrecorded rounds; then ``rss_rounds`` rounds under GNU time for peak RSS. ``gap_s``:
    a pause before each run (the previous run's leftover work done first, as between two hooks on a node).
    Returns {case: {"ms": [...], "rss_kib": [...]}} ("rss_kib" empty without GNU time)."""
    out = {label: {"ms": [], "rss_kib": []} for label in cases}
    for round_no in range(warmup + pairs):
        for label, (argv, env) in cases.items():
            if gap_s > 0:
                time.sleep(gap_s)
            ms, _ = run_once(argv, env)
            if round_no >= warmup:
                out[label]["ms"].append(ms)
        if progress and round_no >= warmup and (round_no - warmup + 1) % 10 == 0:
            print(f"  … {round_no - warmup + 1}/{pairs} rounds", file=sys.stderr, flush=True)
    for _ in range(rss_rounds):
        for label, (argv, env) in cases.items():
            rss = peak_rss_kib(argv, env)
            if rss is not None:
                out[label]["rss_kib"].append(rss)
    return out


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def median(values: list[float]) -> float:
    return statistics.median(values)
