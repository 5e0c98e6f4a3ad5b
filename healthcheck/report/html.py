"""The readiness report as ONE self-contained HTML file: CSS inline, plots as inline SVG, no script, no
network. Every string that comes from the data (node names, messages, reasons, check and metric names)
goes through :func:`e` (``html.escape`` with quotes); the only unescaped markup is our own and the SVG
that :mod:`healthcheck.report.plots` produced from sanitised labels.
"""
from __future__ import annotations

import html
from typing import Any, Callable, Iterable

from .model import NODE_STATES, STATE_LABELS, Report, iso

MAX_ROWS = 200
MAX_NODES_LISTED = 60

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1c2833;background:#f4f6f7}
main{max-width:1300px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #d5dbdb;padding-bottom:4px}
.meta{color:#566573;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{background:#fff;border-radius:8px;padding:12px 18px;min-width:150px;box-shadow:0 1px 3px rgba(0,0,0,.12)}
.card .n{font-size:30px;font-weight:700}.card .l{color:#566573}
.ready .n{color:#1e8449}.drained_ours .n{color:#ca6f1e}.drained_others .n{color:#7d3c98}
.failing .n{color:#c0392b}.unknown .n{color:#7f8c8d}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:6px 0 10px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e5e8e8;vertical-align:top;font-size:13px}
th{background:#eaeded}td.num{text-align:right;font-variant-numeric:tabular-nums}
.fail{color:#c0392b;font-weight:600}.warn{color:#b9770e;font-weight:600}
.note{background:#fef9e7;border-left:4px solid #f1c40f;padding:8px 12px;margin:8px 0}
.nodata{background:#fdedec;border-left:4px solid #c0392b;padding:14px 16px;margin:12px 0;font-size:16px}
.plot{background:#fff;padding:8px;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:6px 0}
.plot svg{width:100%;height:auto;display:block}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:break-word}
ul.ev{margin:0;padding-left:18px}details{margin:4px 0}.muted{color:#7f8c8d}
footer{margin-top:30px;color:#7f8c8d;font-size:12px}
"""


def e(value: Any) -> str:
    """Escaped text of any value from the data (None -> empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:,.4g}" if isinstance(value, float) else f"{value:,}"


def _table(headers: list[str], rows: Iterable[list[str]], total: int, what: str) -> str:
    """``rows`` cells are already HTML (escaped by the caller)."""
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    more = f'<p class="muted">{total - MAX_ROWS} more {e(what)} not shown (see --format json).</p>' \
        if total > MAX_ROWS else ""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _td(value: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{e(value)}</td>' if cls else f"<td>{e(value)}</td>"


def _status(status: str) -> str:
    return f'<td class="{"fail" if status == "fail" else "warn"}">{e(status)}</td>'


def _plot(svg: str | None, alt: str) -> str:
    return f'<div class="plot" role="img" aria-label="{e(alt)}">{svg}</div>' if svg else ""


def _fleet(r: Report) -> str:
    cards = "".join(f'<div class="card {s}"><div class="n">{r.fleet.counts.get(s, 0)}</div>'
                    f'<div class="l">{e(STATE_LABELS[s])}</div></div>' for s in NODE_STATES
                    if s != "unknown" or r.fleet.counts.get(s))
    lists = []
    for s in NODE_STATES:
        nodes = r.fleet.nodes.get(s, [])
        if s == "ready" or not nodes:
            continue
        shown = ", ".join(e(n) for n in nodes[:MAX_NODES_LISTED])
        extra = f" and {len(nodes) - MAX_NODES_LISTED} more" if len(nodes) > MAX_NODES_LISTED else ""
        lists.append(f"<details open><summary>{e(STATE_LABELS[s])} ({len(nodes)})</summary>"
                     f'<p class="mono">{shown}{extra}</p></details>')
    slurm = "" if r.fleet.slurm_known else '<p class="muted">Drain states from our own records (Slurm not asked).</p>'
    return f'<h2 id="fleet">Fleet summary</h2><div class="cards">{cards}</div>{"".join(lists)}{slurm}'


def _findings(r: Report) -> str:
    rows = ([_td(f.node, "mono"), _td(f.kind), _td(f.subject, "mono"), _td(f.component, "mono"), _status(f.status),
             _td(f.detail), _td(f.action)] for f in r.findings[:MAX_ROWS])
    table = _table(["node", "kind", "check / metric", "component", "status", "detail", "recommended action"],
                   rows, len(r.findings), "findings") if r.findings else "<p>Nothing to act on.</p>"
    return f'<h2 id="findings">Findings and recommended actions ({len(r.findings)})</h2>{table}'


def _checks(r: Report) -> str:
    rows = ([_td(c.check, "mono"), _td(c.nodes_failing_now, "num"), _td(c.fail_results, "num"),
             _td(c.warn_results, "num"), _td(", ".join(c.nodes), "mono"), _td(c.last_message), _td(c.action)]
            for c in r.checks[:MAX_ROWS])
    table = _table(["check", "nodes failing now", "fail results", "warn results", "failing nodes", "last message",
                    "recommended action"], rows, len(r.checks), "checks") if r.checks \
        else "<p>No check failed or warned in the window.</p>"
    return f'<h2 id="checks">Failing checks, ranked</h2>{table}'


def _risks(r: Report) -> str:
    def evidence(items: list[str]) -> str:
        return '<td><ul class="ev">' + "".join(f"<li>{e(x)}</li>" for x in items[:12]) + \
            (f"<li>… {len(items) - 12} more</li>" if len(items) > 12 else "") + "</ul></td>"

    rows = ([_td(i + 1, "num"), _td(x.node, "mono"), _td(f"{x.score:g}", "num"), _td(STATE_LABELS.get(x.state, x.state)),
             _td(x.node_class), evidence(x.evidence)] for i, x in enumerate(r.risks[:MAX_ROWS]))
    table = _table(["#", "node", "risk", "state", "class", "evidence"], rows, len(r.risks), "nodes") if r.risks \
        else "<p>No node shows a risk.</p>"
    return f'<h2 id="risk">Nodes ranked by risk</h2>{table}'


def _distributions(r: Report, svg: str | None) -> str:
    if not r.distributions:
        return '<h2 id="perf">Performance distributions</h2><p>No performance metric in the window.</p>'
    stats = ([_td(d.metric, "mono"), _td(d.count, "num"), _td(_num(d.p5), "num"), _td(_num(d.median), "num"),
              _td(_num(d.p95), "num"), _td("low" if d.low_is_bad else "high"), _td(len(d.outliers), "num")]
             for d in r.distributions)
    out = [o | {"metric": d.metric} for d in r.distributions for o in d.outliers]
    rows = ([_td(o["metric"], "mono"), _td(o["node"], "mono"), _td(o["component"], "mono"),
             _td(_num(o["value"]), "num"), _td(_num(o["median"]), "num"), _td(f"{o['z']:.1f}", "num"),
             _td(o["peer_group"])] for o in out[:MAX_ROWS])
    outliers = _table(["metric", "node", "component", "value", "peer median", "robust z", "peers"], rows, len(out),
                      "outliers") if out else "<p>No outlier.</p>"
    return ('<h2 id="perf">Performance distributions</h2>' + _plot(svg, "performance distributions")
            + _table(["metric", "values", "p5", "median", "p95", "bad side", "outliers"], stats,
                     len(r.distributions), "metrics") + "<h3>Outliers among peers</h3>" + outliers)


def _growth(r: Report, svg: str | None) -> str:
    if not r.growth:
        return '<h2 id="growth">Error counter growth</h2><p>No error counter grew in the window.</p>'
    rows = ([_td(g.node, "mono"), _td(g.component, "mono"), _td(g.metric, "mono"), _td(_num(g.increase), "num"),
             _td(f"{g.rate_per_h:.3g}", "num"), _td(_num(g.last), "num"), _td(iso(g.last_at))] for g in r.growth)
    return ('<h2 id="growth">Error counter growth</h2>' + _plot(svg, "counter growth")
            + _table(["node", "component", "counter", "increase", "per hour", "now", "last sample"], rows,
                     len(r.growth), "counters"))


def _drains(r: Report, svg: str | None) -> str:
    if not r.drains:
        return '<h2 id="drains">Drain timeline</h2><p>No drain recorded in the window.</p>'
    rows = ([_td(d.node, "mono"), _td(d.drains, "num"), _td(f"{d.drained_hours:g}", "num"),
             _td("yes" if d.open else "no"), _td("yes" if d.flapping else ""), _td(d.last_reason, "mono")]
            for d in r.drains[:MAX_ROWS])
    return ('<h2 id="drains">Drain timeline</h2>' + _plot(svg, "drain timeline")
            + _table(["node", "drains", "drained hours", "still drained", "flapping", "last reason"], rows,
                     len(r.drains), "nodes"))


def render_html(report: Report, plots: bool = True, step: Callable[[str], None] | None = None) -> str:
    """The whole report page. ``plots=False`` leaves the SVG plots out (smaller page)."""
    r = report
    svgs: dict[str, str | None] = {"dist": None, "growth": None, "drains": None}
    if plots and not r.empty:
        from . import plots as p

        (step or (lambda s: None))("plots")
        svgs = {"dist": p.distributions_svg(r.distributions), "growth": p.growth_svg(r.growth_points),
                "drains": p.timeline_svg(r.intervals, r.since, r.until)}
    head = (f"<h1>Cluster readiness report</h1><p class=\"meta\">Window {e(iso(r.since))} to {e(iso(r.until))} "
            f"· generated {e(iso(r.generated_at))} · {r.counts.get('nodes', 0)} nodes, "
            f"{r.counts.get('runs', 0):,} runs, {r.counts.get('results', 0):,} results, "
            f"{r.counts.get('metrics', 0):,} metric samples, {r.counts.get('actions', 0):,} drain/resume actions</p>")
    notes = "".join(f'<div class="{"nodata" if n.startswith("No data") else "note"}">{e(n)}</div>' for n in r.notes)
    if r.empty:
        body = head + notes + _fleet(r)
    else:
        body = (head + notes + _fleet(r) + _findings(r) + _checks(r) + _risks(r)
                + _distributions(r, svgs["dist"]) + _growth(r, svgs["growth"]) + _drains(r, svgs["drains"]))
    footer = f"<footer>healthcheck report · analyses: {e(r.source)}</footer>"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>Cluster readiness report</title><style>{CSS}</style></head>"
            f"<body><main>{body}{footer}</main></body></html>\n")
