"""The readiness report as Markdown (GitHub flavour): the same sections as the HTML, tables, no plots.

Strings from the data go through :func:`md`: one line, ``|`` and Markdown/HTML specials escaped, so a
hostile node name or message cannot break a table or inject markup into a rendered page.
"""
from __future__ import annotations

import re
from typing import Any

from .human import duration_h, num, rate, when, when_utc
from .model import NODE_STATES, STATE_LABELS, Report

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


_CELL = re.compile(r"([\\`*~|<>])")


def cell(value: Any) -> str:
    """A table cell of data: one line; escaped only what a cell needs: ``|`` (a new column), ``\\`` (that
    escape itself), ``< >`` and ``&`` (markup), backticks, ``*`` and ``~`` (spans that could swallow
    text), and ``](`` (a link); a folded node set (``gpu[001-004,007]``) stays as Slurm takes it."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    text = "".join(ch if ch >= " " else "?" for ch in text).replace("&", "&amp;")
    return _CELL.sub(r"\\\1", text).replace("](", "]\\(")


def _table(headers: list[str], rows: list[list[Any]], what: str, cap: int = MAX_ROWS) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[:cap]]
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
        ["node", "kind", "metric / check", "measured", "runs"], rows, "evidence rows",
        FLEET_ROWS)


def _trends(r: Report) -> list[str]:
    from . import fleetsection as fsec

    if not r.fleet_tables:
        return []
    out = ["## Fleet trends", ""]
    for name, label, cols in fsec.TABLES:
        rows = r.fleet_tables.get(name, [])
        out += [f"### {label}", ""]
        note = r.fleet_notes.get(name, "")
        if note:
            out += [md(note[:1].upper() + note[1:]) + ".", ""]
        out += _table([h for _, h in cols], [[fsec.cell(x.get(c), c) for c, _ in cols] for x in rows], "rows",
                      FLEET_ROWS) if rows else ([] if note else ["None." if name not in ("versions", "drift") else
                                                                 "No version data (the history database has none).",
                                                                 ""])
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
                        [[f.check, f.node, when(f.started_at), f.status, f.results,
                          "; ".join(f"{d['component'] or '-'}: {d['message']}" for d in f.deviations)
                          + (f"; {f.more} more" if f.more else "")] for f in c.fabric], "checks")
    if c.drills:
        stages = ("detect_s", "drain_s", "requeue_s", "resume_s")
        lines += ["### Fault drills: mean seconds per stage", ""]
        lines += _table(["drill", "runs", "failed", "detect s", "drain s", "requeue s", "resume s", "time to detect",
                         "latest"],
                        [[d.drill, d.runs, d.failed] + [f"{d.mean_s[s]:.2f}" if s in d.mean_s else "-" for s in stages]
                         + [d.detect_text, when(d.last_at)] for d in c.drills], "drills")
    from .readiness import markdown_lines  # readiness, consistency, pair bandwidth matrices

    return lines + markdown_lines(c)


def _training(r: Report) -> list[str]:
    """The acceptance figures of the latest training run and the ready/blocked line (report/training.py)."""
    from .training import HEADERS, finish, rows

    t = r.training if r.training is not None else finish(None, None, r.until)
    return (["## Training readiness", "", f"**{md(t.line)}**", ""] + _table(HEADERS, rows(t), "figures")
            + [md(t.curve_note) + ".", ""])


def _findings(r: Report) -> list[str]:
    """Grouped as the HTML: one row per check (or metric), status and action; the nodes folded as Slurm
    takes them; the example the group's worst case (report/groups.py)."""
    from .fold import fold
    from .groups import finding_groups

    lines = [f"## Findings and recommended actions ({len(r.findings):,})", ""]
    if not r.findings:
        return lines + ["Nothing to act on.", ""]
    groups = finding_groups(r)
    lines += [f"{len(groups):,} groups: one row per check (or metric) and recommended action; the nodes folded "
              "(ClusterShell node sets, as Slurm takes them); the example is the worst case.", ""]
    return lines + _table(["status", "kind", "check / metric", "nodes", "which", "components", "example",
                           "recommended action"],
                          [[g["status"], g["kind"], g["subject"], f"{len(g['nodes']):,}", fold(g["nodes"]),
                            ", ".join(sorted(g["components"])[:8]) + (f" (+{len(g['components']) - 8})"
                                                                      if len(g["components"]) > 8 else ""),
                            g["example"] + (f" (+{g['count'] - 1} more)" if g["count"] > 1 else ""), g["action"]]
                           for g in groups], "groups")


