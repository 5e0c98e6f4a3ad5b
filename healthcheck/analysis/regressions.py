"""Regressions against a node's own baseline: a metric off its own rolling median.

For every ``(node, check, component, name)`` series sorted by time, the baseline of a sample is the
median of the *previous* samples in the window (the sample itself never counts towards its own
baseline). ``change = (value - baseline) / |baseline|``. A sample regressed when it moved the bad
way by more than ``threshold``: below by more than the fraction for "higher is better" metrics
(bus bandwidth, TFLOPS), above for "lower is better" ones (temperatures, latencies, error counts).

A lasting drop pulls the rolling median down after about ``window / 2`` samples; use a window
longer than the period you want to compare against (e.g. ``window="30D"``).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ._frames import SERIES_KEYS, Names, empty, metric_rows, per_name, series_sorted

DEVIATION_COLUMNS = {"node": "object", "check": "object", "component": "object", "name": "object",
                     "started_at": "datetime64[us, UTC]", "value": "float64",
                     "baseline": "float64", "n_baseline": "int64", "change": "float64",
                     "direction": "object", "regressed": "bool"}


def baseline_deviation(metrics: pd.DataFrame, names: Names = None, *,
                       window: int | str = 10, min_periods: int = 3,
                       threshold: float | Mapping[str, float] = 0.15,
                       direction: str | Mapping[str, str] = "higher") -> pd.DataFrame:
    """Every sample with its baseline (rolling median of earlier samples of its own series).

    ``window``: an int = that many previous samples; a pandas offset string (``"30D"``) = the samples
    in that span before this one. ``min_periods``: fewer earlier samples -> no baseline (NaN, never
    regressed). ``threshold``: a fraction, or ``{name: fraction}`` (unlisted names: 0.15).
    ``direction``: which way is better, ``"higher"`` or ``"lower"``, or ``{name: direction}``
    (unlisted names: "higher"). A zero baseline gives ``change`` NaN (no fraction of zero).

    Returns columns: node, check, component, name, started_at, value, baseline, n_baseline, change,
    direction, regressed; one row per non-NaN sample, sorted by series then time.

    Complexity: O(n log n) sort, then grouped rolling median (pandas' grouped window kernels:
    O(n * w) worst case for a window of w samples; no per-series Python loop).
    """
    if isinstance(direction, str) and direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', not {direction!r}")
    if isinstance(window, int) and window < 1 or min_periods < 1:
        raise ValueError("window and min_periods must be >= 1")
    df = metric_rows(metrics, names)
    if df.empty:
        return empty(DEVIATION_COLUMNS)
    df = series_sorted(df, SERIES_KEYS)
    if isinstance(window, str):
        roll = df.groupby("_gid", sort=False).rolling(window, on="started_at", closed="left",
                                                     min_periods=min_periods)["value"]
        base, count = roll.median(), roll.count()
    else:
        prev = df.groupby("_gid", sort=False)["value"].shift(1)
        roll = prev.groupby(df["_gid"], sort=False).rolling(window, min_periods=min_periods)
        base, count = roll.median(), roll.count()
    # Grouped rolling returns (group, row) in group order = our sorted order: drop the group level.
    df["baseline"] = base.to_numpy()
    df["n_baseline"] = np.nan_to_num(count.to_numpy(), nan=0.0).astype("int64")
    denom = df["baseline"].abs()
    df["change"] = ((df["value"] - df["baseline"]) / denom).where(denom > 0)
    thr = per_name(df, threshold, 0.15)
    df["direction"] = per_name(df, direction, "higher")
    bad_dir = ~df["direction"].isin(["higher", "lower"])
    if bad_dir.any():
        raise ValueError(f"unknown direction(s): {sorted(set(df.loc[bad_dir, 'direction']))}")
    higher = df["direction"].eq("higher")
    df["regressed"] = ((higher & (df["change"] < -thr)) | (~higher & (df["change"] > thr)))
    df["regressed"] = df["regressed"].fillna(False).astype(bool)
    return df[list(DEVIATION_COLUMNS)].reset_index(drop=True)


def regressions(metrics: pd.DataFrame, names: Names = None, *,
                window: int | str = 10, min_periods: int = 3,
                threshold: float | Mapping[str, float] = 0.15,
                direction: str | Mapping[str, str] = "higher",
                latest_only: bool = True) -> pd.DataFrame:
    """The regressed samples of :func:`baseline_deviation` (same arguments, same columns).

    ``latest_only`` (default): only series whose *latest* sample regressed, one row each — "this
    node is down 15 % now". Otherwise every regressed sample.

    Complexity: that of :func:`baseline_deviation`, plus an O(n) filter.
    """
    dev = baseline_deviation(metrics, names, window=window, min_periods=min_periods,
                             threshold=threshold, direction=direction)
    if latest_only and len(dev):
        last = ~dev.duplicated(SERIES_KEYS, keep="last")
        dev = dev[last]
    return dev[dev["regressed"]].reset_index(drop=True)
