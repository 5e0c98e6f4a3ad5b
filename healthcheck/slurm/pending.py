"""Node-local queue of Slurm actions that could not be applied (slurmctld unreachable).

File: ``<state_dir>/pending-actions.jsonl``, one JSON object per line, mode 0600 in a 0700 directory.

- :func:`queue` rewrites the file atomically (temp file, fsync, rename) under an advisory lock
  (``pending-actions.lock``, ``flock``), so a reader never sees half a line. One node has at most one
  pending action: a newer action for a node replaces the older one (drain then resume -> resume), so the
  next run applies each intended action once. At most :data:`MAX_ACTIONS` entries: the oldest are dropped
  with a warning.
- :func:`take_all` renames the file to a private name under the lock, reads it and deletes it: two runs
  taking at the same time never both get the same action. Files left by a taker that died between rename
  and delete are taken too.
- :func:`requeue` puts back what still failed, without overriding a newer action queued meanwhile.

Corrupt lines, and (:func:`take_valid`) items the hook must not apply, are set aside in
``pending-actions.jsonl.rejected`` (appended, 0600, at most :data:`MAX_REJECTED` bytes kept) with a
logged warning: never applied, never silently lost. The only exception callers see is
:class:`PendingError` (the state directory cannot be created or written), which names the path.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from contextlib import contextmanager
from ..record import asdict, record as dataclass
from datetime import datetime, timezone
from pathlib import Path
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Iterator  # noqa: F401
from ..lazylog import LazyLog

log = LazyLog(__name__)

FILENAME = "pending-actions.jsonl"
LOCKNAME = "pending-actions.lock"
TAKING = "pending-actions.taking-"
REJECTED = FILENAME + ".rejected"
MAX_REJECTED = 1024 * 1024
MAX_ACTIONS = 1000
MAX_LINE = 8192
ACTIONS = ("drain", "resume")
LOCK_WAIT_S = 2.0


class PendingError(OSError):
    """The state directory cannot be created or written; ``path`` says which."""

    def __init__(self, path: str | os.PathLike, why: str):
        super().__init__(f"pending actions: cannot write {path}: {why}")
        self.path = str(path)


@dataclass(frozen=True)
class PendingAction:
    node: str
    action: str  # "drain" | "resume"
    reason: str | None
    created_at: str  # ISO 8601 UTC
    run_id: str | None = None

    @staticmethod
    def now(node: str, action: str, reason: str | None, run_id: str | None = None) -> "PendingAction":
        return PendingAction(node, action, reason,
                             datetime.now(timezone.utc).isoformat(timespec="seconds"), run_id)


def _parse(line: str) -> tuple[PendingAction | None, str]:
    """One queued line -> (action, "") or (None, why it is refused). Refused: not JSON of the right
    shape, a node that is not one plain node name, a drain whose reason is not ours."""
    if len(line) > MAX_LINE:
        return None, f"line over {MAX_LINE} characters"
    try:
        obj = json.loads(line)
    except ValueError:
        return None, "corrupt line"
    if not isinstance(obj, dict):
        return None, "corrupt line"
    node, action, reason = obj.get("node"), obj.get("action"), obj.get("reason")
    created, run_id = obj.get("created_at"), obj.get("run_id")
    if not (isinstance(node, str) and node and action in ACTIONS and isinstance(created, str)
            and (reason is None or isinstance(reason, str)) and (run_id is None or isinstance(run_id, str))):
        return None, "corrupt line"
    from .backend import check_node_name
    from .reasons import is_ours

    try:
        check_node_name(node)
    except ValueError as exc:
        return None, str(exc)
    if action == "drain" and not is_ours(reason):
        return None, f"drain reason {reason!r} is not ours"
    return PendingAction(node, action, reason, created, run_id), ""


def _ensure_dir(state_dir: str | os.PathLike) -> Path:
    d = Path(state_dir)
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.stat()
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(d, 0o700)
    except OSError as exc:
        raise PendingError(d, exc.strerror or str(exc)) from exc
    if not os.access(d, os.W_OK | os.X_OK):
        raise PendingError(d, "directory not writable")
    return d


@contextmanager
def _locked(d: Path) -> Iterator[None]:
    path = d / LOCKNAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise PendingError(path, exc.strerror or str(exc)) from exc
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() > deadline:
                    log.warning("pending actions: lock %s not acquired (%s); going on without it", path, exc)
                    break
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read(path: Path, rejected: list[tuple[str, str]] | None = None) -> list[PendingAction]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("pending actions: cannot read %s: %s", path, exc)
        return []
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        act, why = _parse(line)
        if act is None:
            log.warning("pending actions: set aside line %d of %s (%s): %.80r", n, path, why, line)
            if rejected is not None:
                rejected.append((line[:MAX_LINE], why))
            continue
        out.append(act)
    return out


def _write(d: Path, actions: list[PendingAction]) -> None:
    path = d / FILENAME
    if len(actions) > MAX_ACTIONS:
        log.warning("pending actions: %d queued, dropping the %d oldest", len(actions),
                    len(actions) - MAX_ACTIONS)
        actions = actions[-MAX_ACTIONS:]
    from ..atomicio import atomic_write

    text = "".join(json.dumps(asdict(a), sort_keys=True) + "\n" for a in actions)
    try:  # never through a planted link; as root only in a state directory of root's alone
        atomic_write(path, text, 0o600, private_dir=True)
    except OSError as exc:
        raise PendingError(path, exc.strerror or str(exc)) from exc


def _merge(existing: list[PendingAction], new: list[PendingAction], newer_wins: bool) -> list[PendingAction]:
    out = list(existing)
    for act in new:
        same = [i for i, a in enumerate(out) if a.node == act.node]
        if same and not newer_wins:
            continue  # a newer intention for this node is already queued
        out = [a for a in out if a.node != act.node] + [act]
    return out


def queue(state_dir: str | os.PathLike, action: PendingAction) -> None:
    """Queue ``action`` (replacing an older pending action for the same node)."""
    if action.action not in ACTIONS:
        raise ValueError(f"unknown action {action.action!r}")
    d = _ensure_dir(state_dir)
    with _locked(d):
        _write(d, _merge(_read(d / FILENAME), [action], newer_wins=True))


def requeue(state_dir: str | os.PathLike, actions: list[PendingAction]) -> None:
    """Put back actions taken by :func:`take_all` that still failed; newer queued actions win."""
    if not actions:
        return
    d = _ensure_dir(state_dir)
    with _locked(d):
        _write(d, _merge(_read(d / FILENAME), list(actions), newer_wins=False))


def _set_aside(d: Path, rejected: list[tuple[str, str]]) -> None:
    """Append rejected lines to the .rejected file (kept for an admin; bounded)."""
    if not rejected:
        return
    path = d / REJECTED
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("pending actions: cannot keep %d rejected items in %s: %s", len(rejected), path, exc)
        return
    try:
        if os.fstat(fd).st_size > MAX_REJECTED:
            log.warning("pending actions: %s over %d bytes; %d rejected items not kept", path, MAX_REJECTED,
                        len(rejected))
            return
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        os.write(fd, "".join(json.dumps({"rejected_at": stamp, "why": why, "line": line}) + "\n"
                             for line, why in rejected).encode("utf-8", "replace"))
    except OSError as exc:
        log.warning("pending actions: cannot keep rejected items in %s: %s", path, exc)
    finally:
        os.close(fd)


def take_valid(state_dir: str | os.PathLike, node: str | None, warn) -> list[PendingAction]:
    """:func:`take_all` for the hook of ``node``: lines that are corrupt, name no plain node, or drain
    with a reason not ours are set aside as they are read (so none can replace a good item); then an
    item for another node is set aside too. Each set-aside item is ``warn``-ed and kept in ``.rejected``,
    never applied."""
    taken, rejected = _take(state_dir)
    for line, why in rejected:
        warn(f"queued action set aside in {REJECTED} ({why}): {line[:120]!r}")
    good, bad = [], []
    for act in taken:
        if node is not None and act.node != node:
            why = f"queued for {act.node!r}, not this node ({node})"
            bad.append((json.dumps(asdict(act), sort_keys=True), why))
            warn(f"queued {act.action} set aside in {REJECTED}: {why}")
            continue
        good.append(act)
    if bad:
        _set_aside(Path(state_dir), bad)
    return good


def take_all(state_dir: str | os.PathLike) -> list[PendingAction]:
    """Read and remove every pending action, oldest first. A missing state dir means nothing pending.
    Refused lines are set aside in the .rejected file."""
    return _take(state_dir)[0]


def _take(state_dir: str | os.PathLike) -> tuple[list[PendingAction], list[tuple[str, str]]]:
    d = Path(state_dir)
    if not d.is_dir() or not ((d / FILENAME).exists() or any(d.glob(TAKING + "*"))):
        return [], []
    d = _ensure_dir(d)
    taken: list[PendingAction] = []
    with _locked(d):
        mine = d / f"{TAKING}{os.getpid()}.{os.urandom(4).hex()}"
        try:
            os.rename(d / FILENAME, mine)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise PendingError(d / FILENAME, exc.strerror or str(exc)) from exc
        # files left by a taker that died are older than ours: read them first, ours last (newer wins)
        rejected: list[tuple[str, str]] = []
        for path in sorted(d.glob(TAKING + "*"), key=lambda p: (p == mine, p.name)):
            taken = _merge(taken, _read(path, rejected), newer_wins=True)
            try:
                path.unlink()
            except OSError as exc:
                raise PendingError(path, exc.strerror or str(exc)) from exc
        _set_aside(d, rejected)
    return taken, rejected
