"""Build the readiness report (``model.Report``) from the history of a window. Pure: no I/O, no clock.

Input: a ``summary.Summary`` of the window (``dbsummary.load_summary`` reads one from the database through
its rollups) or the four frames of ``healthcheck.history.queries.load_frames`` (runs, results, metrics,
actions; a mapping, an object with those attributes, or a 4-tuple), which ``summary.summarize_frames``
reduces first; the window (``since``, ``now``), optionally
a node -> class function (peers for the outlier test) and the nodes' live Slurm states (anything with
``.drained`` and ``.reason``, e.g. ``healthcheck.slurm.nodestate.NodeState``). Without Slurm states,
"drained by us" is inferred from our own drain/resume records and "drained by others" is unknown.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping

import pandas as pd

from . import actions as act
from . import inputs
from .human import num, rate
from . import summary as summ
from .model import (NODE_STATES, CheckRank, Distribution, DrainStat, Finding, FleetSummary, Growth, NodeRisk,
                    Report)

MAX_MESSAGE = 300
TOP_GROWTH = 50
PLOTTED_GROWTH = 8


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


def _checks(bad: pd.DataFrame, now_bad: pd.DataFrame) -> list[CheckRank]:
    """``bad``: the window's fail and warn results."""
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


def build_report(history: Any, since: Any, now: Any, node_class: Callable[[str], str | None] | None = None,
                 slurm_states: Mapping[str, Any] | None = None,
                 progress: Callable[[str], None] | None = None,
                 topology: Mapping[str, Any] | None = None, drift: list[str] | None = None,
                 gpu_model: Mapping[str, str] | Callable[[str], Any] | None = None,
                 fleet: Any = None, versions: Any = None, expected_versions: Any = None,
                 nvlink_level: str = "") -> Report:
    """The readiness report of the window [since, now]. ``history`` is a ``summary.Summary`` of that
    window (``dbsummary.load_summary``: the database through its rollups) or the four frames (see the
    module docstring), summarised here in pandas first. ``fleet``: the ``[fleet]`` settings
    (``analysis.fleetsettings.FleetSettings``; None: its defaults) of the fleet ranking, used when the
    summary carries each node's recent runs (the default of both producers). ``versions``: a (node,
    [node_class,] item, value) frame for the version tables; None: the summary's own (read back from the
    history's ``sw.versions`` results by ``report.load``), if any. ``nvlink_level``: the ``[topology]``
    level of the NVLink domains (``[slurm] drain_cap_level``; "" for ``nvlink``): a fabric cause most of
    a domain's trays share is that domain's row of the shared causes."""
    from ..analysis.fleetsettings import FleetSettings

    step = progress or (lambda label: None)
    since, now = summ.utc(since), summ.utc(now)

    @functools.cache
    def groups() -> dict[str, Any]:  # node_groups(topology), expanded once (10,000 nodes: 0.1 s a time)
        from ..config.topology import node_groups

        return node_groups(topology) if topology else {}

    @functools.cache
    def rack_of() -> dict[str, Any]:  # node -> its rack, for the per-rack peers and the shared causes
        return {n: g["rack"] for n, g in groups().items() if "rack" in g}

    fs = fleet if fleet is not None else FleetSettings()
    sm = history if isinstance(history, summ.Summary) else \
        summ.summarize_frames(history, since, now, recent=fs.persist_n)
    if (sm.since, sm.now) != (since, now):
        raise ValueError(f"the summary covers {sm.since} to {sm.now}, not the report's {since} to {now}")
    acts = sm.actions
    peer = (lambda n: node_class(n) or "default") if node_class else (lambda n: "all")
    step("latest runs")
    latest = sm.latest_runs
    fleet_ = _fleet(latest, acts, slurm_states)
    state_of = {n: s for s, ns in fleet_.nodes.items() for n in ns}
    latest_results = sm.latest_results
    # ERROR (the checker could not judge) is a finding too, with what to do next: never hidden
    now_bad = latest_results[latest_results["status"].isin(["fail", "warn", "error"])]
    step("failing checks")
    checks = _checks(sm.flagged_results, now_bad)
    findings = [Finding("check", str(r.node), str(r.check), _comp(r.component), str(r.status), _short(r.message),
                        r.started_at, act.recommend_error(str(r.check), str(r.message)) if r.status == "error"
                        else act.recommend(str(r.check), str(r.message)))
                for r in now_bad.itertuples(index=False)]
    step("counter growth")
    growth_df = inputs.growth(sm.counter_samples)
    growing = growth_df[growth_df["increase"] > 0].sort_values(["rate_per_hour", "increase"], ascending=False)
    growth = [Growth(str(r.node), _comp(r.component), str(r.name), float(r.increase), float(r.rate_per_hour),
                     float(r.last_value), r.first_at, r.last_at) for r in growing.head(TOP_GROWTH).itertuples()]
    findings += [Finding("growth", g.node, g.metric, g.component, "warn",
                         f"grew by {num(g.increase)} ({rate(g.rate_per_h)}), now {num(g.last)}", g.last_at,
                         act.recommend_growth(g.metric)) for g in growth]
    growth_points = inputs.growth_points(sm.counter_samples, growing.head(PLOTTED_GROWTH))
    step("performance distributions")
    outl = inputs.perf_outliers(sm.perf_latest, peer)
    distributions = _distributions(outl)
    for d in distributions:
        findings += [Finding("outlier", o["node"], d.metric, o["component"], "warn",
                             f"{num(o['value'])} vs median {num(o['median'])} of {o['peer_group']} (z {o['z']:.1f})",
                             None, act.recommend_outlier(d.metric)) for o in d.outliers]
    step("drains")
    intervals = inputs.drain_intervals(acts, now)
    flaps = inputs.flapping(acts, since, now)
    drain_df = inputs.drain_stats(acts, since, now, flaps)
    drains = _drains(drain_df, intervals)
    step("risk")
    tables: dict[str, list] = {}
    # persistence, floors, per-rack peers (analysis/fleetrank.py); the samples may still be read (pending): the
    # ranking waits for them only after judging the rest
    if "perf_recent" in getattr(sm, "pending", ()) or getattr(sm, "perf_recent", None) is not None:
        from ..analysis.fleetrank import rank_summary

        racks = rack_of() if fs.peers_per_rack else None
        kept: dict[str, Any] = {}  # the ranking's regression hits, for the fleet tables' regressions
        ranked = rank_summary(sm, gpu_model=gpu_model, rack=racks or None, k=fs.persist_k, n=fs.persist_n,
                              weights=fs.weights or None, thermal=fs.thermal_limits or None, dtype=fs.gemm_dtype,
                              keep=kept)
        step("fleet tables")
        from .fleetsection import fleet_tables

        if versions is None and getattr(sm, "versions", None) is not None and len(sm.versions):
            # read back from the history's sw.versions results (report.load): each node's class for drift
            classes = [node_class(n) if node_class else None for n in sm.versions["node"]]
            versions = sm.versions.assign(node_class=classes)
        tables = fleet_tables(sm, now, k=fs.persist_k, n=fs.persist_n, versions=versions,
                              expected_versions=expected_versions, regressions=kept.get("regressions"))
    else:
        ranked = inputs.risk(latest_results=latest_results, rates=growth_df, perf=outl, flaps=flaps,
                             drains=drain_df, reliability=sm.reliability)
    risks = _risks(ranked, state_of, peer)
    if "why" in ranked.columns:  # the ranking's persistence rule and severity decide what is a finding
        findings = _persistent_findings(findings, ranked, growth_df)
    findings += _sdc(sm.gemm_digests) + _facility(sm.flagged_results, topology, groups) + [
        Finding("drift", "fleet", "versions", "", "warn", _short(line), None,
                "align the odd nodes with their class (reinstall the driver/firmware image), then re-run the burn-in")
        for line in drift or []]
    from .groups import KIND_ORDER

    findings.sort(key=lambda x: (x.status != "fail", KIND_ORDER[x.kind], x.node, x.subject, x.component))
    counts = {**sm.counts, "nodes": fleet_.total}
    notes = list(sm.notes)
    newest = _newest(latest, acts)
    stale = _stale(newest, now)
    if not sm.counts["runs"] and not sm.counts["actions"]:
        notes.append(f"No data: no run or action recorded between {since:%Y-%m-%d %H:%M} and {now:%Y-%m-%d %H:%M} "
                     "UTC. Have the nodes' spools been ingested (healthcheck history ingest)?")
    if slurm_states is None:
        notes.append("Slurm was not asked: 'drained by us' comes from our own drain/resume records and "
                     "'drained by others' is not known (use --slurm).")
    from .fleetstate import daily_states

    fleet_days = daily_states(sm.node_days, acts, since, now) if sm.node_days is not None else None
    from .fleetsection import table_notes
    from .shared import shared_causes

    fleet_notes = table_notes(sm, now, k=fs.persist_k) if tables else {}
    racks = rack_of() or None
    from ..config.topology import nvlink_domains

    nvlink_of = nvlink_domains(topology, nvlink_level)[1] if topology else {}
    return Report(now.to_pydatetime(), since.to_pydatetime(), now.to_pydatetime(), counts, fleet_, checks, risks,
                  findings, distributions, growth, drains, notes, inputs.analysis_source(), growth_points, intervals,
                  fleet_days, fleet_tables=tables,
                  commissioning=_readiness(getattr(sm, "commissioning", None), findings, fleet_),
                  training=_training(getattr(sm, "training", None), sm.reliability, now),
                  fleet_notes=fleet_notes, newest_record=newest, stale=stale,
                  shared_causes=shared_causes(risks, racks, nvlink_of or None) if any(r.why for r in risks) else [])


