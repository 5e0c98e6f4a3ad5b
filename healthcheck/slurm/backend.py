"""Talk to slurmctld: read node state, drain, resume. Default backend: the ``scontrol`` command.

Every call is an argv list (no shell) run through :mod:`healthcheck.safeio.subproc` with a per-call deadline;
``scontrol`` is resolved once to an absolute path from the fixed safe PATH. Transient failures (the
controller did not answer, socket timeouts, our own deadline) are retried ``retries`` times with a short
backoff and then raise :class:`SlurmUnreachable`; any other non-zero exit raises :class:`SlurmError`
carrying scontrol's message. Worst case per call: ``(retries + 1) * timeout_s + sum(backoff)``, and never
past ``deadline`` when one is set (a ``time.monotonic()`` value: the hooks set the end of their budget, so
a hung slurmctld costs the hook its budget, never more; past it a call raises :class:`SlurmUnreachable`
at once and the hook queues the action).

Commands (exact argv; tests pin them):

- node:   ``scontrol -o show node NAME``
- nodes:  ``scontrol -o show node``
- drain:  ``scontrol update NodeName=NAME State=DRAIN Reason=<sanitised reason>`` (Reason is ONE element)
- resume: ``scontrol update NodeName=NAME State=RESUME``

``node``/``nodes`` return the states with stale reasons moved aside (``nodestate.without_stale_reason``):
Slurm 24.11 keeps a resumed node's last reason until its next job, and the ownership rules must not read
it as the reason the node is held for.

Node names are checked against ``[A-Za-z0-9][A-Za-z0-9._-]*``: a hostlist expression (``gpu[01-64]``)
or a comma would make one call act on many nodes, so it is refused (``ValueError``).
"""
from __future__ import annotations

import time
from typing import Callable

from ..safeio import subproc
from ..parsers import ParseError
from .backend_base import (MIN_CALL_S, TRANSIENT_PATTERNS, SlurmBackend, SlurmError, SlurmUnreachable,
                           check_node_name, is_transient, slurm_env, time_left)
from .nodestate import NodeState, parse_scontrol_nodes, without_stale_reason
from .reasons import sanitise

# The shared interface, errors and rules, importable from here as before (callers name this module).
__all__ = ["MIN_CALL_S", "TRANSIENT_PATTERNS", "ScontrolBackend", "SlurmBackend", "SlurmError",
           "SlurmUnreachable", "backend_from_name", "check_node_name", "child_env", "is_transient",
           "time_left"]

child_env = slurm_env  # the name this module's callers and tests know


class ScontrolBackend:
    """The default backend. ``run`` is the subprocess seam (tests inject recorded outputs)."""

    def __init__(self, scontrol: str = "scontrol", timeout_s: float = 5.0, retries: int = 2,
                 run: Callable[..., subproc.Result] = subproc.run, backoff_s: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep, env: dict[str, str] | None = None,
                 deadline: float | None = None):
        # Resolved once; when it is not found the name is kept and the first call reports SlurmError.
        self.scontrol = subproc.which(scontrol) or scontrol
        self.timeout_s = float(timeout_s)
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s
        self._run = run
        self._sleep = sleep
        self._env = env if env is not None else child_env()
        self.deadline = deadline  # time.monotonic() past which no call runs (the hook's budget)

    # -- the one place that runs scontrol ---------------------------------------------------------
    def _call(self, args: list[str]) -> str:
        argv = [self.scontrol, *args]
        last, tries = "", 0
        for attempt in range(self.retries + 1):
            if attempt:
                pause = self.backoff_s * (2 ** (attempt - 1))
                if self.deadline is not None and time.monotonic() + pause + MIN_CALL_S > self.deadline:
                    break  # no time for another try inside the budget
                self._sleep(pause)
            try:
                timeout = time_left(self.deadline, self.timeout_s)
            except SlurmUnreachable:
                if not last:
                    raise
                break
            tries += 1
            try:
                res = self._run(argv, timeout=timeout, env=self._env)
            except subproc.ToolNotFound as exc:
                raise SlurmError(f"scontrol not found: {exc}") from exc
            except OSError as exc:
                raise SlurmError(f"cannot run {argv[0]}: {exc}") from exc
            if res.timed_out:
                last = f"scontrol did not finish within {timeout:g}s"
                continue
            if res.returncode == 0:
                return res.stdout
            message = (res.stderr.strip() or res.stdout.strip() or f"exit status {res.returncode}")
            if is_transient(message):
                last = message
                continue
            raise SlurmError(f"{' '.join(args[:3])}: {message}")
        raise SlurmUnreachable(f"slurmctld unreachable after {tries} attempt{'s' if tries != 1 else ''}: {last}")

    # -- SlurmBackend -------------------------------------------------------------------------------
    def node(self, name: str) -> NodeState:
        out = self._call(["-o", "show", "node", check_node_name(name)])
        try:
            nodes = parse_scontrol_nodes(out)
        except ParseError as exc:
            raise SlurmError(f"cannot parse scontrol output for {name}: {exc}") from exc
        if name not in nodes:
            raise SlurmError(f"node {name} not in scontrol output")
        return without_stale_reason(nodes[name])

    def nodes(self) -> dict[str, NodeState]:
        out = self._call(["-o", "show", "node"])
        try:
            nodes = parse_scontrol_nodes(out)
        except ParseError as exc:
            raise SlurmError(f"cannot parse scontrol output: {exc}") from exc
        return {name: without_stale_reason(node) for name, node in nodes.items()}

    def drain(self, name: str, reason: str) -> None:
        text = sanitise(reason)
        if not text:
            raise ValueError("a drain needs a non-empty reason")
        self._call(["update", f"NodeName={check_node_name(name)}", "State=DRAIN", f"Reason={text}"])

    def resume(self, name: str) -> None:
        self._call(["update", f"NodeName={check_node_name(name)}", "State=RESUME"])


def backend_from_name(name: str, **kwargs) -> SlurmBackend:
    """``"scontrol"`` | ``"pyslurm"`` | ``"auto"`` (pyslurm when it imports, else scontrol).

    ``kwargs`` go to ScontrolBackend (scontrol=, timeout_s=, retries=, run=) and are ignored by pyslurm.
    """
    if name == "scontrol":
        return ScontrolBackend(**kwargs)
    if name in ("pyslurm", "auto"):
        # On use: the pyslurm backend (and its datetime) stays off the scontrol path. One way: it
        # imports backend_base, never this module.
        from .pyslurm_backend import PyslurmBackend, pyslurm_available
        if name == "pyslurm" or pyslurm_available():
            return PyslurmBackend()
        return ScontrolBackend(**kwargs)
    raise ValueError(f"unknown Slurm backend {name!r} (scontrol, pyslurm, auto)")
