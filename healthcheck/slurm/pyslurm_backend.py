"""Optional backend over pyslurm (the package on PyPI targets Slurm 25.11 only).

API used (pyslurm's ``pyslurm/core/node.pyx``, the 23.x+ object API that 25.11 keeps):

- ``pyslurm.Node.load(name)`` -> ``Node`` (slurm_load_node_single; raises ``pyslurm.RPCError``,
  also when the node does not exist);
- ``pyslurm.Nodes.load()`` -> a collection of ``Node`` (a ``MultiClusterMap`` in newer releases: a mapping
  whose ``values()`` are the local cluster's nodes; a list in 23.2) — both shapes are handled;
- ``node.modify(pyslurm.Node(state="DRAIN", reason=...))`` / ``node.modify(pyslurm.Node(state="RESUME"))``
  (slurm_update_node; ``state`` accepts DRAIN, RESUME, UNDRAIN, DOWN, ...);
- read attributes: ``name``, ``state`` (``slurm_node_state_string_complete``: ``"IDLE+DRAIN"``), ``reason``,
  ``reason_user`` (user name), ``reason_time`` (epoch seconds or None), ``comment``, ``extra``;
- ``pyslurm.RPCError`` carries ``errno`` (a Slurm error number) and the message.

Nothing here imports pyslurm at module import time; tests hand in ``tests/fakes/fake_pyslurm.py``.
"""
from __future__ import annotations

import time
from datetime import datetime
from types import ModuleType
from typing import Any, Callable

from .backend_base import SlurmError, SlurmUnreachable, check_node_name, is_transient, time_left
from .nodestate import NodeState, parse_state, without_stale_reason
from .reasons import sanitise
from ..parsers import ParseError

# slurm_errno.h: SLURM_COMMUNICATIONS_{CONNECTION,SEND,RECEIVE,SHUTDOWN}_ERROR (1001-1004),
# SLURMCTLD_COMMUNICATIONS_{CONNECTION,SEND,RECEIVE,SHUTDOWN,BACKOFF}_ERROR (1800-1804),
# SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT (5004), SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT (5005).
TRANSIENT_ERRNOS = frozenset({1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 1804, 5004, 5005})


def import_pyslurm() -> ModuleType | None:
    """The pyslurm module, or None when it is absent or cannot load (e.g. built for another libslurm)."""
    try:
        import pyslurm  # type: ignore[import-not-found]
    except Exception:  # ImportError, or an OSError/undefined symbol from a mismatched libslurm
        return None
    return pyslurm


def pyslurm_available() -> bool:
    return import_pyslurm() is not None


def _time_str(value: Any) -> str | None:
    """pyslurm gives epoch seconds (int) or None; scontrol prints local ISO time: match it."""
    if value in (None, 0):
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value).strftime("%Y-%m-%dT%H:%M:%S")
    return str(value)


def to_node_state(node: Any) -> NodeState:
    """A pyslurm ``Node`` -> NodeState (same shape as the scontrol parser gives)."""
    state_text = getattr(node, "state", None) or "UNKNOWN"
    try:
        state, flags = parse_state(str(state_text))
    except ParseError as exc:
        raise SlurmError(f"node {getattr(node, 'name', '?')}: {exc}") from exc
    reason = getattr(node, "reason", None) or None
    return NodeState(name=str(node.name), state=state, flags=flags, reason=reason,
                     reason_user=(getattr(node, "reason_user", None) or None) if reason else None,
                     reason_time=_time_str(getattr(node, "reason_time", None)) if reason else None,
                     comment=getattr(node, "comment", None) or None,
                     extra=getattr(node, "extra", None) or None)


class PyslurmBackend:
    """SlurmBackend over pyslurm's RPCs; same error contract as ScontrolBackend."""

    def __init__(self, module: ModuleType | None = None, retries: int = 2, backoff_s: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep):
        mod = module if module is not None else import_pyslurm()
        if mod is None:
            raise SlurmError("pyslurm is not importable (backend = \"pyslurm\"); use \"scontrol\" or \"auto\"")
        self.pyslurm = mod
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s
        self._sleep = sleep
        self.deadline: float | None = None  # time.monotonic() past which no RPC is waited for
        self.timeout_s = 5.0  # one RPC, when a deadline is set

    def _bounded(self, fn: Callable[[], Any]) -> Any:
        """Run one RPC; with a deadline, in a daemon thread that is abandoned (not waited for) when the
        controller does not answer in time: an RPC in C cannot be interrupted, but the hook can return
        (the thread dies with the process)."""
        if self.deadline is None:
            return fn()
        import threading

        timeout = time_left(self.deadline, self.timeout_s)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=target, name="pyslurm-rpc", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise SlurmUnreachable(f"slurmctld did not answer within {timeout:g}s (pyslurm)")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _rpc(self, what: str, fn: Callable[[], Any]) -> Any:
        rpc_error = getattr(self.pyslurm, "RPCError", RuntimeError)
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                pause = self.backoff_s * (2 ** (attempt - 1))
                if self.deadline is not None and time.monotonic() + pause > self.deadline:
                    break  # no time for another try inside the budget
                self._sleep(pause)
            try:
                return self._bounded(fn)
            except rpc_error as exc:
                errno = getattr(exc, "errno", None)
                message = str(exc) or f"Slurm error {errno}"
                if errno in TRANSIENT_ERRNOS or is_transient(message):
                    last = message
                    continue
                raise SlurmError(f"{what}: {message}") from exc
        raise SlurmUnreachable(f"slurmctld unreachable after {self.retries + 1} attempts: {last}")

    def node(self, name: str) -> NodeState:
        check_node_name(name)
        # Slurm 24.11 keeps a resumed node's old reason until its next job: not a hold (nodestate.py)
        return without_stale_reason(to_node_state(self._rpc(f"load node {name}", lambda: self.pyslurm.Node.load(name))))

    def nodes(self) -> dict[str, NodeState]:
        loaded = self._rpc("load nodes", lambda: self.pyslurm.Nodes.load())
        items = loaded.values() if hasattr(loaded, "values") else loaded
        out = {}
        for node in items:
            ns = without_stale_reason(to_node_state(node))
            out[ns.name] = ns
        return out

    def drain(self, name: str, reason: str) -> None:
        check_node_name(name)
        text = sanitise(reason)
        if not text:
            raise ValueError("a drain needs a non-empty reason")
        node = self.pyslurm.Node(name)
        self._rpc(f"drain {name}", lambda: node.modify(self.pyslurm.Node(state="DRAIN", reason=text)))

    def resume(self, name: str) -> None:
        check_node_name(name)
        node = self.pyslurm.Node(name)
        self._rpc(f"resume {name}", lambda: node.modify(self.pyslurm.Node(state="RESUME")))
