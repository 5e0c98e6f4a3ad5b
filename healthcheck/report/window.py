"""An empty window is an error the caller can act on, not a report of "0 nodes".

``require_data(summary_or_report, newest)`` raises :class:`EmptyWindow` when the window holds no run and
no drain/resume record; its message says which window, and when the history's newest record is (so the
reader sees at once that ``--since 30d`` on a history that stopped in May is the problem) or that the
history holds nothing at all. :func:`newest_record` reads that time from the database (one MAX per table).
The command maps it to a non-zero exit code; the renderers still say "No data" for anyone who renders
an empty report anyway.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any


class EmptyWindow(Exception):
    """No run and no action in [since, until]. ``newest``: the history's newest record time (None: the
    history is empty)."""

    def __init__(self, since: Any, until: Any, newest: datetime | None) -> None:
        self.since, self.until, self.newest = since, until, newest
        window = f"{_day(since)} to {_day(until)} UTC"
        if newest is None:
            why = "the history holds no record at all (have the nodes' spools been ingested: healthcheck " \
                  "history ingest?)"
        elif _ts(newest) < _ts(since):
            why = f"the newest record is from {_day(newest)}: widen the window (e.g. --since {_day(newest)[:10]}" \
                  " or earlier)"
        else:
            why = f"records exist after it (the newest is from {_day(newest)})"
        super().__init__(f"no run or drain/resume record between {window}: {why}")


def _ts(t: Any):
    import pandas as pd

    ts = pd.Timestamp(t)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _day(t: Any) -> str:
    return _ts(t).strftime("%Y-%m-%d %H:%M")


def is_empty(summary_or_report: Any) -> bool:
    """True when the window has no run and no action (a ``summary.Summary`` or a ``model.Report``)."""
    counts = summary_or_report.counts
    return not counts.get("runs", 0) and not counts.get("actions", 0)


def require_data(summary_or_report: Any, newest: datetime | None) -> None:
    """EmptyWindow when the window is empty (see :func:`is_empty`); nothing otherwise."""
    if is_empty(summary_or_report):
        until = getattr(summary_or_report, "until", None) or getattr(summary_or_report, "now")
        raise EmptyWindow(summary_or_report.since, until, newest)


def newest_record(engine) -> datetime | None:
    """The newest run start or action time in the whole history (None when it holds neither).
    HistoryError (redacted) on a database error."""
    from sqlalchemy import String, func, select, type_coerce
    from sqlalchemy.exc import SQLAlchemyError

    from ..history.db import HistoryError, describe_error, is_sqlite
    from ..history.schema import actions, runs

    sqlite = is_sqlite(engine)
    found = []
    try:
        with engine.connect() as conn:
            for col in (runs.c.started_at, actions.c.time):
                expr = type_coerce(func.max(col), String()) if sqlite else func.max(col)
                value = conn.execute(select(expr)).scalar()
                if value is not None:
                    found.append(_ts(value))
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    return max(found).to_pydatetime() if found else None
