"""One table's rows of a report window, read from the history database into a DataFrame: what the report's
sections that read the database themselves (commissioning, training) share. SQLite's times are read as
text and converted by pandas in one pass; PostgreSQL's are timestamptz (``sqlframe.read_frame``)."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd


def window_frame(conn, sqlite: bool, table, columns: list[str], where, since: Any, now: Any) -> pd.DataFrame:
    """``columns`` of ``table``'s rows matching ``where`` whose ``started_at`` lies in [since, now]."""
    from sqlalchemy import String, select, type_coerce

    from .sqlframe import read_frame

    since, now = pd.Timestamp(since).to_pydatetime(), pd.Timestamp(now).to_pydatetime()

    def column(name: str):
        col = table.c[name]
        return type_coerce(col, String()).label(name) if sqlite and name == "started_at" else col

    stmt = select(*(column(c) for c in columns)).where(where & (table.c.started_at >= since)
                                                       & (table.c.started_at <= now))
    df = read_frame(conn, stmt, columns, ("started_at",))
    return df.astype({"value": "float64"}) if "value" in df.columns else df


def metric_names(conn, where: Callable) -> list[str]:
    """The metric names of the series whose check matches ``where(table)`` (a predicate built
    on ``metric_series`` and on ``metrics``): from the rollups, plus those of runs stored but not merged
    into them yet (``rollup_pending``). A metrics query filtered on these names reads its rows through
    the (name, started_at) index instead of scanning the window's metric rows for their check."""
    from sqlalchemy import select

    from ..history import rollups
    from ..history.schema import metric_series as ms
    from ..history.schema import metrics as m
    from ..history.schema import rollup_pending as p

    names = set(conn.execute(select(ms.c.name).distinct().where(where(ms))).scalars())
    if rollups.has_pending(conn):
        names |= set(conn.execute(select(m.c.name).distinct().where(m.c.run_id.in_(select(p.c.run_id)),
                                                                    where(m))).scalars())
    return sorted(names)


def result_checks(conn, wanted: Callable[[str], bool]) -> list[str]:
    """The distinct check names of the results table that ``wanted`` keeps, by a loose scan of the (check,
    started_at) index: one probe per distinct name (a few hundred), where a prefix filter on the check
    (``LIKE 'fabric.%'``: no index in a non-C collation) scans every result of the window. A query on
    ``check IN (these)`` then reads its rows through that index."""
    from sqlalchemy import text

    rows = conn.execute(text(
        'WITH RECURSIVE c(v) AS (SELECT MIN("check") FROM results UNION ALL '
        'SELECT (SELECT MIN("check") FROM results WHERE "check" > c.v) FROM c WHERE c.v IS NOT NULL) '
        "SELECT v FROM c WHERE v IS NOT NULL")).scalars()
    return sorted(v for v in rows if wanted(v))
