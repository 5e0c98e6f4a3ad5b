"""Port error counters read on the nodes of an allocation: ``perfquery -x -C HCA -P PORT`` on each node,
through the launcher (``srun --overlap -N1 -n1 -w NODE``, no shell) and the one subprocess seam, under a
deadline. I/O only; the judging is :func:`healthcheck.fabric.counters.judge_window`.

A :class:`CounterSampler` is the ``counter_sampler`` of :func:`healthcheck.burnin.rdma.run_rdma_phase`:
called before and after the pair rounds, it returns one :class:`healthcheck.fabric.counters.Sample` per
port it could read. A port it could not read (tool absent, deadline passed, an output that is not
perfquery's) is left out of that sample set and named in ``errors``; never an exception.

The runner is injectable: ``runner(argv, timeout_s) -> (stdout, error or None)``; tests feed recorded
``perfquery`` outputs.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

PerfqueryRunner = Callable[[list, float], "tuple[str, str | None]"]
DEFAULT_LAUNCHER = ("srun", "--overlap", "-N1", "-n1", "-w", "{node}")


def perfquery_argv(launcher: Sequence[str], node: str, hca: str, port: int) -> list[str]:
    """The command reading one port's extended counters on ``node`` (``{node}`` in the launcher)."""
    if not node or node.startswith("-") or not hca or hca.startswith("-"):
        raise ValueError(f"bad node or HCA name: {node!r} {hca!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 255:
        raise ValueError(f"{node} {hca}: port must be 1-255, got {port!r}")
    return [a.replace("{node}", node) for a in launcher] + ["perfquery", "-x", "-C", hca, "-P", str(port)]


def subproc_runner(argv: list, timeout_s: float) -> tuple[str, str | None]:
    """The default runner: :func:`healthcheck.safeio.subproc.run` in the job-step environment."""
    from ..safeio import subproc

    try:
        res = subproc.run(list(argv), timeout=timeout_s, env=subproc.job_env())
    except (OSError, ValueError) as exc:  # ToolNotFound is an OSError
        return "", str(exc)
    if res.timed_out:
        return res.stdout, f"no answer within {timeout_s:g} s (killed)"
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        return res.stdout, f"exit status {res.returncode}: {tail[0][:200]}"
    return res.stdout, None


class CounterSampler:
    """``targets``: (node, HCA, port) triples. Each call reads every target (``max_parallel`` at once)
    and returns the samples it got; ``errors`` keeps "node HCA port N: why" for the ones it did not."""

    def __init__(self, targets: Sequence[tuple[str, str, int]], launcher: Sequence[str] = DEFAULT_LAUNCHER,
                 runner: PerfqueryRunner | None = None, timeout_s: float = 30.0, max_parallel: int = 16,
                 clock: Callable[[], float] = time.time):
        self.targets = [(str(n), str(h), int(p)) for n, h, p in targets]
        for n, h, p in self.targets:
            perfquery_argv(launcher, n, h, p)  # bad names fail here, not half-way through a phase
        if not any("{node}" in a for a in launcher):
            raise ValueError(f"launcher must name {{node}}: {list(launcher)!r}")
        self.launcher, self.runner = tuple(launcher), runner or subproc_runner
        self.timeout_s, self.max_parallel, self.clock = timeout_s, max(1, max_parallel), clock
        self.errors: list[str] = []
        self.calls = 0
        self.read = 0          # samples returned over all calls
        self._lock = threading.Lock()

    def _one(self, target: tuple[str, str, int]) -> list:
        from .counters import samples_from_perfquery
        from ..parsers import ParseError
        from ..parsers.perfquery import parse_perfquery

        node, hca, port = target
        where = f"{node} {hca} port {port}"
        try:
            text, error = self.runner(perfquery_argv(self.launcher, node, hca, port), self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - a runner's failure is the port's, never the phase's
            text, error = "", f"runner failed: {type(exc).__name__}: {exc}"
        taken = self.clock()
        if error is None and text.strip():
            try:
                samples = [s for s in samples_from_perfquery(parse_perfquery(text), node, hca, taken)
                           if s.key.port == port]
            except ParseError as exc:
                error = f"not perfquery output: {exc}"
            else:
                if samples:
                    return samples
                error = f"no counters for port {port} in the output"
        with self._lock:
            self.errors.append(f"{where}: {error or 'no output'}")
        return []

    def __call__(self) -> list:
        self.calls += 1
        if not self.targets:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_parallel, len(self.targets))) as pool:
            out = [s for samples in pool.map(self._one, self.targets) for s in samples]
        self.read += len(out)
        return out
