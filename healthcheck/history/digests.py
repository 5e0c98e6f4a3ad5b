"""Reading the burn-in's GEMM digests (table ``gemm_digests``, migration 0004) for the fleet comparison
of ``healthcheck.analysis.digests``."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .db import HistoryError, describe_error


@dataclass(frozen=True)
class DigestRow:
    run_id: str
    node: str
    component: str
    fleet_key: str
    digest: str
    started_at: datetime


def load_digests(engine, since: datetime | None = None, until: datetime | None = None) -> list[DigestRow]:
    """The digests stored for runs started in [since, until] (either open), in (fleet key, time) order."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from .schema import gemm_digests as t

    stmt = select(t.c.run_id, t.c.node, t.c.component, t.c.fleet_key, t.c.digest, t.c.started_at)
    if since is not None:
        stmt = stmt.where(t.c.started_at >= since)
    if until is not None:
        stmt = stmt.where(t.c.started_at <= until)
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt.order_by(t.c.fleet_key, t.c.started_at, t.c.run_id, t.c.component)).all()
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None
    return [DigestRow(*r) for r in rows]


def fleet_from_history(engine, since: datetime | None = None, **limits):
    """``analysis.digests.fleet_view`` of the digests stored since ``since`` (``limits``: min_gpus,
    min_nodes, share)."""
    from ..analysis.digests import fleet_view

    return fleet_view(load_digests(engine, since), **limits)
