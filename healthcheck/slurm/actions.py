"""The hooks' side effects, in one place: Slurm drain/resume (queued when slurmctld is unreachable),
baselines, and the spool records of every run and action. Every failure here is logged, never raised:
the prolog must finish."""
from __future__ import annotations

import os
from typing import Callable

from ..model import Verdict
from .policy import Decision, decide, failures, short_run
from .reasons import make_reason_multi
from .settings import SlurmSettings
from ..records import SCHEMA_VERSION
from ..safety import make_private  # noqa: F401 - used here and re-exported

Log = Callable[[str], None]


def backend_for(settings: SlurmSettings):
    from .backend import ScontrolBackend, backend_from_name

    if settings.backend == "scontrol":
        return ScontrolBackend(scontrol=settings.scontrol)
    return backend_from_name(settings.backend)


class LazyBackend:
    """The configured backend, built (and its modules imported) on first use."""

    def __init__(self, settings: SlurmSettings):
        self._settings, self._backend = settings, None

    def __getattr__(self, name: str):
        if self._backend is None:
            self._backend = backend_for(self._settings)
        return getattr(self._backend, name)


def apply_pending(backend, state_dir: str, settings: SlurmSettings, log: Log) -> None:
    """Apply drains/resumes queued by earlier runs, re-checking ownership against the node's state now;
    each one applied is recorded in the spool as an action of the run that queued it."""
    if not os.path.exists(os.path.join(state_dir, "pending-actions.jsonl")):
        return
    from .backend import SlurmError, SlurmUnreachable
    from .pending import PendingError, queue, take_all
    from .reasons import is_ours
    try:
        pending = take_all(state_dir)
    except PendingError as exc:
        log(f"pending actions unreadable: {exc}")
        return
    for i, item in enumerate(pending):
        try:
            state = backend.node(item.node)
            if state.reason and not is_ours(state.reason):
                log(f"queued {item.action} of {item.node} dropped: reason now {state.reason!r} (not ours)")
            elif item.action == "drain" and not (state.drained and state.reason == item.reason):
                backend.drain(item.node, item.reason)
                _remember_drain(state_dir, item.reason, "queued", log)
                _record_applied(settings.spool_dir, item, log)
            elif item.action == "resume" and (state.drained or state.down) and is_ours(state.reason):
                backend.resume(item.node)
                _record_applied(settings.spool_dir, item, log)
        except SlurmUnreachable:
            for rest in pending[i:]:
                try:
                    queue(state_dir, rest)
                except PendingError as exc:
                    log(f"cannot re-queue {rest.action} of {rest.node}: {exc}")
            return
        except SlurmError as exc:
            log(f"queued {item.action} of {item.node} failed: {exc}")


# Reasons slurmctld itself sets when a hook exits non-zero; after our prolog drained the node and
# exited 1 (to requeue the job), Slurm replaces our reason with this one.
SLURM_HOOK_REASONS = ("Prolog error", "Epilog error")


def _ledger(state_dir: str) -> str:
    return os.path.join(state_dir, "drained-by-us.json")


def _remember_drain(state_dir: str, reason: str, context: str, log: Log) -> None:
    import json

    from ..runner import utc_now_iso

    try:
        make_private(state_dir)
        tmp = _ledger(state_dir) + ".tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
            json.dump({"reason": reason, "context": context, "time": utc_now_iso()}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, _ledger(state_dir))
    except OSError as exc:
        log(f"drain not remembered locally ({exc}): a 'Prolog error' reason will not be recognised as ours")


def _claimed(state, state_dir: str):
    """The node's state with Slurm's "Prolog error" replaced by the reason we drained it with, when
    this node's ledger says our prolog/epilog drained it (Slurm overwrote our reason after we exited 1)."""
    import dataclasses
    import json

    if state is None or state.reason not in SLURM_HOOK_REASONS:
        return state, False
    try:
        with open(_ledger(state_dir)) as fh:
            ledger = json.load(fh)
    except (OSError, ValueError):
        return state, False
    if not isinstance(ledger, dict) or ledger.get("context") not in ("prolog", "epilog") \
            or not isinstance(ledger.get("reason"), str):
        return state, False
    return dataclasses.replace(state, reason=ledger["reason"]), True


