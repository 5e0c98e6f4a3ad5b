"""ADAPTER between the report and the pandas analyses (issue 4). Owned by the report.

>>> SWITCH POINT: ``healthcheck.analysis`` (trends, growth rates, fleet outliers, availability) is being
>>> written alongside this module. Until it lands, every function below computes what the report needs
>>> with plain pandas/numpy. When it lands, replace the body of each function marked ``# SWITCH`` with a
>>> call into the analysis named there, keeping the signature and the returned columns; nothing else in
>>> ``healthcheck.report`` touches the analyses.

All functions are pure: DataFrames of the contract in ``healthcheck.history.queries.load_frames`` in,
DataFrames out (runs: run_id, node, context, job_id, started_at, duration_s, status; results: run_id, node,
started_at, check, component, status, message; metrics: run_id, node, started_at, check, component, name,
value; actions: record_id, run_id, node, time, action, reason, job_id, context). They are written for
10,000,000 metric rows: only groupby reductions over the rows, no per-row Python.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

try:  # SWITCH: the real analyses; unused until the lead wires them in (see the module docstring)
    import healthcheck.analysis as analysis  # noqa: F401
except ImportError:
    analysis = None

SERIES_KEYS = ["node", "component", "name"]
GROWTH_COLUMNS = SERIES_KEYS + ["first_at", "last_at", "first", "last", "increase", "rate_per_h", "samples"]
OUTLIER_COLUMNS = SERIES_KEYS + ["value", "started_at", "peer_group", "median", "mad", "z", "outlier"]
INTERVAL_COLUMNS = ["node", "start", "end", "open", "reason"]


def analysis_source() -> str:
    """Which implementation computed the figures (shown in the report's footer)."""
    return "healthcheck.analysis" if analysis is not None else "built-in fallback (healthcheck.report.inputs)"


def latest_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per node: its most recent run (run_id, started_at, status, context)."""
    if runs.empty:
        return runs.iloc[0:0]
    ordered = runs.sort_values("started_at", kind="stable")
    return ordered.drop_duplicates("node", keep="last").reset_index(drop=True)


def text(col: pd.Series) -> pd.Series:
    """A key column as str, missing values (a node-level metric has no component) as ""."""
    return col.astype(object).where(col.notna(), "").astype(str)


def _names(col: pd.Series) -> list[str]:
    if isinstance(col.dtype, pd.CategoricalDtype):
        return [str(c) for c in col.cat.categories]
    return [str(c) for c in pd.unique(col)]


def _select(metrics: pd.DataFrame, wanted: Callable[[str], bool]) -> pd.DataFrame:
    """The rows whose metric name passes ``wanted``, in time order (decided once per distinct name)."""
    names = [n for n in _names(metrics["name"]) if wanted(n)]
    if not names:
        return metrics.iloc[0:0]
    sub = metrics.loc[metrics["name"].isin(names), SERIES_KEYS + ["started_at", "value"]]
    if not sub["started_at"].is_monotonic_increasing:
        sub = sub.sort_values("started_at", kind="stable")
    return sub


def _series_codes(sub: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """An integer code per (node, component, name) series, and the keys of each code."""
    grouped = sub.groupby(SERIES_KEYS, observed=True, sort=False, dropna=False)
    codes = grouped.ngroup().to_numpy()
    keys = grouped.size().reset_index()[SERIES_KEYS]
    return codes, keys


def counter_growth(metrics: pd.DataFrame, is_counter: Callable[[str], bool]) -> pd.DataFrame:
    """Per counter series: first/last value and time, the increase and the increase per hour.

    SWITCH: healthcheck.analysis growth rates. The increase counts a decrease as a counter reset (driver
    reload, GPU reset): the value after the reset is growth from zero (Prometheus' ``increase``
    semantics). The rate divides by the span between the first and last sample, at least one hour, so
    one sample a minute apart does not read as a huge rate. Series with one sample have no increase.
    """
    sub = _select(metrics, is_counter)
    if sub.empty:
        return pd.DataFrame(columns=GROWTH_COLUMNS)
    codes, keys = _series_codes(sub)
    order = np.argsort(codes, kind="stable")  # by series, time order kept within each series
    c = codes[order]
    v = sub["value"].to_numpy(dtype="float64")[order]
    t = sub["started_at"].to_numpy()[order]
    same = np.empty(len(c), dtype=bool)
    same[0] = False
    same[1:] = c[1:] == c[:-1]
    step = np.zeros(len(v))
    step[1:] = v[1:] - v[:-1]
    step = np.where(step < 0, v, step)  # reset: counted from zero
    step = np.where(same & ~np.isnan(step), step, 0.0)
    n = len(keys)
    increase = np.bincount(c, weights=step, minlength=n)
    samples = np.bincount(c, minlength=n)
    starts = np.flatnonzero(~same)
    ends = np.append(starts[1:] - 1, len(c) - 1)
    out = keys.copy()
    for col in SERIES_KEYS:
        out[col] = text(out[col])
    out["first_at"] = pd.to_datetime(t[starts], utc=True)
    out["last_at"] = pd.to_datetime(t[ends], utc=True)
    out["first"] = v[starts]
    out["last"] = v[ends]
    out["increase"] = increase
    hours = (out["last_at"] - out["first_at"]).dt.total_seconds().to_numpy() / 3600.0
    out["rate_per_h"] = np.where(samples > 1, increase / np.maximum(hours, 1.0), 0.0)
    out["samples"] = samples
    return out[GROWTH_COLUMNS]


def series_points(metrics: pd.DataFrame, series: pd.DataFrame, limit_points: int = 400) -> pd.DataFrame:
    """The samples of the given (node, component, name) series, cumulative increase per series (for plots).

    At most ``limit_points`` samples per series are kept (evenly spaced, last one always kept).
    """
    if series.empty or metrics.empty:
        return pd.DataFrame(columns=SERIES_KEYS + ["started_at", "value", "cumulative"])
    names = set(series["name"].astype(str))
    sub = _select(metrics, lambda n: n in names)
    nodes = set(series["node"].astype(str))
    sub = sub[sub["node"].isin(nodes)]
    sub = sub.copy()
    wanted = series[SERIES_KEYS].copy()
    for col in SERIES_KEYS:
        sub[col] = text(sub[col])
        wanted[col] = text(wanted[col])
    sub = sub.merge(wanted.drop_duplicates(), on=SERIES_KEYS, how="inner")
    parts = []
    for _, grp in sub.groupby(SERIES_KEYS, sort=False):
        v = grp["value"].to_numpy(dtype="float64")
        step = np.diff(v, prepend=v[0])
        step = np.where(step < 0, v, step)
        grp = grp.assign(cumulative=np.cumsum(step))
        if len(grp) > limit_points:
            idx = np.unique(np.append(np.linspace(0, len(grp) - 1, limit_points).astype(int), len(grp) - 1))
            grp = grp.iloc[idx]
        parts.append(grp)
    return pd.concat(parts, ignore_index=True) if parts else sub.assign(cumulative=[])


def latest_values(metrics: pd.DataFrame, wanted: Callable[[str], bool]) -> pd.DataFrame:
    """The most recent value of every (node, component, name) series whose name passes ``wanted``."""
    sub = _select(metrics, wanted)
    if sub.empty:
        return pd.DataFrame(columns=SERIES_KEYS + ["value", "started_at"])
    last = sub.drop_duplicates(SERIES_KEYS, keep="last")
    out = last[SERIES_KEYS + ["value", "started_at"]].reset_index(drop=True)
    for col in SERIES_KEYS:
        out[col] = text(out[col])
    return out


def fleet_outliers(latest: pd.DataFrame, peer_group: Callable[[str], str], low_is_bad: Callable[[str], bool],
                   threshold: float = 3.5, min_relative: float = 0.05) -> pd.DataFrame:
    """Robust z-score of each latest value among its peers (same metric name, same node class).

    SWITCH: healthcheck.analysis fleet outliers. z = 0.6745 (x - median) / MAD. An outlier is on the bad
    side (low for bandwidth/TFLOPS, high for temperatures), |z| above ``threshold`` and at least
    ``min_relative`` away from the median (so a MAD of zero does not flag 0.1 % noise). Groups of fewer
    than 3 values are not judged.
    """
    if latest.empty:
        return pd.DataFrame(columns=OUTLIER_COLUMNS)
    df = latest.copy()
    classes = {n: peer_group(n) for n in df["node"].unique()}
    df["peer_group"] = df["node"].map(classes)
    grouped = df.groupby(["name", "peer_group"], sort=False)["value"]
    df["median"] = grouped.transform("median")
    df["mad"] = (df["value"] - df["median"]).abs().groupby([df["name"], df["peer_group"]], sort=False) \
        .transform("median")
    size = grouped.transform("size")
    dev = df["value"] - df["median"]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(df["mad"] > 0, 0.6745 * dev / df["mad"], np.sign(dev) * np.inf)
        rel = np.where(df["median"].abs() > 0, dev.abs() / df["median"].abs(), np.inf)
    z = np.where(dev == 0, 0.0, z)
    low = df["name"].map({n: low_is_bad(n) for n in df["name"].unique()}).to_numpy(dtype=bool)
    bad_side = np.where(low, dev < 0, dev > 0)
    df["z"] = z
    df["outlier"] = (size >= 3) & bad_side & (np.abs(z) > threshold) & (rel >= min_relative)
    return df[OUTLIER_COLUMNS]


def drain_intervals(actions: pd.DataFrame, now: pd.Timestamp) -> pd.DataFrame:
    """Drained intervals per node: a drain opens one, the next resume closes it; still open ends at ``now``.

    SWITCH: healthcheck.analysis availability. A second drain while drained (a new reason) keeps the
    interval open and updates the reason.
    """
    rows: list[tuple] = []
    if actions.empty:
        return pd.DataFrame(columns=INTERVAL_COLUMNS)
    ordered = actions.sort_values("time", kind="stable")
    for node, grp in ordered.groupby("node", sort=True, observed=True):
        start, reason = None, None
        for when, what, why in zip(grp["time"], grp["action"], grp["reason"]):
            if what == "drain":
                if start is None:
                    start = when
                reason = why
            elif what == "resume" and start is not None:
                rows.append((str(node), start, when, False, reason))
                start, reason = None, None
        if start is not None:
            rows.append((str(node), start, now, True, reason))
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)
