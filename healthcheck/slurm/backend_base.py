"""What every Slurm backend shares: the interface, the two errors, node-name and deadline rules,
and the environment Slurm's client commands run with.

:mod:`backend` (scontrol, the default) and :mod:`pyslurm_backend` (optional) both import this module
and nothing of each other but ``backend -> pyslurm_backend`` (chosen by name): one way, no circle.

Errors: :class:`SlurmUnreachable` (slurmctld did not answer, after retries, or the caller's deadline
is spent: the action may be queued and retried) and :class:`SlurmError` (slurmctld answered with an
error, or the client is missing).
"""
from __future__ import annotations

import os
import re
import time
from typing import Protocol, runtime_checkable

from ..safeio import subproc
from .nodestate import NodeState

# Messages of transient failures, as scontrol prints them (slurm_strerror() texts of
# SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR/SEND/RECEIVE/SHUTDOWN, SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT,
# SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT, and the controller being busy/in standby).
TRANSIENT_PATTERNS = (
    "unable to contact slurm controller",
    "socket timed out",
    "zero bytes were transmitted",
    "communication connection failure",
    "slurmctld communication",
    "connection refused",
    "controller is in standby mode",
    "slurm backup controller in standby mode",
    "slurmctld is shutting down",
    "resource temporarily unavailable",
)
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MIN_CALL_S = 0.05  # below this much time left before the deadline, a call is not started


class SlurmUnreachable(RuntimeError):
    """slurmctld did not answer (after retries): the action may be queued and retried later."""


class SlurmError(RuntimeError):
    """slurmctld answered with an error (unknown node, permission denied, ...), or scontrol is missing."""


@runtime_checkable
class SlurmBackend(Protocol):
    def node(self, name: str) -> NodeState: ...

    def nodes(self) -> dict[str, NodeState]: ...

    def drain(self, name: str, reason: str) -> None: ...

    def resume(self, name: str) -> None: ...


def time_left(deadline: float | None, default: float) -> float:
    """The time one call may take: ``default``, cut to what is left before ``deadline`` (monotonic).
    Raises SlurmUnreachable when too little is left to start a call."""
    if deadline is None:
        return default
    left = deadline - time.monotonic()
    if left < MIN_CALL_S:
        raise SlurmUnreachable("no time left in the hook's budget for a Slurm call")
    return min(default, left)


def check_node_name(name: str) -> str:
    if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
        raise ValueError(f"refusing node name {name!r}: one plain node name only (no hostlist, no spaces)")
    return name


def is_transient(message: str) -> bool:
    low = message.lower()
    return any(p in low for p in TRANSIENT_PATTERNS)


def slurm_env(environ: dict[str, str] | None = None, warn=None) -> dict[str, str]:
    """The environment for Slurm's client commands (scontrol, sbatch, squeue): the safe PATH/locale
    plus SLURM_CONF when the caller has one (a non-default slurm.conf, e.g. the test cluster), and, run
    as root, only when that file is root's and no one else can write it or a directory above it
    (``safety.check_trusted``: scontrol loads the plugins the file names, as root). An untrusted one is
    left out, so the default slurm.conf is used, and ``warn`` (default: stderr, the hook's log) says why.
    No loader variable (LD_PRELOAD, LD_LIBRARY_PATH, ...) and no PATH of the caller's ever reaches
    Slurm's commands. SLURM_TIME_FORMAT is never passed on, so times print in the ISO 8601 form the
    parsers expect."""
    environ = os.environ if environ is None else environ
    env = dict(subproc.SAFE_ENV)
    conf = environ.get("SLURM_CONF")
    if conf:
        why = untrusted_conf(conf)
        if why is None:
            env["SLURM_CONF"] = conf
        else:
            message = f"SLURM_CONF={conf} not used ({why}); Slurm's default slurm.conf is"
            if warn is not None:
                warn(message)
            else:
                import sys

                sys.stderr.write(f"healthcheck: {message}\n")
    return env


def untrusted_conf(path: str) -> str | None:
    """Why a slurm.conf must not steer a Slurm command run as root (None: it may; not root: anything may)."""
    if os.geteuid() != 0:
        return None
    if not os.path.isabs(path):
        return "not an absolute path"
    from ..safeio.trust import UntrustedFile, check_trusted

    try:
        check_trusted(path, "slurm.conf")
    except UntrustedFile as exc:
        return str(exc)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    return None
