"""What the readiness report needs from the history of one window, already reduced: ``Summary``.

Two producers, one consumer (``build.build_report``):

- :func:`summarize_frames` from the four DataFrames of ``healthcheck.history.queries.load_frames`` (or
  any frames in that contract), in pandas: the in-memory way;
- :func:`healthcheck.report.dbsummary.load_summary` from the database, through SQL and the rollups of
  ``healthcheck.history.rollups``: it never reads every metric row.

Both give equal summaries of equal histories (tests/report/test_dbsummary.py compares them field by
field and the reports section by section), so the report is the same whichever way it was read.

Fields (frames in the ``load_frames`` column contract; times tz-aware UTC):

- ``counts``           rows in the window: runs, results, metrics, actions;
- ``latest_runs``      each node's latest run (latest by (started_at, run_id));
- ``reliability``      ``availability.reliability`` of the window's runs (failure onsets per node);
- ``flagged_results``  the window's results that fail or warn (the failing-checks ranking);
- ``latest_results``   the results of ``latest_runs`` that fail, warn or could not judge (``NOW_BAD``: what
                       fails now; the risk ranking; a passing result adds nothing to either);
- ``counter_samples``  the samples of the error-counter series that moved in the window
                       (``trends.changed_series``): counter growth and its plot are computed from them;
- ``perf_latest``      the latest sample of each performance series (``trends.latest_samples``): the
                       fleet distributions and outliers;
- ``actions``          the window's drain/resume records;
- ``node_days``        per (node, UTC day) with a run: whether its last run that day failed
                       (``fleetstate.node_days``): the fleet-state-per-day plot;
- ``gemm_digests``     the window's burn-in GEMM digests (``history.digests.DigestRow``; filled by
                       ``cli_report.load_history`` from the ``gemm_digests`` table): the fleet comparison.

A producer may hand a field that the report needs late (``DEFERRABLE``: the fleet ranking's inputs, the
fleet-state days, the MTBF runs, first seen) as :class:`Later`: a call that gives its value, made on the
field's first read. The database reader does so where a second connection is still reading it: those reads
then overlap the report's build (its first steps, then the ranking) instead of delaying them. Whoever reads
the field gets the value (or the read's error) either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from ..analysis import availability, trends
from . import actions as act
from . import commissioning, fleetstate, training

COLUMNS = {
    "runs": ["run_id", "node", "context", "job_id", "started_at", "duration_s", "status"],
    "results": ["run_id", "node", "started_at", "check", "component", "status", "message"],
    "metrics": ["run_id", "node", "started_at", "check", "component", "name", "value"],
    "actions": ["record_id", "run_id", "node", "time", "action", "reason", "job_id", "context"],
}
TIME_COLUMN = {"runs": "started_at", "results": "started_at", "metrics": "started_at", "actions": "time"}
FLAGGED = ("fail", "warn")
NOW_BAD = ("fail", "warn", "error")  # the latest results kept (the rollups' runs.n_flagged counts these)


# fields the report's build reads from its ranking on (build.py): they may arrive late (Later)
DEFERRABLE = frozenset({"perf_recent", "recent_runs", "node_days", "mtbf_runs", "first_seen"})


class Later:
    """A Summary field's value still being read: ``get()`` waits for it (or raises the read's error)."""

    __slots__ = ("get",)

    def __init__(self, get: Callable[[], Any]):
        self.get = get


@dataclass
class Summary:
    since: pd.Timestamp
    now: pd.Timestamp
    counts: dict[str, int]
    latest_runs: pd.DataFrame
    reliability: pd.DataFrame
    flagged_results: pd.DataFrame
    latest_results: pd.DataFrame
    counter_samples: pd.DataFrame
    perf_latest: pd.DataFrame
    actions: pd.DataFrame
    source: str = "frames"  # "frames" | "rollups"
    notes: list[str] = field(default_factory=list)
    gemm_digests: list[Any] = field(default_factory=list)
    node_days: pd.DataFrame | None = None  # fleetstate.node_days of the window's runs
    # With ``summarize_frames(..., recent=n)``: each node's last n runs (run_id, node, started_at) and the
    # last n samples of each judged figure (analysis/fleetrank.py); None: the report ranks as before.
    recent_runs: pd.DataFrame | None = None
    perf_recent: pd.DataFrame | None = None
    # With ``recent``: the runs the MTBF tables need (``mtbf_runs``): the window's runs with a fail/warn
    # result, the run of the same node and context just before each, and each node's first run.
    mtbf_runs: pd.DataFrame | None = None
    # The commissioning section's rows (report/commissioning.py): latest fabric results, drill timings
    commissioning: Any = None
    # The training readiness section's rows (report/training.py): the latest burnin.train run, burnin.nccl
    training: Any = None
    # (node, item, value) of each node's latest sw.versions results (analysis/versions.py), for the
    # report's version tables and drift rows; None: not read (the caller may pass its own)
    versions: pd.DataFrame | None = None
    # node -> its first run in the WHOLE history up to ``now`` (not only the window): "new node" means
    # first seen there (fleet tables' TTFF); None: not known (the window's first runs stand in)
    first_seen: pd.Series | None = None

    def __post_init__(self) -> None:
        pending = {name: object.__getattribute__(self, name) for name in DEFERRABLE
                   if isinstance(object.__getattribute__(self, name), Later)}
        for name in pending:
            object.__setattr__(self, name, None)
        object.__setattr__(self, "_later", pending)

    def __getattribute__(self, name: str) -> Any:
        if name in DEFERRABLE:
            pending = object.__getattribute__(self, "_later")
            if name in pending:  # the first read of a field still being read: wait for it (a failed read
                object.__setattr__(self, name, pending[name].get())  # raises again at the next one)
                del pending[name]
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in DEFERRABLE and "_later" in self.__dict__:
            self.__dict__["_later"].pop(name, None)  # a value set over a pending one replaces it
        object.__setattr__(self, name, value)

    @property
    def pending(self) -> frozenset[str]:
        """The fields still being read (``Later``, not read yet)."""
        return frozenset(object.__getattribute__(self, "_later"))

    def wrap_later(self, wrap: Callable[[Callable[[], Any]], Callable[[], Any]]) -> None:
        """Each pending field's read replaced by ``wrap(read)`` (e.g. to turn its error into the caller's)."""
        for later in object.__getattribute__(self, "_later").values():
            later.get = wrap(later.get)

    def settle(self) -> "Summary":
        """Every pending field read (waits for them); the summary, for chaining."""
        for name in list(object.__getattribute__(self, "_later")):
            getattr(self, name)
        return self

    def __getstate__(self) -> dict[str, Any]:  # a pickle or deep copy holds values, not pending reads
        self.settle()
        return {k: v for k, v in self.__dict__.items() if k != "_later"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__["_later"] = {}


def utc(ts: Any) -> pd.Timestamp:
    t = pd.Timestamp(ts)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def empty_frame(name: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="datetime64[ns, UTC]" if c == TIME_COLUMN[name] else object)
                         for c in COLUMNS[name]})


def frames_of(frames: Any) -> dict[str, pd.DataFrame]:
    """The four frames from a mapping, an object with those attributes, or a 4-tuple; missing or empty
    ones as empty frames; ValueError naming the frame when a column is missing."""
    if isinstance(frames, Mapping):
        got = {k: frames.get(k) for k in COLUMNS}
    elif isinstance(frames, (tuple, list)):
        got = dict(zip(COLUMNS, frames))
    else:
        got = {k: getattr(frames, k, None) for k in COLUMNS}
    out = {}
    for name, cols in COLUMNS.items():
        df = got.get(name)
        if df is None or len(df) == 0:
            df = empty_frame(name)
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{name} frame lacks columns {missing}")
        out[name] = df
    return out


def window(df: pd.DataFrame, col: str, since: pd.Timestamp, now: pd.Timestamp) -> pd.DataFrame:
    """Rows inside [since, now]; the frame itself when all are (the common case: no copy)."""
    if df.empty:
        return df
    t = df[col]
    if t.min() >= since and t.max() <= now:
        return df
    return df[(t >= since) & (t <= now)]


def by_time(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs in (started_at, run_id) order: the tie-break every producer uses."""
    return runs.sort_values(["started_at", "run_id"], kind="stable") if len(runs) else runs


