"""The fleet's state per day, for the plot on top of the report: ready / failing / drained by us /
drained by others / down, one count per state per UTC day of the window.

The history records no node-state snapshots (Slurm's states are asked live, today only), so each day's
state is DERIVED from what it does record, at the end of the day (or at the window's end for its last
day):

- **drained by us**: a drain interval of ours (``availability.drain_intervals`` of the window's
  drain/resume records, reason with our prefix) covers that instant;
- **drained by others**: a recorded drain whose reason is not ours covers it. healthcheck records only
  its own drains, so this is 0 unless someone imported others' drains: the renderers say so;
- **failing**: the node's last run of that day failed (not drained);
- **ready**: it ran that day and its last run did not fail;
- **down**: it ran (or was acted on) earlier in the window but recorded no run that day and is not
  drained: silent, most likely down or unreachable. A node is not counted before its first record.
- **no run yet**: the same on a PARTIAL day, one the window covers only in part (today, a few hours
  old; the window's first day when it starts after midnight): a node that has not run yet in the part
  covered, but ran the day before, is not down (one silent the whole day before too still is). Such a
  day carries ``partial`` True and ``hours`` (how much of it the window covers); the plot draws it
  paler and says "partial".

Input, per (node, day): whether the node ran and whether its last run failed (``node_days``), from the
frames (:func:`node_days`) or from SQL (:func:`node_days_sql`, one GROUP BY over the window's runs; the
same rows both ways: "last" is the greatest ``started_at``, and a tie at that instant counts as failed
when any of the tied runs failed). Pure apart from :func:`node_days_sql`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

STATES = ("ready", "failing", "drained_ours", "drained_others", "down", "no_run_yet")
LABELS = {"ready": "ready", "failing": "failing (not drained)", "drained_ours": "drained by us",
          "drained_others": "drained by others", "down": "down (no run that day)",
          "no_run_yet": "no run yet (partial day)"}
COLORS = {"ready": "#27ae60", "failing": "#c0392b", "drained_ours": "#e67e22", "drained_others": "#8e44ad",
          "down": "#7f8c8d", "no_run_yet": "#d5dbdb"}
NODE_DAY_COLUMNS = ["node", "day", "failed"]


def _utc(t: Any) -> pd.Timestamp:
    ts = pd.Timestamp(t)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def empty_node_days() -> pd.DataFrame:
    return pd.DataFrame({"node": pd.Series(dtype=object), "day": pd.Series(dtype="datetime64[ns, UTC]"),
                         "failed": pd.Series(dtype=bool)})


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    out = df[NODE_DAY_COLUMNS].sort_values(["node", "day"], kind="stable").reset_index(drop=True)
    out["node"] = out["node"].astype(str).astype(object)
    out["failed"] = out["failed"].astype(bool)
    out["day"] = out["day"].dt.as_unit("ns")
    return out


def node_days(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (node, UTC day) with a run: ``failed`` = a run at the day's last run time failed.
    ``runs``: the window's runs (columns node, started_at, status)."""
    if runs is None or runs.empty:
        return empty_node_days()
    t = runs["started_at"]
    df = pd.DataFrame({"node": runs["node"].astype(str), "day": t.dt.floor("D"), "t": t,
                       "ft": t.where(runs["status"].astype(str) == "fail")})
    g = df.groupby(["node", "day"], sort=False).agg(last=("t", "max"), last_fail=("ft", "max")).reset_index()
    g["failed"] = g["last_fail"].notna() & (g["last_fail"] == g["last"])
    return _finish(g)


