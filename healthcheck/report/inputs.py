"""The report's view of :mod:`healthcheck.analysis` (issue 4): which analysis computes each figure,
with which settings, renamed into what the report's model and plots take. No analysis here.

- counter growth:    :func:`healthcheck.analysis.trends.counter_rates` over the error counters
                     (``actions.counter_metric``), rate over at least one hour;
- growth plot:       :func:`healthcheck.analysis.trends.counter_increments`, accumulated;
- fleet outliers:    :func:`healthcheck.analysis.outliers.fleet_outliers` of each GPU/port's latest
                     performance figure (``actions.perf_metric``) among its node class, bad side
                     from ``actions.low_is_bad``;
- drains:            :mod:`healthcheck.analysis.availability` (intervals, summary, flapping);
- failing runs:      :func:`healthcheck.analysis.availability.reliability` (failure onsets per node);
- node risk:         :func:`healthcheck.analysis.risk.rank_nodes` over the above (see ``risk``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..analysis import availability, outliers, risk as risk_, trends
from . import actions as act

SOURCE = "healthcheck.analysis"
SERIES_KEYS = ["node", "check", "component", "name"]
MIN_PEERS = 3            # a median of fewer values is no fleet
MIN_RELATIVE = 0.05      # 5 % off the median at least: no alarm on 0.1 % noise of a uniform fleet
FLAPPING_CYCLES = 3
INTERVAL_COLUMNS = ["node", "start", "end", "open", "reason"]


def analysis_source() -> str:
    """Which implementation computed the figures (shown in the report's footer)."""
    return SOURCE


def growth(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per error-counter series: columns of ``counter_rates`` (increase with resets, rate_per_hour
    over max(span, 1 h), last_value, first_at, last_at, ...)."""
    return trends.counter_rates(metrics, act.counter_metric, min_hours=1.0)


def growth_points(metrics: pd.DataFrame, series: pd.DataFrame, limit_points: int = 400) -> pd.DataFrame:
    """The samples of the given counter series with their cumulative increase (for the plot):
    columns node, check, component, name, started_at, value, cumulative; at most ``limit_points``
    per series (evenly spaced, the last one kept)."""
    cols = SERIES_KEYS + ["started_at", "value", "cumulative"]
    if series.empty:
        return pd.DataFrame(columns=cols)
    inc = trends.counter_increments(metrics, set(series["name"]), nodes=set(series["node"]))
    inc = inc.merge(series[SERIES_KEYS].drop_duplicates(), on=SERIES_KEYS, how="inner")
    if inc.empty:
        return pd.DataFrame(columns=cols)
    first = ~inc.duplicated(SERIES_KEYS, keep="first")
    start = inc.loc[first, SERIES_KEYS + ["prev_at", "prev_value"]].rename(
        columns={"prev_at": "started_at", "prev_value": "value"}).assign(cumulative=0.0)
    inc = inc.assign(cumulative=inc.groupby(SERIES_KEYS, dropna=False, sort=False)["increase"].cumsum())
    pts = pd.concat([start, inc[cols]], ignore_index=True)
    pts = pts.sort_values(SERIES_KEYS + ["started_at"], kind="stable", na_position="last")
    parts = []
    for _, grp in pts.groupby(SERIES_KEYS, dropna=False, sort=False):
        if len(grp) > limit_points:
            grp = grp.iloc[np.unique(np.append(np.linspace(0, len(grp) - 1, limit_points).astype(int), len(grp) - 1))]
        parts.append(grp)
    return pd.concat(parts, ignore_index=True)


def perf_outliers(metrics: pd.DataFrame, peer_group: Callable[[str], str]) -> pd.DataFrame:
    """Columns of ``fleet_outliers`` (node_class = the peer group, peer_median, z, outlier, ...) for
    the latest performance figure of every GPU/port/node; component "" for node-level figures."""
    out = outliers.fleet_outliers(metrics, act.perf_metric, node_class=peer_group, per="component",
                                  stat="last", min_peers=MIN_PEERS, min_rel_deviation=MIN_RELATIVE,
                                  side=lambda n: "low" if act.low_is_bad(n) else "high")
    return out.assign(component=out["component"].astype(object).where(out["component"].notna(), ""))


def drain_intervals(actions: pd.DataFrame, now: pd.Timestamp) -> pd.DataFrame:
    """``availability.drain_intervals`` as the timeline takes it: node, start, end (``now`` while
    open), open, reason."""
    iv = availability.drain_intervals(actions, now=now)
    end = iv["resumed_at"].where(~iv["open"], now)
    return pd.DataFrame({"node": iv["node"], "start": iv["drained_at"], "end": end, "open": iv["open"],
                         "reason": iv["reason"]}, columns=INTERVAL_COLUMNS)


def flapping(actions: pd.DataFrame, since: pd.Timestamp, now: pd.Timestamp) -> pd.DataFrame:
    """``availability.flapping``: nodes with at least FLAPPING_CYCLES drain/resume cycles in the window."""
    return availability.flapping(actions, now=now, window=now - since, min_cycles=FLAPPING_CYCLES)


def drain_stats(actions: pd.DataFrame, since: pd.Timestamp, now: pd.Timestamp,
                flaps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per node: ``availability.drain_summary`` over [since, now] plus ``flapping`` (bool, in
    ``flaps``, the output of :func:`flapping`, computed here when not given)."""
    summary = availability.drain_summary(actions, now=now, since=since)
    if flaps is None:
        flaps = flapping(actions, since, now)
    return summary.assign(flapping=summary["node"].isin(set(flaps["node"])))


def failures(runs: pd.DataFrame, now: pd.Timestamp) -> pd.DataFrame:
    """``availability.reliability`` of the window's runs: per node, ``failures`` = onsets of
    failing streaks (a run with status fail after one that was not)."""
    return availability.reliability(runs, now=now)


def risk(*, latest_results: pd.DataFrame, rates: pd.DataFrame, perf: pd.DataFrame,
         flaps: pd.DataFrame, drains: pd.DataFrame, reliability: pd.DataFrame) -> pd.DataFrame:
    """``risk.rank_nodes`` (default weights) over the figures above: the results of each node's
    latest run (what fails/warns *now*), counter growth (:func:`growth`), performance outliers
    (:func:`perf_outliers`), flapping, the drain summary and the failure onsets."""
    return risk_.rank_nodes(results=latest_results, rates=rates, outliers=perf, flapping=flaps,
                            drains=drains, reliability=reliability)
