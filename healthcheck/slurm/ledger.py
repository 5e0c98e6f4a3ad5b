"""The node's memory of its own drains and of the kernel events already acted on. Files in the node's
state folder (0600 in a 0700 folder, written atomically):

- ``drained-by-us.json`` (the ledger): the drain our hook made last, ``{"reason", "context", "time",
  "epoch", "events"}``, ``events`` being the keys of the kernel events the node showed then. It is
  written only once Slurm confirmed the drain (``drain`` returned, or the node is seen drained with our
  reason); a drain that was only queued has none (its events travel in the queue). It lives exactly as
  long as the drain: it ends when the node is seen resumed (by an admin or by us) or held for a reason
  that is not ours (an admin's, or Slurm's own "Prolog error" set long after our drain), so a later
  drain by someone else is never taken for ours.
- ``events-acknowledged.json``: keys of kernel events (``checks.gpu_xid.event_key``: boot id, kernel time
  stamp, PCI address, kind and Xid) that already led to a drain which has since ended. ``gpu.xid``
  passes over them: a resumed node is not drained again for the same old kernel-log lines; a new event
  (another time stamp, another boot) drains it. Bounded to :data:`MAX_ACKS` keys, the newest kept.

A missing file means nothing remembered. A corrupt one is logged, set aside as ``<name>.corrupt`` and
read as empty: the safe default, since old events then count again (a node may be drained once more for
them, never passed wrongly).
"""
from __future__ import annotations

import os
import time
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Callable  # noqa: F401

from .reasons import is_ours, slurm_time_epoch

Log = "Callable[[str], None]"  # a log function (annotations only)

LEDGER = "drained-by-us.json"
ACKS = "events-acknowledged.json"
MAX_ACKS = 20000
MAX_FILE = 4 * 1024 * 1024
# Reasons slurmctld itself sets when a hook exits non-zero; after our prolog drained the node and
# exited 1 (to requeue the job), Slurm replaces our reason with this one.
SLURM_HOOK_REASONS = ("Prolog error", "Epilog error")
# Slurm's reason counts as the mark of our own hook's drain only when it was set this close after it.
CLAIM_BEFORE_S, CLAIM_AFTER_S = 60.0, 900.0


def _write_json(path: str, obj, log: Log, what: str) -> bool:
    from ..safeio.atomic import atomic_write
    from ..safeio.trust import make_private

    try:
        make_private(os.path.dirname(path))
        import json  # on use: a healthy node with no drain of ours reads and writes no ledger

        atomic_write(path, json.dumps(obj, sort_keys=True), 0o600, private_dir=True)
        return True
    except (OSError, ValueError) as exc:
        log(f"{what} not written ({exc})")
        return False


def _read_json(path: str, log: Log, what: str):
    """The file's JSON, None when absent; a corrupt file is set aside and logged (None)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log(f"{what} unreadable ({exc}); taken as empty")
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            import stat

            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
                raise ValueError("not a regular file of at most 4 MiB")
            import json

            return json.loads(fh.read(MAX_FILE + 1).decode("utf-8"))
    except (OSError, ValueError) as exc:
        try:
            os.replace(path, path + ".corrupt")
            aside = f"; set aside as {os.path.basename(path)}.corrupt"
        except OSError:
            aside = ""
        log(f"{what} corrupt ({exc}){aside}: taken as empty")
        return None


# -- the ledger ---------------------------------------------------------------------------------------

def read_ledger(state_dir: str, log: Log) -> dict | None:
    path = os.path.join(state_dir, LEDGER)
    if not os.path.lexists(path):
        return None
    ledger = _read_json(path, log, "drain ledger")
    if not isinstance(ledger, dict) or not isinstance(ledger.get("reason"), str):
        if ledger is not None:
            log("drain ledger without a reason: ignored")
        return None
    return ledger


def remember_drain(state_dir: str, reason: str, context: str, events: list[str] | None, log: Log) -> None:
    """Record our drain, once Slurm confirmed it (never for a drain only queued). ``events``: the kernel
    events it is for (a drain applied from the queue: those of the run that decided it). A ledger still
    there keeps its events: our drain is replaced by ours (a new reason), or it ended unseen, and
    acknowledging its events with this one's end is what seeing it end would have done."""
    from ..core.clock import utc_now_iso

    old = read_ledger(state_dir, lambda _m: None) or {}
    have = [e for e in old.get("events") or [] if isinstance(e, str)] if isinstance(old.get("events"), list) else []
    known = set(have)
    merged = have + [e for e in events or [] if isinstance(e, str) and e not in known and not known.add(e)]
    entry = {"reason": reason, "context": context, "time": utc_now_iso(), "epoch": time.time(),
             "events": merged[-MAX_ACKS:]}
    if not _write_json(os.path.join(state_dir, LEDGER), entry, log, "drain ledger"):
        log("drain not remembered locally: a 'Prolog error' reason will not be recognised as ours")