def node_days_sql(conn, sqlite: bool, since: Any, now: Any) -> pd.DataFrame:
    """:func:`node_days` of the window's runs, read with one GROUP BY (node, day) from the history
    database (``conn``: an open SQLAlchemy connection; SQLite stores times as fixed-width UTC text,
    PostgreSQL as timestamptz)."""
    from sqlalchemy import String, case, func, select, type_coerce

    from ..history.schema import runs

    since, now = _utc(since).to_pydatetime(), _utc(now).to_pydatetime()
    t = runs.c.started_at
    if not sqlite:  # the day as a number and "failed" judged on the server: 300,000 short rows at 10,000 nodes
        from sqlalchemy import Date, Integer, cast, false, literal

        from .sqlframe import read_frame

        # days since 1970-01-01 by date arithmetic (EXTRACT(epoch) is a numeric: 0.3 s more at 10,000 nodes)
        day = type_coerce(cast(func.timezone("UTC", t), Date) - cast(literal("1970-01-01"), Date), Integer)
        failed = func.coalesce(func.max(case((runs.c.status == "fail", t))) == func.max(t), false())
        stmt = (select(runs.c.node, day.label("day"), failed.label("failed"))
                .where(t >= since, t <= now).group_by(runs.c.node, day))
        df = read_frame(conn, stmt, ["node", "day", "failed"])
        if df.empty:
            return empty_node_days()
        df["day"] = pd.to_datetime(df["day"].astype("int64") * 86400, unit="s", utc=True)
        return _finish(df)
    if sqlite:
        day = func.substr(type_coerce(t, String()), 1, 10)
        last, last_fail = (type_coerce(func.max(t), String()),
                           type_coerce(func.max(case((runs.c.status == "fail", t))), String()))
    else:
        day = func.to_char(func.timezone("UTC", t), "YYYY-MM-DD")
        last, last_fail = func.max(t), func.max(case((runs.c.status == "fail", t)))
    stmt = (select(runs.c.node, day.label("day"), last.label("last"), last_fail.label("last_fail"))
            .where(t >= since, t <= now).group_by(runs.c.node, day))
    from .sqlframe import read_frame

    df = read_frame(conn, stmt, ["node", "day", "last", "last_fail"], ("last", "last_fail"))
    if df.empty:
        return empty_node_days()
    df["day"] = pd.to_datetime(df["day"], utc=True, format="%Y-%m-%d")
    df["failed"] = df["last_fail"].notna() & (df["last_fail"] == df["last"])
    return _finish(df)


def days_of(since: Any, now: Any) -> pd.DatetimeIndex:
    """The UTC days the window touches (midnights), first to last; a window that ends at midnight does
    not touch the day that begins then."""
    since, now = _utc(since), _utc(now)
    last = (now - pd.Timedelta(1, "ns")).floor("D") if now > since else now.floor("D")
    return pd.date_range(since.floor("D"), last, freq="D").as_unit("ns")


