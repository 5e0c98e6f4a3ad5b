"""The readiness report's ``Summary`` read from the history database (SQLite or PostgreSQL) without reading
every metric row: SQL aggregates over runs/results and the rollups of ``healthcheck.history.rollups``.

One read transaction (SQLite: the WAL snapshot of its first read; PostgreSQL: REPEATABLE READ), so a
concurrent ingest is either wholly in the summary or not at all. For the window [since, now]:

1. counts: COUNT(*) and SUM(n_results), SUM(n_metrics) of the window's runs; the actions read;
2. latest runs: each node's greatest (started_at, run_id) in the window (per node, index seeks for its
   first and last run time in the window);
3. failure onsets: for the nodes with a failing run in the window, their runs where "status is fail"
   differs from the previous run's (LAG); for the others their first run: ``availability.reliability``
   over those rows finds the same onsets, first run and first failure as over all the runs;
4. flagged results: fail/warn results of the window's runs with ``n_flagged > 0``;
5. latest results: every result of the latest runs (primary key);
6. actions in the window;
7. performance figures: ``metric_series`` rows of the performance names (``actions.perf_metric``) whose
   last sample is in the window; a series with samples after ``now`` is read from ``metrics`` instead;
8. error counters: ``counter_levels`` grouped per series; the series with two levels or more seen in the
   window, or a level seen after ``now``, are read from ``metrics`` (index node, name, started_at) and
   ``trends.changed_series`` keeps those that moved. A constant counter is never read.

Runs stored but not merged into the rollups yet (``rollup_pending``: an ingest in progress, or one that
was interrupted) are accounted for exactly: the series they have samples of in the window are read from
``metrics`` (7 and 8), as are the late ones.

``RollupsUnavailable`` when the rollups were not built by this code (``healthcheck db rebuild-rollups``);
the caller can fall back to ``load_frames`` + ``summary.summarize_frames``.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import trends
from ..history.db import HistoryError, describe_error, is_sqlite
from . import actions as act
from . import commissioning, fleetstate, training
from . import summary as summ
from .sqlframe import array_items, read_frame

PAIRS_PER_QUERY = 400  # (node, name) pairs per IN list: 800 bound parameters, under SQLite's old 999 limit
IDS_PER_QUERY = 900
EXPORT_SNAPSHOT = "SELECT pg_export_snapshot()"
RUNS_PER_SAMPLE = 2  # the fleet ranking's per-run figures are read from each node's 2n-th latest run on
KEY_COLUMNS = ["name", "node", "check", "component"]  # a series in the rollups ('' for no component)


class RollupsUnavailable(HistoryError):
    """The rollups are not (fully) built for this code; the message says how to rebuild them."""


def _time(col, sqlite: bool):
    """A time column read as SQLite's text (converted by pandas in one pass) or PostgreSQL's timestamptz."""
    from sqlalchemy import String, type_coerce

    return type_coerce(col, String()).label(col.name) if sqlite else col


def _frame(conn, stmt, columns: list[str], times: tuple[str, ...] = ()) -> pd.DataFrame:
    df = read_frame(conn, stmt, columns, times)
    return df.astype({c: "float64" for c in ("value", "duration_s") if c in df.columns})


def load_summary(engine, since: Any, now: Any, recent: int | None = None) -> summ.Summary:
    """The summary of [since, now] (see the module docstring). ``recent``: as
    ``summary.summarize_frames`` (each node's last n runs and samples for the fleet ranking; None: the
    default n, 0: none). HistoryError (redacted) on database errors, RollupsUnavailable when the rollups
    cannot be used."""
    from sqlalchemy.exc import SQLAlchemyError

    since, now = summ.utc(since), summ.utc(now)
    sqlite = is_sqlite(engine)
    try:
        with engine.connect() as conn:
            if not sqlite:
                conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                return _Reader(conn, sqlite, since, now, summ.recent_n(recent)).summary()
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


def first_seen(engine, now: Any) -> pd.Series:
    """node -> its first run in the whole history up to ``now`` (the report's fallback without rollups)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            return _Reader(conn, is_sqlite(engine), summ.utc(now), summ.utc(now))._first_seen()
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


class _Reader:
    def __init__(self, conn, sqlite: bool, since: pd.Timestamp, now: pd.Timestamp, recent: int = 0) -> None:
        from ..history import schema

        self.conn, self.sqlite, self.s, self.recent = conn, sqlite, schema, recent
        self.since, self.now = since.to_pydatetime(), now.to_pydatetime()
        self.window = (since, now)
        self.ahead = None  # PostgreSQL: (names, n, Future of the recent samples read on a second connection)

    def summary(self) -> summ.Summary:
        from ..history import rollups

        if not rollups.usable(self.conn):
            raise RollupsUnavailable("the history's rollups are not built for this healthcheck (run `healthcheck db "
                                     "rebuild-rollups`; until then the report reads every row, slowly)")
        n_runs, n_results, n_metrics = self._counts()
        self.ahead = self._read_ahead() if not self.sqlite and self.recent else None
        try:
            return self._summary(n_runs, n_results, n_metrics)
        finally:
            if self.ahead is not None:  # an error before it was used: let its connection go back first
                self.ahead[2].exception()

    def _summary(self, n_runs: int, n_results: int, n_metrics: int) -> summ.Summary:
        span = self._span()
        latest = summ.latest_runs(summ.by_time(self._latest_runs(span)))
        acts = self._actions()
        pending = self._pending_keys()
        since, now = self.window
        return summ.Summary(since, now, {"runs": n_runs, "results": n_results, "metrics": n_metrics,
                                         "actions": len(acts)},
                            latest, summ.reliability(self._onsets(span), now), self._flagged(),
                            self._results_of(list(latest["run_id"])), self._counters(pending), self._perf(pending),
                            acts, "rollups", node_days=fleetstate.node_days_sql(self.conn, self.sqlite, since, now),
                            **self._recent(), commissioning=commissioning.load_sql(self.conn, self.sqlite, since, now),
                            training=training.load_sql(self.conn, self.sqlite, since, now),
                            first_seen=self._first_seen())

    def _first_seen(self) -> pd.Series:
        """node -> its first run in the whole history up to the window's end: one index seek on
        (node, started_at) per node."""
        from sqlalchemy import func, select

        runs = self.s.runs
        stmt = (select(runs.c.node, _time(func.min(runs.c.started_at), self.sqlite).label("first"))
                .where(runs.c.started_at <= self.now).group_by(runs.c.node))
        df = _frame(self.conn, stmt, ["node", "first"], ("first",))
        out = pd.Series(df["first"].to_numpy(), index=df["node"].astype(str).to_numpy(), name="first_seen")
        out.index.name = "node"
        return out.sort_index()

    def _c(self, col):
        """A text column compared by code point, as Python and SQLite do (PostgreSQL: COLLATE "C"), so ties
        in time break the same way here, in ``load_frames`` and in the rollups."""
        return col if self.sqlite else col.collate("C")

    def _in_window(self, col):
        return (col >= self.since) & (col <= self.now)

    def _counts(self) -> tuple[int, int, int]:
        from sqlalchemy import func, select

        runs = self.s.runs
        n, counted, res, met = self.conn.execute(
            select(func.count(), func.count(runs.c.n_results), func.sum(runs.c.n_results), func.sum(runs.c.n_metrics))
            .where(self._in_window(runs.c.started_at))).one()
        if counted != n:
            raise RollupsUnavailable(f"{n - counted} run(s) in the window have no row counts yet (run `healthcheck db "
                                     "rebuild-rollups`)")
        return int(n), int(res or 0), int(met or 0)

    def _runs_columns(self):
        runs = self.s.runs
        return [_time(runs.c[c], self.sqlite) if c == "started_at" else runs.c[c] for c in summ.COLUMNS["runs"]]

    def _span(self):
        """Per node: its first and last run time in the window (NULL: none), by two index seeks each
        on (node, started_at) instead of a scan of the window's runs."""
        from sqlalchemy import func, select

        runs = self.s.runs
        nodes = select(runs.c.node).distinct().subquery()
        r = runs.alias("r")

        def seek(fn):
            return (select(fn(r.c.started_at)).where(r.c.node == nodes.c.node, self._in_window(r.c.started_at))
                    .scalar_subquery())

        return select(nodes.c.node, seek(func.min).label("first"), seek(func.max).label("last")).subquery()

    def _latest_runs(self, span) -> pd.DataFrame:
        from sqlalchemy import and_, select

        runs = self.s.runs
        stmt = select(*self._runs_columns()).join(span, and_(runs.c.node == span.c.node,
                                                             runs.c.started_at == span.c.last))
        return _frame(self.conn, stmt, summ.COLUMNS["runs"], ("started_at",))

    def _onsets(self, span) -> pd.DataFrame:
        """Runs enough for ``availability.reliability``: for a node with a failing run in the window, its
        runs where "status is fail" differs from the previous run's (LAG); for any other node its first
        run (as "pass": none of its runs fails, and the output has no status)."""
        from sqlalchemy import case, func, literal, or_, select, union_all

        runs = self.s.runs
        failing_nodes = select(runs.c.node).where(self._in_window(runs.c.started_at), runs.c.status == "fail")
        failing = case((runs.c.status == "fail", 1), else_=0)
        prev = func.lag(failing).over(partition_by=runs.c.node, order_by=(runs.c.started_at, self._c(runs.c.run_id)))
        inner = (select(runs.c.node, _time(runs.c.started_at, self.sqlite), runs.c.status, runs.c.run_id,
                        failing.label("f"), prev.label("p"))
                 .where(self._in_window(runs.c.started_at), runs.c.node.in_(failing_nodes)).subquery())
        changes = select(inner.c.node, inner.c.started_at, inner.c.status, inner.c.run_id).where(
            or_(inner.c.p.is_(None), inner.c.p != inner.c.f))
        others = select(span.c.node, _time(span.c.first, self.sqlite), literal("pass"), literal("")).where(
            span.c.first.is_not(None), span.c.node.not_in(failing_nodes))
        both = union_all(changes, others).subquery()
        stmt = select(both.c[0], both.c[1], both.c[2]).order_by(both.c[1], self._c(both.c[3]))
        return _frame(self.conn, stmt, ["node", "started_at", "status"], ("started_at",))

    def _results_columns(self):
        res = self.s.results
        return [_time(res.c[c], self.sqlite) if c == "started_at" else res.c[c] for c in summ.COLUMNS["results"]]

    def _flagged(self) -> pd.DataFrame:
        from sqlalchemy import select

        runs, res = self.s.runs, self.s.results
        stmt = (select(*self._results_columns()).select_from(runs.join(res, res.c.run_id == runs.c.run_id))
                .where(self._in_window(runs.c.started_at), runs.c.n_flagged > 0, res.c.status.in_(summ.FLAGGED))
                .order_by(res.c.started_at, self._c(res.c.run_id), res.c.seq))
        return _frame(self.conn, stmt, summ.COLUMNS["results"], ("started_at",))

    def _results_of(self, run_ids: list[str]) -> pd.DataFrame:
        from sqlalchemy import select

        res = self.s.results
        cols = self._results_columns()
        parts = [_frame(self.conn, select(*cols).where(res.c.run_id.in_(run_ids[i:i + IDS_PER_QUERY]))
                        .order_by(res.c.started_at, self._c(res.c.run_id), res.c.seq),
                        summ.COLUMNS["results"], ("started_at",)) for i in range(0, len(run_ids), IDS_PER_QUERY)]
        if not parts:
            return summ.empty_frame("results")
        out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        return out.sort_values(["started_at", "run_id"], kind="stable").reset_index(drop=True)

    def _actions(self) -> pd.DataFrame:
        from sqlalchemy import select

        a = self.s.actions
        cols = [_time(a.c[c], self.sqlite) if c == "time" else a.c[c] for c in summ.COLUMNS["actions"]]
        stmt = select(*cols).where(self._in_window(a.c.time)).order_by(a.c.time, self._c(a.c.record_id))
        return _frame(self.conn, stmt, summ.COLUMNS["actions"], ("time",))

    def _samples(self, keys: pd.DataFrame) -> pd.DataFrame:
        """The window's metric rows of the series in ``keys`` (name, node, check, component; '' = none),
        in (started_at, run_id, seq) order, through the (node, name, started_at) index."""
        from sqlalchemy import select, tuple_

        m = self.s.metrics
        cols = [_time(m.c[c], self.sqlite) if c == "started_at" else m.c[c] for c in summ.COLUMNS["metrics"]]
        pairs = sorted(set(zip(keys["node"], keys["name"])))
        parts = []
        for i in range(0, len(pairs), PAIRS_PER_QUERY):
            stmt = (select(*cols).where(tuple_(m.c.node, m.c.name).in_(pairs[i:i + PAIRS_PER_QUERY]),
                                        self._in_window(m.c.started_at))
                    .order_by(m.c.started_at, self._c(m.c.run_id), m.c.seq))
            parts.append(_frame(self.conn, stmt, summ.COLUMNS["metrics"], ("started_at",)))
        if not parts:
            return summ.empty_frame("metrics").astype({"value": "float64"})
        df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            df = df.sort_values("started_at", kind="stable").reset_index(drop=True)
        comp = df["component"].astype(object)
        wanted = set(zip(keys["name"], keys["node"], keys["check"], keys["component"]))
        mine = [k in wanted for k in zip(df["name"], df["node"], df["check"], comp.where(comp.notna(), ""))]
        return df[mine].reset_index(drop=True)

    def _pending_keys(self) -> pd.DataFrame:
        """The series (rollup keys) with samples in the window from runs not merged into the rollups yet
        (``rollup_pending``; normally none): they are read from ``metrics`` like the late ones."""
        from sqlalchemy import func, select

        from ..history import rollups

        if not rollups.has_pending(self.conn):
            return pd.DataFrame(columns=KEY_COLUMNS)
        p, m = self.s.rollup_pending, self.s.metrics
        # IN (subquery), not a join: the planner then walks the pending runs' rows by primary key
        stmt = (select(m.c.name, m.c.node, m.c.check, func.coalesce(m.c.component, "")).distinct()
                .where(m.c.run_id.in_(select(p.c.run_id)), self._in_window(m.c.started_at)))
        return pd.DataFrame.from_records([tuple(r) for r in self.conn.execute(stmt)], columns=KEY_COLUMNS)

    def _counters(self, pending: pd.DataFrame) -> pd.DataFrame:
        from sqlalchemy import func, or_, select

        cl = self.s.counter_levels
        key = [cl.c.name, cl.c.node, cl.c.check, cl.c.component]
        stmt = (select(*key).where(cl.c.last_at >= self.since, cl.c.first_at <= self.now).group_by(*key)
                .having(or_(func.count() > 1, func.max(cl.c.last_at) > self.now)))
        keys = pd.DataFrame.from_records([tuple(r) for r in self.conn.execute(stmt)], columns=KEY_COLUMNS)
        mine = pending[[act.counter_metric(n) for n in pending["name"]]] if len(pending) else pending
        if len(mine):
            keys = pd.concat([keys, mine], ignore_index=True).drop_duplicates()
        return summ.counter_samples(self._samples(keys))

    def _perf(self, pending: pd.DataFrame) -> pd.DataFrame:
        from sqlalchemy import select

        ms = self.s.metric_series
        names = [n for n in self.conn.execute(select(ms.c.name).distinct()).scalars() if act.perf_metric(n)]
        if not names:
            return summ.perf_latest(summ.empty_frame("metrics"))
        stmt = (select(ms.c.node, _time(ms.c.last_at, self.sqlite), ms.c.check, ms.c.component, ms.c.name,
                       ms.c.last_value)
                .where(ms.c.name.in_(names), ms.c.last_at >= self.since, ms.c.first_at <= self.now))
        df = _frame(self.conn, stmt, ["node", "started_at", "check", "component", "name", "value"], ("started_at",))
        df["started_at"] = df["started_at"].dt.as_unit("us")  # as trends.latest_samples gives them
        # from the rows instead: series with samples after the window's end, or from pending runs
        redo = df["started_at"] > self.window[1]
        mine = pending[[act.perf_metric(n) for n in pending["name"]]] if len(pending) else pending
        if len(mine):
            redo |= pd.MultiIndex.from_frame(df[KEY_COLUMNS]).isin(pd.MultiIndex.from_frame(mine))
        if redo.any() or len(mine):
            keys = pd.concat([df.loc[redo, KEY_COLUMNS], mine], ignore_index=True).drop_duplicates()
            df = pd.concat([df[~redo], summ.perf_latest(self._samples(keys))], ignore_index=True)
        return df.sort_values(trends.SERIES_KEYS, kind="stable").reset_index(drop=True)

    # -- the fleet ranking's inputs (summary.summarize_frames(recent=n) gives the same) --------------------

    def _recent(self) -> dict[str, Any]:
        """Each node's last n runs and the last n (n + the regression window for the "higher is better"
        figures) samples of every judged series, and the runs the MTBF table needs: bounded reads by
        window functions (ROW_NUMBER / LAG), then the same pandas reduction as the frames path, so both
        give identical frames."""
        if not self.recent:
            return {}
        from ..analysis.fleetrank import recent_names

        short, long_ = recent_names()
        metrics = self._last_samples(short, long_, self.recent)
        runs = self._last_runs(self.recent)
        return {**summ.recent_fields(metrics, runs, self.recent), "mtbf_runs": self._mtbf_runs()}

    def _last_samples(self, short: list[str], long_: list[str], n: int) -> pd.DataFrame:
        """At least the last n samples of each series of ``short`` and the last n + the regression window of
        ``long_`` in the window (``recent_inputs`` then keeps exactly those). ``short`` figures are sampled
        in (nearly) every run: they are read from each node's n-th latest run on (index seeks on (node,
        name, started_at)) of its ``RUNS_PER_SAMPLE`` * n-th latest run on; a series with fewer than n
        samples there is read again over the whole window (exact either way).
        ``long_`` (the weekly burn-in figures) by ROW_NUMBER per series over the window."""
        from sqlalchemy import func, select, tuple_

        from ..analysis.fleetrank import REGRESSION_WINDOW

        m, runs = self.s.metrics, self.s.runs
        cols = [_time(m.c[c], self.sqlite) if c == "started_at" else m.c[c] for c in summ.COLUMNS["metrics"]]
        names = summ.COLUMNS["metrics"] + ["seq"]
        parts = []
        if long_:
            rn = func.row_number().over(partition_by=(m.c.node, m.c.check, m.c.component, m.c.name),
                                        order_by=(m.c.started_at.desc(), self._c(m.c.run_id).desc(), m.c.seq.desc()))
            inner = (select(*cols, m.c.seq, rn.label("rn"))
                     .where(m.c.name.in_(long_), self._in_window(m.c.started_at)).subquery())
            parts.append(_frame(self.conn, select(*(inner.c[c] for c in names))
                                .where(inner.c.rn <= n + REGRESSION_WINDOW)
                                .order_by(inner.c.started_at, self._c(inner.c.run_id), inner.c.seq),
                                names, ("started_at",)))
        if short:
            cut, span = self._cut(n)
            if self.sqlite:
                stmt = (select(*cols, m.c.seq).select_from(m.join(cut, m.c.node == cut.c.node))
                        .where(m.c.name.in_(short), m.c.started_at >= cut.c.cut, m.c.started_at <= self.now))
                got = _frame(self.conn, stmt, names, ("started_at",))
                comp = got["component"].astype(object).where(got["component"].notna(), "")
                size = got.groupby([got["node"], got["check"], comp, got["name"]], sort=False)["value"].transform(
                    "size")
            else:
                ahead, self.ahead = self.ahead, None
                if ahead is not None and ahead[:2] != (short, n):
                    ahead[2].exception()  # read for other names: not these
                    ahead = None
                got = ahead[2].result() if ahead is not None else self._last_per_node(short, n)
                size = got.pop("cnt")
            # series with fewer than n samples since their node's cut, on nodes with n runs or more: again,
            # whole (their cut may have hidden older samples)
            full = {r[0] for r in self.conn.execute(select(cut.c.node).where(cut.c.k >= span))}
            short_series = ((size < n) & got["node"].isin(full)).to_numpy()
            again = sorted(set(zip(got.loc[short_series, "node"], got.loc[short_series, "name"])))
            if again:
                got = got[~pd.MultiIndex.from_arrays([got["node"], got["name"]]).isin(again)]
                for i in range(0, len(again), PAIRS_PER_QUERY):
                    parts.append(_frame(self.conn, select(*cols, m.c.seq).where(
                        tuple_(m.c.node, m.c.name).in_(again[i:i + PAIRS_PER_QUERY]),
                        self._in_window(m.c.started_at)).order_by(m.c.started_at, self._c(m.c.run_id), m.c.seq),
                        names, ("started_at",)))
            parts.append(got)
        parts = [p for p in parts if len(p)]
        if not parts:
            return summ.empty_frame("metrics").astype({"value": "float64"})
        df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        if self.sqlite:  # the load_frames order (started_at, then the primary key run_id, seq, name by code point)
            df = df.sort_values(["started_at", "run_id", "seq", "name"], kind="stable").reset_index(drop=True)
        # PostgreSQL: the parts hold disjoint series, and within each part every series' samples come in
        # (started_at, run_id, seq) order; the reduction (``recent_inputs``) orders by series and time with
        # a stable sort, so the rows it keeps, and their order, are those of the load_frames order: a sort
        # of millions of rows saved at 10,000 nodes
        return df[summ.COLUMNS["metrics"]]

    def _cut(self, n: int):
        """(per node: the time of its ``RUNS_PER_SAMPLE`` * n-th latest run in the window and how many runs it
        has up to that many, as a subquery; that span)."""
        from sqlalchemy import func, select

        runs = self.s.runs
        rn = func.row_number().over(partition_by=runs.c.node,
                                    order_by=(runs.c.started_at.desc(), self._c(runs.c.run_id).desc()))
        last = select(runs.c.node, runs.c.started_at, rn.label("rn")).where(
            self._in_window(runs.c.started_at)).subquery()
        span = RUNS_PER_SAMPLE * n  # runs of other kinds (a burn-in) between two samples: some slack
        cut = select(last.c.node, func.min(last.c.started_at).label("cut"), func.count().label("k")).where(
            last.c.rn <= span).group_by(last.c.node).subquery()
        return cut, span

    def _read_ahead(self):
        """PostgreSQL: start reading the recent samples (``_last_per_node``, most of the server's work at
        fleet scale) on a second connection in this transaction's snapshot (``pg_export_snapshot``: the same
        data, a concurrent ingest included or not for both alike) while this one reads the rest; None where
        the snapshot cannot be shared (the caller then reads them in line). Returns (names, n, Future)."""
        import re
        from concurrent.futures import ThreadPoolExecutor

        from ..analysis.fleetrank import recent_names

        from sqlalchemy.exc import DBAPIError

        try:
            with self.conn.begin_nested():  # a savepoint: a refusal must not abort the report's transaction
                snapshot = self.conn.exec_driver_sql(EXPORT_SNAPSHOT).scalar()
        except DBAPIError:  # a server that exports no snapshot (a standby in recovery, a pooler): in line
            return None
        if not isinstance(snapshot, str) or not re.fullmatch(r"[0-9A-Fa-f-]{1,64}", snapshot):
            return None
        engine, window, n = self.conn.engine, self.window, self.recent
        short = recent_names()[0]

        def work() -> pd.DataFrame:
            with engine.connect() as other:
                other = other.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                with other.begin():
                    other.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
                    return _Reader(other, False, *window, n)._last_per_node(short, n)

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-recent")
        try:
            return short, n, pool.submit(work)
        finally:
            pool.shutdown(wait=False)

    def _last_per_node(self, short: list[str], n: int) -> pd.DataFrame:
        """PostgreSQL: per node (a LATERAL range of the (node, name, started_at) index from its cut on; a
        plain join scans every metric row), one row per series of ``short``: its sample count since the cut
        (``cnt``) and its last ``n`` samples' times and values as two arrays, newest first (ties in time by
        run_id and seq, as load_frames orders them). A tenth of the rows of one row per sample: at 10,000
        nodes the per-row cost of the transfer was most of the report's read (docs/performance.md). Returned
        as rows (series, then time), ``run_id`` left empty: the fleet ranking reads the samples' times."""
        from sqlalchemy import BigInteger, Float, func, select, true
        from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by

        m = self.s.metrics
        cut, _span = self._cut(n)
        newest = (m.c.started_at.desc(), self._c(m.c.run_id).desc(), m.c.seq.desc())
        micros = func.floor(func.extract("epoch", m.c.started_at) * 1_000_000).cast(BigInteger)

        def last(expr, kind):
            return func.array_agg(aggregate_order_by(expr, *newest), type_=ARRAY(kind))[1:n]

        per_node = (select(m.c.check, m.c.component, m.c.name, func.count().label("cnt"),
                           last(micros, BigInteger).label("t"), last(m.c.value, Float).label("v"))
                    .where(m.c.node == cut.c.node, m.c.name.in_(short), m.c.started_at >= cut.c.cut,
                           m.c.started_at <= self.now)
                    .group_by(m.c.check, m.c.component, m.c.name)
                    .offset(0).lateral("recent"))  # OFFSET 0: a per-node subquery, not flattened into a scan
        keys = ["node", "check", "component", "name", "cnt", "t", "v"]
        rows = _frame(self.conn, select(cut.c.node, *(per_node.c[c] for c in keys[1:]))
                      .select_from(cut.join(per_node, true())), keys)
        return _unnest_last(rows)

    def _last_runs(self, n: int) -> pd.DataFrame:
        from sqlalchemy import func, select

        runs = self.s.runs
        rn = func.row_number().over(partition_by=runs.c.node,
                                    order_by=(runs.c.started_at.desc(), self._c(runs.c.run_id).desc()))
        inner = (select(*self._runs_columns(), rn.label("rn")).where(self._in_window(runs.c.started_at))
                 .subquery())
        stmt = (select(*(inner.c[c] for c in summ.COLUMNS["runs"])).where(inner.c.rn <= n)
                .order_by(inner.c.started_at, self._c(inner.c.run_id)))
        return _frame(self.conn, stmt, summ.COLUMNS["runs"], ("started_at",))

    def _mtbf_runs(self) -> pd.DataFrame:
        """``summary.mtbf_runs`` in SQL: the window's runs with a fail/warn result, the run of the same
        node and context just before each, and each node's first run."""
        from sqlalchemy import and_, func, or_, select

        runs, res = self.s.runs, self.s.results
        flagged = (select(res.c.run_id).select_from(runs.join(res, res.c.run_id == runs.c.run_id))
                   .where(self._in_window(runs.c.started_at), runs.c.n_flagged > 0, res.c.status.in_(summ.FLAGGED)))
        order = (runs.c.started_at, self._c(runs.c.run_id))
        nxt = func.lead(runs.c.run_id).over(partition_by=(runs.c.node, runs.c.context), order_by=order)
        first = func.row_number().over(partition_by=runs.c.node, order_by=order)
        inner = (select(*self._runs_columns(), nxt.label("nxt"), first.label("first"))
                 .where(self._in_window(runs.c.started_at)).subquery())
        stmt = (select(*(inner.c[c] for c in summ.COLUMNS["runs"]))
                .where(or_(inner.c.run_id.in_(flagged), inner.c.first == 1,
                           and_(inner.c.nxt.is_not(None), inner.c.nxt.in_(flagged))))
                .order_by(inner.c.started_at, self._c(inner.c.run_id)))
        return summ.by_time(_frame(self.conn, stmt, summ.COLUMNS["runs"], ("started_at",)))


def _unnest_last(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of (node, check, component, name, cnt, t, v) with ``t``/``v`` arrays, newest first -> one row
    per sample in the metrics frame's columns (+ seq, cnt), each series oldest first."""
    import numpy as np

    columns = summ.COLUMNS["metrics"] + ["seq", "cnt"]
    if rows.empty:
        return pd.DataFrame({c: pd.Series([], dtype="int64" if c in ("seq", "cnt") else object) for c in columns})
    ticks, lengths = array_items(rows["t"], "int64")
    values, vlengths = array_items(rows["v"], "float64")
    if not np.array_equal(lengths, vlengths):
        raise HistoryError("the recent samples' times and values disagree in length (a database error?)")
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    newest_first = np.arange(len(ticks)) - starts  # 0 for the newest of its series
    at = starts + np.repeat(lengths, lengths) - 1 - newest_first  # oldest first within the series
    series = np.repeat(np.arange(len(rows)), lengths)
    order = np.empty(len(ticks), dtype=np.int64)
    order[at] = np.arange(len(ticks))
    take = series[order]
    out = rows.iloc[take][["node", "check", "component", "name", "cnt"]].reset_index(drop=True)
    out["started_at"] = pd.to_datetime(ticks[order], unit="us", utc=True)
    out["value"] = values[order]
    out["run_id"] = None
    out["seq"] = 0
    return out[columns]
