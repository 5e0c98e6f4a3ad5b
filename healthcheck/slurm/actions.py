"""The hooks' side effects, in one place: Slurm drain/resume (queued when slurmctld is unreachable),
baselines, and the spool records of every run and action. Every failure here is logged, never raised:
the prolog must finish."""
from __future__ import annotations

import hashlib
import os
from typing import Callable

from ..model import Verdict
from .policy import Decision, decide
from .settings import SlurmSettings

Log = Callable[[str], None]


def backend_for(settings: SlurmSettings):
    from .backend import ScontrolBackend, backend_from_name

    if settings.backend == "scontrol":
        return ScontrolBackend(scontrol=settings.scontrol)
    return backend_from_name(settings.backend)


def apply_pending(backend, state_dir: str, settings: SlurmSettings, log: Log) -> None:
    """Apply drains/resumes queued by earlier runs, re-checking ownership against the node's state now."""
    from .pending import PendingError, queue, take_all
    from .backend import SlurmError, SlurmUnreachable
    from .reasons import is_ours

    if not os.path.exists(os.path.join(state_dir, "pending-actions.jsonl")):
        return
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
                log(f"applied queued drain of {item.node}: {item.reason}")
            elif item.action == "resume" and (state.drained or state.down) and is_ours(state.reason):
                backend.resume(item.node)
                log(f"applied queued resume of {item.node}")
        except SlurmUnreachable:
            for rest in pending[i:]:
                try:
                    queue(state_dir, rest)
                except PendingError as exc:
                    log(f"cannot re-queue {rest.action} of {rest.node}: {exc}")
            return
        except SlurmError as exc:
            log(f"queued {item.action} of {item.node} failed: {exc}")


def decide_and_act(context: str, verdict: Verdict, node: str, settings: SlurmSettings, backend,
                   state_dir: str, run_id: str, log: Log) -> Decision:
    from .backend import SlurmError, SlurmUnreachable

    state = None
    needs_state = bool(verdict.failing) or context == "slurm-check"
    if needs_state:
        try:
            state = backend.node(node)
        except SlurmUnreachable as exc:
            log(f"slurmctld unreachable ({exc}); deciding without the node's state")
        except SlurmError as exc:
            log(f"cannot read node {node}: {exc}")
            return Decision("none", None, f"node state unreadable: {exc}")
    decision = decide(context, verdict, state, settings, run_id)
    if decision.action == "none":
        return decision
    try:
        if decision.action == "drain":
            backend.drain(node, decision.reason)
        else:
            backend.resume(node)
    except SlurmUnreachable as exc:
        _queue(state_dir, node, decision, run_id, log)
        return Decision(decision.action, decision.reason, f"{decision.why}; queued: slurmctld unreachable ({exc})")
    except SlurmError as exc:
        log(f"{decision.action} of {node} refused by Slurm: {exc}")
        return Decision("none", decision.reason, f"{decision.action} refused: {exc}")
    return decision


def _queue(state_dir: str, node: str, decision: Decision, run_id: str, log: Log) -> None:
    from ..runner import utc_now_iso
    from .pending import PendingAction, PendingError, queue

    try:
        queue(state_dir, PendingAction(node, decision.action, decision.reason, utc_now_iso(), run_id))
    except PendingError as exc:
        log(f"LOST {decision.action} of {node}: cannot queue it: {exc}")


def save_baseline(state_dir: str, job_id: str, counters: dict, log: Log) -> None:
    from .baseline import save

    try:
        save(state_dir, job_id, counters)
    except (OSError, ValueError) as exc:
        log(f"baseline for job {job_id} not saved: {exc}")


def record(spool_dir: str, verdict: Verdict, decision: Decision, run_id: str, job_id: str | None,
           config_path: str, log: Log) -> None:
    """One "run" record per run and one "action" record per drain/resume, to the node-local spool."""
    from ..spool import SpoolError, append
    from .. import __version__

    run = {"kind": "run", "run_id": run_id, "node": verdict.node, "context": verdict.context,
           "job_id": job_id, "started_at": verdict.started_at, "duration_s": round(verdict.duration_s, 6),
           "status": verdict.status.value, "results": [f.to_dict() for f in verdict.findings],
           "config_hash": _config_hash(config_path), "tool_version": __version__}
    records = [run]
    if decision.action != "none":
        from ..runner import utc_now_iso

        records.append({"kind": "action", "run_id": run_id, "node": verdict.node, "time": utc_now_iso(),
                        "action": decision.action, "reason": decision.reason, "job_id": job_id,
                        "context": verdict.context, "why": decision.why,
                        "checks": sorted({f.check for f in verdict.failing})})
    for rec in records:
        try:
            append(spool_dir, rec)
        except (SpoolError, ValueError, OSError) as exc:
            log(f"spool not written ({exc}); run {run_id} is only in this log")
            return


def _config_hash(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()[:16]
    except OSError:
        return None
