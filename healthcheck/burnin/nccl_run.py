"""Run nccl-tests binaries (I/O only; judging is in judge_nccl.py).

Two shapes:
- **on this node**: one process drives every local GPU (``all_reduce_perf -g N``), no MPI needed;
- **across nodes**: the configured launcher starts one rank per GPU on each node (``srun --mpi=pmix
  -N 2 -w a,b --ntasks-per-node 8 all_reduce_perf -g 1``). The launcher is an argument list with
  placeholders ``{nnodes}``, ``{nodelist}``, ``{tasks_per_node}`` (no shell), so a site can use its own.

Every run has a deadline and goes through the one subprocess seam (process-group kill); the binary is
taken by absolute path from the configured directory; the child gets only the job-step environment.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..safeio import subproc
from ..parsers import nccl_tests
from .tools_run import run_tool

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
DEFAULT_LAUNCHER = ("srun", "--overlap", "--mpi=pmix", "--kill-on-bad-exit=1", "-N", "{nnodes}", "-w", "{nodelist}",
                    "--ntasks-per-node", "{tasks_per_node}")
_PLACEHOLDERS = ("{nnodes}", "{nodelist}", "{tasks_per_node}")


@dataclass(frozen=True)
class Sweep:
    """The size sweep: ``-b min -e max -f factor``, ``-w warmup -n iters``, ``-c check``."""

    min_bytes: int = 8
    max_bytes: int = 8 << 30
    factor: int = 2
    warmup: int = 5
    iters: int = 20
    check: int = 1  # data validation on: the #wrong columns are only meaningful with it

    def args(self) -> list[str]:
        return ["-b", str(self.min_bytes), "-e", str(self.max_bytes), "-f", str(self.factor),
                "-w", str(self.warmup), "-n", str(self.iters), "-c", str(self.check)]


@dataclass
class NcclRun:
    collective: str
    scope: str                 # "node" | "allocation" | "pair" | "group"
    nodes: list[str]
    argv: list[str]
    result: nccl_tests.NcclResult | None = None
    error: str | None = None   # could not run / no output to parse
    returncode: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    missing: bool = False      # the binary is not there: the phase is skipped, not failed
    stderr_tail: list[str] = field(default_factory=list)


class LauncherError(ValueError):
    pass


def binary(nccl_dir: str, collective: str) -> str:
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r} (one of {', '.join(COLLECTIVES)})")
    return os.path.join(nccl_dir, f"{collective}_perf")


def launcher_argv(template: list[str] | tuple[str, ...], nodes: list[str], tasks_per_node: int) -> list[str]:
    """The launcher's argument list with its placeholders filled; LauncherError when it has none of
    ``{nodelist}``/``{nnodes}`` (it could not know which nodes to use)."""
    if not template:
        raise LauncherError("empty launcher")
    if not any(p in arg for arg in template for p in ("{nodelist}", "{nnodes}")):
        raise LauncherError(f"launcher {' '.join(template)!r} names no {{nodelist}} or {{nnodes}}: "
                            "it would not know which nodes to use")
    values = {"{nnodes}": str(len(nodes)), "{nodelist}": ",".join(nodes), "{tasks_per_node}": str(tasks_per_node)}
    out = []
    for arg in template:
        for key in _PLACEHOLDERS:
            arg = arg.replace(key, values[key])
        out.append(arg)
    return out


def _execute(run: NcclRun, exe: str, timeout_s: float, env: dict[str, str] | None) -> NcclRun:
    # the binary is checked here even when a launcher starts it elsewhere: the directory is shared (or
    # installed alike on every node), and a missing binary is a skipped phase, not a failing node
    if not os.access(exe, os.X_OK):
        run.missing, run.error = True, f"{exe} not found or not executable"
        return run
    from ..safeio.trust import UntrustedFile, check_trusted, running_as_root

    if running_as_root():  # a binary anyone else can replace must not run as root (skipped, never a drain)
        try:
            check_trusted(exe, "nccl-tests binary")
        except (UntrustedFile, OSError) as exc:
            run.missing, run.error = True, str(exc)
            return run
    res = run_tool("nccl-tests", run.argv, timeout_s, env)
    if res.missing or (res.error and res.returncode is None and not res.timed_out):
        run.missing, run.error = res.missing, res.error
        return run
    run.duration_s = res.duration_s
    run.returncode, run.timed_out = res.returncode, res.timed_out
    run.stderr_tail = [line for line in res.stderr.splitlines() if line.strip()][-5:]
    # nccl-tests prints everything on stdout; launchers add their own lines on stderr (kept for errors)
    try:
        run.result = nccl_tests.parse(res.stdout + ("\n" + res.stderr if res.stderr else ""))
    except nccl_tests.NcclParseError as exc:
        run.error = f"no nccl-tests output ({exc})"
    if res.timed_out:
        run.error = f"did not finish within {timeout_s:g} s (killed)"
    elif res.returncode not in (0, None) and run.error is None and not (run.result and run.result.errors):
        run.error = f"exit status {res.returncode}"
    return run


def run_on_node(nccl_dir: str, collective: str, ngpus: int, sweep: Sweep, timeout_s: float,
                node: str, env: dict[str, str] | None = None) -> NcclRun:
    """One process, ``-g ngpus``: the node's GPUs among themselves (NVLink / NVSwitch)."""
    exe = binary(nccl_dir, collective)
    argv = [exe, *sweep.args(), "-g", str(max(1, ngpus))]
    return _execute(NcclRun(collective, "node", [node], argv), exe, timeout_s,
                    env if env is not None else subproc.node_env())


def run_across(launcher: list[str] | tuple[str, ...], nccl_dir: str, collective: str, nodes: list[str],
               tasks_per_node: int, sweep: Sweep, timeout_s: float, scope: str = "allocation",
               env: dict[str, str] | None = None) -> NcclRun:
    """One rank per GPU on every node of ``nodes``, started by the launcher."""
    exe = binary(nccl_dir, collective)
    argv = [*launcher_argv(launcher, nodes, tasks_per_node), exe, *sweep.args(), "-g", "1"]
    return _execute(NcclRun(collective, scope, list(nodes), argv), exe, timeout_s, env)


def run_groups(launcher, nccl_dir: str, collective: str, groups: list[tuple[str, ...]], tasks_per_node: int,
               sweep: Sweep, timeout_s: float, scope: str, max_parallel: int = 64,
               env: dict[str, str] | None = None) -> dict[tuple[str, ...], NcclRun]:
    """One parallel round: every (disjoint) group at once, each its own job step."""
    if not groups:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(max_parallel, len(groups)))) as pool:
        futures = {g: pool.submit(run_across, launcher, nccl_dir, collective, list(g), tasks_per_node, sweep,
                                  timeout_s, scope, env) for g in groups}
        return {g: f.result() for g, f in futures.items()}
