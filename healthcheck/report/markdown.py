"""The readiness report as Markdown (GitHub flavour): the same sections as the HTML, tables, no plots.

Strings from the data go through :func:`md`: one line, ``|`` and Markdown/HTML specials escaped, so a
hostile node name or message cannot break a table or inject markup into a rendered page.
"""
from __future__ import annotations

import re
from typing import Any

from .model import NODE_STATES, STATE_LABELS, Report, iso

MAX_ROWS = 200
FLEET_ROWS = 50  # rows of each fleet table and of the "why" table (the JSON and the HTML's CSVs hold all)
_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")


def md(value: Any) -> str:
    """One-line Markdown-safe text of a value from the data."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    text = "".join(ch if ch >= " " else "?" for ch in text)
    return _SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")


def _table(headers: list[str], rows: list[list[Any]], what: str, cap: int = MAX_ROWS) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows[:cap]]
    if len(rows) > cap:
        out.append(f"\n{len(rows) - cap} more {what} not shown (see --format json).")
    return out + [""]


def _why(r: Report) -> list[str]:
    """The fleet ranking's evidence rows of the ranked nodes, heaviest first per node."""
    from .html import why_cells

    rows = [[x.node, *why_cells(w)] for x in r.risks for w in x.why]
    if not rows:
        return []
    return ["### Why: the evidence of each ranked node", ""] + _table(
        ["node", "kind", "metric / check", "value", "peers / baseline", "limit", "runs"], rows, "evidence rows",
        FLEET_ROWS)


def _trends(r: Report) -> list[str]:
    from . import fleetsection as fsec

    if not r.fleet_tables:
        return []
    out = ["## Fleet trends", ""]
    for name, label, cols in fsec.TABLES:
        rows = r.fleet_tables.get(name, [])
        out += [f"### {label}", ""]
        out += _table([h for _, h in cols], [[fsec.cell(x.get(c), c) for c, _ in cols] for x in rows], "rows",
                      FLEET_ROWS) if rows else ["None." if name not in ("versions", "drift") else
                                                "No version data (the history database has none).", ""]
    return out


def _commissioning(r: Report) -> list[str]:
    """The latest fabric results (deviations named) and the drills' mean timings (report/commissioning.py)."""
    c = r.commissioning
    lines = ["## Commissioning", ""]
    if c is None or c.empty:
        return lines + ["No fabric result or fault drill recorded in the window.", ""]
    if c.fabric:
        lines += ["### Fabric: latest result per check", ""]
        lines += _table(["check", "node", "latest", "status", "results", "deviations"],
                        [[f.check, f.node, f.started_at, f.status, f.results,
                          "; ".join(f"{d['component'] or '-'}: {d['message']}" for d in f.deviations)
                          + (f"; {f.more} more" if f.more else "")] for f in c.fabric], "checks")
    if c.drills:
        stages = ("detect_s", "drain_s", "requeue_s", "resume_s")
        lines += ["### Fault drills: mean seconds per stage", ""]
        lines += _table(["drill", "runs", "failed", "detect s", "drain s", "requeue s", "resume s", "time to detect",
                         "latest"],
                        [[d.drill, d.runs, d.failed] + [f"{d.mean_s[s]:.2f}" if s in d.mean_s else "-" for s in stages]
                         + [d.detect_text, d.last_at] for d in c.drills], "drills")
    from .readiness import markdown_lines  # readiness, consistency, pair bandwidth matrices

    return lines + markdown_lines(c)


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
    lines += _why(r) + _trends(r)
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
    lines += _commissioning(r)
    lines += [f"_Analyses: {md(r.source)}_", ""]
    return "\n".join(lines)
