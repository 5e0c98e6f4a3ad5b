"""A stand-in for the ``pyslurm`` module at its boundary, for PyslurmBackend tests.

Mirrors the object API of pyslurm's ``pyslurm/core/node.pyx`` (PySlurm/pyslurm on GitHub, the 23.x+
API kept by the 25.11 release on PyPI), as far as the backend uses it:

- ``Node(name=None, **kwargs)``: kwargs set writable attributes (``state``, ``reason``, ``comment``,
  ``extra``, ``weight``, ...); ``Node.load(name)`` (static) -> Node or ``RPCError`` "Node 'x' does not
  exist"; ``node.modify(changes: Node)`` applies the changes (slurm_update_node).
- ``Nodes.load()`` (static) -> collection. Newer pyslurm returns a ``MultiClusterMap`` (mapping; its
  ``values()`` are Node objects); this fake returns a dict subclass keyed by node name.
- Read attributes: ``name``, ``state`` (``slurm_node_state_string_complete`` text, e.g. ``IDLE+DRAIN``),
  ``reason``, ``reason_user`` (user name), ``reason_time`` (epoch seconds, or None), ``comment``, ``extra``.
- ``RPCError(errno=..., msg=...)`` with ``.errno`` (Slurm error number) and ``str()`` = message.
- State updates follow slurmctld: ``DRAIN`` needs a reason and adds the DRAIN flag; ``RESUME`` clears
  DRAIN (and DOWN -> IDLE) and the reason; ``UNDRAIN`` clears DRAIN only.

The cluster lives in the module-level ``CLUSTER`` (reset with :func:`reset`); :func:`fail_next` makes the
next RPCs raise, to test retries and unreachable controllers.
"""
from __future__ import annotations

import time

SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR = 1800
ESLURM_INVALID_NODE_NAME = 2006
ESLURM_ACCESS_DENIED = 2002


class RPCError(RuntimeError):
    def __init__(self, errno: int = 1, msg: str | None = None):
        self.errno = errno
        self.msg = msg or f"Slurm error {errno}"
        super().__init__(self.msg)


CLUSTER: dict[str, dict] = {}
_FAILURES: list[RPCError] = []
CALLS: list[tuple] = []  # (rpc, node name, changes dict) for assertions


def reset(nodes: dict[str, str] | None = None) -> None:
    """Fresh cluster: {name: state string}."""
    CLUSTER.clear()
    _FAILURES.clear()
    CALLS.clear()
    for name, state in (nodes or {}).items():
        CLUSTER[name] = {"state": state, "reason": None, "reason_user": None, "reason_time": None,
                         "comment": None, "extra": None}


def fail_next(*errors: RPCError) -> None:
    _FAILURES.extend(errors)


def _maybe_fail() -> None:
    if _FAILURES:
        raise _FAILURES.pop(0)


class Node:
    _WRITABLE = {"name", "state", "reason", "comment", "extra", "weight", "available_features",
                 "active_features", "address", "hostname", "configured_gres", "cpu_binding"}

    def __init__(self, name: str | None = None, **kwargs):
        object.__setattr__(self, "_changes", {})
        object.__setattr__(self, "_data", {"name": name})
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __setattr__(self, key, value):
        if key not in self._WRITABLE:
            raise AttributeError(f"attribute {key!r} of pyslurm.Node is not writable")
        if key == "state" and str(value).upper() not in ("DRAIN", "RESUME", "UNDRAIN", "DOWN", "FAIL",
                                                          "FUTURE", "NORESP", "NO_RESP", "POWER_DOWN",
                                                          "POWER_UP", "CANCEL_REBOOT"):
            raise ValueError(f"Invalid Node state: {value}")
        self._changes[key] = value
        self._data[key] = value

    def __getattr__(self, key):
        data = object.__getattribute__(self, "_data")
        if key in ("state", "reason", "reason_user", "reason_time", "comment", "extra"):
            return data.get(key)
        raise AttributeError(key)

    @property
    def name(self):
        return self._data.get("name")

    @staticmethod
    def load(name: str) -> "Node":
        CALLS.append(("load", name, None))
        _maybe_fail()
        if name not in CLUSTER:
            raise RPCError(msg=f"Node '{name}' does not exist")
        node = Node(name)
        object.__getattribute__(node, "_data").update(CLUSTER[name])
        return node

    def modify(self, changes: "Node") -> None:
        CALLS.append(("modify", self.name, dict(changes._changes)))
        _maybe_fail()
        if self.name not in CLUSTER:
            raise RPCError(ESLURM_INVALID_NODE_NAME, "Invalid node name specified")
        rec = CLUSTER[self.name]
        ch = changes._changes
        state = str(ch.get("state", "")).upper()
        base, *flags = rec["state"].split("+")
        if state == "DRAIN":
            if not ch.get("reason"):
                raise RPCError(2, "You must specify a reason when DOWNING or DRAINING a node")
            if "DRAIN" not in flags:
                flags.append("DRAIN")
            rec.update(reason=ch["reason"], reason_user="root", reason_time=int(time.time()))
        elif state in ("RESUME", "UNDRAIN"):
            flags = [f for f in flags if f != "DRAIN"]
            if state == "RESUME" and base == "DOWN":
                base = "IDLE"
            rec.update(reason=None, reason_user=None, reason_time=None)
        for key in ("comment", "extra"):
            if key in ch:
                rec[key] = ch[key]
        rec["state"] = "+".join([base, *flags])


class Nodes(dict):
    @staticmethod
    def load(preload_passwd_info: bool = False) -> "Nodes":
        CALLS.append(("load_all", None, None))
        _maybe_fail()
        out = Nodes()
        for name in CLUSTER:
            node = Node(name)
            object.__getattribute__(node, "_data").update(CLUSTER[name])
            out[name] = node
        return out