def add_events(state_dir: str, ledger: dict | None, events: list[str] | None, log: Log) -> None:
    """While our drain stands, the events a later run sees join it: when an admin resumes the node,
    everything logged up to then is old (only what comes after the resume is new)."""
    if ledger is None or not events:
        return
    have = [e for e in ledger.get("events") or [] if isinstance(e, str)]
    known = set(have)
    fresh = [e for e in events if isinstance(e, str) and e not in known]
    if fresh:
        ledger["events"] = (have + fresh)[-MAX_ACKS:]
        _write_json(os.path.join(state_dir, LEDGER), ledger, log, "drain ledger")


def end_ledger(state_dir: str, ledger: dict | None, why: str, log: Log) -> None:
    """The drain is over: its kernel events are acknowledged, the ledger removed."""
    if ledger is None:
        return
    events = [e for e in ledger.get("events") or [] if isinstance(e, str)]
    if events:
        acknowledge(state_dir, events, log)
    try:
        os.unlink(os.path.join(state_dir, LEDGER))
    except FileNotFoundError:
        pass
    except OSError as exc:
        log(f"drain ledger not removed ({exc})")
        return
    log(f"our drain is over ({why}); {len(events)} kernel events acknowledged")


def slurm_mark_of_ours(state, ledger: dict | None) -> bool:
    """Slurm's "Prolog error"/"Epilog error" on the node stands for our own hook's drain: the ledger says
    our prolog/epilog drained it, and Slurm set its reason right after (when the time is known)."""
    if state is None or ledger is None or state.reason not in SLURM_HOOK_REASONS:
        return False
    if ledger.get("context") not in ("prolog", "epilog", "queued"):
        return False
    when, ours = slurm_time_epoch(state.reason_time), ledger.get("epoch")
    if when is None or not isinstance(ours, (int, float)):
        return True  # no times to compare: trust the ledger (the drain is not over: nothing resumed it)
    return ours - CLAIM_BEFORE_S <= when <= ours + CLAIM_AFTER_S


def reconcile(state, state_dir: str, ledger: dict | None, log: Log) -> dict | None:
    """The ledger as it stands given the node's state now: ended when the node was resumed or is held
    for a reason not ours; else returned unchanged."""
    if ledger is None or state is None:
        return ledger
    if not (state.drained or state.down):
        end_ledger(state_dir, ledger, "the node was resumed", log)
        return None
    if state.reason and not is_ours(state.reason) and not slurm_mark_of_ours(state, ledger):
        end_ledger(state_dir, ledger, f"the node is now held for {state.reason!r}", log)
        return None
    return ledger


# -- acknowledged kernel events -------------------------------------------------------------------------

def read_acks(state_dir: str, log: Log) -> list[str]:
    path = os.path.join(state_dir, ACKS)
    if not os.path.lexists(path):
        return []
    data = _read_json(path, log, "acknowledged kernel events")
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list):
        if data is not None:
            log("acknowledged kernel events: no key list; taken as empty")
        return []
    return [k for k in keys if isinstance(k, str)][-MAX_ACKS:]


def acknowledge(state_dir: str, keys: list[str], log: Log) -> None:
    have = read_acks(state_dir, log)
    seen = set(have)
    merged = have + [k for k in keys if k not in seen and not seen.add(k)]
    _write_json(os.path.join(state_dir, ACKS), {"version": 1, "keys": merged[-MAX_ACKS:]}, log,
                "acknowledged kernel events")
