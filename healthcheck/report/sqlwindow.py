"""One table's rows of a report window, read from the history database into a DataFrame: what the report's
sections that read the database themselves (commissioning, training) share. SQLite's times are read as
text and converted by pandas in one pass; PostgreSQL's are timestamptz."""
from __future__ import annotations

from typing import Any

import pandas as pd


def window_frame(conn, sqlite: bool, table, columns: list[str], where, since: Any, now: Any) -> pd.DataFrame:
    """``columns`` of ``table``'s rows matching ``where`` whose ``started_at`` lies in [since, now]."""
    from sqlalchemy import String, select, type_coerce

    since, now = pd.Timestamp(since).to_pydatetime(), pd.Timestamp(now).to_pydatetime()

    def column(name: str):
        col = table.c[name]
        return type_coerce(col, String()).label(name) if sqlite and name == "started_at" else col

    stmt = select(*(column(c) for c in columns)).where(where & (table.c.started_at >= since)
                                                       & (table.c.started_at <= now))
    df = pd.DataFrame.from_records([tuple(r) for r in conn.execute(stmt).all()], columns=columns)
    df["started_at"] = pd.to_datetime(df["started_at"], utc=True, format="ISO8601")
    return df.astype({"value": "float64"}) if "value" in df.columns else df
