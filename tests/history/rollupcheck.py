"""The rollups as stored, and as they should be: recomputed here from the raw metric rows, independently
of healthcheck.history.rollups (plain sorting and grouping)."""
from __future__ import annotations

from collections import defaultdict

from sqlalchemy import func, select

import pandas as pd

from healthcheck.history.recent import KEEP
from healthcheck.history.rollups import is_counter
from healthcheck.history.schema import counter_levels, metric_recent, metric_series, metrics, results, runs


def _array(value, kind) -> list:
    """PostgreSQL gives the arrays as lists, SQLite as their text."""
    if isinstance(value, str):
        assert value[0] == "{" and value[-1] == "}", value
        value = value[1:-1].split(",")
    return [kind(x) for x in value]


def stored(engine) -> dict:
    with engine.connect() as conn:
        series = {tuple(r[:4]): tuple(r[4:]) for r in conn.execute(select(metric_series))}
        levels = {tuple(r[:5]): tuple(r[5:]) for r in conn.execute(select(counter_levels))}
        counts = {r[0]: tuple(r[1:]) for r in conn.execute(
            select(runs.c.run_id, runs.c.n_results, runs.c.n_metrics, runs.c.n_flagged))}
        recent = {tuple(r[:4]): tuple(r[4:8]) + (_array(r[8], int), _array(r[9], float))
                  for r in conn.execute(select(metric_recent))}
    return {"series": series, "levels": levels, "counts": counts, "recent": recent}


def expected(engine) -> dict:
    with engine.connect() as conn:
        rows = conn.execute(select(metrics.c.name, metrics.c.node, metrics.c.check, metrics.c.component,
                                   metrics.c.started_at, metrics.c.run_id, metrics.c.seq, metrics.c.value)).all()
        n_res = dict(conn.execute(select(results.c.run_id, func.count()).group_by(results.c.run_id)).all())
        n_flag = dict(conn.execute(select(results.c.run_id, func.count())
                                   .where(results.c.status.in_(("fail", "warn", "error")))
                                   .group_by(results.c.run_id)).all())
        n_met = dict(conn.execute(select(metrics.c.run_id, func.count()).group_by(metrics.c.run_id)).all())
        run_ids = list(conn.execute(select(runs.c.run_id)).scalars())
    by_series = defaultdict(list)
    for name, node, check, comp, t, run_id, seq, value in rows:
        by_series[(name, node, check, comp or "")].append((t, run_id, seq, value))
    series = {k: (min(s)[0],) + max(s) for k, s in by_series.items()}
    by_level = defaultdict(list)
    for k, samples in by_series.items():
        if is_counter(k[0]):
            for t, _, _, value in samples:
                by_level[k + (value,)].append(t)
    levels = {k: (min(ts), max(ts)) for k, ts in by_level.items()}
    counts = {r: (n_res.get(r, 0), n_met.get(r, 0), n_flag.get(r, 0)) for r in run_ids}
    recent = {}
    for k, samples in by_series.items():  # the newest KEEP by (time, run id by code point, seq), newest first
        kept = sorted(samples, reverse=True)[:KEEP]
        us = [pd.Timestamp(t).value // 1000 for t, *_ in kept]
        recent[k] = (len(kept), us[0], us[-1], 0, us, [float(v) for *_, v in kept])
    return {"series": series, "levels": levels, "counts": counts, "recent": recent}
