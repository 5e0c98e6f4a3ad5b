"""The report's fleet tables (``analysis.fleetviews``) from a summary, as plain records, and how each is
shown: regressions since a date, time to first failure of new nodes, MTBF per check and per component
kind, versions across the fleet and the nodes that drift. Pure: no I/O, no clock.

Inputs, read the same from the database and from frames (``summary.Summary`` with ``recent``):
``perf_recent`` (each series' last n + 20 samples: the regressions), ``reliability`` (first run and
first failure per node: TTFF), ``flagged_results`` + ``mtbf_runs`` (failure onsets and node-hours:
MTBF). Versions are not in the history database: the caller passes them (the sweep has them from its
burn-in records); without them the two version tables are empty.
"""
from __future__ import annotations

import math
from typing import Any

#: name (CSV ``<page>.<name>.csv``), title, [(column, header)] shown; the CSV and the JSON hold every column.
TABLES: tuple[tuple[str, str, list[tuple[str, str]]], ...] = (
    ("regressions", "Regressions against the unit's own baseline",
     [("node", "node"), ("component", "component"), ("text", "regression"), ("value", "now"),
      ("baseline", "baseline"), ("hits", "hits"), ("runs", "of runs")]),
    ("new-nodes", "New nodes: time to first failure",
     [("node", "node"), ("first_seen", "first seen"), ("first_failure_at", "first failure"),
      ("ttff_h", "time to first failure"), ("failures", "failures"), ("observed_h", "observed for")]),
    ("mtbf-check", "MTBF per check",
     [("key", "check"), ("failures", "failures"), ("nodes", "nodes"), ("mtbf_h", "MTBF"),
      ("last_failure_at", "last failure")]),
    ("mtbf-component", "MTBF per component kind",
     [("key", "component"), ("failures", "failures"), ("nodes", "nodes"), ("mtbf_h", "MTBF"),
      ("last_failure_at", "last failure")]),
    ("versions", "Versions across the fleet",
     [("item", "item"), ("value", "value"), ("nodes", "nodes"), ("share", "share"), ("majority", "majority")]),
    ("drift", "Version drift",
     [("node", "node"), ("node_class", "class"), ("item", "item"), ("value", "value"), ("majority", "majority"),
      ("severity", "severity")]),
)
NAMES = tuple(t[0] for t in TABLES)
_KEYS = {"regressions": "regressions", "new-nodes": "new_nodes", "mtbf-check": "mtbf_check",
         "mtbf-component": "mtbf_component", "versions": "versions", "drift": "drift"}


def _plain(v: Any) -> Any:
    """A cell as JSON carries it: numpy -> Python, NaN/NaT -> None, times -> ISO-8601 UTC text."""
    if v is None:
        return None
    if hasattr(v, "isoformat"):
        try:
            if v != v:  # NaT
                return None
        except (TypeError, ValueError):
            pass
        return v.isoformat().replace("+00:00", "Z")
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def records(df: Any) -> list[dict[str, Any]]:
    if df is None or not len(df):
        return []
    return [{str(k): _plain(v) for k, v in row.items()} for row in df.to_dict("records")]


def fleet_tables(summary: Any, now: Any, *, k: int, n: int, versions: Any = None,
                 expected_versions: Any = None, new_since: Any = None,
                 regressions: Any = None) -> dict[str, list[dict[str, Any]]]:
    """{name: records} for every table of :data:`TABLES` (empty lists without their inputs).
    ``regressions``: the fleet ranking's ``regression_hits`` of the same samples (``rank_fleet(keep=)``)."""
    import pandas as pd

    from ..analysis import drift as drift_
    from ..analysis import fleetviews as fv
    from ..analysis._frames import empty

    now = pd.Timestamp(now)
    new_since = now - pd.Timedelta(days=30) if new_since is None else pd.Timestamp(new_since)
    perf = getattr(summary, "perf_recent", None)
    runs = getattr(summary, "mtbf_runs", None)
    vers = versions if versions is not None and len(versions) else None
    frames = {
        "regressions": fv.regressions_since(perf, k=k, n=n, hits=regressions),
        "new_nodes": fv.new_node_ttff(None, now=now, new_since=new_since, reliability=summary.reliability,
                                      first_seen=getattr(summary, "first_seen", None)),
        "mtbf_check": fv.mtbf(summary.flagged_results, runs, now=now, by="check"),
        "mtbf_component": fv.mtbf(summary.flagged_results, runs, now=now, by="component"),
        "versions": fv.version_table(vers),
        "drift": drift_.version_drift(vers, expected_versions) if vers is not None else empty(drift_.DRIFT_COLUMNS),
    }
    return {name: records(frames[_KEYS[name]]) for name in NAMES}


