"""What the sweep does with its results (pure: per-node burn-in verdicts -> actions).

- a node that FAILs is drained with our reason naming the checks and the sweep's run id;
- a node we had drained that now passes stays resumed ("resume" is recorded); one whose test proved
  nothing (no result, an ERROR) is put back as it was, with its old reason;
- **blast radius**: when one check fails on more nodes than the cap (``max_drain_fraction`` of the
  nodes considered, at least one, and at most ``max_drain_nodes`` when set) — counting the nodes this
  sweep found failing it and the nodes already drained by us for it (prolog, slurm-check, earlier
  sweeps) — that check is "suspect": no node is drained for it alone, and the sweep says so loudly.
  A config error deployed everywhere therefore drains nothing.
- **facility issues**: a node whose thermal/power failures are shared with its rack, chassis or power
  group in the same window (``facility``, from sweep/fleet.py) is not drained for those checks: one
  cooling or power fault is reported once, not as N node faults.
- **NVLink domain faults**: a node whose NVLink-fabric failures (gpu.fabric, gpu.nvlink.*, nvlink.imex,
  SXid) are shared by more than half of its declared NVLink domain (``domain_faults``, from
  sweep/fleet.py) is not drained for them, nor are they counted against the blast radius: the domain's
  switch trays or backplane are named once, not 17 trays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from ..core.model import Finding, Status
from ..policies.nvldomain import fabric_cause
from ..slurm.policy import short_run
from ..slurm.reasons import make_reason_multi
from .fleet import FACILITY_CHECKS
from .settings import SweepSettings


@dataclass
class NodeResult:
    node: str
    status: Status                    # the node's burn-in verdict; ERROR when it left no result
    findings: list[Finding]
    ours_before: bool = False
    prior_reason: str | None = None


@dataclass
class Action:
    node: str
    action: str                       # "drain" | "resume" | "restore" (our old drain put back) | "none"
    reason: str | None
    why: str
    checks: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"node": self.node, "action": self.action, "reason": self.reason, "why": self.why,
                "checks": self.checks}


@dataclass
class Decisions:
    actions: list[Action]
    suspect: dict[str, str]           # check -> why it is suspect

    @property
    def flagged(self) -> bool:
        return bool(self.suspect)


def cap_for(total: int, settings: SweepSettings) -> int:
    cap = max(1, math.floor(settings.max_drain_fraction * total))
    return min(cap, settings.max_drain_nodes) if settings.max_drain_nodes else cap


def decide(results: dict[str, NodeResult], drained_by_us: dict[str, str], total_nodes: int,
           settings: SweepSettings, run_id: str, facility: set[str] = frozenset(),
           domain_faults: Sequence[dict] = ()) -> Decisions:
    """``drained_by_us``: node -> reason, for the nodes outside this sweep that carry our reason now;
    ``total_nodes``: the nodes the limit is a share of (the partition, or the cluster)."""
    held: dict[str, set[str]] = {}  # node -> the fabric causes its NVLink domain shares
    for row in domain_faults:
        for node in row["nodes"]:
            held.setdefault(node, set()).add(row["cause"])

    def domain_held(node: str, f: Finding) -> bool:
        return node in held and fabric_cause(f.check, f.metrics) in held[node]

    failing = {n: sorted({f.check for f in r.findings if f.status is Status.FAIL and not domain_held(n, f)})
               for n, r in results.items() if r.status is Status.FAIL}
    cap = cap_for(total_nodes, settings)
    suspect: dict[str, str] = {}
    for check in sorted({c for checks in failing.values() for c in checks}):
        new = [n for n, checks in failing.items() if check in checks and not results[n].ours_before]
        before = [n for n, reason in drained_by_us.items() if n not in results and check in reason]
        if len(new) + len(before) > cap:
            suspect[check] = (f"{check} failed on {len(new)} node(s) in this sweep, {len(before)} already drained by "
                              f"us for it: more than the cap of {cap} of {total_nodes}: suspect check or shared cause")
    actions = []
    for node, r in sorted(results.items()):
        if r.status is Status.FAIL:
            bad = [f for f in r.findings if f.status is Status.FAIL]
            kept = bad if r.ours_before else [f for f in bad if f.check not in suspect and not (
                node in facility and f.check in FACILITY_CHECKS) and not domain_held(node, f)]
            if kept:
                reason = make_reason_multi([(f.check, f.component, f.message) for f in kept], short_run(run_id))
                actions.append(Action(node, "drain", reason, f"{len(kept)} burn-in checks failed",
                                      sorted({f.check for f in kept})))
            elif all(domain_held(node, f) or f.check in suspect or (node in facility and f.check in FACILITY_CHECKS)
                     for f in bad) and any(domain_held(node, f) for f in bad):
                actions.append(Action(node, "none", None, "NVLink fabric failures shared with its NVLink domain: "
                                      "reported as the domain's fault", sorted({f.check for f in bad})))
            elif node in facility and all(f.check in FACILITY_CHECKS or f.check in suspect for f in bad):
                actions.append(Action(node, "none", None, "thermal/power failures shared with its group: "
                                      "reported as a facility issue", sorted({f.check for f in bad})))
            else:
                actions.append(Action(node, "none", None, "failed only suspect checks: "
                                      + ", ".join(sorted({f.check for f in bad})), sorted({f.check for f in bad})))
        elif r.ours_before and r.status in (Status.PASS, Status.WARN, Status.SKIP):
            actions.append(Action(node, "resume", r.prior_reason, "drained by us and passed the burn-in"))
        elif r.ours_before:
            actions.append(Action(node, "restore", r.prior_reason, "drained by us; the burn-in proved nothing "
                                  f"({r.status.value}): put back as it was"))
        else:
            actions.append(Action(node, "none", None, f"burn-in {r.status.value}"))
    return Decisions(actions, suspect)
