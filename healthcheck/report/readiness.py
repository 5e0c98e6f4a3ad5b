"""Readiness: one verdict per node and one for the cluster, and the commissioning section's matrices
(RDMA pair heatmap, NVLink/P2P matrix per node) and consistency table, as HTML (inline SVG) and Markdown.

A node is **blocked** by any of (each named in its verdict):

- failing checks: the report's ``check`` findings with status fail whose node is this one (a burn-in
  job's per-node findings, component = the node, count for that node); ``fabric.*`` and ``drill.*``
  results are judged below instead;
- fabric: a failing latest ``fabric.*`` result on its ports (a deviation whose component is
  ``NODE/HCA/PORT``: topology, port counters) or of its own ``fabric node`` run (``fabric.node.*``);
- odd software: an item of the latest consistency run on which it holds an odd value;
- drills: a drill whose latest run on it failed.

The cluster is **ready** when no node is blocked and nothing else blocks it: switch or tier deviations
(a failing ``fabric.*`` deviation naming no node port) and low pairs of the latest RDMA phase; else its
verdict lists the blockers with their counts. Pure: the section and the report's findings in, plain data out.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Iterable

JOB_CHECKS = ("burnin.rdma", "burnin.localise", "burnin.gemm.fleet", "burnin.result", "fabric.counters")
MAX_NODES_DRAWN = 32  # nodes per heatmap side; a larger allocation shows its low pairs in the table only
MAX_BLOCKERS = 12  # reasons named per node (the count says how many)
CELL = 22


@dataclass
class NodeReadiness:
    node: str
    ready: bool
    blockers: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # the blocker kinds, for the cluster's counts


@dataclass
class Readiness:
    nodes: list[NodeReadiness] = field(default_factory=list)
    cluster_blockers: dict[str, int] = field(default_factory=dict)  # kind -> count

    @property
    def ready(self) -> bool:
        return not self.cluster_blockers

    @property
    def verdict(self) -> str:
        if self.ready:
            return "ready"
        return "blocked: " + ", ".join(f"{k} {n}" for k, n in self.cluster_blockers.items())

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": {"ready": self.ready, "verdict": self.verdict, "blockers": dict(self.cluster_blockers)},
                "nodes": [{"node": n.node, "ready": n.ready, "blockers": list(n.blockers)} for n in self.nodes]}


def _expand(nodes: str) -> list[str]:
    if not nodes:
        return []
    try:
        from ClusterShell.NodeSet import NodeSet

        return list(NodeSet(nodes))
    except Exception:  # noqa: BLE001 - a value that is no node set: the text itself names the node
        return [nodes]


def assess(c: Any, findings: Iterable[Any], nodes: Iterable[str]) -> Readiness:
    """The verdicts from the section ``c`` (report/commissioning.py), the report's findings and the
    fleet's nodes (a node of the commissioning rows only is judged too)."""
    reasons: dict[str, list[tuple[str, str]]] = {str(n): [] for n in nodes}
    cluster: dict[str, int] = {}

    def block(node: str, kind: str, text: str) -> None:
        reasons.setdefault(node, []).append((kind, text))

    for f in findings:
        if f.kind != "check" or f.status != "fail" or f.subject.startswith(("fabric.", "drill.")):
            continue
        node = f.component if f.subject in JOB_CHECKS and f.component in reasons else f.node
        block(node, "failing checks", f"check {f.subject}" + (f" [{f.component}]" if f.component else ""))
    for fl in c.fabric:
        if fl.status not in ("fail", "error") or fl.check == "fabric.consistency":
            continue
        if fl.check.startswith("fabric.node."):
            block(fl.node, "fabric deviations", f"{fl.check}: {fl.status}")
            continue
        for d in fl.deviations:
            if d["status"] not in ("fail", "error"):
                continue
            parts = (d["component"] or "").split("/")
            if len(parts) == 3:  # NODE/HCA/PORT
                block(parts[0], "fabric deviations", f"{fl.check} {d['component']}: {d['message'][:80]}")
            else:
                cluster["switch/tier deviations"] = cluster.get("switch/tier deviations", 0) + 1
        if fl.more:  # beyond the 50 named per check: counted, their nodes not known here
            key = "fabric deviations not named"
            cluster[key] = cluster.get(key, 0) + fl.more
    for item in c.consistency:
        if item.status == "pass":
            continue
        for value, folded in item.odd:
            for node in _expand(folded):
                block(node, "odd software", f"{item.item} {value}")
    for node, drills in c.drill_failures.items():
        for d in drills:
            block(node, "failed drills", f"drill {d} failed")
    if c.rdma is not None:
        low = sum(1 for cells in c.rdma.cells.values() for x in cells if x["low"])
        if low:
            cluster["low RDMA pairs"] = low
    out = []
    for node in sorted(reasons):
        seen = list(dict.fromkeys(reasons[node]))
        texts = [t for _k, t in seen]
        shown = texts[:MAX_BLOCKERS] + ([f"{len(texts) - MAX_BLOCKERS} more"] if len(texts) > MAX_BLOCKERS else [])
        out.append(NodeReadiness(node, not seen, shown, sorted({k for k, _t in seen})))
    counts: dict[str, int] = {}
    for n in out:
        for k in n.kinds:
            counts[f"nodes with {k}"] = counts.get(f"nodes with {k}", 0) + 1
    blocked = sum(1 for n in out if not n.ready)
    head = {"blocked nodes": blocked} if blocked else {}
    out.sort(key=lambda n: (n.ready, n.node))
    return Readiness(out, {**head, **dict(sorted(counts.items())), **cluster})


