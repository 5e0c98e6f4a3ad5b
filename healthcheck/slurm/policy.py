"""What to do with a verdict in a Slurm context: drain, resume or nothing. Pure.

Ownership rules (after LBNL NHC's node-mark-offline / node-mark-online):
- we drain only with our own reason prefix, and never replace a reason that is not ours;
- we resume only nodes whose reason is ours, only from HealthCheckProgram runs (slurm-check), and only
  when the run found no FAIL and no ERROR (a checker that could not judge proves nothing);
- a node down or drained by an admin (any reason not ours) stays exactly as the admin left it;
- ERROR (the checker broke) never drains; FAIL does, unless the context's on_fail is "warn".
"""
from __future__ import annotations

from ..core.struct import record as dataclass
TYPE_CHECKING = False  # typing is not imported on the hot path

from ..core.model import Status, Verdict
from .reasons import is_ours, make_reason_multi, without_run
from ..config.slurm_settings import SlurmSettings

if TYPE_CHECKING:
    from .nodestate import NodeState


@dataclass(frozen=True)
class Decision:
    action: str  # "drain" | "resume" | "none"
    reason: str | None  # the reason to set (drain) or the one we clear (resume)
    why: str  # one line for logs and the action record
    held: tuple[str, ...] = ()  # failing checks the drain cap held back (not drained for)


def short_run(run_id: str | None) -> str | None:
    """The run tag in a drain reason: enough of the run id to find the run in the history."""
    return run_id[:12] if run_id else None


def failures(verdict: Verdict) -> list[tuple[str, str | None, str]]:
    return [(f.check, f.component, f.message) for f in verdict.findings if f.status is Status.FAIL]


def decide(context: str, verdict: Verdict, state: NodeState | None, settings: SlurmSettings,
           run_id: str | None = None) -> Decision:
    """``state`` None: slurmctld could not be asked; a drain is still decided (and queued)."""
    failed = failures(verdict)
    foreign = state is not None and bool(state.reason) and not is_ours(state.reason)
    if failed:
        if settings.on_fail(context) == "warn":
            return Decision("none", None, f"{len(failed)} checks failed; on_fail=warn for {context}")
        if foreign:
            return Decision("none", None, f"{len(failed)} checks failed but the node's reason is not ours "
                                          f"({state.reason!r}): left as the admin set it")
        unjudged = sum(1 for f in verdict.findings if f.status is Status.ERROR)
        reason = make_reason_multi(failed, short_run(run_id), unjudged)
        if state is not None and state.drained and without_run(state.reason) == without_run(reason):
            return Decision("none", reason, "already drained by us for the same reason")
        return Decision("drain", reason, f"{len(failed)} checks failed")
    if context != "slurm-check" or not settings.resume:
        return Decision("none", None, "healthy" if verdict.status is not Status.ERROR else "no failure")
    if state is None or not (state.drained or state.down) or not is_ours(state.reason):
        return Decision("none", None, "healthy")
    errors = [f.check for f in verdict.findings if f.status is Status.ERROR]
    if errors:
        return Decision("none", state.reason, f"drained by us; not resumed: checks could not judge "
                                              f"({', '.join(sorted(set(errors))[:5])})")
    return Decision("resume", state.reason, "drained by us and healthy again")
