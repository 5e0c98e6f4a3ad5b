"""The sweep's outcome as text for a terminal or a cron mail."""
from __future__ import annotations

from ..output.render import clean


def render(outcome) -> str:
    d = outcome.to_dict()
    head = "sweep plan (dry run: nothing changed)" if d["dry_run"] else f"sweep {d['sweep_id'] or '-'}"
    lines = [head]
    plan = d["plan"]
    if plan["test"]:
        lines.append("test: " + ", ".join(f"{t['node']}{' (ours)' if t['ours'] else ''}" for t in plan["test"]))
    if plan["over_budget"]:
        lines.append(f"left for a later sweep (max_nodes): {', '.join(plan['over_budget'])}")
    for node, why in sorted(plan["skipped"].items()):
        lines.append(f"  skip {node}: {clean(why)}")
    for node, status in sorted(d["results"].items()):
        lines.append(f"{node}: {status.upper()}")
    for a in d["applied"] or d["actions"]:
        if a["action"] != "none":
            done = "" if a.get("applied", True) else " (not applied)"
            lines.append(f"  {a['action']} {a['node']}{done}: {clean(a['reason'] or '')} — {clean(a['why'])}")
        elif a["why"].startswith("failed only suspect"):
            lines.append(f"  kept {a['node']} in service: {clean(a['why'])}")
    for check, why in sorted(d["suspect"].items()):
        lines.append(f"SUSPECT {clean(why)}")
    fleet = d.get("fleet") or {}
    lines += [f"version drift: {clean(line)}" for line in fleet.get("drift", [])]
    for row in fleet.get("facility", []):
        lines.append(f"FACILITY {row['level']} {row['group']}: {row['kind']} on {row['n_nodes']} of "
                     f"{row['group_size']} nodes ({clean(row['nodes'])}): one shared cause, not node faults")
    for row in fleet.get("domain_faults", []):
        lines.append(f"DOMAIN FAULT {clean(row['text'])}")
    lines += [f"note: {clean(n)}" for n in d["notes"]]
    if d["report"]:
        lines.append(f"report: {d['report']}")
    return "\n".join(lines)