STALE_AFTER = pd.Timedelta(hours=24)  # no record for this long before the window's end: the history stopped


def _newest(latest: pd.DataFrame, acts: pd.DataFrame) -> Any:
    """The window's newest run start or drain/resume record (None: neither)."""
    times = []
    if len(latest):
        times.append(pd.Timestamp(latest["started_at"].max()))
    if acts is not None and len(acts):
        times.append(pd.Timestamp(pd.to_datetime(acts["time"], utc=True).max()))
    times = [t for t in times if not pd.isna(t)]
    return max(times).to_pydatetime() if times else None


def _stale(newest: Any, now: pd.Timestamp) -> str:
    """What the page says first when the history stopped: how old its newest record is ("" when fresh)."""
    if newest is None:
        return ""
    age = now - summ.utc(newest)
    if age <= STALE_AFTER:
        return ""
    from .human import duration_h, when_utc

    return (f"Stale history: the newest record is from {when_utc(newest)}, {duration_h(age.total_seconds() / 3600)} "
            f"before the report's end ({when_utc(now)}). Has ingest stopped (healthcheck history ingest)? Every "
            "state below is as of that record, not now.")


OWN_POLICY = ("slurm.",)  # warnings of our own policy (a drain held back by the cap): never noise


def _key(node: Any, check: Any, component: Any) -> tuple[str, str, str]:
    return str(node), str(check or ""), _comp(component)


