"""Shared input normalisation for the analyses: column checks, UTC times, numeric values.

Complexity: every helper is one vectorised pass over the frame (O(n)), plus an O(n log n) sort
where it says so.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

SERIES_KEYS = ["node", "check", "component", "name"]


def prepare(df: pd.DataFrame | None, required: Iterable[str], *, frame: str,
            time_col: str | None = None, value_col: str | None = None) -> pd.DataFrame:
    """A copy of ``df`` restricted to ``required`` columns, times as tz-aware UTC, values as float.

    An empty (or None) frame may lack columns: they are created empty. A non-empty frame lacking a
    required column raises ``ValueError`` naming the frame and the columns. Naive times are taken as
    UTC; aware times in another zone are converted. Rows whose node or time is missing are dropped
    (they cannot be placed in any series); non-finite values become NaN.
    """
    required = list(required)
    if df is None:
        df = pd.DataFrame()
    missing = [c for c in required if c not in df.columns]
    if missing and len(df):
        raise ValueError(f"{frame} frame lacks column(s): {', '.join(missing)}")
    out = pd.DataFrame({c: (df[c] if c in df.columns else pd.Series([], dtype=object))
                        for c in required})
    out = out.reset_index(drop=True)
    if time_col is not None:
        out[time_col] = pd.to_datetime(out[time_col], utc=True, errors="coerce").dt.as_unit("us")
        out = out[out[time_col].notna()]
    if "node" in out.columns:
        out = out[out["node"].notna()]
    if value_col is not None:
        values = pd.to_numeric(out[value_col], errors="coerce").astype("float64")
        out[value_col] = values.where(np.isfinite(values))
    return out.reset_index(drop=True)


def filter_names(df: pd.DataFrame, names: str | Iterable[str] | None) -> pd.DataFrame:
    """Rows whose ``name`` is one of ``names`` (a single name or an iterable; None keeps all)."""
    if names is None:
        return df
    wanted = [names] if isinstance(names, str) else list(names)
    return df[df["name"].isin(wanted)]


def utc(ts: Any) -> pd.Timestamp:
    """``ts`` (datetime, Timestamp or ISO string) as a tz-aware UTC Timestamp; naive = UTC."""
    if isinstance(ts, (str, datetime, pd.Timestamp, np.datetime64)):
        t = pd.Timestamp(ts)
    else:
        raise TypeError(f"expected a timestamp, got {type(ts).__name__}")
    if pd.isna(t):
        raise ValueError("timestamp is NaT")
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def series_sorted(df: pd.DataFrame, keys: list[str], time_col: str = "started_at") -> pd.DataFrame:
    """``df`` with a ``_gid`` column (one id per ``keys`` group, NaN keys allowed) sorted by
    ``(_gid, time)`` with a fresh RangeIndex. O(n log n)."""
    df = df.copy()
    df["_gid"] = (df.groupby(keys, dropna=False, sort=True).ngroup() if len(df)
                  else pd.Series([], dtype="int64"))
    return df.sort_values(["_gid", time_col], kind="stable").reset_index(drop=True)


def per_name(df: pd.DataFrame, setting: Any, default: Any) -> pd.Series:
    """A per-row setting: ``setting`` itself, or looked up by the row's ``name`` in a mapping
    (names missing from the mapping get ``default``)."""
    if hasattr(setting, "keys") and not isinstance(setting, str):
        mapped = df["name"].map(dict(setting))  # hash lookup, vectorised
        return mapped.astype(object).where(mapped.notna(), default).astype(type(default))
    return pd.Series(setting, index=df.index, dtype=type(default))


def empty(columns: dict[str, str]) -> pd.DataFrame:
    """An empty frame with the given ``{column: dtype}``."""
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()})


def hours_between(later: pd.Series, earlier: pd.Series) -> pd.Series:
    return (later - earlier).dt.total_seconds() / 3600.0