def daily_states(node_days_df: pd.DataFrame | None, actions: pd.DataFrame | None, since: Any,
                 now: Any) -> pd.DataFrame:
    """One row per UTC day of [since, now]: ``day``, one count per state (:data:`STATES`), each node
    counted once a day, ``partial`` (the window covers only part of the day) and ``hours`` (how many
    hours of it it covers); see the module docstring. Empty frame (same columns) for no node."""
    from ..analysis.availability import drain_intervals
    from ..slurm.reasons import is_ours

    since, now = _utc(since), _utc(now)
    days = days_of(since, now)
    nd = node_days_df if node_days_df is not None else empty_node_days()
    acts = actions if actions is not None else pd.DataFrame()
    iv = drain_intervals(acts, now=now) if len(acts) else None
    node_codes, node_names = pd.factorize(nd["node"]) if len(nd) else (np.zeros(0, dtype=np.int64), [])
    nodes = sorted({str(n) for n in node_names} | (set(acts["node"].astype(str)) if len(acts) else set()))
    cols = {"day": days} | {s: np.zeros(len(days), dtype=np.int64) for s in STATES}
    covered = (np.minimum((days + pd.Timedelta(days=1)).asi8, now.value)
               - np.maximum(days.asi8, since.value)) / 3.6e12
    cols["partial"] = covered < 24.0
    cols["hours"] = np.round(covered, 2)
    if not nodes or not len(days):
        return pd.DataFrame(cols).iloc[0:0] if not len(days) else pd.DataFrame(cols)
    index = {n: i for i, n in enumerate(nodes)}
    n_nodes, n_days = len(nodes), len(days)
    # the instant each day is judged at: its end, or the window's end for the last day
    ends = np.minimum((days + pd.Timedelta(days=1) - pd.Timedelta(microseconds=1)).asi8, now.value)
    present = np.zeros((n_nodes, n_days), dtype=bool)
    failed = np.zeros((n_nodes, n_days), dtype=bool)
    first = np.full(n_nodes, n_days, dtype=np.int64)
    if len(nd):
        ni = np.array([index[str(n)] for n in node_names], dtype=np.int64)[node_codes]  # one lookup per node
        di = days.get_indexer(nd["day"])
        ok = di >= 0
        present[ni[ok], di[ok]] = True
        failed[ni[ok], di[ok]] = nd["failed"].to_numpy(dtype=bool)[ok]
        np.minimum.at(first, ni[ok], di[ok])
    if len(acts):
        ai = acts["node"].astype(str).map(index).to_numpy()
        ad = np.searchsorted(ends, pd.to_datetime(acts["time"], utc=True).dt.as_unit("ns").astype("int64").to_numpy())
        np.minimum.at(first, ai, np.minimum(ad, n_days))
    drained = {"drained_ours": np.zeros((n_nodes, n_days + 1), dtype=np.int64),
               "drained_others": np.zeros((n_nodes, n_days + 1), dtype=np.int64)}
    if iv is not None and len(iv):
        start = pd.to_datetime(iv["drained_at"], utc=True).dt.as_unit("ns").astype("int64").to_numpy()
        stop = pd.to_datetime(iv["resumed_at"], utc=True).dt.as_unit("ns")
        stop = np.where(iv["open"].to_numpy(dtype=bool), np.iinfo(np.int64).max,
                        stop.fillna(pd.Timestamp(0, tz="UTC")).astype("int64").to_numpy())
        # day k counts a drain when start <= ends[k] < stop
        lo = np.searchsorted(ends, start, side="left")
        hi = np.searchsorted(ends, stop, side="left")
        for node, a, b, reason in zip(iv["node"].astype(str), lo, hi, iv["reason"]):
            if b > a:
                m = drained["drained_ours" if is_ours(reason) else "drained_others"]
                m[index[node], a] += 1
                m[index[node], b] -= 1
    ours = np.cumsum(drained["drained_ours"], axis=1)[:, :n_days] > 0
    others = (np.cumsum(drained["drained_others"], axis=1)[:, :n_days] > 0) & ~ours
    known = np.arange(n_days)[None, :] >= first[:, None]
    rest = known & ~ours & ~others
    cols["drained_ours"] = ours.sum(axis=0)
    cols["drained_others"] = others.sum(axis=0)
    cols["failing"] = (rest & present & failed).sum(axis=0)
    cols["ready"] = (rest & present & ~failed).sum(axis=0)
    silent = rest & ~present
    # a partial day: a node silent so far is "no run yet" when it ran the day before (or that day is
    # not in the window); one silent the whole day before too is still down
    ran_before = np.ones_like(present)
    ran_before[:, 1:] = present[:, :-1] | ~known[:, :-1]
    partial = cols["partial"]
    waiting = silent & partial[None, :] & ran_before
    cols["down"] = (silent & ~waiting).sum(axis=0)
    cols["no_run_yet"] = waiting.sum(axis=0)
    return pd.DataFrame(cols)


def to_records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The JSON form: ``[{"day": "YYYY-MM-DD", "ready": n, ..., "partial": bool, "hours": h}]``."""
    if df is None or not len(df):
        return []
    partial = df["partial"] if "partial" in df else pd.Series(False, index=df.index)
    hours = df["hours"] if "hours" in df else pd.Series(24.0, index=df.index)
    return [{"day": d.strftime("%Y-%m-%d"), **{s: int(getattr(r, s)) for s in STATES}, "partial": bool(p),
             "hours": float(h)} for d, r, p, h in zip(df["day"], df.itertuples(index=False), partial, hours)]