def _persistent_findings(findings: list[Finding], ranked: pd.DataFrame, growth_df: pd.DataFrame) -> list[Finding]:
    """The findings under the fleet ranking's rules (analysis/fleetrank.py): a check that fails or errs
    in the latest run stays (a verdict); a warning only when it persists (k of the last n runs); growth,
    outliers, floors, regressions and flapping only from the ranking's persistent rows, with its
    severity; a floor or an outlier already named by a failing check of the same node and component
    once. Each finding carries a ``weight`` (how bad) so a group shows its worst case."""
    rows = [(str(node), w) for node, why in zip(ranked["node"], ranked["why"]) for w in (why or [])]
    persistent_checks = {_key(n, w.get("check"), w.get("component")): w for n, w in rows
                         if w.get("kind") == "check" and w.get("persistent")}
    out = []
    for f in findings:
        if f.kind != "check":
            continue  # growth and outliers come from the ranking below
        w = persistent_checks.get(_key(f.node, f.subject, f.component))
        if f.status == "warn" and w is None and not f.subject.startswith(OWN_POLICY):
            continue  # a warning in one run: noise
        out.append(Finding(f.kind, f.node, f.subject, f.component, f.status, f.detail, f.seen, f.action,
                           float(w["points"]) if w is not None and w.get("points") is not None else 0.0))
    named = {(f.node, f.component) for f in out if f.status == "fail"}
    named_by_check = {_key(f.node, f.subject, f.component) for f in out if f.status == "fail"}
    increase = {}
    if growth_df is not None and len(growth_df):
        for g in growth_df.itertuples(index=False):
            increase[(str(g.node), str(g.name), _comp(g.component))] = (float(g.increase), g.last_at)
    floors = {(n, _comp(w.get("component")), str(w.get("metric"))) for n, w in rows
              if w.get("kind") == "floor" and w.get("persistent")}
    for node, w in rows:
        kind, comp, metric = w.get("kind"), _comp(w.get("component")), str(w.get("metric") or "")
        if not w.get("persistent") or kind not in ("floor", "outlier", "regression", "growth", "flapping"):
            continue
        status = "fail" if w.get("severity") == "fail" else "warn"
        text = _short(w.get("text"))
        value, ref = w.get("value"), w.get("peer_median") if kind != "floor" else w.get("limit")
        off = abs(float(value) - float(ref)) / max(abs(float(ref)), 1e-9) * 100 \
            if value is not None and ref is not None else 0.0
        if kind == "floor":
            if _key(node, w.get("check"), comp) in named_by_check:
                continue
            out.append(Finding("floor", node, metric, comp, status, text, None,
                               act.recommend(str(w.get("check") or metric), text), off, str(w.get("check") or "")))
        elif kind == "outlier":
            if (node, comp, metric) in floors or (node, comp) in named and metric.startswith("temperature"):
                continue
            out.append(Finding("outlier", node, metric, comp, status, text, None, act.recommend_outlier(metric), off))
        elif kind == "regression":
            out.append(Finding("regression", node, metric, comp, status, text, None,
                               "compare with the node's earlier burn-ins: " + act.recommend_outlier(metric), off))
        elif kind == "growth":
            inc, at = increase.get((node, metric, comp), (float(value or 0.0), None))
            out.append(Finding("growth", node, metric, comp, status, f"grew by {inc:,.0f} in the window; {text}", at,
                               act.recommend_growth(metric), inc))
        else:
            out.append(Finding("flapping", node, "drain/resume", "", status, text, None,
                               "keep the node drained and fix the cause its other findings name before resuming it "
                               "again", float(w.get("hits") or 0)))
    return out


