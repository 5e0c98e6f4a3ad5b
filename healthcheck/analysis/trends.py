"""Trends: metric series per node and per GPU, and growth rates of cumulative counters.

Counters such as corrected (SBE) ECC errors, NVLink CRC errors and InfiniBand symbol errors are
totals since the last reset. A drop between two samples of one series means the counter restarted
(driver reload, reboot, ``perfquery -R``, GPU swap): the increase over that interval is then the new
value itself (what accumulated since the reset; a lower bound), never a negative number.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import pandas as pd

from ._frames import (SERIES_KEYS, Names, empty, from_ticks, int_times, metric_rows, metric_units,
                      series_codes, time_order)

#: Cumulative error counters emitted by our checks (docs/checks.md): GPU ECC (gpu.ecc.*),
#: NVLink (gpu.nvlink.errors), InfiniBand port counters (ib.port.errors).
DEFAULT_COUNTERS: tuple[str, ...] = (
    "ecc_corrected_volatile", "ecc_corrected_aggregate",
    "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
    "retired_pages_sbe", "retired_pages_dbe",
    "nvlink_crc_errors", "nvlink_replay_errors", "nvlink_recovery_errors",
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)

SERIES_COLUMNS = {"node": "object", "check": "object", "component": "object", "name": "object",
                  "started_at": "datetime64[us, UTC]", "value": "float64", "n": "int64"}
INCREMENT_COLUMNS = {"node": "object", "check": "object", "component": "object", "name": "object",
                     "prev_at": "datetime64[us, UTC]", "started_at": "datetime64[us, UTC]",
                     "prev_value": "float64", "value": "float64", "increase": "float64",
                     "hours": "float64", "rate_per_hour": "float64", "reset": "bool"}
RATE_COLUMNS = {"node": "object", "check": "object", "component": "object", "name": "object",
                "first_at": "datetime64[us, UTC]", "last_at": "datetime64[us, UTC]",
                "samples": "int64", "last_value": "float64", "increase": "float64",
                "resets": "int64", "hours": "float64", "rate_per_hour": "float64",
                "last_rate_per_hour": "float64"}


def metric_series(metrics: pd.DataFrame, names: Names = None, *,
                  per: str = "component", freq: str | None = None,
                  agg: str = "median") -> pd.DataFrame:
    """Time series of metric ``names`` per GPU/port (``per="component"``) or per node (``per="node"``).

    Samples are grouped by series key and time bucket (``freq``, a fixed pandas frequency such as
    ``"1h"`` or ``"1D"``; None = each distinct timestamp) and reduced with ``agg`` ("median",
    "mean", "min", "max", "sum", "last", "first"). With ``per="node"`` the components of one node
    are reduced together (e.g. the median temperature of a node's 8 GPUs) and ``component`` is None.
    NaN values are ignored.

    Returns columns: node, check, component, name, started_at (bucket start, UTC), value, n (samples
    reduced). Sorted by series then time.

    Complexity: one filter and one hash groupby, O(n) plus the O(g log g) sort of the g output rows.
    """
    df = metric_units(metrics, names, per)
    if df.empty:
        return empty(SERIES_COLUMNS)
    if freq is not None:
        df = df.assign(started_at=df["started_at"].dt.floor(freq))
    keys = SERIES_KEYS + ["started_at"]
    grouped = df.groupby(keys, dropna=False, sort=True, observed=True)["value"]
    out = grouped.agg(agg).rename("value").to_frame()
    out["n"] = grouped.count().astype("int64")
    out = out.reset_index()
    return out[list(SERIES_COLUMNS)].reset_index(drop=True)


def changed_series(metrics: pd.DataFrame, names: Names = DEFAULT_COUNTERS) -> pd.DataFrame:
    """The samples of the series (of ``names``) that hold two or more distinct values in the frame:
    the only ones whose :func:`counter_rates` row can have an increase or a reset (a constant series
    grows by 0). Columns node, started_at, check, component, name, value; input order kept.

    Complexity: O(n) selection and series codes, two ``bincount``-style reductions.
    """
    df = metric_rows(metrics, names)
    if df.empty:
        return df
    codes, keys = series_codes(df, SERIES_KEYS)
    values = df["value"].to_numpy(dtype="float64")
    lo = np.full(len(keys), np.inf)
    hi = np.full(len(keys), -np.inf)
    np.minimum.at(lo, codes, values)
    np.maximum.at(hi, codes, values)
    return df[(hi > lo)[codes]].reset_index(drop=True)


def latest_samples(metrics: pd.DataFrame, names: Names = None) -> pd.DataFrame:
    """The latest sample of each series (of ``names``) with a value: one row per (node, check,
    component, name), a missing component read as "" (the history's rollups key it so). Among samples
    of equal time the one later in the frame wins (``load_frames`` orders by time, run, seq). Columns
    node, started_at, check, component, name, value; sorted by series key.

    Complexity: O(n) selection and series codes, one O(n log n) time sort unless already in time order.
    """
    df = metric_rows(metrics, names)
    if df.empty:
        return df
    comp = df["component"].astype(object)
    df = df.assign(component=comp.where(comp.notna(), ""))
    codes, _ = series_codes(df, SERIES_KEYS, with_keys=False)
    order = time_order(codes, int_times(df["started_at"]))
    c = codes[order]
    last = np.ones(len(c), dtype=bool)
    last[:-1] = c[1:] != c[:-1]
    return df.iloc[order[last]].reset_index(drop=True)


class _Steps(NamedTuple):
    """Counter samples in (series, time) order with the step from the previous sample."""
    keys: pd.DataFrame     # series keys, one row per code
    code: np.ndarray       # series code per sample
    ticks: np.ndarray      # int64 time per sample (unit of ``like``)
    value: np.ndarray
    same: np.ndarray       # the previous sample is of the same series
    reset: np.ndarray      # the counter dropped since the previous sample
    increase: np.ndarray   # growth since the previous sample (0 at a series' first sample)
    hours: np.ndarray      # hours since the previous sample (0 at a series' first sample)
    like: pd.Series        # the time column (for its unit)
    per_second: int        # ticks per second


def _steps(metrics: pd.DataFrame, names: Names, nodes: Iterable[str] | None) -> _Steps | None:
    """The samples of the selected counters, sorted, with per-interval increases (no Python loop)."""
    df = metric_rows(metrics, names, nodes)
    if df.empty:
        return None
    codes, keys = series_codes(df, SERIES_KEYS)
    ticks = int_times(df["started_at"])
    order = time_order(codes, ticks)
    c, t, v = codes[order], ticks[order], df["value"].to_numpy(dtype="float64")[order]
    same = np.zeros(len(c), dtype=bool)
    same[1:] = c[1:] == c[:-1]
    delta = np.zeros(len(v))
    delta[1:] = v[1:] - v[:-1]
    reset = same & (delta < 0)
    increase = np.where(same, np.where(reset, np.maximum(v, 0.0), delta), 0.0)
    per_second = pd.Timedelta(seconds=1) // pd.Timedelta(1, unit=pd.DatetimeIndex(df["started_at"]).unit)
    dt = np.zeros(len(t), dtype=np.int64)
    dt[1:] = t[1:] - t[:-1]
    hours = np.where(same, dt / per_second / 3600.0, 0.0)
    return _Steps(keys, c, t, v, same, reset, increase, hours, df["started_at"], per_second)


def counter_increments(metrics: pd.DataFrame, names: Names = DEFAULT_COUNTERS, *,
                       nodes: Iterable[str] | None = None) -> pd.DataFrame:
    """Per-interval increases of cumulative counters, with resets handled.

    For consecutive samples of one series (sorted by time): ``increase = value - prev_value``, or
    ``value`` when the counter dropped (``reset`` = True). ``rate_per_hour = increase / hours``;
    NaN when both samples share a timestamp (hours == 0). Samples with a NaN value are skipped.

    Returns one row per interval (a series with k samples gives k-1 rows), columns: node, check,
    component, name, prev_at, started_at, prev_value, value, increase, hours, rate_per_hour, reset.

    ``names``: names, one name, a predicate ``name -> bool`` (asked once per distinct name) or None
    (all); ``nodes``: only these nodes (None: all).

    Complexity: O(n) selection and series codes (integer factorize), an O(n log n) stable sort,
    then vectorised numpy differences (no per-series Python loop).
    """
    st = _steps(metrics, names, nodes)
    if st is None:
        return empty(INCREMENT_COLUMNS)
    at = np.flatnonzero(st.same)
    out = st.keys.iloc[st.code[at]].reset_index(drop=True)
    out["prev_at"] = from_ticks(st.ticks[at - 1], st.like)
    out["started_at"] = from_ticks(st.ticks[at], st.like)
    out["prev_value"] = st.value[at - 1]
    out["value"] = st.value[at]
    out["increase"] = st.increase[at]
    out["hours"] = st.hours[at]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["rate_per_hour"] = np.where(st.hours[at] > 0, st.increase[at] / st.hours[at], np.nan)
    out["reset"] = st.reset[at]
    return out[list(INCREMENT_COLUMNS)]


def counter_rates(metrics: pd.DataFrame, names: Names = DEFAULT_COUNTERS, *,
                  nodes: Iterable[str] | None = None, min_hours: float = 0.0) -> pd.DataFrame:
    """Growth rate of each counter series over the whole frame (filter ``metrics`` by time first
    for a window, e.g. the last 7 days).

    ``increase`` sums the per-interval increases of :func:`counter_increments` (so a reset never
    makes it negative), ``hours = last_at - first_at``, ``rate_per_hour = increase / hours`` (NaN
    with a single sample or zero span), ``last_rate_per_hour`` = the rate over the latest interval
    (NaN when unknown), ``resets`` = how many drops were seen.

    Returns one row per series, columns: node, check, component, name, first_at, last_at, samples,
    last_value, increase, resets, hours, rate_per_hour, last_rate_per_hour; sorted by
    rate_per_hour descending (NaN last), then series key.

    ``names`` / ``nodes`` as in :func:`counter_increments`. ``min_hours`` > 0 divides by
    ``max(hours, min_hours)`` instead (never NaN: a single sample gives 0, and two samples minutes
    apart do not read as a huge rate).

    Complexity: that of :func:`counter_increments`, then ``np.bincount`` reductions per series code
    and an O(s log s) sort of the s output rows.
    """
    st = _steps(metrics, names, nodes)
    if st is None:
        return empty(RATE_COLUMNS)
    n = len(st.keys)
    starts = np.flatnonzero(~st.same)
    ends = np.append(starts[1:] - 1, len(st.code) - 1)
    out = st.keys.copy()
    out["first_at"] = from_ticks(st.ticks[starts], st.like)
    out["last_at"] = from_ticks(st.ticks[ends], st.like)
    out["samples"] = np.bincount(st.code, minlength=n).astype("int64")
    out["last_value"] = st.value[ends]
    increase = np.bincount(st.code, weights=st.increase, minlength=n)
    out["increase"] = increase
    out["resets"] = np.bincount(st.code, weights=st.reset, minlength=n).astype("int64")
    hours = (st.ticks[ends] - st.ticks[starts]) / st.per_second / 3600.0
    out["hours"] = hours
    with np.errstate(divide="ignore", invalid="ignore"):
        if min_hours > 0:
            out["rate_per_hour"] = increase / np.maximum(hours, min_hours)
        else:
            out["rate_per_hour"] = np.where(hours > 0, increase / hours, np.nan)
        last_ok = st.same[ends] & (st.hours[ends] > 0)
        out["last_rate_per_hour"] = np.where(last_ok, st.increase[ends] / st.hours[ends], np.nan)
    out = out.sort_values(["rate_per_hour"] + SERIES_KEYS, ascending=[False, True, True, True, True],
                          na_position="last", kind="stable")
    return out[list(RATE_COLUMNS)].reset_index(drop=True)
