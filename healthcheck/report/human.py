"""Numbers, durations and times as people read them, for every rendered output (HTML, Markdown, the
plots' titles). The JSON keeps plain numbers and ISO-8601 times; the CSVs keep full precision in the
units their column names say (``_h`` hours, ``_s`` seconds, ``_pct`` percent, times ISO-8601 UTC).

- :func:`num`: thousands separators, never an exponent for a figure a report shows (``22,840``,
  ``745.2``, ``0.0014``);
- :func:`duration_h`: hours as minutes, hours or days (``35 min``, ``5.2 h``, ``952 days``);
- :func:`when`: a time to the minute, UTC (``2026-05-31 05:00``), never microseconds.
"""
from __future__ import annotations

import math
from typing import Any


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def num(value: Any, digits: int = 4) -> str:
    """A number for people: integers and anything >= 1,000 in units with thousands separators,
    smaller figures to ``digits`` significant digits (trailing zeros dropped); "" for None/NaN; text
    stays text."""
    if isinstance(value, str):
        return value
    v = _finite(value)
    if v is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    a = abs(v)
    if a >= 1000 or v == int(v) and a < 1e15:
        return f"{v:,.0f}"
    if a == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(a))))
    text = f"{v:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration_h(hours: Any) -> str:
    """Hours as people say them: under an hour in minutes, under two days in hours, else in days."""
    h = _finite(hours)
    if h is None:
        return ""
    a = abs(h)
    if a < 1:
        return f"{h * 60:.0f} min"
    if a < 48:
        return f"{num(round(h, 1))} h"
    return f"{num(round(h / 24))} days"


def when(t: Any) -> str:
    """A time to the minute, UTC: ``2026-05-31 05:00``; ISO text is read too; "" for None/NaT."""
    if t is None:
        return ""
    import pandas as pd

    try:
        ts = pd.Timestamp(t)
    except (TypeError, ValueError):
        return str(t)
    if ts is pd.NaT or pd.isna(ts):
        return ""
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%d %H:%M")


def when_utc(t: Any) -> str:
    """:func:`when` with " UTC" after it ("" stays "")."""
    text = when(t)
    return f"{text} UTC" if text else ""


def rate(per_hour: Any) -> str:
    """A rate per hour as people read it: per hour from 1/h up, else per day (``0.035/day``)."""
    v = _finite(per_hour)
    if v is None:
        return ""
    if abs(v) >= 1 or v == 0:
        return f"{num(v, 3)}/h"
    return f"{num(v * 24, 3)}/day"