def _record_applied(spool_dir: str, item, log: Log) -> None:
    from ..runner import utc_now_iso
    from ..spool import SpoolError, append

    log(f"applied queued {item.action} of {item.node}" + (f": {item.reason}" if item.reason else ""))
    try:
        append(spool_dir, {"kind": "action", "schema_version": SCHEMA_VERSION, "run_id": item.run_id,
                           "node": item.node, "time": utc_now_iso(),
                           "action": item.action, "reason": item.reason, "job_id": None, "context": "queued",
                           "why": f"applied from the queue (decided {item.created_at})", "checks": []})
    except (SpoolError, ValueError, OSError) as exc:
        log(f"spool not written ({exc})")


def decide_and_act(context: str, verdict: Verdict, node: str, settings: SlurmSettings, backend,
                   state_dir: str, run_id: str, log: Log) -> Decision:
    needs_state = bool(verdict.failing) or context == "slurm-check"
    if not needs_state:  # healthy prolog/epilog: nothing to ask slurmctld, nothing to import
        return Decision("none", None, "healthy")
    from .backend import SlurmError, SlurmUnreachable

    state = None
    if needs_state:
        try:
            state = backend.node(node)
        except SlurmUnreachable as exc:
            log(f"slurmctld unreachable ({exc}); deciding without the node's state")
        except SlurmError as exc:
            log(f"cannot read node {node}: {exc}")
            return Decision("none", None, f"node state unreadable: {exc}")
    state, claimed = _claimed(state, state_dir)
    decision = decide(context, verdict, state, settings, run_id)
    if claimed and decision.action == "none" and decision.reason and verdict.failing:
        decision = Decision("drain", make_reason_multi(failures(verdict), short_run(run_id)),
                            "drained by our prolog; our reason restored over Slurm's")
    if decision.action == "none":
        return decision
    try:
        if decision.action == "drain":
            backend.drain(node, decision.reason)
        else:
            backend.resume(node)
    except SlurmUnreachable as exc:
        _queue(state_dir, node, decision, run_id, log)
        decision = Decision(decision.action, decision.reason,
                            f"{decision.why}; queued: slurmctld unreachable ({exc})")
    except SlurmError as exc:
        log(f"{decision.action} of {node} refused by Slurm: {exc}")
        return Decision("none", decision.reason, f"{decision.action} refused: {exc}")
    if decision.action == "drain":
        _remember_drain(state_dir, decision.reason, context, log)
    else:
        try:
            os.unlink(_ledger(state_dir))
        except OSError:
            pass
    return decision


def _queue(state_dir: str, node: str, decision: Decision, run_id: str, log: Log) -> None:
    from ..runner import utc_now_iso
    from .pending import PendingAction, PendingError, queue

    try:
        make_private(state_dir)
    except OSError:
        pass  # queue() names the path and the error
    try:
        queue(state_dir, PendingAction(node, decision.action, decision.reason, utc_now_iso(), run_id))
    except PendingError as exc:
        log(f"LOST {decision.action} of {node}: cannot queue it: {exc}")


def save_baseline(state_dir: str, job_id: str, counters: dict, log: Log) -> None:
    from .baseline import save

    try:
        make_private(state_dir)
        save(state_dir, job_id, counters)
    except (OSError, ValueError) as exc:
        log(f"baseline for job {job_id} not saved: {exc}")


def record(spool_dir: str, verdict: Verdict, decision: Decision, run_id: str, job_id: str | None,
           config_path: str, log: Log) -> None:
    """One "run" record per run and one "action" record per drain/resume, to the node-local spool."""
    from ..records import run_record
    from ..spool import SpoolError, append

    records = [run_record(verdict, run_id, job_id, config_path)]
    if decision.action != "none":
        from ..runner import utc_now_iso

        records.append({"kind": "action", "schema_version": SCHEMA_VERSION, "run_id": run_id,
                        "node": verdict.node, "time": utc_now_iso(),
                        "action": decision.action, "reason": decision.reason, "job_id": job_id,
                        "context": verdict.context, "why": decision.why,
                        "checks": sorted({f.check for f in verdict.failing})})
    try:
        make_private(spool_dir)
    except OSError:
        pass  # append() reports it
    for rec in records:
        try:
            append(spool_dir, rec)
        except (SpoolError, ValueError, OSError) as exc:
            log(f"spool not written ({exc}); run {run_id} is only in this log")
            return
