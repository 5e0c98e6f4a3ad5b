"""The readiness report as ONE self-contained HTML file: CSS inline, plots as inline SVG, no script, no
network. Every string that comes from the data (node names, messages, reasons, check and metric names)
goes through :func:`e` (``html.escape`` with quotes); the only unescaped markup is our own and the SVG
that :mod:`healthcheck.report.plots` produced from sanitised labels.

Built to be read at fleet scale (1,000-10,000 nodes, docs/report.md): a table of contents, the fleet's
counts and the findings on the first screen, the fleet state per day under them, findings grouped by
check and action with their nodes folded (``gpu[001-017,033]``,
:mod:`healthcheck.report.fold`), every long table capped (the first ``PREVIEW_ROWS`` rows shown, up to
``MAX_ROWS`` behind a closed ``<details>``, all of them in the CSV beside the page when ``csv_base`` is
given: :mod:`healthcheck.report.tables`, written by :func:`healthcheck.report.files.write_html`), and a
footer with the tool version, the config hash and the data window.
"""
from __future__ import annotations

import html
from typing import Any, Callable, Iterable

from .fold import count_text
from .human import duration_h, num, rate, when, when_utc
from .model import NODE_STATES, STATE_LABELS, Report, iso

PREVIEW_ROWS = 10
SLURM_NOT_ASKED = "Slurm was not asked"  # build.py's note: the fleet summary's own line says it on the page
MAX_ROWS = 50
EVIDENCE_SHOWN = 2
NODES_TEXT = 160  # characters of a folded node list in a cell; the CSV has every node
EXAMPLE_TEXT = 90  # characters of a finding group's example detail (the CSV has every detail)
SECTIONS = (("fleet", "Fleet summary"), ("findings", "Findings"), ("fleet-days", "Fleet state per day"),
            ("checks", "Failing checks"), ("risk", "Nodes by risk"), ("trends", "Fleet trends"),
            ("perf", "Performance"),
            ("growth", "Counter growth"), ("drains", "Drains"),
            ("commissioning", "Commissioning"), ("training", "Training readiness"), ("about", "About this report"))

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1c2833;background:#f4f6f7}
main{max-width:1300px;margin:0 auto;padding:16px 24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:20px 0 8px;border-bottom:2px solid #d5dbdb;padding-bottom:4px}
.meta{color:#566573;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{background:#fff;border-radius:8px;padding:8px 18px;min-width:150px;box-shadow:0 1px 3px rgba(0,0,0,.12)}
.card .n{font-size:26px;font-weight:700}.card .l{color:#566573}
.ready .n{color:#1e8449}.drained_ours .n{color:#ca6f1e}.drained_others .n{color:#7d3c98}
.failing .n{color:#c0392b}.unknown .n{color:#7f8c8d}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:6px 0 10px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e5e8e8;vertical-align:top;font-size:13px}
th{background:#eaeded}td.num{text-align:right;font-variant-numeric:tabular-nums}
.fail{color:#c0392b;font-weight:600}.ready-line{color:#1e8449}.warn{color:#b9770e;font-weight:600}
.note{background:#fef9e7;border-left:4px solid #f1c40f;padding:8px 12px;margin:8px 0}
.nodata{background:#fdedec;border-left:4px solid #c0392b;padding:14px 16px;margin:12px 0;font-size:16px}
.plot{background:#fff;padding:8px;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:6px 0}
.plot svg{width:100%;height:auto;display:block}.plot.days svg{max-height:190px}
td.nw{white-space:nowrap}td.subj{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
td.node{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;white-space:nowrap}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere}
ul.ev{margin:0;padding-left:18px}details{margin:4px 0}details>p.mono{margin:2px 0}.muted{color:#7f8c8d}
footer{margin-top:30px;color:#566573;font-size:12px;border-top:1px solid #d5dbdb;padding-top:8px}
nav.toc{font-size:13px;margin:8px 0 4px}nav.toc a{margin-right:14px;color:#1f4e79}
details.more>summary{cursor:pointer;color:#1f4e79;font-size:13px}
"""


def e(value: Any) -> str:
    """Escaped text of any value from the data (None -> empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _num(value: float) -> str:
    from .human import num

    return num(value)


class _Page:
    """What every section needs: the report, where its CSVs are (None: not written)."""

    def __init__(self, report: Report, csv_base: str | None) -> None:
        self.r, self.csv_base = report, csv_base

    def csv_link(self, name: str, text: str = "") -> str:
        if self.csv_base is None:
            return ""
        from .tables import csv_name

        href = e(csv_name(self.csv_base, name))
        return f'<a href="{href}">{e(text or href)}</a>'

    def table(self, headers: list[str], rows: Iterable[list[str]], total: int, what: str, csv: str) -> str:
        """The first PREVIEW_ROWS rows, up to MAX_ROWS behind a closed <details>, then where the rest is.
        ``rows`` cells are already HTML (escaped by the caller); only the first MAX_ROWS are consumed."""
        head = "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in headers) + "</tr></thead>"
        shown = []
        for row in rows:
            shown.append("<tr>" + "".join(row) + "</tr>")
            if len(shown) >= MAX_ROWS:
                break
        out = f"<table>{head}<tbody>{''.join(shown[:PREVIEW_ROWS])}</tbody></table>"
        if len(shown) > PREVIEW_ROWS:
            out += (f'<details class="more"><summary>{len(shown) - PREVIEW_ROWS} more {e(what)}</summary>'
                    f"<table>{head}<tbody>{''.join(shown[PREVIEW_ROWS:])}</tbody></table></details>")
        link = self.csv_link(csv)
        if total > MAX_ROWS:
            where = f"all {total:,} in {link}" if link else "see --format json"
            out += f'<p class="muted">{total - MAX_ROWS:,} more {e(what)} not shown ({where}).</p>'
        elif link and total > PREVIEW_ROWS:
            out += f'<p class="muted">All {total:,} {e(what)}: {link}.</p>'
        return out


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _td(value: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{e(value)}</td>' if cls else f"<td>{e(value)}</td>"


def _status(status: str) -> str:
    return f'<td class="{"fail" if status == "fail" else "warn"}">{e(status)}</td>'


def _plot(svg: str | None, alt: str) -> str:
    return f'<div class="plot" role="img" aria-label="{e(alt)}">{svg}</div>' if svg else ""


def _nodes(nodes: Iterable[str]) -> str:
    return f'<td class="mono">{e(count_text(nodes, NODES_TEXT))}</td>'


def _toc() -> str:
    return '<nav class="toc">' + "".join(f'<a href="#{k}">{e(v)}</a>' for k, v in SECTIONS) + "</nav>"


def _fleet_days(p: _Page, svg: str | None) -> str:
    r = p.r
    from .fleetstate import LABELS, STATES

    title = '<h2 id="fleet-days">Fleet state per day</h2>'
    if r.fleet_days is None or not len(r.fleet_days):
        return title + "<p>No day to show.</p>"
    days = r.fleet_days
    partial = days["partial"] if "partial" in days else [False] * len(days)
    whole = [i for i, p_ in enumerate(partial) if not p_]

    def said(i: int) -> str:
        row = days.iloc[i]
        counts = ", ".join(f"{int(row[s]):,} {e(LABELS[s])}" for s in STATES if s != "no_run_yet" or row[s])
        when = f"{row['day']:%Y-%m-%d}"
        if bool(partial[i]):
            from .human import duration_h

            when += f" (partial: the window covers {e(duration_h(float(row['hours'])))} of it)"
        return f"on {when}: {counts}"

    lines = [said(whole[-1])] if whole else []
    if bool(partial[len(days) - 1]):
        lines.append(said(len(days) - 1))
    link = p.csv_link("fleet-days", "per day as CSV")
    said_ = "; ".join(lines)
    return (title + _plot(svg, "fleet state per day").replace('class="plot"', 'class="plot days"', 1)
            + f'<details class="more"><summary>{said_[:1].upper() + said_[1:]}.</summary><p class="muted">Derived '
            "from the runs and our drain records at each day's end (the history records no Slurm states): "
            "&quot;down&quot; is a node that recorded no run that day; a day the window covers only in part (today, "
            "the window's first day) is drawn paler, and a node that has not run yet in it, but ran the day before, "
            "counts as &quot;no run yet&quot;, never down; &quot;drained by others&quot; is known only from live "
            f"Slurm states (--slurm), today only.{' ' + link if link else ''}</p></details>")


def _fleet(p: _Page) -> str:
    r = p.r
    cards = "".join(f'<div class="card {s}"><div class="n">{r.fleet.counts.get(s, 0):,}</div>'
                    f'<div class="l">{e(STATE_LABELS[s])}</div></div>' for s in NODE_STATES
                    if s != "unknown" or r.fleet.counts.get(s))
    lists = []
    for s in NODE_STATES:
        nodes = r.fleet.nodes.get(s, [])
        if s == "ready" or not nodes:
            continue
        lists.append(f"<details open><summary>{e(STATE_LABELS[s])} ({len(nodes)})</summary>"
                     f'<p class="mono">{e(count_text(nodes, NODES_TEXT).split(": ", 1)[-1])}</p></details>')
    slurm = "" if r.fleet.slurm_known else "Drain states from our own records (Slurm not asked)."
    link = p.csv_link("nodes", "every node and its state (CSV)")
    line = " ".join(x for x in (slurm, link) if x)
    return (f'<h2 id="fleet">Fleet summary</h2><div class="cards">{cards}</div>{"".join(lists)}'
            + (f'<p class="muted">{line}</p>' if line else ""))


def finding_groups(r: Report) -> list[dict[str, Any]]:
    """The findings grouped (``report.groups.finding_groups``: worst case as the example)."""
    from .groups import finding_groups as groups

    return groups(r)


def _findings(p: _Page) -> str:
    r = p.r
    title = f'<h2 id="findings">Findings and recommended actions ({len(r.findings):,})</h2>'
    if not r.findings:
        return title + "<p>Nothing to act on.</p>"
    groups = finding_groups(r)

    def comps(g: dict) -> str:
        from .fold import fold_limited

        return fold_limited(g["components"], 40)[0]  # gpu[0-7]

    rows = ([_status(g["status"]), _td(f"{g['kind']} {g['subject']}", "subj"), _nodes(g["nodes"]),
             _td(comps(g), "mono"),
             _td(_cut(g["example"], EXAMPLE_TEXT) + (f" (+{g['count'] - 1} more)" if g["count"] > 1 else "")),
             _td(g["action"])] for g in groups)
    return (title + p.table(["status", "kind and check / metric", "nodes", "components", "worst case",
                             "recommended action"], rows, len(groups), "groups", "findings")
            + f'<p class="muted">{len(groups):,} groups: one row per check (or metric) and recommended action; the '
            "nodes are folded (ClusterShell node sets, as Slurm takes them); the example is the worst case.</p>")


def _checks(p: _Page) -> str:
    r = p.r
    if not r.checks:
        return '<h2 id="checks">Failing checks, ranked</h2><p>No check failed or warned in the window.</p>'
    from .tables import failing_nodes

    nodes_of = failing_nodes(r)
    rows = ([_td(c.check, "subj"), _td(c.nodes_failing_now, "num"), _td(c.fail_results, "num"),
             _td(c.warn_results, "num"), _nodes(nodes_of.get(c.check, c.nodes)), _td(c.last_message), _td(c.action)]
            for c in r.checks)
    return ('<h2 id="checks">Failing checks, ranked</h2>'
            + p.table(["check", "nodes failing now", "fail results", "warn results", "failing nodes", "last message",
                       "recommended action"], rows, len(r.checks), "checks", "checks"))


def _risks(p: _Page) -> str:
    r = p.r
    if not r.risks:
        return '<h2 id="risk">Nodes ranked by risk</h2><p>No node shows a risk.</p>'

    def evidence(items: list[str]) -> str:
        more = f"<li>… {len(items) - EVIDENCE_SHOWN} more (CSV)</li>" if len(items) > EVIDENCE_SHOWN else ""
        return '<td><ul class="ev">' + "".join(f"<li>{e(x)}</li>" for x in items[:EVIDENCE_SHOWN]) + more + \
            "</ul></td>"

    if any(x.why for x in r.risks):
        return _risks_why(p)
    rows = ([_td(i + 1, "num"), _td(x.node, "node"), _td(_num(x.score), "num"), _td(STATE_LABELS.get(x.state, x.state)),
             _td(x.node_class), evidence(x.evidence)] for i, x in enumerate(r.risks))
    return ('<h2 id="risk">Nodes ranked by risk</h2>'
            + p.table(["#", "node", "risk", "state", "class", "evidence"], rows, len(r.risks), "nodes", "risk"))


def why_cells(w: dict[str, Any]) -> list[str]:
    """A ``why`` row's fields as text: kind, subject (metric or check, [component]), what was measured
    against what (never empty: "8 vs limit 16", "688.8 vs peers 744.9", "699.4 vs own baseline 740.6",
    "+9, now 16", "FAIL: the check's verdict", "3 drain/resume cycles"), and "hits of runs"."""
    subject = w.get("metric") or w.get("check") or ""
    if w.get("component"):
        subject += f" [{w['component']}]"
    runs = f"{int(w['hits'])} of {int(w['runs'])}" if w.get("runs") else (f"{int(w['hits'])}x" if w.get("hits") else "")
    return [str(w.get("kind") or ""), subject, measured(w), runs]


def measured(w: dict[str, Any]) -> str:
    """What a ``why`` row measured, against what (see :func:`why_cells`)."""
    from .human import num

    kind, value, ref = w.get("kind"), w.get("value"), w.get("peer_median")
    if kind == "floor":
        return f"{num(value)} vs limit {num(w.get('limit'))}"
    if kind == "outlier":
        return f"{num(value)} vs peers {num(ref)}"
    if kind == "regression":
        return f"{num(value)} vs own baseline {num(ref)}"
    if kind == "growth":
        return f"now {num(value)}"
    if kind == "check":
        return f"{str(w.get('severity') or '').upper() or 'flagged'}: the check's verdict"
    if kind == "flapping":
        return f"{num(w.get('hits'))} drain/resume cycles"
    if kind == "drain":
        return f"drained {num(w.get('hits'))}x"
    if kind == "failure":
        return f"failed {num(w.get('hits'))}x"
    return num(value) if value is not None else ""


def _risks_why(p: _Page) -> str:
    """The fleet ranking: per node its heaviest evidence row as columns (what, what was measured against
    what, in how many of the last runs) and its sentence; the members of a cause shared by a rack (or by
    adjacent names without [topology]) as one row (report/shared.py); every row in the ``why`` CSV."""
    from .human import num
    from .shared import risk_rows

    def row(x: dict[str, Any]) -> list[str]:
        kind, subject, what, runs = why_cells(x["why"]) if x["why"] else [""] * 4
        more = f" (+{x['more']} more)" if x["more"] else ""
        node = (f'<td class="node" title="{e(x["node"])}">{e(_cut(x["node"], 40))}'
                f'<br><span class="muted">{x["n_nodes"]:,} nodes, one cause</span></td>' if x["group"]
                else f'<td class="node">{e(x["node"])}</td>')
        return [_td(x["rank"], "num"), node, _td(num(x["score"]), "num"),
                _td(STATE_LABELS.get(x["state"], x["state"])), _td("shared cause" if x["group"] else kind),
                _td(subject, "subj"), _td(what, "num"), _td(runs, "num nw"),
                _td(_cut(x["text"], EXAMPLE_TEXT) + more)]

    rows = risk_rows(p.r)
    link = p.csv_link("why", "every evidence row (CSV)")
    return ('<h2 id="risk">Nodes ranked by risk</h2><p class="muted">Severity-weighted: persistence over the last '
            "runs, absolute floors and ceilings, robust statistics per GPU model (and rack); the heaviest evidence "
            "row of each node; a cause shared by most nodes of a rack (or of adjacent names) is one row."
            f"{' ' + link if link else ''}</p>"
            + p.table(["#", "node", "risk", "state", "why", "metric / check", "measured", "runs", "evidence"],
                      (row(x) for x in rows), len(rows), "rows", "risk"))


def _trends(p: _Page) -> str:
    """The fleet tables (report/fleetsection.py), each folded; the regressions open."""
    from . import fleetsection as fsec

    r = p.r
    title = '<h2 id="trends">Fleet trends: regressions, new nodes, MTBF, versions</h2>'
    if not r.fleet_tables:
        return title + "<p>Not computed (the report was built without the fleet ranking's inputs).</p>"
    parts = []
    for name, label, cols in fsec.TABLES:
        rows = r.fleet_tables.get(name, [])
        if name in ("versions", "drift") and not rows:
            parts.append(f'<p class="muted">{e(label)}: no version data (the sweep\'s burn-in records carry '
                         "them; the history database does not).</p>")
            continue

        def cells(x: dict, cols=cols) -> list[str]:
            return [_td(fsec.cell(x.get(c), c), "mono" if c in ("node", "key", "value") and isinstance(x.get(c), str)
                        else "") for c, _ in cols]

        note = r.fleet_notes.get(name, "")
        body = (p.table([h for _, h in cols], (cells(x) for x in rows), len(rows), "rows", name) if rows
                else f"<p>{e(note[:1].upper() + note[1:]) if note else 'None.'}</p>")
        opened = " open" if name == "regressions" and (rows or note) else ""
        parts.append(f'<details class="more"{opened}><summary>{e(label)}: {e(fsec.summary_line(name, rows, note))}'
                     f"</summary>{body}</details>")
    return title + "".join(parts)


def _distributions(p: _Page, svg: str | None) -> str:
    r = p.r
    if not r.distributions:
        return '<h2 id="perf">Performance distributions</h2><p>No performance metric in the window.</p>'
    stats = ([_td(d.metric, "mono"), _td(d.count, "num"), _td(_num(d.p5), "num"), _td(_num(d.median), "num"),
              _td(_num(d.p95), "num"), _td("low" if d.low_is_bad else "high"), _td(len(d.outliers), "num")]
             for d in r.distributions)
    out = [o | {"metric": d.metric} for d in r.distributions for o in d.outliers]
    rows = ([_td(o["metric"], "mono"), _td(o["node"], "mono"), _td(o["component"], "mono"),
             _td(_num(o["value"]), "num"), _td(_num(o["median"]), "num"), _td(f"{o['z']:.1f}", "num"),
             _td(o["peer_group"])] for o in out)
    outliers = p.table(["metric", "node", "component", "value", "peer median", "robust z", "peers"], rows, len(out),
                       "outliers", "outliers") if out else "<p>No outlier.</p>"
    return ('<h2 id="perf">Performance distributions</h2>' + _plot(svg, "performance distributions")
            + p.table(["metric", "values", "p5", "median", "p95", "bad side", "outliers"], stats,
                      len(r.distributions), "metrics", "outliers") + "<h3>Outliers among peers</h3>" + outliers)


def _growth(p: _Page, svg: str | None) -> str:
    r = p.r
    if not r.growth:
        return '<h2 id="growth">Error counter growth</h2><p>No error counter grew in the window.</p>'
    rows = ([_td(g.node, "mono"), _td(g.component, "mono"), _td(g.metric, "mono"), _td(_num(g.increase), "num"),
             _td(rate(g.rate_per_h), "num"), _td(_num(g.last), "num"), _td(when(g.last_at))] for g in r.growth)
    return ('<h2 id="growth">Error counter growth</h2>' + _plot(svg, "counter growth")
            + p.table(["node", "component", "counter", "increase", "rate", "now", "last sample (UTC)"], rows,
                      len(r.growth), "counters", "growth"))


def _drains(p: _Page, svg: str | None) -> str:
    r = p.r
    if not r.drains:
        return '<h2 id="drains">Drain timeline</h2><p>No drain recorded in the window.</p>'
    rows = ([_td(d.node, "node"), _td(d.drains, "num"), _td(duration_h(d.drained_hours), "num"),
             _td("yes" if d.open else "no"), _td("yes" if d.flapping else ""), _td(d.last_reason, "mono")]
            for d in r.drains)
    return ('<h2 id="drains">Drain timeline</h2>' + _plot(svg, "drain timeline")
            + p.table(["node", "drains", "drained for", "still drained", "flapping", "last reason"], rows,
                      len(r.drains), "nodes", "drains"))


def _commissioning(p: _Page) -> str:
    """The latest fabric results (deviations named) and the drills' mean timings (report/commissioning.py)."""
    c = p.r.commissioning
    title = '<h2 id="commissioning">Commissioning</h2>'
    if c is None or c.empty:
        return title + "<p>No fabric result or fault drill recorded in the window.</p>"
    out = title
    if c.fabric:
        def named(f) -> str:
            items = "".join(f"<li>{_status(d['status'])} <span class=\"mono\">{e(d['component'] or '-')}</span> "
                            f"{e(_cut(d['message'], 300))}</li>" for d in f.deviations)
            more = f"<li>{f.more:,} more</li>" if f.more else ""
            return f"<td><ul>{items}{more}</ul></td>" if items else "<td>none</td>"

        head = "".join(f"<th>{h}</th>" for h in ("check", "node", "latest", "status", "results", "deviations"))
        rows = "".join(f"<tr>{_td(f.check, 'mono')}{_td(f.node, 'mono')}{_td(when(f.started_at))}"
                       f"<td>{_status(f.status)}</td>"
                       f"{_td(f.results, 'num')}{named(f)}</tr>" for f in c.fabric[:MAX_ROWS])
        out += (f"<h3>Fabric: latest result per check</h3><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{rows}</tbody></table>")
    if c.drills:
        stages = ("detect_s", "drain_s", "requeue_s", "resume_s")

        def cell(d, s) -> str:
            return _td(f"{d.mean_s[s]:.2f}" if s in d.mean_s else "-", "num")

        head = "".join(f"<th>{h}</th>" for h in ("drill", "runs", "failed", "detect s", "drain s", "requeue s",
                                                 "resume s", "time to detect", "latest"))
        rows = "".join(f"<tr>{_td(d.drill, 'mono')}{_td(d.runs, 'num')}{_td(d.failed, 'num')}"
                       + "".join(cell(d, s) for s in stages) + f"{_td(d.detect_text)}{_td(when(d.last_at))}</tr>"
                       for d in c.drills)
        out += (f"<h3>Fault drills: mean seconds per stage</h3><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{rows}</tbody></table>")
    from .readiness import html_parts  # readiness, consistency, RDMA heatmap, P2P matrices

    return out + html_parts(c, getattr(p, "plots", True))


def _training(p: _Page) -> str:
    """The acceptance figures of the latest training run and the ready/blocked line (report/training.py)."""
    from .training import html_part

    return html_part(p.r.training, getattr(p, "plots", True))


def _footer(p: _Page) -> str:
    from .. import __version__

    r = p.r
    links = ""
    if p.csv_base is not None:
        from .tables import NAMES

        links = " · full tables (CSV): " + ", ".join(p.csv_link(n, n) for n in NAMES)
    config = e(r.config_hash) if r.config_hash else "not given (no --config)"
    return (f'<footer id="about">healthcheck {e(__version__)} · config hash {config} · data window '
            f"{e(when_utc(r.since))} to {e(when_utc(r.until))} ({r.counts.get('runs', 0):,} runs, "
            f"{r.counts.get('actions', 0):,} drain/resume records) · generated {e(when_utc(r.generated_at))} · "
            f"analyses: {e(r.source)}{links}</footer>")


def render_html(report: Report, plots: bool = True, step: Callable[[str], None] | None = None,
                csv_base: str | None = None) -> str:
    """The whole report page. ``plots=False`` leaves the SVG plots out (smaller page). ``csv_base``: the
    file name stem (no folder) of the CSVs written beside the page (``tables.csv_name``); the capped
    tables then link them (``files.write_html`` writes both)."""
    r = report
    p = _Page(r, csv_base)
    p.plots = plots  # the commissioning section's heatmaps follow it (report/readiness.py)
    svgs: dict[str, str | None] = {"days": None, "dist": None, "growth": None, "drains": None}
    if plots and not r.empty:
        from . import plots as pl
        from .fleetstate import COLORS, LABELS, STATES

        (step or (lambda s: None))("plots")
        svgs = {"days": pl.fleet_days_svg(r.fleet_days, STATES, LABELS, COLORS),
                "dist": pl.distributions_svg(r.distributions), "growth": pl.growth_svg(r.growth_points),
                "drains": pl.timeline_svg(r.intervals, r.since, r.until)}
    head = (f"<h1>Cluster readiness report</h1><p class=\"meta\">Window {e(when_utc(r.since))} to "
            f"{e(when_utc(r.until))} · generated {e(when_utc(r.generated_at))} · {r.counts.get('nodes', 0):,} nodes, "
            f"{r.counts.get('runs', 0):,} runs, {r.counts.get('results', 0):,} results, "
            f"{r.counts.get('metrics', 0):,} metric samples, {r.counts.get('actions', 0):,} drain/resume actions</p>")
    notes = "".join(f'<div class="{"nodata" if n.startswith("No data") else "note"}">{e(n)}</div>' for n in r.notes
                    if not n.startswith(SLURM_NOT_ASKED) or r.empty)  # the fleet summary says it, in its place
    if r.stale:  # the first thing on the page: every count below is as old as the newest record
        head = f'<h1>Cluster readiness report</h1><div class="nodata" id="stale">{e(r.stale)}</div>' + \
            head.removeprefix("<h1>Cluster readiness report</h1>")
    if r.empty:
        body = head + notes + _fleet(p)
    else:
        # what to act on on the first screen (issue 35): the counts, the findings, then the days
        body = (head + _toc() + notes + _fleet(p) + _findings(p) + _fleet_days(p, svgs["days"]) + _checks(p)
                + _risks(p) + _trends(p) + _distributions(p, svgs["dist"]) + _growth(p, svgs["growth"])
                + _drains(p, svgs["drains"]) + _commissioning(p) + _training(p))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>Cluster readiness report</title><style>{CSS}</style></head>"
            f"<body><main>{body}{_footer(p)}</main></body></html>\n")
