"""Build the readiness report (``model.Report``) from the history's DataFrames. Pure: no I/O, no clock.

Input: the four frames of ``healthcheck.history.queries.load_frames`` (runs, results, metrics, actions;
a mapping, an object with those attributes, or a 4-tuple), the window (``since``, ``now``), optionally
a node -> class function (peers for the outlier test) and the nodes' live Slurm states (anything with
``.drained`` and ``.reason``, e.g. ``healthcheck.slurm.nodestate.NodeState``). Without Slurm states,
"drained by us" is inferred from our own drain/resume records and "drained by others" is unknown.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import pandas as pd

from . import actions as act
from . import inputs
from .model import (NODE_STATES, CheckRank, Distribution, DrainStat, Finding, FleetSummary, Growth, NodeRisk,
                    Report)

COLUMNS = {
    "runs": ["run_id", "node", "context", "job_id", "started_at", "duration_s", "status"],
    "results": ["run_id", "node", "started_at", "check", "component", "status", "message"],
    "metrics": ["run_id", "node", "started_at", "check", "component", "name", "value"],
    "actions": ["record_id", "run_id", "node", "time", "action", "reason", "job_id", "context"],
}
TIME_COLUMN = {"runs": "started_at", "results": "started_at", "metrics": "started_at", "actions": "time"}
MAX_MESSAGE = 300
TOP_GROWTH = 50
PLOTTED_GROWTH = 8


def _frames(frames: Any) -> dict[str, pd.DataFrame]:
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
            df = pd.DataFrame({c: pd.Series(dtype="datetime64[ns, UTC]" if c == TIME_COLUMN[name] else object)
                               for c in cols})
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{name} frame lacks columns {missing}")
        out[name] = df
    return out


def _window(df: pd.DataFrame, col: str, since: pd.Timestamp, now: pd.Timestamp) -> pd.DataFrame:
    """Rows inside [since, now]; the frame itself when all are (the common case: no copy)."""
    if df.empty:
        return df
    t = df[col]
    if t.min() >= since and t.max() <= now:
        return df
    return df[(t >= since) & (t <= now)]


def _short(text: Any) -> str:
    text = "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _comp(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _fleet(latest: pd.DataFrame, acts: pd.DataFrame, slurm_states: Mapping[str, Any] | None) -> FleetSummary:
    from ..slurm.reasons import is_ours

    status = dict(zip(latest["node"].astype(str), latest["status"].astype(str)))
    last_action = {}
    if not acts.empty:
        last = acts.sort_values("time", kind="stable").drop_duplicates("node", keep="last")
        last_action = dict(zip(last["node"].astype(str), last["action"].astype(str)))
    nodes = set(status) | set(last_action) | set(slurm_states or {})
    groups: dict[str, list[str]] = {s: [] for s in NODE_STATES}
    for node in sorted(nodes):
        state = None
        if slurm_states is not None:
            st = slurm_states.get(node)
            if st is not None and st.drained:
                state = "drained_ours" if is_ours(st.reason) else "drained_others"
        elif last_action.get(node) == "drain":
            state = "drained_ours"
        if state is None:
            state = {"fail": "failing", "pass": "ready", "warn": "ready", "skip": "ready"}.get(
                status.get(node, ""), "unknown")
        groups[state].append(node)
    return FleetSummary({s: len(v) for s, v in groups.items()}, groups, slurm_states is not None)


def _checks(results: pd.DataFrame, now_bad: pd.DataFrame) -> list[CheckRank]:
    bad = results[results["status"].isin(["fail", "warn"])]
    if bad.empty:
        return []
    bad = bad[["check", "status", "started_at", "message", "node"]].copy()
    bad["check"] = bad["check"].astype(str)
    bad["status"] = bad["status"].astype(str)
    counts = bad.groupby(["check", "status"]).size().unstack(fill_value=0)
    last = bad.sort_values("started_at", kind="stable").drop_duplicates("check", keep="last").set_index("check")
    failing_now = now_bad[now_bad["status"] == "fail"]
    nodes_now = failing_now.groupby("check")["node"].agg(lambda s: sorted(set(s)))
    ranks = []
    for check in counts.index:
        nodes = nodes_now.get(check, [])
        msg = str(last.at[check, "message"])
        ranks.append(CheckRank(check, int(counts.at[check, "fail"]) if "fail" in counts else 0,
                               int(counts.at[check, "warn"]) if "warn" in counts else 0, len(nodes), nodes[:10],
                               last.at[check, "started_at"], _short(msg), act.recommend(check, msg)))
    ranks.sort(key=lambda r: (-r.nodes_failing_now, -r.fail_results, -r.warn_results, r.check))
    return ranks


def _distributions(outl: pd.DataFrame) -> list[Distribution]:
    out = []
    for metric, grp in outl.groupby("name", sort=True):
        values = grp["value"].astype(float)
        bad = grp[grp["outlier"]].sort_values("z", key=lambda z: -z.abs())
        outliers = [{"node": r.node, "component": r.component, "value": float(r.value), "z": float(r.z),
                     "median": float(r.peer_median), "peer_group": str(r.node_class)} for r in bad.itertuples()]
        points = grp[["node", "component", "value", "outlier"]].assign(peer_group=grp["node_class"]) \
            .reset_index(drop=True)
        out.append(Distribution(str(metric), act.low_is_bad(str(metric)), int(len(values)),
                                float(values.median()), float(values.quantile(0.05)), float(values.quantile(0.95)),
                                outliers, points))
    return out


def _drains(stats: pd.DataFrame, intervals: pd.DataFrame) -> list[DrainStat]:
    """Per node: drains in the window, hours drained inside the window, still drained, flapping,
    the reason of its latest drain."""
    if stats.empty:
        return []
    reason = intervals.sort_values("start", kind="stable").drop_duplicates("node", keep="last") \
        .set_index("node")["reason"] if len(intervals) else pd.Series(dtype=object)
    out = [DrainStat(str(r.node), int(r.drains), round(float(r.drained_s) / 3600, 2), bool(r.open),
                     _short(reason.get(r.node, "")), bool(r.flapping)) for r in stats.itertuples(index=False)]
    out.sort(key=lambda d: (-d.drained_hours, -d.drains, d.node))
    return out


def _latest_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per node: its most recent run."""
    if runs.empty:
        return runs.iloc[0:0]
    return runs.sort_values("started_at", kind="stable").drop_duplicates("node", keep="last").reset_index(drop=True)


