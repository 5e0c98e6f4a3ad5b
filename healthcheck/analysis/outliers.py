"""Fleet outliers among peers of the same node class: the robust (modified) z-score.

``z = 0.6745 * (x - median) / MAD`` with ``MAD = median(|x - median|)`` over the peers (Iglewicz &
Hoaglin, "How to Detect and Handle Outliers", ASQC 1993); ``|z| > 3.5`` flags an outlier (their
recommended cut-off). 0.6745 is the 0.75 quantile of the standard normal, which makes the score
comparable to an ordinary z-score for normal data, while one bad node cannot drag the median and
MAD the way it drags a mean and standard deviation.

MAD == 0 (more than half the peers share one value, common for identical GPUs): the scale falls
back to the mean absolute deviation, ``z = (x - median) / (1.253314 * MeanAD)`` (1.253314 =
sqrt(pi/2) makes MeanAD consistent with a standard deviation); when MeanAD is 0 too, every peer
equals the median and z = 0. Groups with fewer than ``min_peers`` members get z = NaN and are never
flagged: a median of three is no fleet.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._frames import SERIES_KEYS, Names, empty, int_times, metric_units, per_name, series_codes, text_categories

IGLEWICZ_HOAGLIN_THRESHOLD = 3.5
_K = 0.6745          # Phi^-1(0.75)
_MEANAD_K = 1.253314  # sqrt(pi / 2)

OUTLIER_COLUMNS = {"node_class": "object", "check": "object", "name": "object", "node": "object",
                   "component": "object", "value": "float64", "peer_median": "float64",
                   "mad": "float64", "n_peers": "int64", "z": "float64", "outlier": "bool",
                   "side": "object"}

_STATS = ("median", "mean", "min", "max", "last", "first")

NodeClassSource = Mapping[str, Any] | Callable[[str], Any] | None


def robust_z(values: pd.Series, groups: pd.Series | list[pd.Series] | None = None, *,
             min_peers: int = 5) -> pd.DataFrame:
    """Modified z-score of each value within its group (all one group when ``groups`` is None).

    Returns a frame aligned on ``values.index`` with columns peer_median, mad, n_peers, z. NaN
    values are not peers and get z NaN.

    Complexity: four grouped transforms (hash groupby), O(n).
    """
    values = pd.to_numeric(values, errors="coerce").astype("float64")
    keys = [pd.Series(0, index=values.index)] if groups is None else (
        groups if isinstance(groups, list) else [groups])
    grouped = values.groupby(keys, dropna=False, sort=False)
    med = grouped.transform("median")
    absdev = (values - med).abs()
    by_dev = absdev.groupby(keys, dropna=False, sort=False)
    mad = by_dev.transform("median")
    meanad = by_dev.transform("mean")
    n = grouped.transform("count").fillna(0).astype("int64")
    diff = values - med
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(mad > 0, _K * diff / mad,
                     np.where(meanad > 0, diff / (_MEANAD_K * meanad), 0.0))
    z = pd.Series(z, index=values.index).where(values.notna() & (n >= min_peers))
    return pd.DataFrame({"peer_median": med, "mad": mad, "n_peers": n, "z": z})


def _class_of(nodes: pd.Series, node_class: NodeClassSource) -> pd.Series:
    """Class name per row, resolving each distinct node once (O(distinct nodes))."""
    if node_class is None:
        return pd.Series(None, index=nodes.index, dtype=object)
    uniq = pd.unique(nodes)
    if callable(node_class):
        resolved = {n: node_class(n) for n in uniq}
    else:
        resolved = {n: node_class.get(n) for n in uniq}
    resolved = {n: getattr(c, "name", c) for n, c in resolved.items()}
    return nodes.map(resolved).astype(object)


def _reduce(df: pd.DataFrame, stat: str) -> pd.DataFrame:
    """One row per (node, check, component, name) unit, its samples reduced with ``stat``.

    Units are integer series codes; "first"/"last" take the earliest/latest sample by time (input
    order among equal times); the other statistics are grouped reductions over the codes.
    """
    keys = ["node", "check", "component", "name"]
    codes, units = series_codes(df, keys)
    values = df["value"].to_numpy(dtype="float64")
    if stat in ("last", "first"):
        order = np.argsort(int_times(df["started_at"]), kind="stable")
        c = codes[order]
        # Sorted by time: the position of each unit's last (first) sample in that order.
        pos = np.full(len(units), -1 if stat == "last" else len(c), dtype=np.int64)
        (np.maximum if stat == "last" else np.minimum).at(pos, c, np.arange(len(c)))
        units["value"] = values[order[pos]]
    else:
        units["value"] = pd.Series(values).groupby(codes, sort=True).agg(stat).to_numpy()
    return units


def fleet_outliers(metrics: pd.DataFrame, names: Names = None, *,
                   node_class: NodeClassSource = None, per: str = "component",
                   stat: str = "median", threshold: float = IGLEWICZ_HOAGLIN_THRESHOLD,
                   min_peers: int = 5, side: str | Mapping[str, str] | Callable[[str], str] = "both",
                   min_rel_deviation: float = 0.0) -> pd.DataFrame:
    """Score every node (``per="node"``) or GPU/port (``per="component"``) against its peers.

    Each unit's samples are first reduced with ``stat`` (median by default: one noisy run does not
    make an outlier; "last" = current state). Peers = units with the same node class, check and
    metric name. ``node_class`` maps a node to its class: a mapping, or a callable such as
    ``lambda n: cfg.node_class(n)`` (an object with ``.name`` is reduced to its name); None = one
    fleet. Nodes of no class are peers of each other.

    ``side``: "both", "low" (only low values are bad: bandwidth, TFLOPS) or "high" (temperatures,
    error rates), or ``{name: side}`` (unlisted: "both"), or a callable ``name -> side`` (asked once
    per distinct name). ``min_rel_deviation``: additionally require
    ``|x - median| > min_rel_deviation * |median|`` (e.g. 0.05 so a 1 % spread on a very uniform fleet
    is not flagged). ``outlier`` = ``|z| > threshold`` on the flagged side.

    Returns columns: node_class, check, name, node, component (None with per="node"), value,
    peer_median, mad, n_peers, z, outlier, side ("low"/"high" where value is below/above the
    median, None when equal); sorted by |z| descending (NaN last).

    ``names``: names, one name, a predicate ``name -> bool`` (asked once per distinct name) or None
    (all).

    Complexity: O(n) selection and integer series codes, one reduction over the codes (O(n log n)
    time sort for "first"/"last" when the rows are not already in time order), robust_z O(u) over
    the u units, class lookup O(distinct nodes).
    """
    if stat not in _STATS:
        raise ValueError(f"stat must be one of {_STATS}, not {stat!r}")
    df = metric_units(metrics, names, per)
    if df.empty:
        return empty(OUTLIER_COLUMNS)
    units = _reduce(df, stat)
    units = units.assign(**{c: text_categories(units[c]) for c in SERIES_KEYS if c in units.columns})
    units["node_class"] = _class_of(units["node"], node_class)
    scored = robust_z(units["value"], [units["node_class"], units["check"], units["name"]],
                      min_peers=min_peers)
    units = pd.concat([units, scored], axis=1)
    wanted = per_name(units, side, "both")
    bad = ~wanted.isin(["both", "low", "high"])
    if bad.any():
        raise ValueError(f"unknown side(s): {sorted(set(wanted[bad]))}")
    diff = units["value"] - units["peer_median"]
    units["side"] = np.where(diff < 0, "low", np.where(diff > 0, "high", None))
    big = diff.abs() > min_rel_deviation * units["peer_median"].abs() if min_rel_deviation else True
    side_ok = wanted.eq("both") | wanted.eq(units["side"])
    units["outlier"] = ((units["z"].abs() > threshold) & side_ok & big).fillna(False).astype(bool)
    units["_absz"] = units["z"].abs()
    units = units.sort_values(["_absz", "node_class", "check", "name", "node", "component"],
                              ascending=[False, True, True, True, True, True], na_position="last",
                              kind="stable")
    return units[list(OUTLIER_COLUMNS)].reset_index(drop=True)
