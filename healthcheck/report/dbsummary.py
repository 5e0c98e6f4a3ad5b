"""The readiness report's ``Summary`` read from the history database (SQLite or PostgreSQL) without reading
every metric row: SQL aggregates over runs/results and the rollups of ``healthcheck.history.rollups``.

One read transaction (SQLite: the WAL snapshot of its first read; PostgreSQL: REPEATABLE READ, with no
parallel workers and no JIT: ``_plain_plans``), so a concurrent ingest is either wholly in the summary or not
at all. PostgreSQL reads every node of the history once per connection (a loose index scan) and hands the
list to each read that goes node by node. For the window [since, now]:

1. counts: COUNT(*) and SUM(n_results), SUM(n_metrics) of the window's runs; the actions read;
2. latest runs: each node's greatest (started_at, run_id) in the window (per node, index seeks for its
   first and last run time in the window);
3. failure onsets: for the nodes with a failing run in the window, their runs where "status is fail"
   differs from the previous run's (LAG); for the others their first run: ``availability.reliability``
   over those rows finds the same onsets, first run and first failure as over all the runs;
4. flagged results: fail/warn results of the window's runs with ``n_flagged > 0``;
5. latest results: the results of the latest runs that fail, warn or error (``summary.NOW_BAD``; primary key);
6. actions in the window;
7. performance figures: ``metric_series`` rows of the performance names (``actions.perf_metric``) whose
   last sample is in the window; a series with samples after ``now`` is read from ``metrics`` instead;
8. error counters: ``counter_levels`` grouped per series; the series with two levels or more seen in the
   window, or a level seen after ``now``, are read from ``metrics`` (index node, name, started_at) and
   ``trends.changed_series`` keeps those that moved. A constant counter is never read.
9. the fleet ranking's input: each series' newest samples from ``metric_recent`` (``history.recent``), cut
   to the window and to what the ranking judges (``keptsamples``; PostgreSQL: read and unnested on a second
   connection in this transaction's exported snapshot, while the rest is read); each node's last n runs
   (PostgreSQL: per node a LATERAL .. LIMIT on its index range; SQLite: ROW_NUMBER) and the MTBF table's
   runs (window functions).

PostgreSQL: the fleet ranking's samples are needed only at the report's ranking, the fleet-state days, the
MTBF runs and each node's first run only after it; the second connection reads them in that order, and the
summary hands them over as ``summary.Later`` fields, so those reads overlap the report's build (the
snapshot, once taken, outlives this transaction).

Runs stored but not merged into the rollups yet (``rollup_pending``: an ingest in progress, or one that
was interrupted) are accounted for exactly: the series they have samples of in the window are read from
``metrics`` (7, 8 and 9), as are the late ones.

``RollupsUnavailable`` when the rollups were not built by this code (``healthcheck db rebuild-rollups``);
the caller can fall back to ``load_frames`` + ``summary.summarize_frames``.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import trends
from ..history.db import BOUND_PARAMETERS as IDS_PER_QUERY, HistoryError, describe_error, is_sqlite
from ..history.recent import KEEP, PAIRS_PER_QUERY
from . import actions as act
from . import commissioning, fleetstate, training
from . import summary as summ
from .keptsamples import KEY_COLUMNS, keyed, longest, no_samples, unnest_recent, with_partners
from .sqlframe import read_frame

EXPORT_SNAPSHOT = "SELECT pg_export_snapshot()"
# setting: (value, server version since which it exists); see _plain_plans
PLAIN_PLANS = {"max_parallel_workers_per_gather": ("0", (9, 6)), "jit": ("off", (11,)), "work_mem": ("64MB", (0,))}
_NOT_READ = object()  # a read-ahead that could not be done: read on the report's connection


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
            if sqlite:
                with conn.begin():
                    return _Reader(conn, sqlite, since, now, summ.recent_n(recent)).summary()
            conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            trans, snapshot = _begin_exported(conn)
            with trans:
                return _Reader(conn, sqlite, since, now, summ.recent_n(recent), snapshot).summary()
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


def _begin_exported(conn):
    """PostgreSQL: begin the report's transaction and export its snapshot (the first statement, so the
    snapshot is the transaction's: ``pg_export_snapshot`` cannot run in a savepoint) -> (transaction, snapshot
    name); where the server exports none (a standby in recovery, a pooler), the refused transaction is rolled
    back and a fresh one begun: (transaction, None), everything then read on this connection."""
    import re

    from sqlalchemy.exc import DBAPIError

    trans = conn.begin()
    try:
        snapshot = conn.exec_driver_sql(EXPORT_SNAPSHOT).scalar()
    except DBAPIError:
        trans.rollback()
        trans = conn.begin()
        _plain_plans(conn)
        return trans, None
    if not isinstance(snapshot, str) or not re.fullmatch(r"[0-9A-Fa-f-]{1,64}", snapshot):
        snapshot = None
    _plain_plans(conn)
    return trans, snapshot


def _plain_plans(conn) -> None:
    """PostgreSQL: no parallel workers, no JIT compilation and room to group in memory until the transaction
    ends (SET LOCAL). The report's reads are index seeks and scans of a few hundred thousand rows on two
    connections of its own; where the planner misjudges a join (the flagged results, the MTBF runs) it chose a
    parallel scan of the window's runs, and three processes' CPU for one query's, and JIT compiled plans that
    run in 0.2 s; the fleet-state days (300,000 groups at 10,000 nodes) spilled to disk with the default 4 MB
    (docs/performance.md). Each setting only where the server has it (``PLAIN_PLANS``)."""
    version = tuple(conn.dialect.server_version_info or (0,))
    calls = [f"set_config('{name}', '{value}', true)" for name, (value, since) in PLAIN_PLANS.items()
             if version >= since]
    if calls:
        conn.exec_driver_sql("SELECT " + ", ".join(calls))


def first_seen(engine, now: Any) -> pd.Series:
    """node -> its first run in the whole history up to ``now`` (the report's fallback without rollups)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            return _Reader(conn, is_sqlite(engine), summ.utc(now), summ.utc(now))._first_seen()
    except SQLAlchemyError as exc:
        raise HistoryError(describe_error(exc, engine.url)) from None


class _Reader:
    def __init__(self, conn, sqlite: bool, since: pd.Timestamp, now: pd.Timestamp, recent: int = 0,
                 snapshot: str | None = None) -> None:
        from ..history import schema

        self.conn, self.sqlite, self.s, self.recent = conn, sqlite, schema, recent
        self.since, self.now = since.to_pydatetime(), now.to_pydatetime()
        self.window = (since, now)
        self.snapshot = snapshot  # PostgreSQL: the exported snapshot of ``conn``'s transaction, if any
        self.ahead: dict[str, Any] = {}  # PostgreSQL: name -> Future of a read done on a second connection
        self.imported: Any = None  # with ``ahead``: a Future, True once that connection took the snapshot
        self.node_list: Any = None  # PostgreSQL: every node of the history (_nodes) as one text[] parameter

    def summary(self) -> summ.Summary:
        from ..history import rollups

        if not rollups.usable(self.conn):
            raise RollupsUnavailable("the history's rollups are not built for this healthcheck (run `healthcheck db "
                                     "rebuild-rollups`; until then the report reads every row, slowly)")
        n_runs, n_results, n_metrics = self._counts()
        self.ahead = self._read_ahead() if self.snapshot else {}
        try:
            return self._summary(n_runs, n_results, n_metrics)
        finally:
            # an error before they were used: let the connection go back (the summary's Later fields are
            # not here: popped, read on while this transaction ends, in the snapshot already taken)
            for future in self.ahead.values():
                future.exception()

    def _summary(self, n_runs: int, n_results: int, n_metrics: int) -> summ.Summary:
        span = self._span()
        latest = summ.latest_runs(summ.by_time(self._latest_runs(span)))
        acts = self._actions()
        pending = self._pending_keys()
        since, now = self.window
        node_days = self._later("node_days", self._node_days)  # a summ.Later where read on the other connection
        reliability = summ.reliability(self._onsets(span), now)
        flagged, latest_results = self._flagged(), self._results_of(list(latest["run_id"]))
        counters = self._counters(pending)
        perf = self._perf(pending)
        recent = self._recent(pending)
        return summ.Summary(since, now, {"runs": n_runs, "results": n_results, "metrics": n_metrics,
                                         "actions": len(acts)},
                            latest, reliability, flagged, latest_results, counters, perf, acts, "rollups",
                            node_days=node_days, **recent,
                            commissioning=commissioning.load_sql(self.conn, self.sqlite, since, now),
                            training=training.load_sql(self.conn, self.sqlite, since, now),
                            first_seen=self._later("first_seen", self._first_seen))

    def _later(self, name: str, read):
        """A read the report's build needs only after its ranking (``summary.DEFERRABLE``): where the second
        connection reads it, a ``summary.Later`` that waits for it (its reads then overlap the build; its
        error a HistoryError, redacted, when the field is read); else read here, now: its value."""
        future = self.ahead.pop(name, None)
        if future is None or not self.imported.result():  # raises the second connection's failure to open
            return read()
        url = self.conn.engine.url

        def get():
            from sqlalchemy.exc import SQLAlchemyError

            try:
                return future.result()
            except SQLAlchemyError as exc:
                raise HistoryError(describe_error(exc, url)) from None

        return summ.Later(get)

    def _node_days(self) -> pd.DataFrame:
        return fleetstate.node_days_sql(self.conn, self.sqlite, *self.window)

    def _first_seen(self) -> pd.Series:
        """node -> its first run in the whole history up to the window's end: one index seek on
        (node, started_at) per node (PostgreSQL: per node of :meth:`_nodes`, where a GROUP BY reads every
        run; SQLite's planner seeks by itself)."""
        from sqlalchemy import func, select, true

        runs = self.s.runs
        if self.sqlite:
            stmt = (select(runs.c.node, _time(func.min(runs.c.started_at), True).label("first"))
                    .where(runs.c.started_at <= self.now).group_by(runs.c.node))
        else:
            nodes, r = self._nodes(), runs.alias("r")
            first = (select(func.min(r.c.started_at).label("first"))
                     .where(r.c.node == nodes.c.node, r.c.started_at <= self.now).lateral("first"))
            stmt = (select(nodes.c.node, first.c.first).select_from(nodes.join(first, true()))
                    .where(first.c.first.is_not(None)))
        df = _frame(self.conn, stmt, ["node", "first"], ("first",))
        out = pd.Series(df["first"].to_numpy(), index=df["node"].astype(str).to_numpy(), name="first_seen")
        out.index.name = "node"
        return out.sort_index()

    def _nodes(self, name: str = "nodes"):
        """Every node of the history as a subquery (column ``node``). PostgreSQL: read once per connection
        (:meth:`_distinct` of the runs' node: 10,000 index seeks, 0.2 s of the server's CPU at 10,000 nodes)
        and passed to each query that needs it as one array; SQLite: :meth:`_distinct`."""
        if self.sqlite:
            return self._distinct(self.s.runs.c.node, name)
        from sqlalchemy import func, select

        if self.node_list is None:
            every = self._distinct(self.s.runs.c.node, name)
            self.node_list = _text_array(self.conn.execute(select(every.c.node)).scalars())
        return func.unnest(self.node_list).table_valued("node").render_derived(name=name)

    def _distinct(self, col, name: str):
        """The distinct values of ``col`` (the first column of an index) as a subquery with a column of
        its name. PostgreSQL: a loose index scan, one seek per value (a recursive CTE of "the next value
        after this one"), where a DISTINCT reads the whole index or table; SQLite: DISTINCT (its planner
        skips through the index itself)."""
        from sqlalchemy import func, select

        if self.sqlite:
            return select(col).distinct().subquery(name)
        r = col.table.alias(f"{name}_r")
        walk = select(func.min(col).label(col.name)).cte(f"{name}_walk", recursive=True)
        step = select(select(func.min(r.c[col.name])).where(r.c[col.name] > walk.c[col.name]).scalar_subquery()
                      ).where(walk.c[col.name].is_not(None))
        walk = walk.union_all(step)
        return select(walk.c[col.name]).where(walk.c[col.name].is_not(None)).subquery(name)

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
        nodes = self._nodes()
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
        # read once (PostgreSQL: a CTE used twice is computed once), not once per use
        failing_nodes = select(select(runs.c.node).where(self._in_window(runs.c.started_at), runs.c.status == "fail")
                               .distinct().cte("failing").c.node)
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
        """The ``summ.NOW_BAD`` results of the runs ``run_ids``: of those whose ``n_flagged`` (the rollups'
        count of such results) is not 0, each by its primary key range."""
        from sqlalchemy import or_, select

        res, runs = self.s.results, self.s.runs
        cols = self._results_columns()
        flagged = or_(runs.c.n_flagged > 0, runs.c.n_flagged.is_(None))
        # SQLite: IN lists within its bound-parameter limit; PostgreSQL: every id in one array, one statement
        per_query = IDS_PER_QUERY if self.sqlite else max(len(run_ids), 1)
        run_ids = [r for i in range(0, len(run_ids), per_query) for r in self.conn.execute(
            select(runs.c.run_id).where(self._one_of(runs.c.run_id, run_ids[i:i + per_query]), flagged)).scalars()]
        parts = [_frame(self.conn, select(*cols).where(self._one_of(res.c.run_id, run_ids[i:i + per_query]),
                                                       res.c.status.in_(summ.NOW_BAD))
                        .order_by(res.c.started_at, self._c(res.c.run_id), res.c.seq),
                        summ.COLUMNS["results"], ("started_at",)) for i in range(0, len(run_ids), per_query)]
        if not parts:
            return summ.empty_frame("results")
        out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        return out.sort_values(["started_at", "run_id"], kind="stable").reset_index(drop=True)

    def _one_of(self, col, values: list[str]):
        """``col`` IN ``values``: SQLite an IN list, PostgreSQL ``= ANY`` of one array (``_text_array``)."""
        if self.sqlite:
            return col.in_(values)
        from sqlalchemy import any_

        return col == any_(_text_array(values))

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
        if not self.sqlite:
            return self._samples_pg(keys, cols) if len(keys) else no_samples()
        pairs = sorted(set(zip(keys["node"], keys["name"])))
        parts = []
        for i in range(0, len(pairs), PAIRS_PER_QUERY):
            stmt = (select(*cols).where(tuple_(m.c.node, m.c.name).in_(pairs[i:i + PAIRS_PER_QUERY]),
                                        self._in_window(m.c.started_at))
                    .order_by(m.c.started_at, self._c(m.c.run_id), m.c.seq))
            parts.append(_frame(self.conn, stmt, summ.COLUMNS["metrics"], ("started_at",)))
        if not parts:
            return no_samples()
        df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            df = df.sort_values("started_at", kind="stable").reset_index(drop=True)
        mine = pd.MultiIndex.from_frame(keyed(df)[KEY_COLUMNS]).isin(pd.MultiIndex.from_frame(keys[KEY_COLUMNS]))
        return df[mine].reset_index(drop=True)

    def _samples_pg(self, keys: pd.DataFrame, cols: list) -> pd.DataFrame:
        """PostgreSQL: the series' rows by one index range scan of (node, name, started_at) per series (a
        LATERAL join on the keys passed as four arrays), the exact series only; where a list of (node, name)
        pairs makes the planner AND a scan of the whole name's window into it, and plan for long."""
        from sqlalchemy import func, select, true

        m = self.s.metrics
        distinct = keyed(keys[KEY_COLUMNS]).drop_duplicates()  # no component: ''
        k = func.unnest(*(_text_array(str(v) for v in distinct[c]) for c in KEY_COLUMNS)
                        ).table_valued(*KEY_COLUMNS).render_derived(name="k")
        rows = (select(*cols, m.c.seq.label("_seq"))
                .where(m.c.node == k.c.node, m.c.name == k.c.name, m.c.check == k.c.check,
                       func.coalesce(m.c.component, "") == k.c.component, self._in_window(m.c.started_at))
                .lateral("rows"))
        names = summ.COLUMNS["metrics"]
        stmt = (select(*(rows.c[c] for c in names)).select_from(k.join(rows, true()))
                .order_by(rows.c.started_at, self._c(rows.c.run_id), rows.c._seq))
        return _frame(self.conn, stmt, names, ("started_at",))

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
        every = self._distinct(ms.c.name, "names")  # the rollups' key leads with the name
        names = [n for n in self.conn.execute(select(every.c.name)).scalars() if act.perf_metric(n)]
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

    def _recent(self, pending: pd.DataFrame) -> dict[str, Any]:
        """Each node's last n runs, the last n (n + the regression window for the "higher is better"
        figures) samples of every judged series, and the runs the MTBF table needs; the same frames as
        ``summary.summarize_frames`` gives."""
        if not self.recent:
            return {}
        from ..analysis.fleetrank import recent_names

        short, long_ = recent_names()
        n = self.recent
        runs = self._last_runs(n)  # here, while the other connection reads the kept samples
        samples = self._later("recent_samples", lambda: self._last_samples(short, long_, n, pending))
        if not isinstance(samples, summ.Later):
            fields = summ.recent_fields(samples, runs, n)
        else:  # the runs now (the ranking judges the checks with them while the samples are still read), the
            # samples reduced on the first read of the field
            from ..analysis.fleetrank import recent_runs

            fields = {"perf_recent": summ.Later(lambda: summ.recent_perf(samples.get(), n)),
                      "recent_runs": recent_runs(runs, n=n)}
        return {**fields, "mtbf_runs": self._later("mtbf_runs", self._mtbf_runs)}

    def _last_samples(self, short: list[str], long_: list[str], n: int, pending: pd.DataFrame) -> pd.DataFrame:
        """At least the last n samples in the window of each series of ``short`` and the last n + the
        regression window of ``long_`` (``recent_inputs`` then keeps exactly those), from ``metric_recent``
        (one row per series: its newest ``recent.KEEP`` samples, ``history.recent``). Read from the metric
        rows instead, whole window: the series of runs not merged yet (``pending``), and those whose kept
        samples cannot tell (samples after the window's end crowd out the ones in it: a report of a past
        period). Returned one row per sample, each series oldest first, ``run_id`` empty."""
        longer = longest(n, long_)
        if longer > KEEP:  # more than is kept: every series from its rows
            rows, again = no_samples(), self._series_keys(short + long_)
        else:
            rows, again = self._recent_samples(short + long_, long_, n)
        mine = with_partners(pending[pending["name"].isin(short + long_)]) if len(pending) else pending
        keys = pd.concat([again, mine], ignore_index=True).drop_duplicates() if len(mine) else again
        if len(keys):
            rows = rows[~pd.MultiIndex.from_frame(keyed(rows)[KEY_COLUMNS]).isin(pd.MultiIndex.from_frame(keys))]
            rows = pd.concat([rows, self._samples(keys)], ignore_index=True)
        return rows[summ.COLUMNS["metrics"]].reset_index(drop=True)

    def _window_us(self) -> tuple[int, int]:
        since, now = self.window
        return since.value // 1000, now.value // 1000

    def _series_keys(self, names: list[str]) -> pd.DataFrame:
        """The series (rollup keys) of ``names`` with a sample in the window (``metric_series``)."""
        from sqlalchemy import select

        ms = self.s.metric_series
        stmt = select(*(ms.c[c] for c in KEY_COLUMNS)).where(
            ms.c.name.in_(names), ms.c.last_at >= self.since, ms.c.first_at <= self.now)
        return pd.DataFrame.from_records([tuple(r) for r in self.conn.execute(stmt)], columns=KEY_COLUMNS)

    def _recent_samples(self, names: list[str], long_: list[str], n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``unnest_recent`` of ``_recent_rows``: (the kept samples in the window, the series to read again)."""
        return unnest_recent(self._recent_rows(names, long_, n), long_, n, longest(n, long_), *self._window_us())

    def _recent_rows(self, names: list[str], long_: list[str], n: int) -> pd.DataFrame:
        """``metric_recent``'s rows of ``names`` with a kept sample in or after the window. PostgreSQL cuts
        the arrays to what the window can use: the first n (n + the regression window for ``long_``) where
        no kept sample is after the window's end, all of them otherwise."""
        from sqlalchemy import BigInteger, Float, case, literal, select, type_coerce
        from sqlalchemy.dialects.postgresql import ARRAY

        from ..analysis.fleetrank import REGRESSION_WINDOW

        mr = self.s.metric_recent
        since_us, now_us = self._window_us()
        times, vals = mr.c.times, mr.c.vals
        if not self.sqlite:
            need = case((mr.c.name.in_(long_), n + REGRESSION_WINDOW), else_=n) if long_ else literal(n)
            upto = case((mr.c.newest_us <= now_us, need), else_=KEEP)
            times = type_coerce(times, ARRAY(BigInteger))[1:upto]
            vals = type_coerce(vals, ARRAY(Float))[1:upto]
        stmt = (select(mr.c.node, mr.c.check, mr.c.component, mr.c.name, mr.c.n_kept, mr.c.newest_us,
                       mr.c.oldest_us, mr.c.redo, times.label("t"), vals.label("v"))
                .where(mr.c.name.in_(names), mr.c.newest_us >= since_us))
        return _frame(self.conn, stmt, ["node", "check", "component", "name", "n_kept", "newest_us", "oldest_us",
                                        "redo", "t", "v"])

    def _read_ahead(self) -> dict[str, Any]:
        """PostgreSQL: start the reads whose cost is mostly the server's (window functions over the window's
        runs, ``metric_recent``) on a second connection in this transaction's snapshot (``pg_export_snapshot``:
        the same data, a concurrent ingest included or not for both alike), one after the other, while this
        connection reads the rest: name -> Future; ``self.imported`` says whether it took the snapshot.
        In the order the report needs them, all handed over as ``summary.Later`` fields (``_later``), which
        the thread may still read when this transaction has ended: the fleet ranking's inputs (the kept
        samples: ``_last_samples``), needed after the build's first steps, then the fields needed after the
        ranking. Where the second connection cannot take the snapshot (another server
        behind a pooler) every Future gives ``_NOT_READ`` and ``_later`` reads here, before the transaction
        ends."""
        import threading
        from concurrent.futures import Future

        from sqlalchemy.exc import DBAPIError

        from ..analysis.fleetrank import recent_names

        engine, window, n, snapshot = self.conn.engine, self.window, self.recent, self.snapshot
        reads: dict[str, Any] = {}
        if n:  # in the order the report needs them (all of them handed over as summary.Later fields)
            short, long_ = recent_names()
            reads["recent_samples"] = lambda r: r._last_samples(short, long_, n, r._pending_keys())
        reads["node_days"] = lambda r: r._node_days()
        if n:
            reads["mtbf_runs"] = lambda r: r._mtbf_runs()
        reads["first_seen"] = lambda r: r._first_seen()
        futures = {name: Future() for name in reads}
        imported = self.imported = Future()

        def work() -> None:
            try:
                with engine.connect() as other:
                    other = other.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                    with other.begin():
                        try:
                            other.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
                        except DBAPIError:  # another server behind a pooler, the snapshot gone: read in line
                            for future in futures.values():
                                future.set_result(_NOT_READ)
                            imported.set_result(False)
                            return
                        imported.set_result(True)  # the report's transaction may end from here on
                        _plain_plans(other)
                        reader = _Reader(other, False, *window, n)
                        for name, read in reads.items():
                            futures[name].set_result(read(reader))
                    other.invalidate()  # closed now, not pooled: the report may have disposed of the engine
            except BaseException as exc:  # noqa: B902 - handed to the report's thread, which raises it
                for future in (imported, *futures.values()):
                    if not future.done():
                        future.set_exception(exc)

        threading.Thread(target=work, name="report-read-ahead", daemon=True).start()
        return dict(futures)  # the report pops what it takes from its own dict; the thread sets every one

    def _last_runs(self, n: int) -> pd.DataFrame:
        """Each node's last n runs in the window. PostgreSQL: per node the first n of a backward range of
        the (node, started_at) index (a LATERAL .. LIMIT; 10,000 short seeks instead of numbering every
        run of the window); SQLite: ROW_NUMBER over the window's runs."""
        from sqlalchemy import func, select, true

        runs = self.s.runs
        if not self.sqlite:
            nodes = self._nodes()
            r = runs.alias("r")
            cols = [_time(r.c[c], False) if c == "started_at" else r.c[c] for c in summ.COLUMNS["runs"]]
            last = (select(*cols).where(r.c.node == nodes.c.node, self._in_window(r.c.started_at))
                    .order_by(r.c.started_at.desc(), self._c(r.c.run_id).desc()).limit(n).lateral("last"))
            stmt = (select(*(last.c[c] for c in summ.COLUMNS["runs"])).select_from(nodes.join(last, true()))
                    .order_by(last.c.started_at, self._c(last.c.run_id)))
            return _frame(self.conn, stmt, summ.COLUMNS["runs"], ("started_at",))
        rn = func.row_number().over(partition_by=runs.c.node,
                                    order_by=(runs.c.started_at.desc(), self._c(runs.c.run_id).desc()))
        inner = (select(*self._runs_columns(), rn.label("rn")).where(self._in_window(runs.c.started_at))
                 .subquery())
        stmt = (select(*(inner.c[c] for c in summ.COLUMNS["runs"])).where(inner.c.rn <= n)
                .order_by(inner.c.started_at, self._c(inner.c.run_id)))
        return _frame(self.conn, stmt, summ.COLUMNS["runs"], ("started_at",))

    def _mtbf_runs(self) -> pd.DataFrame:
        """``summary.mtbf_runs`` in SQL: the window's runs with a fail/warn result, the run of the same
        node and context just before each, and each node's first run. PostgreSQL: index seeks (the flagged
        runs by the rollups' ``n_flagged``, then per flagged run and per node a LATERAL .. LIMIT 1 on (node,
        started_at)) instead of two window functions over every run of the window; SQLite: LEAD and
        ROW_NUMBER over the window's runs."""
        from sqlalchemy import and_, exists, func, or_, select, true, union

        runs, res = self.s.runs, self.s.results
        flagged = (select(res.c.run_id).select_from(runs.join(res, res.c.run_id == runs.c.run_id))
                   .where(self._in_window(runs.c.started_at), runs.c.n_flagged > 0, res.c.status.in_(summ.FLAGGED)))
        if not self.sqlite:
            f = runs.alias("f")
            cols = [_time(f.c[c], False) if c == "started_at" else f.c[c] for c in summ.COLUMNS["runs"]]
            hit = (select(*cols, f.c.started_at.label("t"))
                   .where(self._in_window(f.c.started_at), f.c.n_flagged > 0,
                          exists().where(res.c.run_id == f.c.run_id, res.c.status.in_(summ.FLAGGED)))
                   .cte("hit"))
            p = runs.alias("p")
            before = (select(*(_time(p.c[c], False) if c == "started_at" else p.c[c]
                               for c in summ.COLUMNS["runs"])).where(
                p.c.node == hit.c.node, p.c.context.is_not_distinct_from(hit.c.context),
                self._in_window(p.c.started_at),
                or_(p.c.started_at < hit.c.t,
                    and_(p.c.started_at == hit.c.t, self._c(p.c.run_id) < self._c(hit.c.run_id))))
                .order_by(p.c.started_at.desc(), self._c(p.c.run_id).desc()).limit(1).lateral("before"))
            nodes = self._nodes()
            q = runs.alias("q")
            first = (select(*(_time(q.c[c], False) if c == "started_at" else q.c[c] for c in summ.COLUMNS["runs"]))
                     .where(q.c.node == nodes.c.node, self._in_window(q.c.started_at))
                     .order_by(q.c.started_at, self._c(q.c.run_id)).limit(1).lateral("first"))
            names = summ.COLUMNS["runs"]
            both = union(select(*(hit.c[c] for c in names)),
                         select(*(before.c[c] for c in names)).select_from(hit.join(before, true())),
                         select(*(first.c[c] for c in names)).select_from(nodes.join(first, true()))).subquery()
            stmt = select(*(both.c[c] for c in names)).order_by(both.c.started_at, self._c(both.c.run_id))
            return summ.by_time(_frame(self.conn, stmt, names, ("started_at",)))
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


def _text_array(values) -> Any:
    """PostgreSQL: ``values`` (strings) as ONE text[] parameter, written as the server's array literal here:
    passed as a Python list, the driver adapts each string in Python (57 ms for 10,000 node names, at every
    statement that takes them), and an IN list is one parameter per value that the driver parses too."""
    from sqlalchemy import String, bindparam, cast
    from sqlalchemy.dialects.postgresql import ARRAY

    values = list(values)
    body = "\x00".join(values)  # no text of PostgreSQL's holds NUL: a separator, escaped in one pass
    body = body.replace("\\", "\\\\").replace('"', '\\"').replace("\x00", '","')
    literal = '{"' + body + '"}' if values else "{}"
    return cast(bindparam(None, literal, type_=String), ARRAY(String))
