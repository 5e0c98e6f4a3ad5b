"""The report's long tables, whole, as CSV: the HTML shows their first rows and links these files.

``csv_tables(report)`` -> ``{name: csv text}`` for every table the page caps (findings, checks, risk,
outliers, growth, drains, nodes, fleet-days). ``csv_name(base, name)`` is the file name the page links
(``<base>.<name>.csv``, beside the HTML). Cells that a spreadsheet would run as a formula (text starting
with ``= + - @``, a tab or a carriage return) get a leading ``'`` (the OWASP advice for CSV injection):
node names and messages come from the records, so they are data, never formulas.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Iterable

from .fleetstate import STATES, to_records
from .model import Report, iso

NAMES = ("findings", "checks", "risk", "why", "outliers", "growth", "drains", "nodes", "fleet-days", "regressions",
         "new-nodes", "mtbf-check", "mtbf-component", "versions", "drift")
WHY = ("kind", "check", "component", "metric", "value", "peer_median", "limit", "hits", "runs", "severity",
       "persistent", "points", "text")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_name(base: str, name: str) -> str:
    return f"{base}.{name}.csv"


def cell(value: Any) -> Any:
    """A CSV cell: None -> "", text that could start a formula -> prefixed with a quote."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def _csv(header: list[str], rows: Iterable[Iterable[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow([cell(v) for v in row])
    return buf.getvalue()


def failing_nodes(report: Report) -> dict[str, list[str]]:
    """Per check: every node whose latest run fails it (from the findings; ``CheckRank.nodes`` holds only
    the first few)."""
    out: dict[str, set[str]] = {}
    for f in report.findings:
        if f.kind == "check" and f.status == "fail":
            out.setdefault(f.subject, set()).add(f.node)
    return {k: sorted(v) for k, v in out.items()}


def csv_tables(report: Report) -> dict[str, str]:
    r = report
    nodes_of = failing_nodes(r)
    from .fold import fold

    outliers = [(d.metric, o) for d in r.distributions for o in d.outliers]
    shared = {n: f"{c['group']}: {c['kind']} {c['subject']}" for c in r.shared_causes for n in c["nodes"]}
    return {
        "findings": _csv(["node", "kind", "check_or_metric", "component", "status", "detail", "action", "seen"],
                         ([f.node, f.kind, f.subject, f.component, f.status, f.detail, f.action, iso(f.seen)]
                          for f in r.findings)),
        "checks": _csv(["check", "nodes_failing_now", "fail_results", "warn_results", "failing_nodes", "last_seen",
                        "last_message", "action"],
                       ([c.check, c.nodes_failing_now, c.fail_results, c.warn_results,
                         fold(nodes_of.get(c.check, c.nodes)), iso(c.last_seen), c.last_message, c.action]
                        for c in r.checks)),
        "risk": _csv(["rank", "node", "risk", "state", "class", "shared_cause", "evidence"],
                     ([i + 1, x.node, x.score, x.state, x.node_class, shared.get(x.node, ""), " | ".join(x.evidence)]
                      for i, x in enumerate(r.risks))),
        "outliers": _csv(["metric", "node", "component", "value", "peer_median", "robust_z", "peers"],
                         ([m, o["node"], o["component"], o["value"], o["median"], o["z"], o["peer_group"]]
                          for m, o in outliers)),
        "growth": _csv(["node", "component", "counter", "increase", "per_hour", "now", "first_sample", "last_sample"],
                       ([g.node, g.component, g.metric, g.increase, g.rate_per_h, g.last, iso(g.first_at),
                         iso(g.last_at)] for g in r.growth)),
        "drains": _csv(["node", "drains", "drained_hours", "still_drained", "flapping", "last_reason"],
                       ([d.node, d.drains, d.drained_hours, d.open, d.flapping, d.last_reason] for d in r.drains)),
        "nodes": _csv(["node", "state"], ([n, s] for s, ns in r.fleet.nodes.items() for n in ns)),
        "fleet-days": _csv(["day", *STATES, "partial", "hours"],
                           ([x["day"], *(x[s] for s in STATES), x["partial"], x["hours"]]
                            for x in to_records(r.fleet_days))),
        "why": _csv(["rank", "node", *WHY], ([i + 1, x.node, *(w.get(k) for k in WHY)]
                                             for i, x in enumerate(r.risks) for w in x.why)),
        **{name: _fleet_csv(name, r.fleet_tables.get(name, [])) for name in NAMES[-6:]},
    }


def _fleet_csv(name: str, rows: list[dict]) -> str:
    """A fleet table (report/fleetsection.py records) with every column."""
    from .fleetsection import TABLES

    header = list(rows[0]) if rows else [c for n, _, cols in TABLES if n == name for c, _ in cols]
    return _csv(header, ([x.get(c) for c in header] for x in rows))
