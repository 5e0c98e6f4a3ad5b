"""Availability from the action log and the runs: drain intervals, flapping, TTFF, MTBF.

Drain intervals: per node, a ``drain`` opens an interval and the next ``resume`` of the same node
closes it. A drain while already drained (a new reason on a drained node) extends the open interval
(counted in ``drain_actions``) rather than opening a second one; a resume with no open drain (the
frame starts mid-drain, or a duplicate resume) is ignored. A drain still open counts up to ``now``.
At equal timestamps a drain sorts before a resume. ``now`` is always an argument (no clock here).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ._frames import empty, prepare, utc

_ACTION_COLS = ["node", "time", "action", "reason", "run_id"]
_RUN_COLS = ["node", "started_at", "status"]

INTERVAL_COLUMNS = {"node": "object", "drained_at": "datetime64[us, UTC]",
                    "resumed_at": "datetime64[us, UTC]", "duration_s": "float64",
                    "open": "bool", "drain_actions": "int64", "reason": "object",
                    "run_id": "object"}
SUMMARY_COLUMNS = {"node": "object", "drains": "int64", "drained_s": "float64",
                   "mean_drain_s": "float64", "max_drain_s": "float64", "open": "bool",
                   "last_drain_at": "datetime64[us, UTC]", "last_resume_at": "datetime64[us, UTC]"}
FLAPPING_COLUMNS = {"node": "object", "cycles": "int64", "first_drain_at": "datetime64[us, UTC]",
                    "last_resume_at": "datetime64[us, UTC]"}
RELIABILITY_COLUMNS = {"node": "object", "first_seen": "datetime64[us, UTC]",
                       "first_failure_at": "datetime64[us, UTC]", "ttff_s": "float64",
                       "failures": "int64", "observed_s": "float64", "drained_s": "float64",
                       "mtbf_s": "float64"}


def drain_intervals(actions: pd.DataFrame, *, now: Any) -> pd.DataFrame:
    """One row per drain interval.

    Returns columns: node, drained_at, resumed_at (NaT while open), duration_s (open: up to
    ``now``), open, drain_actions (drain records inside the interval), reason and run_id (of the
    drain that opened it); sorted by node, drained_at. Actions after ``now`` are ignored.

    Complexity: O(n log n) sort, then vectorised shifts, cumsum and one merge on (node, k).
    """
    now = utc(now)
    df = prepare(actions, _ACTION_COLS, frame="actions", time_col="time")
    df = df[df["action"].isin(["drain", "resume"]) & (df["time"] <= now)]
    if df.empty:
        return empty(INTERVAL_COLUMNS)
    df = df.assign(_rank=np.where(df["action"].eq("drain"), 0, 1))
    df = df.sort_values(["node", "time", "_rank"], kind="stable").reset_index(drop=True)
    drain = df["action"].eq("drain")
    prev_drain = drain.shift(fill_value=False) & df["node"].eq(df["node"].shift())
    start = drain & ~prev_drain
    end = ~drain & prev_drain
    interval = start.cumsum()
    starts = df[start].assign(_k=lambda d: d.groupby("node").cumcount())
    ends = df[end].assign(_k=lambda d: d.groupby("node").cumcount())
    out = starts[["node", "_k", "time", "reason", "run_id"]].rename(columns={"time": "drained_at"})
    out["drain_actions"] = drain.groupby(interval).sum().loc[interval[start]].to_numpy()
    out = out.merge(ends[["node", "_k", "time"]].rename(columns={"time": "resumed_at"}),
                    on=["node", "_k"], how="left")
    out["open"] = out["resumed_at"].isna()
    stop = out["resumed_at"].where(~out["open"], now)
    out["duration_s"] = (stop - out["drained_at"]).dt.total_seconds()
    out["drain_actions"] = out["drain_actions"].astype("int64")
    return out[list(INTERVAL_COLUMNS)].reset_index(drop=True)


def drain_summary(actions: pd.DataFrame, *, now: Any, since: Any = None) -> pd.DataFrame:
    """Per node: how often and how long it was drained.

    With ``since``, intervals are clipped to ``[since, now]`` (an interval that began before
    ``since`` counts only its part inside the window; one that ended before is dropped).

    Returns columns: node, drains (intervals), drained_s (total), mean_drain_s, max_drain_s, open
    (drained at ``now``), last_drain_at, last_resume_at (NaT if none); sorted by drained_s
    descending, then node.

    Complexity: that of :func:`drain_intervals` plus one groupby, O(n log n).
    """
    iv = drain_intervals(actions, now=now)
    if since is not None and len(iv):
        lo = utc(since)
        stop = iv["resumed_at"].where(~iv["open"], utc(now))
        iv = iv[stop >= lo].copy()
        stop = stop[iv.index]
        iv["duration_s"] = (stop - iv["drained_at"].clip(lower=lo)).dt.total_seconds()
    if iv.empty:
        return empty(SUMMARY_COLUMNS)
    g = iv.groupby("node", sort=True)
    out = pd.DataFrame({
        "drains": g.size().astype("int64"),
        "drained_s": g["duration_s"].sum(),
        "mean_drain_s": g["duration_s"].mean(),
        "max_drain_s": g["duration_s"].max(),
        "open": g["open"].any().astype(bool),
        "last_drain_at": g["drained_at"].max(),
        "last_resume_at": g["resumed_at"].max(),
    }).reset_index()
    out = out.sort_values(["drained_s", "node"], ascending=[False, True], kind="stable")
    return out[list(SUMMARY_COLUMNS)].reset_index(drop=True)


def flapping(actions: pd.DataFrame, *, now: Any, window: str | pd.Timedelta = "7D",
             min_cycles: int = 3) -> pd.DataFrame:
    """Nodes drained and resumed at least ``min_cycles`` times within ``[now - window, now]``.

    A cycle is a closed drain interval that began inside the window. Returns columns: node, cycles,
    first_drain_at, last_resume_at (of the cycles counted); sorted by cycles descending, then node.

    Complexity: that of :func:`drain_intervals` plus one groupby.
    """
    now = utc(now)
    lo = now - pd.Timedelta(window)
    iv = drain_intervals(actions, now=now)
    iv = iv[~iv["open"] & (iv["drained_at"] >= lo)]
    if iv.empty:
        return empty(FLAPPING_COLUMNS)
    g = iv.groupby("node", sort=True)
    out = pd.DataFrame({"cycles": g.size().astype("int64"),
                        "first_drain_at": g["drained_at"].min(),
                        "last_resume_at": g["resumed_at"].max()}).reset_index()
    out = out[out["cycles"] >= min_cycles]
    if out.empty:
        return empty(FLAPPING_COLUMNS)
    out = out.sort_values(["cycles", "node"], ascending=[False, True], kind="stable")
    return out[list(FLAPPING_COLUMNS)].reset_index(drop=True)


def reliability(runs: pd.DataFrame, *, now: Any, actions: pd.DataFrame | None = None,
                fail_statuses: Iterable[str] = ("fail",)) -> pd.DataFrame:
    """Per node: time to first failure and mean time between failures, from the runs.

    A failure is the onset of a failing streak: a run whose status (case-insensitive) is in
    ``fail_statuses`` after a run that was not, or the node's first run. ``first_seen`` = the
    node's first run; ``ttff_s`` = first failure - first seen (NaN if it never failed);
    ``observed_s`` = now - first seen. With ``actions``, the node's drained time inside that span is
    subtracted: ``mtbf_s = (observed_s - drained_s) / failures`` (NaN with no failure).
    Runs after ``now`` are ignored.

    Returns columns: node, first_seen, first_failure_at, ttff_s, failures, observed_s, drained_s,
    mtbf_s; sorted by node.

    Complexity: O(n log n) sort, vectorised shift and groupby; drain part as :func:`drain_summary`.
    """
    now = utc(now)
    df = prepare(runs, _RUN_COLS, frame="runs", time_col="started_at")
    df = df[df["started_at"] <= now]
    if df.empty:
        return empty(RELIABILITY_COLUMNS)
    df = df.sort_values(["node", "started_at"], kind="stable").reset_index(drop=True)
    failed = df["status"].astype(str).str.lower().isin([s.lower() for s in fail_statuses])
    prev_failed = failed.shift(fill_value=False) & df["node"].eq(df["node"].shift())
    onset = failed & ~prev_failed
    g = df.groupby("node", sort=True)
    out = pd.DataFrame({"first_seen": g["started_at"].min(),
                        "failures": onset.groupby(df["node"]).sum().astype("int64")})
    out["first_failure_at"] = df.loc[failed].groupby("node")["started_at"].min()
    out["first_failure_at"] = pd.to_datetime(out["first_failure_at"], utc=True)
    out["ttff_s"] = (out["first_failure_at"] - out["first_seen"]).dt.total_seconds()
    out["observed_s"] = (now - out["first_seen"]).dt.total_seconds()
    out["drained_s"] = 0.0
    if actions is not None and len(actions):
        iv = drain_intervals(actions, now=now)
        iv = iv[iv["node"].isin(out.index)]
        seen = iv["node"].map(out["first_seen"])
        stop = iv["resumed_at"].where(~iv["open"], now)
        # Only drained time after the node's first run counts (each interval clipped to it).
        part = (stop - iv["drained_at"].where(iv["drained_at"] > seen, seen)).dt.total_seconds()
        drained = part.clip(lower=0.0).groupby(iv["node"]).sum()
        out["drained_s"] = drained.reindex(out.index).fillna(0.0).astype("float64")
    out["mtbf_s"] = ((out["observed_s"] - out["drained_s"]) / out["failures"]).where(
        out["failures"] > 0)
    return out.reset_index()[list(RELIABILITY_COLUMNS)]