def build_report(frames: Any, since: Any, now: Any, node_class: Callable[[str], str | None] | None = None,
                 slurm_states: Mapping[str, Any] | None = None,
                 progress: Callable[[str], None] | None = None) -> Report:
    """The readiness report of the window [since, now] (see the module docstring for the inputs)."""
    step = progress or (lambda label: None)
    since, now = pd.Timestamp(since), pd.Timestamp(now)
    since = since.tz_localize("UTC") if since.tzinfo is None else since.tz_convert("UTC")
    now = now.tz_localize("UTC") if now.tzinfo is None else now.tz_convert("UTC")
    f = {k: _window(v, TIME_COLUMN[k], since, now) for k, v in _frames(frames).items()}
    runs, results, metrics, acts = f["runs"], f["results"], f["metrics"], f["actions"]
    peer = (lambda n: node_class(n) or "default") if node_class else (lambda n: "all")
    step("latest runs")
    latest = _latest_runs(runs)
    fleet = _fleet(latest, acts, slurm_states)
    state_of = {n: s for s, ns in fleet.nodes.items() for n in ns}
    latest_results = results[results["run_id"].isin(set(latest["run_id"]))] if not latest.empty else results.iloc[0:0]
    now_bad = latest_results[latest_results["status"].isin(["fail", "warn"])]
    step("failing checks")
    checks = _checks(results, now_bad)
    findings = [Finding("check", str(r.node), str(r.check), _comp(r.component), str(r.status), _short(r.message),
                        r.started_at, act.recommend(str(r.check), str(r.message)))
                for r in now_bad.itertuples(index=False)]
    step("counter growth")
    growth_df = inputs.growth(metrics)
    growing = growth_df[growth_df["increase"] > 0].sort_values(["rate_per_hour", "increase"], ascending=False)
    growth = [Growth(str(r.node), _comp(r.component), str(r.name), float(r.increase), float(r.rate_per_hour),
                     float(r.last_value), r.first_at, r.last_at) for r in growing.head(TOP_GROWTH).itertuples()]
    findings += [Finding("growth", g.node, g.metric, g.component, "warn",
                         f"grew by {g.increase:g} ({g.rate_per_h:.3g}/h), now {g.last:g}", g.last_at,
                         act.recommend_growth(g.metric)) for g in growth]
    growth_points = inputs.growth_points(metrics, growing.head(PLOTTED_GROWTH))
    step("performance distributions")
    outl = inputs.perf_outliers(metrics, peer)
    distributions = _distributions(outl)
    for d in distributions:
        findings += [Finding("outlier", o["node"], d.metric, o["component"], "warn",
                             f"{o['value']:.4g} vs median {o['median']:.4g} of {o['peer_group']} (z {o['z']:.1f})",
                             None, act.recommend_outlier(d.metric)) for o in d.outliers]
    step("drains")
    intervals = inputs.drain_intervals(acts, now)
    flaps = inputs.flapping(acts, since, now)
    drain_df = inputs.drain_stats(acts, since, now, flaps)
    drains = _drains(drain_df, intervals)
    step("risk")
    ranked = inputs.risk(latest_results=latest_results, rates=growth_df, perf=outl, flaps=flaps, drains=drain_df,
                         reliability=inputs.failures(runs, now))
    risks = _risks(ranked, state_of, peer)
    rank = {"check": 0, "growth": 1, "outlier": 2}
    findings.sort(key=lambda x: (x.status != "fail", rank[x.kind], x.node, x.subject, x.component))
    counts = {"runs": len(runs), "results": len(results), "metrics": len(metrics), "actions": len(acts),
              "nodes": fleet.total}
    notes = []
    if not len(runs) and not len(acts):
        notes.append(f"No data: no run or action recorded between {since:%Y-%m-%d %H:%M} and {now:%Y-%m-%d %H:%M} "
                     "UTC. Have the nodes' spools been ingested (healthcheck history ingest)?")
    if slurm_states is None:
        notes.append("Slurm was not asked: 'drained by us' comes from our own drain/resume records and "
                     "'drained by others' is not known (use --slurm).")
    return Report(now.to_pydatetime(), since.to_pydatetime(), now.to_pydatetime(), counts, fleet, checks, risks,
                  findings, distributions, growth, drains, notes, inputs.analysis_source(), growth_points, intervals)


def _risks(ranked: pd.DataFrame, state_of: dict[str, str], peer: Callable[[str], str]) -> list[NodeRisk]:
    """The report's view of ``analysis.risk.rank_nodes``: the nodes with something against them, in its
    order (score, then node), each with its state, peer group and evidence lines (shortened)."""
    ranked = ranked[ranked["score"] > 0]
    return [NodeRisk(str(r.node), round(float(r.score), 1), state_of.get(str(r.node), "unknown"), peer(str(r.node)),
                     [_short(x) for x in r.evidence]) for r in ranked.itertuples(index=False)]