# ------------------------------------------------------------------------------------ rendering

def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _color(value: float | None, top: float, low: bool) -> str:
    if value is None:
        return "#bbbbbb"
    if low:
        return "#d62728"
    share = max(0.0, min(1.0, value / top)) if top > 0 else 1.0
    light = int(92 - 50 * share)  # darker blue = faster
    return f"hsl(210,60%,{light}%)"


def matrix_svg(title: str, cells: list[dict[str, Any]], unit: str = "GB/s") -> str | None:
    """A square heatmap (rows a, columns b), a symmetric pair drawn in both cells; every cell has a hover
    title (a, b, value, low); low cells red and crossed. None when too many nodes to draw."""
    from .plots import svg, svg_text, tip

    names = sorted({x["a"] for x in cells} | {x["b"] for x in cells}, key=_natural)
    if not names or len(names) > MAX_NODES_DRAWN:
        return None
    grid: dict[tuple[str, str], dict[str, Any]] = {}
    for x in cells:
        grid[(x["a"], x["b"])] = x
        grid.setdefault((x["b"], x["a"]), x)
    top = max((x["gbyte_s"] for x in cells if x["gbyte_s"] is not None), default=0.0)
    left = 14 + 7.3 * min(22, max(len(n) for n in names) + 3)  # the longest row label (cut at 22) fits
    head = 30
    body = [svg_text(4, 14, title, 100)]
    for i, name in enumerate(names):  # row labels at the left, column labels numbered above (no overlap)
        y = head + i * CELL
        body.append(svg_text(left - 4, y + CELL * 0.7, f"{i + 1} {name}", 22, "end"))
        body.append(f'<text x="{left + i * CELL + CELL / 2:g}" y="{head - 4}" text-anchor="middle" '
                    f'font-size="9">{tip(name)}{i + 1}</text>')
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            x = grid.get((a, b))
            if x is None:
                continue
            value, low = x["gbyte_s"], x["low"]
            what = f"{a} - {b}: " + (f"{value:.1f} {unit}" if value is not None else "no result") + \
                (" (low)" if low else "")
            px, py = left + j * CELL, head + i * CELL
            body.append(f'<rect x="{px}" y="{py}" width="{CELL - 1}" height="{CELL - 1}" '
                        f'fill="{_color(value, top, low)}">{tip(what)}</rect>')
            if low:
                body.append(f'<path d="M{px + 4} {py + 4}L{px + CELL - 5} {py + CELL - 5}" stroke="#fff" '
                            f'stroke-width="2"/>')
    height = head + len(names) * CELL + 24
    body.append(svg_text(left, height - 6, f"columns numbered as the rows; max {top:.1f} {unit}; red: low pair", 100))
    return svg(height, body, title)


