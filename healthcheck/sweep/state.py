"""The sweep's lock and its state file (node-local, under the [slurm] state_dir).

The lock (``flock`` on ``sweep.lock``) keeps two sweeps from overlapping; the kernel releases it when
the holder dies, so a killed sweep never blocks the next one. The state file records, before and after
each step, what the running sweep has done (its id, reservation, the job of each node), written
atomically; the next sweep finds an unfinished one there and continues it instead of starting over.
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..safeio.trust import make_private

STATE_FILE = "sweep-state.json"
LOCK_FILE = "sweep.lock"


class SweepBusy(RuntimeError):
    pass


class StateError(ValueError):
    pass


@dataclass
class SweepState:
    sweep_id: str
    started_at: str
    results_dir: str
    reservation: str | None = None
    nodes: list[dict[str, Any]] = field(default_factory=list)  # Candidate fields
    jobs: dict[str, str] = field(default_factory=dict)          # node -> job id
    resumed: list[str] = field(default_factory=list)            # nodes of ours resumed into the reservation
    phase: str = "planned"                                      # planned | submitted | collected | done

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Lock:
    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, LOCK_FILE)
        self.state_dir = state_dir
        self.fd: int | None = None

    def __enter__(self) -> "Lock":
        make_private(self.state_dir)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise SweepBusy(f"another sweep holds {self.path}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def load(state_dir: str) -> SweepState | None:
    path = os.path.join(state_dir, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(f"{path}: unreadable sweep state ({exc}); inspect it, then remove it to start afresh") \
            from None
    try:
        return SweepState(**data)
    except TypeError as exc:
        raise StateError(f"{path}: not a sweep state of this version ({exc})") from None


def save(state_dir: str, state: SweepState) -> None:
    make_private(state_dir)
    path = os.path.join(state_dir, STATE_FILE)
    from ..safeio.atomic import atomic_write

    atomic_write(path, json.dumps(state.to_dict(), indent=1), 0o600, private_dir=True)


def clear(state_dir: str) -> None:
    try:
        os.unlink(os.path.join(state_dir, STATE_FILE))
    except FileNotFoundError:
        pass
