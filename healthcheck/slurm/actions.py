"""The hooks' side effects, in one place: Slurm drain/resume (queued when slurmctld is unreachable),
baselines, and the spool records of every run and action. Every failure here is logged, never raised:
the prolog must finish."""
from __future__ import annotations

import os
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Callable  # noqa: F401

from ..core.model import Verdict
from .ledger import (add_events, end_ledger, read_acks, read_ledger, reconcile, remember_drain,
                     slurm_mark_of_ours)
from .policy import Decision, decide, failures, short_run
from .reasons import make_reason_multi, reason_check
from ..config.slurm_settings import SlurmSettings
from ..safeio.trust import make_private  # noqa: F401 - used here and re-exported

Log = "Callable[[str], None]"  # a log function (annotations only)


def backend_for(settings: SlurmSettings):
    from .backend import ScontrolBackend, backend_from_name

    if settings.backend == "scontrol":
        return ScontrolBackend(scontrol=settings.scontrol)
    return backend_from_name(settings.backend)


class LazyBackend:
    """The configured backend, built (and its modules imported) on first use. ``deadline`` (a
    ``time.monotonic()`` value) bounds every call it makes: the hooks set the end of their budget."""

    def __init__(self, settings: SlurmSettings, deadline: float | None = None):
        self._settings, self._backend, self._deadline = settings, None, deadline

    @property
    def deadline(self) -> float | None:
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline = value
        if self._backend is not None:
            self._backend.deadline = value

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._backend is None:
            self._backend = backend_for(self._settings)
            self._backend.deadline = self._deadline
        return getattr(self._backend, name)


class StateRead:
    """``backend.node(node)`` begun now in a thread of its own: HealthCheckProgram, which reads the node's
    state whatever its verdict, reads it while its child probes (a ``scontrol`` process, or slurmctld's
    answer, no longer adds to the run). ``result()`` waits for it, up to the backend's deadline (the
    call ends by then: the subprocess seam kills it), and returns or raises what the call did."""

    JOIN_SLACK_S = 1.0  # past the deadline: the seam's kill and reaping

    def __init__(self, backend, node: str):
        from ..probes.bounded import Task

        self._backend = backend
        self._task = Task(lambda: backend.node(node)).start()

    def result(self):
        import time

        deadline = self._backend.deadline
        self._task.join(self.JOIN_SLACK_S + (max(0.0, deadline - time.monotonic()) if deadline is not None else 60.0))
        if self._task.is_alive():
            from .backend import SlurmUnreachable

            raise SlurmUnreachable("the node's state was not read within the hook's budget")
        if self._task.error is not None:
            raise self._task.error
        return self._task.result