MIN_BASELINE = 3  # earlier samples a unit's own baseline needs (fleetrank.regression_hits' min_periods)


def table_notes(summary: Any, now: Any, *, k: int, new_since: Any = None) -> dict[str, str]:
    """{table name: why it says nothing}, for the tables that can be empty for want of history rather
    than for want of a problem: "regressions" when the typical unit has fewer samples of a "higher is
    better" figure in the window than a persistent regression needs (k of them, each after a baseline
    of MIN_BASELINE earlier ones); "new-nodes" when the whole history is younger than the new-node
    span (every node would be new). A table without a note that is empty means "none"."""
    import pandas as pd

    from ..analysis.fleetrank import FIGURES

    notes: dict[str, str] = {}
    need = k + MIN_BASELINE
    perf = getattr(summary, "perf_recent", None)
    names = sorted(m for m, side in FIGURES.items() if side == "low")
    have = 0
    if perf is not None and len(perf):
        import numpy as np

        from ..analysis._frames import isin_mask, series_codes

        sub = perf[isin_mask(perf["name"], names)]
        if len(sub):  # samples per unit (node, component, name; no component is a value of its own): the median
            codes, _ = series_codes(sub, ["node", "component", "name"], with_keys=False)
            have = int(np.median(np.bincount(codes)))
            names = sorted({str(n) for n in pd.unique(sub["name"])})
    if have < need:
        notes["regressions"] = (f"not enough history: {have:,} samples of {need:,} per unit (the median unit's "
                                f"{', '.join(names)} in the window; a regression must show in {k} samples, each "
                                f"after {MIN_BASELINE} earlier ones): widen --since")
    first = getattr(summary, "first_seen", None)
    now = pd.Timestamp(now)
    new_since = now - pd.Timedelta(days=30) if new_since is None else pd.Timestamp(new_since)
    if first is not None and len(first) and pd.Timestamp(first.min()) >= new_since:
        notes["new-nodes"] = (f"not enough history: it begins {pd.Timestamp(first.min()):%Y-%m-%d %H:%M}, after the "
                              f"new-node span's start ({new_since:%Y-%m-%d}): every node would count as new")
    return notes


def cell(value: Any, column: str = "") -> str:
    """A table cell's text: numbers to 4 significant digits, times to the minute, booleans yes/no."""
    from .human import duration_h, num, when

    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if column.endswith("_h") and isinstance(value, (int, float)):
        return duration_h(value)
    if isinstance(value, float):
        return "%.1f" % (value * 100) + " %" if column == "share" else num(value)
    if isinstance(value, int):
        return f"{value:,}"
    text = str(value)
    if column.endswith(("_at", "_seen", "since")) and len(text) >= 16 and text[10:11] == "T":
        return when(text)
    return text


def summary_line(name: str, rows: list[dict[str, Any]], note: str = "") -> str:
    """One line that says what a table holds (the HTML fold's summary); an empty table says "none" only
    without a ``note`` (``table_notes``: not enough history to look), else the note."""
    if not rows:
        return note or "none"
    if note:
        return f"{note}; {summary_line(name, rows)}"
    if name == "regressions":
        r = rows[0]
        return f"{len(rows):,}; worst: {r['node']} {r['text']}"
    if name == "new-nodes":
        failed = sum(1 for r in rows if r.get("failed"))
        return f"{len(rows):,} new nodes, {failed:,} failed since first seen"
    if name.startswith("mtbf"):
        r = rows[0]
        return f"{len(rows):,}; shortest: {r['key']} {cell(r['mtbf_h'], 'mtbf_h')}"
    if name == "drift":
        return f"{len({r['node'] for r in rows}):,} nodes off their class's majority"
    return f"{len({r['item'] for r in rows}):,} items, {len(rows):,} values"