def _risks(r: Report) -> list[str]:
    from .html import why_cells
    from .shared import risk_rows

    lines = ["## Nodes ranked by risk", ""]
    if not r.risks:
        return lines + ["No node shows a risk.", ""]
    if not any(x.why for x in r.risks):
        return lines + _table(["node", "risk", "state", "class", "evidence"],
                              [[x.node, num(x.score), STATE_LABELS.get(x.state, x.state), x.node_class,
                                "; ".join(x.evidence)] for x in r.risks], "nodes")
    rows = []
    for x in risk_rows(r):
        kind, subject, what, runs = why_cells(x["why"]) if x["why"] else [""] * 4
        node = f"{x['node']} ({x['n_nodes']:,} nodes, one cause)" if x["group"] else x["node"]
        rows.append([x["rank"], node, num(x["score"]), STATE_LABELS.get(x["state"], x["state"]),
                     "shared cause" if x["group"] else kind, subject, what, runs,
                     x["text"] + (f" (+{x['more']} more)" if x["more"] else "")])
    return lines + _table(["#", "node", "risk", "state", "why", "metric / check", "measured", "runs", "evidence"],
                          rows, "rows")


def render_markdown(report: Report) -> str:
    r = report
    lines = ["# Cluster readiness report", ""]
    if r.stale:  # first thing: every count below is as old as the newest record
        lines += [f"> **{md(r.stale)}**", ""]
    lines += [f"Window {when_utc(r.since)} to {when_utc(r.until)}; generated {when_utc(r.generated_at)}; "
              f"{r.counts.get('nodes', 0):,} nodes, {r.counts.get('runs', 0):,} runs, "
              f"{r.counts.get('metrics', 0):,} metric samples, {r.counts.get('actions', 0):,} actions.", ""]
    lines += [f"> {md(n)}" for n in r.notes] + ([""] if r.notes else [])
    lines += ["## Fleet summary", ""]
    from .fold import fold

    lines += _table(["state", "nodes", "which"],
                    [[STATE_LABELS[s], f"{r.fleet.counts.get(s, 0):,}", "" if s == "ready" else
                      fold(r.fleet.nodes.get(s, []))] for s in NODE_STATES], "states")
    if r.empty:
        return "\n".join(lines)
    lines += _findings(r)
    lines += ["## Failing checks, ranked", ""]
    lines += _table(["check", "nodes failing now", "fail results", "warn results", "last message", "action"],
                    [[c.check, f"{c.nodes_failing_now:,}", f"{c.fail_results:,}", f"{c.warn_results:,}",
                      c.last_message, c.action] for c in r.checks], "checks") if r.checks \
        else ["No check failed or warned.", ""]
    lines += _risks(r)
    lines += _why(r) + _trends(r)
    lines += ["## Performance distributions", ""]
    lines += _table(["metric", "values", "p5", "median", "p95", "outliers"],
                    [[d.metric, f"{d.count:,}", num(d.p5), num(d.median), num(d.p95),
                      ", ".join(f"{o['node']} {o['component']} {num(o['value'])}" for o in d.outliers[:10])]
                     for d in r.distributions], "metrics") if r.distributions else ["No performance metric.", ""]
    lines += ["## Error counter growth", ""]
    lines += _table(["node", "component", "counter", "increase", "rate", "now"],
                    [[g.node, g.component, g.metric, num(g.increase), rate(g.rate_per_h), num(g.last)]
                     for g in r.growth], "counters") if r.growth else ["No error counter grew.", ""]
    lines += ["## Drains", ""]
    lines += _table(["node", "drains", "drained for", "still drained", "flapping", "last reason"],
                    [[d.node, d.drains, duration_h(d.drained_hours), "yes" if d.open else "no",
                      "yes" if d.flapping else "", d.last_reason] for d in r.drains], "nodes") \
        if r.drains else ["No drain recorded.", ""]
    lines += _commissioning(r)
    lines += _training(r)
    lines += [f"_Analyses: {md(r.source)}_", ""]
    return "\n".join(lines)