def apply_pending(backend, state_dir: str, settings: SlurmSettings, log: Log, node: str | None = None) -> None:
    """Apply drains/resumes queued by earlier runs, re-checking ownership against the node's state now;
    each one applied is recorded in the spool as an action of the run that queued it.

    Every queued item is validated first (``pending.take_valid``): one for another node, with a node
    name that is not one plain name, or a drain whose reason is not ours is set aside in
    ``pending-actions.jsonl.rejected`` and logged, never applied. A valid item is applied, or
    superseded (dropped, with a logged why), or put back as it was (logged each time): a queued action
    is never lost to a hold or an error, only to a newer decision. For a queued drain, once the node's
    state is read (and a ledger of ours whose drain ended is ended, as :func:`reconcile` does):

    - the node drained/down with our reason (or Slurm's mark of our own hook): our drain stands; the
      item's events join its ledger (one is written if the drain went through unseen) - superseded;
    - held for a reason not ours (an admin's): left as it is - superseded (nothing acknowledged: the
      events count again once the admin resumes the node);
    - else the drain cap is asked: a hold puts the item back; then ``drain``: confirmed, the ledger
      records it with the item's events; refused (``SlurmError``) or unreachable: put back.

    A queued resume is applied when the node is held for our reason (the ledger then ends), else
    dropped. Nothing here raises: the checks always run after it."""
    if not os.path.exists(os.path.join(state_dir, "pending-actions.jsonl")):
        return
    from .backend import SlurmError, SlurmUnreachable
    from .pending import PendingError, reject, requeue, take_valid
    from .reasons import is_ours
    try:
        pending = take_valid(state_dir, node, log)
    except PendingError as exc:
        log(f"pending actions unreadable: {exc}")
        return

    def put_back(items, why: str) -> None:
        for item in items:
            log(f"queued {item.action} of {item.node} (decided {item.created_at}) kept in the queue: {why}")
        try:
            requeue(state_dir, list(items))
        except PendingError as exc:
            log(f"LOST queued actions ({', '.join(f'{i.action} of {i.node}' for i in items)}): "
                f"cannot re-queue them: {exc}")

    for i, item in enumerate(pending):
        what = f"queued {item.action} of {item.node} (decided {item.created_at})"
        try:
            state = backend.node(item.node)
            led = reconcile(state, state_dir, read_ledger(state_dir, log), log)
            ours_now = (state.drained or state.down) and (is_ours(state.reason) or slurm_mark_of_ours(state, led))
            if item.action == "drain":
                if ours_now:
                    if led is not None:
                        add_events(state_dir, led, list(item.events), log)
                    else:  # our drain went through though its answer never came: Slurm shows it
                        remember_drain(state_dir, state.reason or item.reason, "queued", list(item.events), log)
                    log(f"{what} superseded: the node is drained by us ({state.reason!r}); "
                        f"its {len(item.events)} kernel events join that drain")
                elif state.reason and not is_ours(state.reason):
                    log(f"{what} dropped: the node is held for {state.reason!r} (not ours); "
                        f"its kernel events are not acknowledged")
                else:
                    held = _capped(item.node, [reason_check(item.reason) or ""], backend, settings, log)
                    if held:
                        put_back([item], f"held back by the drain cap: {', '.join(sorted(held))}")
                        continue
                    backend.drain(item.node, item.reason)
                    remember_drain(state_dir, item.reason, "queued", list(item.events), log)
                    _record_applied(settings.spool_dir, item, log)
            elif ours_now:
                backend.resume(item.node)
                end_ledger(state_dir, read_ledger(state_dir, log), "resumed from the queue", log)
                _record_applied(settings.spool_dir, item, log)
            else:
                log(f"{what} dropped: the node is not held by us ({state.state}, reason {state.reason!r})")
        except SlurmUnreachable as exc:
            put_back(pending[i:], f"slurmctld unreachable ({exc})")
            return
        except SlurmError as exc:
            put_back([item], f"refused by Slurm: {exc}")
        except ValueError as exc:  # can never be applied (e.g. a reason that sanitises to nothing)
            log(f"{what} set aside: {exc}")
            try:
                reject(state_dir, [(item, str(exc))])
            except OSError as err:
                log(f"{what} not kept: {err}")
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not lose the action
            put_back([item], f"{type(exc).__name__}: {exc}")


def _record_applied(spool_dir: str, item, log: Log) -> None:
    from ..spool.entries import action_record
    from ..core.clock import utc_now_iso
    from ..spool.store import SpoolError, encode
    from ..spool.append import append_line

    log(f"applied queued {item.action} of {item.node}" + (f": {item.reason}" if item.reason else ""))
    try:
        append_line(spool_dir, encode(action_record(
            item.run_id, item.node, item.action, item.reason, time=utc_now_iso(), job_id=None,
            context="queued", why=f"applied from the queue (decided {item.created_at})")))
    except (SpoolError, ValueError, OSError) as exc:
        log(f"spool not written ({exc})")


def reconcile_before_checks(backend, node: str, state_dir: str, log: Log) -> list[str]:
    """Before the checks: when the ledger says we drained this node, ask slurmctld whether that drain
    still stands (one call, inside the budget); a drain that has ended has its kernel events
    acknowledged. Returns the acknowledged event keys for gpu.xid (read without any Slurm call)."""
    ledger = read_ledger(state_dir, log)
    if ledger is not None:
        from .backend import SlurmError, SlurmUnreachable

        try:
            reconcile(backend.node(node), state_dir, ledger, log)
        except (SlurmUnreachable, SlurmError, ValueError) as exc:
            log(f"our earlier drain not re-checked ({exc})")
    return read_acks(state_dir, log)


def _capped(node: str, checks: list[str], backend, settings: SlurmSettings, log: Log,
            domain: tuple[str, list[str]] | None = None) -> dict:
    """The failing checks the drain cap holds back on this node (one ``nodes()`` call); {} when the cap is
    off, or when slurmctld cannot be asked (the drain is then queued anyway and re-judged when applied).
    ``domain``: this node's NVLink domain (name, members), capped on its own too (draincap)."""
    if not settings.drain_cap:
        return {}
    import time

    from .backend import SlurmError, SlurmUnreachable
    from .draincap import held_back

    try:
        nodes = backend.nodes()
    except (SlurmUnreachable, SlurmError) as exc:
        log(f"drain cap not evaluated ({exc})")
        return {}
    return held_back(node, [c for c in checks if c], nodes, settings, time.time(), domain)