def _readiness(c: Any, findings: list[Finding], fleet_: Any) -> Any:
    """The commissioning section with its readiness verdicts (report/readiness.py): per node of the fleet
    and of the commissioning rows, and for the cluster; None stays None, an empty section stays empty."""
    if c is None or c.empty:
        return c
    from dataclasses import replace

    from .readiness import assess

    nodes = sorted({n for ns in fleet_.nodes.values() for n in ns})
    return replace(c, readiness=assess(c, findings, nodes))


def _training(t: Any, reliability: Any, now: Any) -> Any:
    """The training readiness section (report/training.py) with the cluster's MTTF and its ready line."""
    from .training import finish

    return finish(t, reliability, now)


def _sdc(digests: list[Any]) -> list[Finding]:
    """GPUs whose latest GEMM product differs from the fleet's majority for the same model, library
    stack, dtype and size (analysis/digests.py): wrong bits no single node could see."""
    if not digests:
        return []
    from ..analysis.digests import fleet_view

    return [Finding("sdc", d.node, "burnin.gemm.verify", d.component, "fail", _short(d.message()), d.started_at,
                    "drain the node and re-run the burn-in on it; if the GPU differs again, replace it (if the whole "
                    "node differs, compare its driver, CUDA and library versions with its peers first)")
            for d in fleet_view(digests).deviants]


def _facility(flagged: pd.DataFrame, topology: Mapping[str, Any] | None,
              groups: Callable[[], dict[str, Any]]) -> list[Finding]:
    """Thermal/power failures shared by nodes of one rack/chassis/power group ([topology] in the config)
    in the same window: one facility finding each, not N node faults (analysis/correlated.py)."""
    if not topology or flagged is None or flagged.empty:
        return []
    from ..analysis.correlated import correlated_events, events_from_results

    events = events_from_results(flagged)
    if events.empty:
        return []
    corr = correlated_events(events, groups())  # every node of the table: true group sizes
    return [Finding("facility", f"{r.level} {r.group}", str(r.kind), "", "fail",
                    _short(f"{r.kind} on {r.n_nodes} of {r.group_size} nodes together ({r.nodes}) between "
                           f"{r.start:%Y-%m-%d %H:%M} and {r.end:%H:%M} UTC"), r.end,
                    "a shared cause (cooling, airflow, power feed) of the group: check the facility before "
                    "replacing any of these nodes") for r in corr.itertuples(index=False)]


def _risks(ranked: pd.DataFrame, state_of: dict[str, str], peer: Callable[[str], str]) -> list[NodeRisk]:
    """The report's view of ``analysis.risk.rank_nodes``: the nodes with something against them, in its
    order (score, then node), each with its state, peer group and evidence lines (shortened)."""
    ranked = ranked[ranked["score"] > 0]
    has_why = "why" in ranked.columns
    return [NodeRisk(str(r.node), round(float(r.score), 1), state_of.get(str(r.node), "unknown"), peer(str(r.node)),
                     [_short(x) for x in r.evidence], _why(r.why) if has_why else [])
            for r in ranked.itertuples(index=False)]


WHY_SHOWN = ("kind", "check", "component", "metric", "value", "peer_median", "limit", "hits", "runs", "severity",
             "persistent", "points")


def _why(rows: Any) -> list[dict[str, Any]]:
    """The ranking's structured evidence rows (analysis/fleetrank.py ``why``), plain, with the text shortened."""
    out = []
    for w in rows or []:
        row = {k: w.get(k) for k in WHY_SHOWN}
        if isinstance(row["points"], float):
            row["points"] = round(row["points"], 3)
        out.append({**row, "text": _short(w.get("text"))})
    return out
