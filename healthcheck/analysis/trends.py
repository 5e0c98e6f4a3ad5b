"""Trends: metric series per node and per GPU, and growth rates of cumulative counters.

Counters such as corrected (SBE) ECC errors, NVLink CRC errors and InfiniBand symbol errors are
totals since the last reset. A drop between two samples of one series means the counter restarted
(driver reload, reboot, ``perfquery -R``, GPU swap): the increase over that interval is then the new
value itself (what accumulated since the reset; a lower bound), never a negative number.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ._frames import SERIES_KEYS, empty, filter_names, hours_between, prepare, series_sorted

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

_METRIC_COLS = ["node", "started_at", "check", "component", "name", "value"]

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


def metric_series(metrics: pd.DataFrame, names: str | Iterable[str] | None = None, *,
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
    if per not in ("component", "node"):
        raise ValueError(f"per must be 'component' or 'node', not {per!r}")
    df = filter_names(prepare(metrics, _METRIC_COLS, frame="metrics", time_col="started_at",
                              value_col="value"), names)
    df = df[df["value"].notna()]
    if df.empty:
        return empty(SERIES_COLUMNS)
    if per == "node":
        df = df.assign(component=None)
    if freq is not None:
        df = df.assign(started_at=df["started_at"].dt.floor(freq))
    keys = SERIES_KEYS + ["started_at"]
    grouped = df.groupby(keys, dropna=False, sort=True)["value"]
    out = grouped.agg(agg).rename("value").to_frame()
    out["n"] = grouped.count().astype("int64")
    out = out.reset_index()
    return out[list(SERIES_COLUMNS)].reset_index(drop=True)


def counter_increments(metrics: pd.DataFrame,
                       names: str | Iterable[str] | None = DEFAULT_COUNTERS) -> pd.DataFrame:
    """Per-interval increases of cumulative counters, with resets handled.

    For consecutive samples of one series (sorted by time): ``increase = value - prev_value``, or
    ``value`` when the counter dropped (``reset`` = True). ``rate_per_hour = increase / hours``;
    NaN when both samples share a timestamp (hours == 0). Samples with a NaN value are skipped.

    Returns one row per interval (a series with k samples gives k-1 rows), columns: node, check,
    component, name, prev_at, started_at, prev_value, value, increase, hours, rate_per_hour, reset.

    Complexity: O(n log n) for the sort, then vectorised shifts (no per-series Python loop).
    """
    df = filter_names(prepare(metrics, _METRIC_COLS, frame="metrics", time_col="started_at",
                              value_col="value"), names)
    df = df[df["value"].notna()]
    if df.empty:
        return empty(INCREMENT_COLUMNS)
    df = series_sorted(df, SERIES_KEYS)
    same = df["_gid"].eq(df["_gid"].shift())
    df["prev_value"] = df["value"].shift()
    df["prev_at"] = df["started_at"].shift()
    df = df[same].copy()
    delta = df["value"] - df["prev_value"]
    df["reset"] = (delta < 0).astype(bool)
    df["increase"] = np.where(df["reset"], df["value"].clip(lower=0.0), delta)
    df["hours"] = hours_between(df["started_at"], df["prev_at"])
    df["rate_per_hour"] = (df["increase"] / df["hours"]).where(df["hours"] > 0)
    return df[list(INCREMENT_COLUMNS)].reset_index(drop=True)


def counter_rates(metrics: pd.DataFrame,
                  names: str | Iterable[str] | None = DEFAULT_COUNTERS) -> pd.DataFrame:
    """Growth rate of each counter series over the whole frame (filter ``metrics`` by time first
    for a window, e.g. the last 7 days).

    ``increase`` sums the per-interval increases of :func:`counter_increments` (so a reset never
    makes it negative), ``hours = last_at - first_at``, ``rate_per_hour = increase / hours`` (NaN
    with a single sample or zero span), ``last_rate_per_hour`` = the rate over the latest interval
    (NaN when unknown), ``resets`` = how many drops were seen.

    Returns one row per series, columns: node, check, component, name, first_at, last_at, samples,
    last_value, increase, resets, hours, rate_per_hour, last_rate_per_hour; sorted by
    rate_per_hour descending (NaN last), then series key.

    Complexity: O(n log n) sort + two vectorised groupby reductions.
    """
    df = filter_names(prepare(metrics, _METRIC_COLS, frame="metrics", time_col="started_at",
                              value_col="value"), names)
    df = df[df["value"].notna()]
    if df.empty:
        return empty(RATE_COLUMNS)
    df = series_sorted(df, SERIES_KEYS)
    g = df.groupby("_gid", sort=True)
    out = df.loc[g.head(1).index, SERIES_KEYS + ["_gid"]].set_index("_gid")
    out["first_at"] = g["started_at"].min()
    out["last_at"] = g["started_at"].max()
    out["samples"] = g.size().astype("int64")
    out["last_value"] = g["value"].last()
    same = df["_gid"].eq(df["_gid"].shift())
    delta = df["value"] - df["value"].shift()
    reset = same & (delta < 0)
    increase = np.where(reset, df["value"].clip(lower=0.0), delta).astype("float64")
    increase = pd.Series(np.where(same, increase, 0.0), index=df.index)
    hours = hours_between(df["started_at"], df["started_at"].shift())
    rate = (increase / hours).where(same & (hours > 0))
    out["increase"] = increase.groupby(df["_gid"]).sum()
    out["resets"] = reset.groupby(df["_gid"]).sum().astype("int64")
    out["hours"] = hours_between(out["last_at"], out["first_at"])
    out["rate_per_hour"] = (out["increase"] / out["hours"]).where(out["hours"] > 0)
    last_idx = g.tail(1).index
    out["last_rate_per_hour"] = pd.Series(rate.loc[last_idx].to_numpy(),
                                          index=df.loc[last_idx, "_gid"].to_numpy())
    out = out.sort_values(["rate_per_hour"] + SERIES_KEYS, ascending=[False, True, True, True, True],
                          na_position="last", kind="stable")
    return out[list(RATE_COLUMNS)].reset_index(drop=True)