def _cap_finding(held: dict, decided: str):
    from ..core.model import Finding, Status

    def where(h: dict) -> str:
        scope = h.get("scope", "partition")
        return "nodes" if scope == "partition" else f"nodes of {scope}"

    parts = [f"{check} (already drained by us on {h['drained']} of {h['nodes']} {where(h)}, cap {h['cap']}: "
             f"{', '.join(h['examples'])})" for check, h in sorted(held.items())]
    domains = sorted({h["scope"] for h in held.values() if h.get("scope", "partition") != "partition"})
    why = (f" - a check failing on this many nodes of one NVLink domain ({', '.join(domains)}) is more likely "
           "the domain (an NVLink switch tray, the backplane, the fabric manager, IMEX) than each tray: "
           "inspect it as a unit" if domains else
           " - a check failing on this many nodes is more likely a wrong expectation than faulty nodes; fix "
           "it, or raise [slurm] drain_cap_nodes/drain_cap_fraction")
    return Finding("slurm.drain_cap", Status.WARN,
                   f"held back by the drain cap, {decided}: " + "; ".join(parts) + why,
                   None, {"held_back": float(len(held)),
                          "drained_same_check": float(max(h["drained"] for h in held.values())),
                          "cap": float(min(h["cap"] for h in held.values()))})


def decide_and_act(context: str, verdict: Verdict, node: str, settings: SlurmSettings, backend,
                   state_dir: str, run_id: str, log: Log, events: list[str] | None = None,
                   state_read: StateRead | None = None,
                   before_act: Callable[[Decision], None] | None = None,
                   domain: Callable[[], tuple[str, list[str]] | None] | None = None) -> Decision:
    """Decide and act on ``verdict``. ``events``: keys of the kernel events the run saw (recorded with a
    drain once Slurm confirmed it, or carried by the queued drain; acknowledged when that drain ends).
    ``state_read``: the node's state, read already (begun while the checks ran). ``before_act``: called
    with the final decision right before the drain/resume is asked of Slurm (an exception in it is
    logged, the action goes on). A check held back by the drain cap adds a ``slurm.drain_cap`` finding
    to ``verdict``. ``domain``: called only when the cap is evaluated, this node's NVLink domain (name,
    members) or None.

    Only a confirmed drain is remembered (the ledger); one slurmctld did not answer is queued with the
    run's events, and a resume that was only queued leaves the ledger (its events are acknowledged when
    the resume is applied). A confirmed action is the node's newest decision: actions queued for the
    node earlier are superseded (a queued drain's events join our confirmed drain's ledger)."""
    needs_state = bool(verdict.failing) or context == "slurm-check"
    if not needs_state:  # healthy prolog/epilog: nothing to ask slurmctld, nothing to import
        return Decision("none", None, "healthy")
    from .backend import SlurmError, SlurmUnreachable

    state = None
    try:
        state = state_read.result() if state_read is not None else backend.node(node)
    except SlurmUnreachable as exc:
        log(f"slurmctld unreachable ({exc}); deciding without the node's state")
    except SlurmError as exc:
        log(f"cannot read node {node}: {exc}")
        return Decision("none", None, f"node state unreadable: {exc}")
    ledger = reconcile(state, state_dir, read_ledger(state_dir, log), log)
    if state is not None and ledger is not None:  # our drain stands: what this run saw joins it
        add_events(state_dir, ledger, events, log)
    claimed = slurm_mark_of_ours(state, ledger)
    if claimed:
        import dataclasses

        state = dataclasses.replace(state, reason=ledger["reason"])
    failed = failures(verdict)
    held = {}
    # the cap decides whether to drain a node that is not drained yet; one already held (by us, or by
    # anyone) is left to the ownership rules
    in_service = state is None or not (state.drained or state.down)
    if failed and settings.on_fail(context) == "drain" and in_service:
        held = _capped(node, sorted({check for check, _, _ in failed}), backend, settings, log,
                       domain() if domain is not None else None)
    if held:
        kept = [f for f in failed if f[0] not in held]
        verdict.findings.append(_cap_finding(held, "not drained for these" if kept else "not drained"))
        log(f"{context} on {node}: held back by the drain cap: {', '.join(sorted(held))}")
        if not kept:
            return Decision("none", None, f"held back by the drain cap ({', '.join(sorted(held))})",
                            tuple(sorted(held)))
    decision = decide(context, _only(verdict, held), state, settings, run_id)
    if held:
        decision = Decision(decision.action, decision.reason, decision.why, tuple(sorted(held)))
    if claimed and decision.action == "none" and decision.reason and verdict.failing:
        decision = Decision("drain", make_reason_multi([f for f in failed if f[0] not in held], short_run(run_id)),
                            "drained by our prolog; our reason restored over Slurm's", decision.held)
    if decision.action == "none":
        return decision
    if before_act is not None:
        try:
            before_act(decision)
        except Exception as exc:  # noqa: BLE001 - never stops the action
            log(f"{context} on {node}: before the {decision.action}: {type(exc).__name__}: {exc}")
    try:
        if decision.action == "drain":
            backend.drain(node, decision.reason)
        else:
            backend.resume(node)
    except SlurmUnreachable as exc:
        _queue(state_dir, node, decision, run_id, log, events if decision.action == "drain" else None)
        return Decision(decision.action, decision.reason,
                        f"{decision.why}; queued: slurmctld unreachable ({exc})", decision.held)
    except SlurmError as exc:
        log(f"{decision.action} of {node} refused by Slurm: {exc}")
        return Decision("none", decision.reason, f"{decision.action} refused: {exc}", decision.held)
    queued = _superseded(state_dir, node, decision.action, log)
    if decision.action == "drain":
        remember_drain(state_dir, decision.reason, context,
                       [e for item in queued for e in item.events] + list(events or []), log)
    else:
        end_ledger(state_dir, read_ledger(state_dir, log), "resumed by us", log)
    return decision