def _natural(name: str) -> tuple:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def html_parts(c: Any, plots: bool = True) -> str:
    """The heatmap(s), P2P matrices, consistency table and readiness verdicts (after the fabric and drill
    tables of html.py's section)."""
    out = ""
    r = c.readiness
    if r is not None:
        verdict = "ready" if r.ready else _e(r.verdict)
        cls = "" if r.ready else ' class="fail"'
        out += f'<h3>Readiness</h3><p>Cluster: <strong{cls}>{verdict}</strong></p>'
        rows = "".join(f'<tr><td class="mono">{_e(n.node)}</td>'
                       + ("<td>ready</td>" if n.ready else '<td class="fail">blocked</td>')
                       + f"<td>{_e('; '.join(n.blockers)) or '-'}</td></tr>" for n in r.nodes[:200])
        more = f"<p>{len(r.nodes) - 200:,} more nodes (the JSON has every one).</p>" if len(r.nodes) > 200 else ""
        out += (f"<table><thead><tr><th>node</th><th>verdict</th><th>blocked by</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>{more}")
    if c.consistency:
        rows = "".join(f"<tr><td class=\"mono\">{_e(i.item)}</td><td>{_e(i.status)}</td><td>{_e(i.majority)}</td>"
                       f"<td>{_e('; '.join(f'{v} on {n}' for v, n in i.odd)) or '-'}</td></tr>"
                       for i in c.consistency)
        out += (f"<h3>Software consistency ({_e(c.consistency_from)})</h3><table><thead><tr><th>item</th>"
                f"<th>status</th><th>majority</th><th>odd nodes</th></tr></thead><tbody>{rows}</tbody></table>")
    if c.rdma is not None:
        out += f"<h3>RDMA pair bandwidth (run {_e(c.rdma.run_id)}, {_e(c.rdma.started_at)})</h3>"
        for key, cells in sorted(c.rdma.cells.items()):
            svg = matrix_svg(f"{key}: GB/s per node pair", cells) if plots else None
            out += _plot_or_table(svg, key, cells, "GB/s")
    for m in c.p2p:
        out += f"<h3>NVLink/P2P matrix: {_e(m.node)} ({_e(m.started_at)})</h3>"
        for key, cells in sorted(m.cells.items()):
            svg = matrix_svg(f"{m.node} {key}: GB/s per GPU pair", cells) if plots else None
            out += _plot_or_table(svg, key, cells, "GB/s")
    return out


def _plot_or_table(svg: str | None, key: str, cells: list[dict[str, Any]], unit: str) -> str:
    low = [x for x in cells if x["low"]]
    if svg:
        alt = f"{key} heatmap"
        return f'<div class="plot" role="img" aria-label="{_e(alt)}">{svg}</div>' + _low_list(low, unit)
    return f"<p class=\"mono\">{_e(key)}: {len(cells)} pairs</p>" + _low_list(low, unit)


def _low_list(low: list[dict[str, Any]], unit: str) -> str:
    if not low:
        return "<p>No low pair.</p>"

    def value(x: dict[str, Any]) -> str:
        return f"{x['gbyte_s']:.1f} {unit}" if x["gbyte_s"] is not None else "no result"

    items = "".join(f"<li class=\"mono\">{_e(x['a'])} - {_e(x['b'])}: {_e(value(x))}</li>" for x in low[:50])
    return f"<p>Low pairs ({len(low)}):</p><ul>{items}</ul>"


def markdown_lines(c: Any) -> list[str]:
    """The same parts as Markdown tables (the matrices as their low pairs and the min/median)."""
    lines: list[str] = []
    r = c.readiness
    if r is not None:
        lines += ["### Readiness", "", f"Cluster: **{r.verdict}**", "", "| node | verdict | blocked by |",
                  "|---|---|---|"]
        lines += [f"| {n.node} | {'ready' if n.ready else 'blocked'} | {_md('; '.join(n.blockers)) or '-'} |"
                  for n in r.nodes[:200]]
        lines.append("")
    if c.consistency:
        lines += [f"### Software consistency ({c.consistency_from})", "", "| item | status | majority | odd nodes |",
                  "|---|---|---|---|"]
        lines += [f"| {_md(i.item)} | {i.status} | {_md(i.majority)} | "
                  f"{_md('; '.join(f'{v} on {n}' for v, n in i.odd)) or '-'} |" for i in c.consistency]
        lines.append("")
    maps = ([("RDMA pairs", c.rdma)] if c.rdma is not None else []) + [(f"P2P {m.node}", m) for m in c.p2p]
    if maps:
        lines += ["### Pair bandwidth (GB/s)", "", "| matrix | run | pairs | min | median | low pairs |",
                  "|---|---|---|---|---|---|"]
        for title, m in maps:
            for key, cells in sorted(m.cells.items()):
                vals = sorted(x["gbyte_s"] for x in cells if x["gbyte_s"] is not None)
                low = [f"{x['a']}-{x['b']}" for x in cells if x["low"]]
                mid = f"{vals[len(vals) // 2]:.1f}" if vals else "-"
                lines.append(f"| {_md(title)} {_md(key)} | {m.started_at} | {len(cells)} | "
                             f"{f'{vals[0]:.1f}' if vals else '-'} | {mid} | {_md(', '.join(low[:20])) or '-'} |")
        lines.append("")
    return lines


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
