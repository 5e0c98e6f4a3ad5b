"""The findings grouped as every renderer shows them: one group per (kind, check or metric, status,
recommended action), its nodes and components (a floor judged by a check that other nodes fail with the
same status and action joins that check's group: kind ``check+floor``, subject ``check (metric)``), and as its example the group's WORST case (a failure
before a warning, then the greatest ``Finding.weight``: the largest growth, |z|, regression, distance
past a limit), never merely the first. Pure."""
from __future__ import annotations

from typing import Any

KIND_ORDER = {"facility": 0, "sdc": 1, "check": 2, "floor": 3, "regression": 4, "flapping": 5, "growth": 6,
              "outlier": 7, "drift": 8}
_STATUS = {"fail": 0, "error": 1, "warn": 2}


def finding_groups(report: Any) -> list[dict[str, Any]]:
    """[{kind, subject, status, action, nodes (set), components (set), example, count}], failures first,
    then by kind, then the most nodes."""
    groups: dict[tuple, dict[str, Any]] = {}
    worst: dict[tuple, tuple] = {}
    checks = {(f.subject, f.status, f.action) for f in report.findings if f.kind == "check"}
    for f in report.findings:
        key = (f.kind, f.subject, f.status, f.action)
        own = getattr(f, "check", "")
        if f.kind == "floor" and own and (own, f.status, f.action) in checks:
            # the same cause on nodes whose latest run did not run the check (a burn-in run, say): one row
            key = ("check", own, f.status, f.action)
            groups.setdefault(key, {"kind": "check", "subject": own, "status": f.status, "action": f.action,
                                    "nodes": set(), "components": set(), "example": "", "count": 0})
            if "+floor" not in groups[key]["kind"]:
                groups[key]["kind"] += "+floor"
                groups[key]["subject"] += f" ({f.subject})"
        g = groups.setdefault(key, {"kind": f.kind, "subject": f.subject, "status": f.status, "action": f.action,
                                    "nodes": set(), "components": set(), "example": "", "count": 0})
        g["nodes"].add(f.node)
        if f.component:
            g["components"].add(f.component)
        g["count"] += 1
        rank = (-float(getattr(f, "weight", 0.0) or 0.0), f.node, f.component)
        if key not in worst or rank < worst[key]:
            worst[key] = rank
            comp = f" [{f.component}]" if f.component and f.component not in f.detail else ""
            g["example"] = f"{f.node}{comp}: {f.detail}"
    out = list(groups.values())
    out.sort(key=lambda g: (_STATUS.get(g["status"], 3), KIND_ORDER.get(g["kind"].split("+")[0], 9), -len(g["nodes"]),
                            g["subject"]))
    return out