def latest_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per node: its latest run (``runs`` already in ``by_time`` order)."""
    if runs.empty:
        return runs.iloc[0:0]
    return runs.drop_duplicates("node", keep="last").reset_index(drop=True)


def results_of(results: pd.DataFrame, run_ids: Any) -> pd.DataFrame:
    """The ``NOW_BAD`` results of the runs ``run_ids``."""
    if not len(results):
        return results.iloc[0:0]
    return results[results["run_id"].isin(set(run_ids)) & results["status"].isin(NOW_BAD)]


def counter_samples(metrics: pd.DataFrame) -> pd.DataFrame:
    """Samples of the error-counter series that moved (two distinct values or more)."""
    return trends.changed_series(metrics, act.counter_metric)


def perf_latest(metrics: pd.DataFrame) -> pd.DataFrame:
    """The latest sample of each performance-figure series (component "" for none)."""
    return trends.latest_samples(metrics, act.perf_metric)


def reliability(runs: pd.DataFrame, now: pd.Timestamp) -> pd.DataFrame:
    """``availability.reliability`` (failure onsets per node) of runs in ``by_time`` order."""
    return availability.reliability(runs, now=now)


def summarize_frames(frames: Any, since: Any, now: Any, recent: int | None = None) -> Summary:
    """The summary of the window [since, now] of in-memory frames (the ``load_frames`` contract).
    ``recent`` > 0 also keeps each node's last ``recent`` runs and samples (the fleet ranking's input)
    and the runs of the MTBF tables; None: the ranking's default n (``persistence.DEFAULT_N``); 0: none
    (the report then ranks the old way, ``risk.rank_nodes``)."""
    recent = recent_n(recent)
    since, now = utc(since), utc(now)
    whole = frames_of(frames)
    f = {k: window(v, TIME_COLUMN[k], since, now) for k, v in whole.items()}
    runs = by_time(f["runs"])
    results, metrics = f["results"], f["metrics"]
    latest = latest_runs(runs)
    flagged = results[results["status"].isin(FLAGGED)] if len(results) else results
    return Summary(since, now, {"runs": len(runs), "results": len(results), "metrics": len(metrics),
                                "actions": len(f["actions"])},
                   latest, reliability(runs, now), flagged, results_of(results, latest["run_id"]),
                   counter_samples(metrics), perf_latest(metrics), f["actions"], "frames",
                   node_days=fleetstate.node_days(runs), **_recent(metrics, runs, results, recent),
                   commissioning=commissioning.from_frames(results, metrics),
                   training=training.from_frames(results, metrics, runs),
                   first_seen=first_seen(whole["runs"], now))


def first_seen(runs: pd.DataFrame, now: pd.Timestamp) -> pd.Series:
    """node -> its first run up to ``now`` in ``runs`` (every run the frames hold, before the window too)."""
    if runs.empty:
        return pd.Series(dtype="datetime64[ns, UTC]", name="first_seen")
    t = runs["started_at"]
    keep = runs[t <= now] if len(runs) and t.max() > now else runs
    out = keep.groupby(keep["node"].astype(str), sort=True)["started_at"].min()
    out.index.name, out.name = "node", "first_seen"
    return out


def recent_n(recent: int | None) -> int:
    """``recent`` checked: None -> the ranking's default n; else an int >= 0 (ValueError otherwise)."""
    if recent is None:
        from ..analysis.persistence import DEFAULT_N

        return DEFAULT_N
    if isinstance(recent, bool) or not isinstance(recent, int) or recent < 0:
        raise ValueError(f"recent must be an integer >= 0 (runs per node), not {recent!r}")
    return recent


