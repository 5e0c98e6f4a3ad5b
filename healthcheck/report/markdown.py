"""The readiness report as Markdown (GitHub flavour): the same sections as the HTML, tables, no plots.

Strings from the data go through :func:`md`: one line, ``|`` and Markdown/HTML specials escaped, so a
hostile node name or message cannot break a table or inject markup into a rendered page.
"""
from __future__ import annotations

import re
from typing import Any

from .model import NODE_STATES, STATE_LABELS, Report, iso

MAX_ROWS = 200
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")


def md(value: Any) -> str:
    """One-line Markdown-safe text of a value from the data."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    text = "".join(ch if ch >= " " else "?" for ch in text)
    return _SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")


def _table(headers: list[str], rows: list[list[Any]], what: str) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        out.append(f"\n{len(rows) - MAX_ROWS} more {what} not shown (see --format json).")
    return out + [""]


def render_markdown(report: Report) -> str:
    r = report
    lines = ["# Cluster readiness report", "",
             f"Window {iso(r.since)} to {iso(r.until)}; generated {iso(r.generated_at)}; "
             f"{r.counts.get('nodes', 0)} nodes, {r.counts.get('runs', 0):,} runs, "
             f"{r.counts.get('metrics', 0):,} metric samples, {r.counts.get('actions', 0):,} actions.", ""]
    lines += [f"> {md(n)}" for n in r.notes] + ([""] if r.notes else [])
    lines += ["## Fleet summary", ""]
    lines += _table(["state", "nodes", "which"],
                    [[STATE_LABELS[s], r.fleet.counts.get(s, 0), "" if s == "ready" else
                      ", ".join(r.fleet.nodes.get(s, [])[:60])] for s in NODE_STATES], "states")
    if r.empty:
        return "\n".join(lines)
    lines += [f"## Findings and recommended actions ({len(r.findings)})", ""]
    lines += _table(["node", "kind", "check / metric", "component", "status", "detail", "recommended action"],
                    [[f.node, f.kind, f.subject, f.component, f.status, f.detail, f.action] for f in r.findings],
                    "findings") if r.findings else ["Nothing to act on.", ""]
    lines += ["## Failing checks, ranked", ""]
    lines += _table(["check", "nodes failing now", "fail results", "warn results", "last message", "action"],
                    [[c.check, c.nodes_failing_now, c.fail_results, c.warn_results, c.last_message, c.action]
                     for c in r.checks], "checks") if r.checks else ["No check failed or warned.", ""]
    lines += ["## Nodes ranked by risk", ""]
    lines += _table(["node", "risk", "state", "class", "evidence"],
                    [[x.node, f"{x.score:g}", STATE_LABELS.get(x.state, x.state), x.node_class, "; ".join(x.evidence)]
                     for x in r.risks], "nodes") if r.risks else ["No node shows a risk.", ""]
    lines += ["## Performance distributions", ""]
    lines += _table(["metric", "values", "p5", "median", "p95", "outliers"],
                    [[d.metric, d.count, f"{d.p5:.4g}", f"{d.median:.4g}", f"{d.p95:.4g}",
                      ", ".join(f"{o['node']} {o['component']} {o['value']:.4g}" for o in d.outliers[:10])]
                     for d in r.distributions], "metrics") if r.distributions else ["No performance metric.", ""]
    lines += ["## Error counter growth", ""]
    lines += _table(["node", "component", "counter", "increase", "per hour", "now"],
                    [[g.node, g.component, g.metric, f"{g.increase:g}", f"{g.rate_per_h:.3g}", f"{g.last:g}"]
                     for g in r.growth], "counters") if r.growth else ["No error counter grew.", ""]
    lines += ["## Drains", ""]
    lines += _table(["node", "drains", "drained hours", "still drained", "flapping", "last reason"],
                    [[d.node, d.drains, f"{d.drained_hours:g}", "yes" if d.open else "no",
                      "yes" if d.flapping else "", d.last_reason] for d in r.drains], "nodes") \
        if r.drains else ["No drain recorded.", ""]
    lines += [f"_Analyses: {md(r.source)}_", ""]
    return "\n".join(lines)
