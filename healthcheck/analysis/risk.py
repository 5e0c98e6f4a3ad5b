"""Nodes ranked by risk, each with the evidence behind its score.

The score is a weighted count of evidence items (defaults in :data:`DEFAULT_WEIGHTS`, override per
kind with ``weights``):

- ``fail`` / ``error`` / ``warn``: a check whose *latest* result on that node/component has that
  status (from the results frame; pass/skip score nothing);
- ``growth``: a counter series whose ``rate_per_hour`` (from :func:`trends.counter_rates`) exceeds
  ``min_rate_per_hour``;
- ``outlier``: a row flagged by :func:`outliers.fleet_outliers`;
- ``regression``: a row of :func:`regressions.regressions`;
- ``flapping``: a row of :func:`availability.flapping`;
- ``drain``: per drain interval of a node in :func:`availability.drain_summary` (its ``drains``
  column; one evidence line per node, scoring ``drains * weight``);
- ``failure``: per failure (onset of a failing streak of runs) of a node in
  :func:`availability.reliability` (its ``failures`` column; one evidence line per node, scoring
  ``failures * weight``).

Every input is optional; pass the outputs of the other analyses so the report and the sweep
compute them once.
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ._frames import empty, prepare

DEFAULT_WEIGHTS: dict[str, float] = {"fail": 10.0, "regression": 5.0, "flapping": 6.0,
                                     "growth": 4.0, "outlier": 3.0, "error": 3.0, "warn": 2.0,
                                     "failure": 2.0, "drain": 1.0}

RISK_COLUMNS = {"node": "object", "score": "float64", "n_fail": "int64", "n_warn": "int64",
                "n_error": "int64", "n_growing": "int64", "n_outliers": "int64",
                "n_regressions": "int64", "flapping": "bool", "failing_checks": "object",
                "evidence": "object"}
_COUNTS = {"fail": "n_fail", "warn": "n_warn", "error": "n_error", "growth": "n_growing",
           "outlier": "n_outliers", "regression": "n_regressions"}


def _where(component: pd.Series) -> pd.Series:
    """" [GPU3]" or "" for node-level rows (missing or empty component; vectorised string ops)."""
    comp = component.astype(object)
    return (" [" + comp.astype(str) + "]").where(comp.notna() & comp.astype(str).ne(""), "")


def _fmt(values: pd.Series, spec: str) -> pd.Series:
    # Python formatting per row, but only over the (few) flagged rows.
    return values.map(lambda v: format(v, spec) if pd.notna(v) else "nan")


def _latest_results(results: pd.DataFrame) -> pd.DataFrame:
    df = prepare(results, ["node", "started_at", "check", "component", "status", "message"],
                 frame="results", time_col="started_at")
    df = df.sort_values("started_at", kind="stable")
    df = df[~df.duplicated(["node", "check", "component"], keep="last")]
    return df.assign(status=df["status"].astype(str).str.lower())


def rank_nodes(*, results: pd.DataFrame | None = None, rates: pd.DataFrame | None = None,
               outliers: pd.DataFrame | None = None, regressions: pd.DataFrame | None = None,
               flapping: pd.DataFrame | None = None,
               drains: pd.DataFrame | None = None,
               reliability: pd.DataFrame | None = None,
               weights: Mapping[str, float] | None = None,
               min_rate_per_hour: float = 0.0) -> pd.DataFrame:
    """Rank nodes by risk score (highest first), with the evidence.

    Returns columns: node, score, n_fail, n_warn, n_error, n_growing, n_outliers, n_regressions,
    flapping (bool), failing_checks (sorted list of check names failing now), evidence (list of
    strings, heaviest first, e.g. ``"FAIL gpu.ecc.sbe [GPU3]: 12 corrected"``,
    ``"growth ecc_corrected_volatile [GPU3]: +2.5/h"``, ``"outlier busbw_gbps: 61.2 vs peer median
    98.5 (z=-9.1)"``, ``"regression busbw_gbps: 80 vs baseline 100 (-20.0%)"``,
    ``"flapping: 4 drain/resume cycles"``, ``"drained 2x, 5.5 h (still drained)"``,
    ``"failed 3x (failing streaks of runs)"``). ``drains`` is a :func:`availability.drain_summary`
    frame (node, drains, drained_s, open), ``reliability`` an :func:`availability.reliability`
    frame (node, failures); both optional. Every node named in any input appears once (score 0 if
    nothing counts against it); ties sort by node.

    Complexity: O(n log n) for the latest-result sort over the results; the rest is linear in the
    (already reduced) analysis outputs, with Python string formatting only over flagged rows.
    """
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    parts: list[pd.DataFrame] = []
    nodes: list[pd.Series] = []

    def add(node: pd.Series, kind: str, text: pd.Series, check: pd.Series | None = None,
            times: pd.Series | None = None) -> None:
        """``times``: per-row multiple of the kind's weight (drains, failures); 1 otherwise."""
        points = w[kind] if times is None else times.to_numpy(dtype=float) * w[kind]
        parts.append(pd.DataFrame({"node": node.to_numpy(), "kind": kind, "points": points,
                                   "text": text.to_numpy(),
                                   "check": (check.to_numpy() if check is not None else None)}))

    if results is not None:
        res = _latest_results(results)
        nodes.append(res["node"])
        for status in ("fail", "error", "warn"):
            sel = res[res["status"].eq(status)]
            if len(sel):
                text = (status.upper() + " " + sel["check"].astype(str) + _where(sel["component"])
                        + ": " + sel["message"].astype(object).fillna("").astype(str))
                add(sel["node"], status, text, sel["check"])
    if rates is not None and len(rates):
        nodes.append(rates["node"])
        sel = rates[rates["rate_per_hour"] > min_rate_per_hour]
        if len(sel):
            text = ("growth " + sel["name"].astype(str) + _where(sel["component"]) + ": +"
                    + _fmt(sel["rate_per_hour"], ".3g") + "/h")
            add(sel["node"], "growth", text)
    if outliers is not None and len(outliers):
        nodes.append(outliers["node"])
        sel = outliers[outliers["outlier"].astype(bool)]
        if len(sel):
            text = ("outlier " + sel["name"].astype(str) + _where(sel["component"]) + ": "
                    + _fmt(sel["value"], ".4g") + " vs peer median "
                    + _fmt(sel["peer_median"], ".4g") + " (z=" + _fmt(sel["z"], ".2f") + ")")
            add(sel["node"], "outlier", text)
    if regressions is not None and len(regressions):
        sel = regressions[regressions["regressed"].astype(bool)]
        nodes.append(regressions["node"])
        if len(sel):
            text = ("regression " + sel["name"].astype(str) + _where(sel["component"]) + ": "
                    + _fmt(sel["value"], ".4g") + " vs baseline " + _fmt(sel["baseline"], ".4g")
                    + " (" + _fmt(sel["change"] * 100, "+.1f") + "%)")
            add(sel["node"], "regression", text)
    if flapping is not None and len(flapping):
        nodes.append(flapping["node"])
        text = "flapping: " + flapping["cycles"].astype(str) + " drain/resume cycles"
        add(flapping["node"], "flapping", text)
    if drains is not None and len(drains):
        nodes.append(drains["node"])
        open_ = drains["open"].astype(bool) if "open" in drains.columns else pd.Series(
            False, index=drains.index)
        sel = drains[(drains["drains"] > 0) | open_]
        if len(sel):
            hours = sel["drained_s"].astype(float) / 3600.0
            text = ("drained " + sel["drains"].astype("int64").astype(str) + "x, "
                    + _fmt(hours.round(2), "g") + " h"
                    + pd.Series(" (still drained)", index=sel.index).where(open_[sel.index], ""))
            add(sel["node"], "drain", text, times=sel["drains"].clip(lower=1))
    if reliability is not None and len(reliability):
        nodes.append(reliability["node"])
        sel = reliability[reliability["failures"] > 0]
        if len(sel):
            text = ("failed " + sel["failures"].astype("int64").astype(str)
                    + "x (failing streaks of runs)")
            add(sel["node"], "failure", text, times=sel["failures"])

    all_nodes = pd.unique(pd.concat(nodes, ignore_index=True).astype(object)) if nodes else []
    all_nodes = [n for n in all_nodes if pd.notna(n)]
    if not all_nodes:
        return empty(RISK_COLUMNS)
    out = pd.DataFrame(index=pd.Index(sorted(all_nodes), name="node"))
    ev = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["node", "kind", "points", "text", "check"])
    ev = ev.sort_values(["node", "points", "text"], ascending=[True, False, True], kind="stable")
    out["score"] = ev.groupby("node")["points"].sum().reindex(out.index).fillna(0.0).astype(float)
    counts = ev.groupby(["node", "kind"]).size().unstack(fill_value=0) if len(ev) else pd.DataFrame()
    for kind, col in _COUNTS.items():
        series = counts[kind] if kind in counts.columns else pd.Series(dtype="int64")
        out[col] = series.reindex(out.index).fillna(0).astype("int64")
    flap = counts["flapping"] if "flapping" in counts.columns else pd.Series(dtype="int64")
    out["flapping"] = flap.reindex(out.index).fillna(0).astype(int) > 0
    fails = ev[ev["kind"].eq("fail")]
    failing = fails.groupby("node")["check"].agg(lambda c: sorted(set(c)))
    out["failing_checks"] = failing.reindex(out.index)
    out["failing_checks"] = out["failing_checks"].apply(lambda v: v if isinstance(v, list) else [])
    evidence = ev.groupby("node")["text"].agg(list)
    out["evidence"] = evidence.reindex(out.index)
    out["evidence"] = out["evidence"].apply(lambda v: v if isinstance(v, list) else [])
    out = out.reset_index().sort_values(["score", "node"], ascending=[False, True], kind="stable")
    return out[list(RISK_COLUMNS)].reset_index(drop=True)