def recent_fields(metrics: pd.DataFrame, runs: pd.DataFrame, n: int) -> dict[str, Any]:
    """``perf_recent`` and ``recent_runs`` of a window's metrics and runs (or of any superset of each
    node's last n runs and each series' last samples: the reduction is the same): :func:`recent_perf`,
    ``fleetrank.recent_runs``."""
    from ..analysis.fleetrank import recent_runs

    return {"perf_recent": recent_perf(metrics, n), "recent_runs": recent_runs(runs, n=n)}


def recent_perf(metrics: pd.DataFrame, n: int) -> pd.DataFrame:
    """``perf_recent`` of a window's metrics (``fleetrank.recent_samples``). A component '' is no component,
    as in the rollups' series (``history.rollups``): one series, whichever a record wrote."""
    from ..analysis.fleetrank import recent_samples

    if len(metrics) and metrics["component"].eq("").any():
        metrics = metrics.assign(component=metrics["component"].where(metrics["component"].ne(""), None))
    return recent_samples(metrics, n=n)


def mtbf_runs(runs: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """The runs (``by_time`` order) that ``fleetviews.mtbf`` needs to find the same failure onsets and
    node-hours as over all of them: those with a fail/warn result, the run of the same node and context
    just before each (adjacent there, so adjacent here), and each node's first run."""
    if runs.empty:
        return runs
    flagged = set(results.loc[results["status"].isin(FLAGGED), "run_id"]) if len(results) else set()
    ctx = runs["context"].astype(object).where(runs["context"].notna(), None)
    nxt = runs["run_id"].groupby([runs["node"], ctx], sort=False, dropna=False).shift(-1)
    keep = runs["run_id"].isin(flagged) | nxt.isin(flagged) | ~runs["node"].duplicated()
    return runs[keep.to_numpy()].reset_index(drop=True)


def _recent(metrics: pd.DataFrame, runs: pd.DataFrame, results: pd.DataFrame, n: int) -> dict[str, Any]:
    if not n:
        return {}
    return {**recent_fields(metrics, runs, n), "mtbf_runs": mtbf_runs(runs, results)}
