"""The readiness report as plain data: what every renderer (HTML, markdown, JSON) shows. No pandas here.

``Report.to_dict()`` is the JSON form (``healthcheck report --format json``); times are ISO-8601 UTC
strings, every other value a str/int/float/bool/None/list/dict. Plot data (``Distribution.points``,
``Report.growth_points``, ``Report.intervals``) is kept for the HTML plots and left out of the dict,
except the outliers and the drain intervals, which are findings in their own right.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

NODE_STATES = ("ready", "drained_ours", "drained_others", "failing", "unknown")
STATE_LABELS = {"ready": "ready", "drained_ours": "drained by us", "drained_others": "drained by others",
                "failing": "failing", "unknown": "unknown"}


def iso(t: Any) -> str | None:
    """ISO-8601 UTC text of a datetime/Timestamp (None stays None)."""
    if t is None:
        return None
    try:
        if t != t:  # NaT
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(t, "isoformat"):
        return t.isoformat().replace("+00:00", "Z")
    return str(t)


@dataclass
class FleetSummary:
    """How many nodes are in each state; ``slurm_known`` False: drains inferred from our own actions."""
    counts: dict[str, int]
    nodes: dict[str, list[str]]
    slurm_known: bool

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class CheckRank:
    check: str
    fail_results: int
    warn_results: int
    nodes_failing_now: int
    nodes: list[str]  # nodes whose latest run fails this check (first few)
    last_seen: datetime | None
    last_message: str
    action: str


@dataclass
class NodeRisk:
    node: str
    score: float
    state: str
    node_class: str
    evidence: list[str]
    # the fleet ranking's evidence rows (kind, check, component, metric, value, peer_median = the peers' median
    # or the unit's own baseline, limit, hits, runs, severity, persistent, points, text); empty without it
    why: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Finding:
    """One thing to act on: a failing/warning check now, a growing counter, or a performance outlier."""
    kind: str  # "facility" | "sdc" | "check" | "floor" | "regression" | "flapping" | "growth" | "outlier" | "drift"
    node: str
    subject: str  # the check, or the metric name
    component: str
    status: str  # fail | warn | error (the checker could not judge: what to do next in ``action``)
    detail: str
    seen: datetime | None
    action: str
    # how bad, to pick a group's worst case: the growth, |z|, % off the own baseline, distance past
    # the limit, drain/resume cycles; the ranking's points for a check (0 when not known)
    weight: float = 0.0
    # a floor's check (the rule it is judged by, e.g. gpu.pcie.link for pcie_width): grouped with that
    # check's failures where they share status and action (report/groups.py)
    check: str = ""


@dataclass
class Distribution:
    metric: str
    low_is_bad: bool
    count: int
    median: float
    p5: float
    p95: float
    outliers: list[dict[str, Any]]  # node, component, value, z, peer_group
    points: Any = None  # DataFrame (node, component, value, outlier) for the plot; not serialised


@dataclass
class Growth:
    node: str
    component: str
    metric: str
    increase: float
    rate_per_h: float
    last: float
    first_at: datetime | None
    last_at: datetime | None


@dataclass
class DrainStat:
    node: str
    drains: int
    drained_hours: float
    open: bool
    last_reason: str
    flapping: bool


@dataclass
class Report:
    generated_at: datetime
    since: datetime
    until: datetime
    counts: dict[str, int]  # runs, results, metrics, actions, nodes
    fleet: FleetSummary
    checks: list[CheckRank] = field(default_factory=list)
    risks: list[NodeRisk] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    distributions: list[Distribution] = field(default_factory=list)
    growth: list[Growth] = field(default_factory=list)
    drains: list[DrainStat] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    growth_points: Any = None  # DataFrame for the counter-growth plot
    intervals: Any = None  # DataFrame (node, start, end, open, reason) for the drain timeline
    fleet_days: Any = None  # DataFrame (day, one count per fleetstate.STATES) for the fleet-state plot
    config_hash: str | None = None  # of the config the report was made with (set by the caller), for the footer
    # report/fleetsection.py: {table name: records} (regressions, new-nodes, mtbf-check, mtbf-component,
    # versions, drift); plain values, times as ISO text; empty without the fleet ranking's inputs
    fleet_tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    commissioning: Any = None  # report.commissioning.Commissioning: latest fabric results, drill timings
    # {fleet table name: why it is empty for want of history} (fleetsection.table_notes); no note: "none"
    fleet_notes: dict[str, str] = field(default_factory=dict)
    newest_record: datetime | None = None  # the window's newest run or drain/resume record
    stale: str = ""  # the history stopped before the window's end: what the page says first ("" when fresh)
    # a cause shared by a group of nodes (a rack, or adjacent names without [topology]): group, kind,
    # subject, nodes, n_nodes, score, text; the risk table shows each as one row (report/shared.py)
    shared_causes: list[dict[str, Any]] = field(default_factory=list)
    training: Any = None  # report.training.Training: the acceptance figures of the latest training run

    @property
    def empty(self) -> bool:
        return self.counts.get("runs", 0) == 0 and self.counts.get("actions", 0) == 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: plain types only, times as ISO text."""
        intervals = []
        if self.intervals is not None:
            for row in self.intervals.itertuples(index=False):
                intervals.append({"node": row.node, "start": iso(row.start), "end": iso(row.end),
                                  "open": bool(row.open), "reason": row.reason})
        return {
            "generated_at": iso(self.generated_at), "since": iso(self.since), "until": iso(self.until),
            "empty": self.empty, "counts": dict(self.counts), "source": self.source, "notes": list(self.notes),
            "fleet": {"counts": dict(self.fleet.counts), "nodes": {k: list(v) for k, v in self.fleet.nodes.items()},
                      "slurm_known": self.fleet.slurm_known, "total": self.fleet.total},
            "checks": [{**_plain(c.__dict__), "last_seen": iso(c.last_seen)} for c in self.checks],
            "risks": [_plain(r.__dict__) for r in self.risks],
            "findings": [{**_plain(f.__dict__), "seen": iso(f.seen)} for f in self.findings],
            "distributions": [{k: _plain(v) for k, v in d.__dict__.items() if k != "points"}
                              for d in self.distributions],
            "growth": [{**_plain(g.__dict__), "first_at": iso(g.first_at), "last_at": iso(g.last_at)}
                       for g in self.growth],
            "drains": [_plain(d.__dict__) for d in self.drains],
            "drain_intervals": intervals,
            "fleet_days": fleet_days(self.fleet_days),
            "fleet_tables": {k: [_plain(r) for r in v] for k, v in self.fleet_tables.items()},
            "commissioning": _plain(self.commissioning.to_dict()) if self.commissioning is not None else None,
            "fleet_table_notes": dict(self.fleet_notes),
            "newest_record": iso(self.newest_record), "stale": self.stale,
            "finding_groups": finding_groups(self),
            "shared_causes": [_plain(c) for c in self.shared_causes],
            "training": _plain(self.training.to_dict()) if self.training is not None else None,
        }


def finding_groups(report: "Report") -> list[dict[str, Any]]:
    """The findings grouped as every renderer shows them (``report.groups.finding_groups``), with the
    nodes folded (``gpu[001-004,007]``, as Slurm takes them): the JSON form."""
    from .fold import fold
    from .groups import finding_groups as groups

    return [{"status": g["status"], "kind": g["kind"], "subject": g["subject"], "action": g["action"],
             "n_nodes": len(g["nodes"]), "nodes": fold(g["nodes"]), "components": sorted(g["components"]),
             "findings": g["count"], "example": g["example"]} for g in groups(report)]


def fleet_days(df: Any) -> list[dict[str, Any]]:
    """The fleet state per day as JSON records (``report.fleetstate.to_records``)."""
    from .fleetstate import to_records

    return to_records(df)


def _plain(value: Any) -> Any:
    """numpy scalars -> Python; containers recursively; non-finite floats -> None (valid JSON)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, datetime):
        return iso(value)
    return value
