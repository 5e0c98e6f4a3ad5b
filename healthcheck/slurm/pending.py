"""Node-local queue of Slurm actions that could not be applied (slurmctld unreachable).

File: ``<state_dir>/pending-actions.jsonl``, one JSON object per line, mode 0600 in a 0700 directory.

- :func:`queue` rewrites the file atomically (temp file, fsync, rename) under an advisory lock
  (``pending-actions.lock``, ``flock``), so a reader never sees half a line. One node has at most one
  pending action: the newest decision wins (drain then resume -> resume, resume then drain -> drain,
  each replacement logged), so the next run applies each intended action once; a drain that replaces
  an older queued drain keeps the older one's kernel events too. At most :data:`MAX_ACTIONS` entries:
  the oldest are dropped with a warning.
- A queued drain carries ``events``: the keys of the kernel events the run that decided it saw (the
  drain ledger records them once Slurm confirmed the drain). Optional: a line without it (written by an
  earlier release) reads as no events. At most :data:`MAX_EVENTS` keys of :data:`MAX_EVENT_LEN`
  characters (:func:`bounded_events` keeps the newest), so a line stays under :data:`MAX_LINE`.
- :func:`take_all` renames the file to a private name under the lock, reads it and deletes it: two runs
  taking at the same time never both get the same action. Files left by a taker that died between rename
  and delete are taken too.
- :func:`requeue` puts back what still failed (or was held back), without overriding a newer action
  queued meanwhile; a queued item keeps its ``created_at`` and ``run_id`` however often it goes back.
- :func:`supersede` removes a node's queued actions once a newer decision of ours was applied directly.

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
from ..core.struct import asdict, record as dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Iterator  # noqa: F401
from ..core.lazylog import LazyLog

log = LazyLog(__name__)

FILENAME = "pending-actions.jsonl"
LOCKNAME = "pending-actions.lock"
TAKING = "pending-actions.taking-"
REJECTED = FILENAME + ".rejected"
MAX_REJECTED = 1024 * 1024
MAX_ACTIONS = 1000
MAX_EVENTS = 2000  # event keys one queued drain carries (the newest kept)
MAX_EVENT_LEN = 256  # one key: boot id|time|PCI address|kind|code (about 75 characters)
MAX_LINE = 8192 + MAX_EVENTS * (MAX_EVENT_LEN + 4)
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
    events: tuple = ()  # a drain's kernel-event keys (str), oldest first; () for a resume

    @staticmethod
    def now(node: str, action: str, reason: str | None, run_id: str | None = None,
            events=()) -> "PendingAction":
        return PendingAction(node, action, reason,
                             datetime.now(timezone.utc).isoformat(timespec="seconds"), run_id,
                             bounded_events(events))


def bounded_events(events) -> tuple:
    """``events`` as a queued item carries them: the string keys of at most :data:`MAX_EVENT_LEN`
    characters, without repeats, the newest :data:`MAX_EVENTS` of them."""
    seen: set = set()
    keys = [e for e in events or () if isinstance(e, str) and 0 < len(e) <= MAX_EVENT_LEN
            and not (e in seen or seen.add(e))]
    return tuple(keys[-MAX_EVENTS:])


def _joined(older: tuple, newer: tuple) -> tuple:
    """The events of two drains of one node, one superseding the other: both sets, older first."""
    return bounded_events(list(older) + list(newer))


def _line(act: PendingAction) -> str:
    obj = asdict(act)
    if not obj.get("events"):
        obj.pop("events", None)  # the line as earlier releases wrote it
    else:
        obj["events"] = list(obj["events"])
    return json.dumps(obj, sort_keys=True)


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
    created, run_id, events = obj.get("created_at"), obj.get("run_id"), obj.get("events")
    if not (isinstance(node, str) and node and action in ACTIONS and isinstance(created, str)
            and (reason is None or isinstance(reason, str)) and (run_id is None or isinstance(run_id, str))
            and (events is None or (isinstance(events, list) and len(events) <= MAX_EVENTS
                                    and all(isinstance(e, str) and 0 < len(e) <= MAX_EVENT_LEN
                                            for e in events)))):
        return None, "corrupt line"
    from .backend import check_node_name
    from .reasons import is_ours

    try:
        check_node_name(node)
    except ValueError as exc:
        return None, str(exc)
    if action == "drain" and not is_ours(reason):
        return None, f"drain reason {reason!r} is not ours"
    return PendingAction(node, action, reason, created, run_id, tuple(events or ())), ""


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
    from ..safeio.atomic import atomic_write

    text = "".join(_line(a) + "\n" for a in actions)
    try:  # never through a planted link; as root only in a state directory of root's alone
        atomic_write(path, text, 0o600, private_dir=True)
    except OSError as exc:
        raise PendingError(path, exc.strerror or str(exc)) from exc


def _merge(existing: list[PendingAction], new: list[PendingAction], newer_wins: bool) -> list[PendingAction]:
    """``new`` into ``existing``, one action per node. ``newer_wins``: each of ``new`` is the newer
    decision (it replaces the queued one); else the queued one is newer and stays. Either way a drain
    that supersedes another drain keeps the other's events; a replacement of one action by the other
    (drain by resume, resume by drain) is logged."""
    out = list(existing)
    for act in new:
        same = [a for a in out if a.node == act.node]
        if not same:
            out.append(act)
            continue
        old = same[-1]
        newer, older = (act, old) if newer_wins else (old, act)
        if newer.action == older.action == "drain" and older.events:
            newer = replace(newer, events=_joined(older.events, newer.events))
        elif newer.action != older.action:
            log.warning("pending actions: the queued %s of %s (decided %s) is superseded by the newer %s "
                        "(decided %s)", older.action, older.node, older.created_at, newer.action,
                        newer.created_at)
        if newer_wins:
            out = [a for a in out if a.node != act.node] + [newer]
        else:
            out = [newer if a is old else a for a in out if a.node != act.node or a is old]
    return out


def _read_keeping(d: Path) -> list[PendingAction]:
    """The queue as it stands, under the lock; corrupt lines set aside (a rewrite must not lose them)."""
    rejected: list[tuple[str, str]] = []
    acts = _read(d / FILENAME, rejected)
    _set_aside(d, rejected)
    return acts


def queue(state_dir: str | os.PathLike, action: PendingAction) -> None:
    """Queue ``action``: the newest decision for its node (it replaces an older pending action)."""
    if action.action not in ACTIONS:
        raise ValueError(f"unknown action {action.action!r}")
    d = _ensure_dir(state_dir)
    with _locked(d):
        _write(d, _merge(_read_keeping(d), [action], newer_wins=True))


def requeue(state_dir: str | os.PathLike, actions: list[PendingAction]) -> None:
    """Put back actions taken by :func:`take_all` that were not applied (unreachable, refused, held back),
    as they were (``created_at``, ``run_id``, ``events``); an action queued meanwhile is newer and wins."""
    if not actions:
        return
    d = _ensure_dir(state_dir)
    with _locked(d):
        _write(d, _merge(_read_keeping(d), list(actions), newer_wins=False))


def supersede(state_dir: str | os.PathLike, node: str) -> list[PendingAction]:
    """Remove and return every action queued for ``node``: a newer decision of ours for it was just
    applied (the caller says what becomes of them). Nothing queued: [] without touching the folder."""
    d = Path(state_dir)
    if not (d / FILENAME).exists():
        return []
    d = _ensure_dir(d)
    with _locked(d):
        acts = _read_keeping(d)
        gone = [a for a in acts if a.node == node]
        if not gone:
            return []
        kept = [a for a in acts if a.node != node]
        if kept:
            _write(d, kept)
        else:
            try:
                (d / FILENAME).unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise PendingError(d / FILENAME, exc.strerror or str(exc)) from exc
    return gone


def reject(state_dir: str | os.PathLike, items: list[tuple[PendingAction, str]]) -> None:
    """Set aside taken items that can never be applied (``(item, why)``), kept in the .rejected file."""
    if items:
        _set_aside(Path(state_dir), [(_line(a), why) for a, why in items])


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
            bad.append((_line(act), why))
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