def _superseded(state_dir: str, node: str, action: str, log: Log) -> list:
    """After our ``action`` on ``node`` was confirmed: the actions queued for it earlier, removed from
    the queue (each logged). Nothing queued: one ``stat``."""
    if not os.path.exists(os.path.join(state_dir, "pending-actions.jsonl")):
        return []
    from .pending import PendingError, supersede

    try:
        gone = supersede(state_dir, node)
    except PendingError as exc:
        log(f"queued actions of {node} not superseded ({exc}): the next run re-checks them")
        return []
    for item in gone:
        log(f"queued {item.action} of {node} (decided {item.created_at}) superseded by our {action}"
            + (f"; its {len(item.events)} kernel events join the drain" if action == "drain" and item.events else ""))
    return gone


def _only(verdict: Verdict, held: dict) -> Verdict:
    """``verdict`` without the FAILs of the checks the drain cap holds back (for the policy)."""
    if not held:
        return verdict
    import dataclasses

    from ..core.model import Status

    return dataclasses.replace(verdict, findings=[f for f in verdict.findings
                                                  if not (f.status is Status.FAIL and f.check in held)])


def _queue(state_dir: str, node: str, decision: Decision, run_id: str, log: Log,
           events: list[str] | None = None) -> None:
    from ..core.clock import utc_now_iso
    from .pending import PendingAction, PendingError, bounded_events, queue

    try:
        make_private(state_dir)
    except OSError:
        pass  # queue() names the path and the error
    try:
        queue(state_dir, PendingAction(node, decision.action, decision.reason, utc_now_iso(), run_id,
                                       bounded_events(events)))
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
    from ..spool.entries import action_record, run_record
    from ..spool.store import SpoolError, encode
    from ..spool.append import append_line

    records = [run_record(verdict, run_id, job_id, config_path)]
    if decision.action != "none":
        from ..core.clock import utc_now_iso

        records.append(action_record(run_id, verdict.node, decision.action, decision.reason, time=utc_now_iso(),
                                     job_id=job_id, context=verdict.context, why=decision.why,
                                     checks=sorted({f.check for f in verdict.failing})))
    try:
        make_private(spool_dir)
    except OSError:
        pass  # append() reports it
    # a healthy run with no action is not fsync'ed (5-10 ms before every job); failures and actions are
    durable = decision.action != "none" or verdict.status.value not in ("pass", "skip", "warn")
    for rec in records:
        try:
            append_line(spool_dir, encode(rec), durable=durable)
        except (SpoolError, ValueError, OSError) as exc:
            log(f"spool not written ({exc}); run {run_id} is only in this log")
            return
