"""Which nodes a sweep tests (pure: node states + settings -> plan).

- never a node whose reason is not ours (an admin's drain or down stays exactly as the admin left it);
- nodes we drained, first (they wait for re-qualification), when `include_ours` and a reservation
  holds them (Slurm starts no job on a drained node, so they are resumed into the sweep's MAINT
  reservation, where only the sweep's jobs run);
- then idle nodes, by name; never busy, reserved, powered-down or unresponsive ones;
- at most `max_nodes`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..slurm.nodestate import NodeState
from ..slurm.reasons import is_ours
from .settings import SweepSettings

_UNAVAILABLE = frozenset({"NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "POWER_DOWN",
                          "REBOOT_REQUESTED", "REBOOT_ISSUED", "MAINTENANCE", "RESERVED", "COMPLETING",
                          "PLANNED", "FUTURE"})


@dataclass(frozen=True)
class Candidate:
    node: str
    ours: bool               # drained by us before the sweep (resumed into the reservation to be tested)
    reason: str | None       # our reason, to put back if the test proves nothing


@dataclass
class Plan:
    test: list[Candidate] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why it is not tested
    over_budget: list[str] = field(default_factory=list)   # eligible, left for a later sweep

    def to_dict(self) -> dict:
        return {"test": [{"node": c.node, "ours": c.ours, "reason": c.reason} for c in self.test],
                "skipped": self.skipped, "over_budget": self.over_budget}


def _partitions(state: NodeState) -> set[str]:
    return set(filter(None, state.fields.get("Partitions", "").split(",")))


def make_plan(states: dict[str, NodeState], settings: SweepSettings) -> Plan:
    plan = Plan()
    ours, idle = [], []
    for name in sorted(states):
        st = states[name]
        if settings.partition and settings.partition not in _partitions(st):
            continue
        if st.reason and not is_ours(st.reason):
            plan.skipped[name] = f"reason not ours, left as set: {st.reason[:80]}"
            continue
        unavailable = sorted(st.flags & _UNAVAILABLE) or (["in a reservation"] if st.fields.get("ReservationName")
                                                          else [])
        if st.drained and st.reason and is_ours(st.reason):
            if not settings.include_ours:
                plan.skipped[name] = "drained by us; include_ours is off"
            elif not settings.reservation:
                plan.skipped[name] = "drained by us; re-testing it needs the sweep reservation (reservation = true)"
            elif st.state == "DOWN" or unavailable:
                plan.skipped[name] = f"drained by us but {st.state.lower()} {'+'.join(unavailable)}".strip()
            elif st.state != "IDLE":
                plan.skipped[name] = f"drained by us, still {st.state.lower()} (a job is finishing)"
            else:
                ours.append(Candidate(name, True, st.reason))
            continue
        if st.drained or st.state == "DOWN":
            plan.skipped[name] = f"{st.state.lower()} without a reason of ours"
        elif st.state != "IDLE":
            plan.skipped[name] = f"busy ({st.state.lower()})"
        elif unavailable:
            plan.skipped[name] = f"unavailable ({', '.join(unavailable).lower()})"
        else:
            idle.append(Candidate(name, False, None))
    eligible = ours + idle
    plan.test = eligible[:settings.max_nodes]
    plan.over_budget = [c.node for c in eligible[settings.max_nodes:]]
    return plan
