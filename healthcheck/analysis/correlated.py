"""Correlated (facility) events: when several nodes of one rack, chassis or power group throttle or
run hot within the same window, that is one cooling or power issue, not N node faults.

Events come from the history's results frame (:func:`events_from_results`): warn/fail results of
``gpu.temperature`` (kind "thermal"), ``gpu.power`` (kind "power"), and of ``gpu.throttle`` and
``burnin.telemetry``, whose kind follows the message's words: "power"/"brake" (``sw_power_cap``,
``hw_power_brake_slowdown``) -> "power"; "thermal"/"temperature" (``hw_thermal_slowdown``,
``sw_thermal_slowdown``) -> "thermal"; a message naming both gives one event of each kind; one
naming neither but "slowdown" (NVML's generic ``hw_slowdown``), or nothing at all, -> "thermal".

Method (:func:`correlated_events`), per (level, group, kind) with the events sorted by time: the
window opened at each event ``i`` holds the events with ``t_i <= t <= t_i + window``; it *qualifies*
when it holds at least ``min_nodes`` distinct nodes, at least ``min_share`` of the group's nodes, and
never fewer than two (so a group of one node never correlates). Each qualifying window spans
``[t_i, t_last]``; overlapping spans are merged (interval union) and each merged span is reported
once, with every node that had an event inside it. Counting distinct nodes uses each event's
previous event of the same node: an event starts a new node within window ``[i, j)`` iff that
previous event lies before ``i``. Group sizes come from the ``groups`` mapping alone, so events of
nodes in no group of a level are ignored for that level (they cannot change any output).

Complexity: O(n log n) sort and merge; per group O(n_g * w_g) for the windows (w_g: events per
window), fine for the thousands of events a night's sweep or a burn-in produces.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ._frames import empty, prepare

EVENT_COLUMNS = {"node": "object", "time": "datetime64[ns, UTC]", "kind": "object",
                 "detail": "object"}
CORRELATED_COLUMNS = {"level": "object", "group": "object", "kind": "object",
                      "start": "datetime64[ns, UTC]", "end": "datetime64[ns, UTC]",
                      "nodes": "object", "n_nodes": "int64", "group_size": "int64",
                      "share": "float64"}

EVENT_CHECKS = ("gpu.throttle", "gpu.temperature", "gpu.power", "burnin.telemetry")
_RESULT_COLS = ["node", "started_at", "check", "component", "status", "message"]
_POWER = r"power|brake"
_THERMAL = r"thermal|temperature"


def events_from_results(results: pd.DataFrame) -> pd.DataFrame:
    """Thermal and power events from the results frame (``load_frames``' "results").

    Rows of :data:`EVENT_CHECKS` with status warn or fail (any case) become events: node, time
    (the run's started_at, UTC), kind ("thermal" | "power"), detail ("<check> <component> <status>:
    <message>"). Sorted by time, node, kind.
    """
    df = prepare(results, _RESULT_COLS, frame="results", time_col="started_at")
    if df.empty:
        return empty(EVENT_COLUMNS)
    check = df["check"].astype(object).where(df["check"].notna(), "").astype(str)
    status = df["status"].astype(object).where(df["status"].notna(), "").astype(str).str.lower()
    df = df[check.isin(EVENT_CHECKS).to_numpy() & status.isin(["warn", "fail"]).to_numpy()]
    if df.empty:
        return empty(EVENT_COLUMNS)
    check, status = check[df.index], status[df.index]
    msg = df["message"].astype(object).where(df["message"].notna(), "").astype(str)
    low = msg.str.lower()
    by_words = check.isin(["gpu.throttle", "burnin.telemetry"])
    power = check.eq("gpu.power") | (by_words & low.str.contains(_POWER, regex=True))
    thermal = check.eq("gpu.temperature") | (by_words & low.str.contains(_THERMAL, regex=True))
    thermal |= by_words & ~power  # "slowdown" alone (hw_slowdown) or no reason named
    comp = df["component"].astype(object)
    comp = comp.where(comp.notna(), "").astype(str)
    detail = (check + np.where(comp.ne(""), " " + comp, "") + " " + status + ": " + msg)
    base = pd.DataFrame({"node": df["node"].astype(object).astype(str),
                         "time": df["started_at"].dt.as_unit("ns"), "detail": detail})
    out = pd.concat([base[thermal.to_numpy()].assign(kind="thermal"),
                     base[power.to_numpy()].assign(kind="power")], ignore_index=True)
    out = out.sort_values(["time", "node", "kind"], kind="stable")
    return out[list(EVENT_COLUMNS)].astype(EVENT_COLUMNS).reset_index(drop=True)


def _membership(groups: Mapping[str, Mapping[str, str]]) -> pd.DataFrame:
    """(node, level, group) rows of the ``node -> {level: group}`` mapping."""
    if not isinstance(groups, Mapping):
        raise ValueError(f"groups must map node -> {{level: group}}, not {type(groups).__name__}")
    rows = []
    for node, levels in groups.items():
        if not isinstance(levels, Mapping):
            raise ValueError(f"groups[{node!r}] must map level -> group, "
                             f"not {type(levels).__name__}")
        rows.extend((str(node), str(level), str(group)) for level, group in levels.items()
                    if group is not None)
    return pd.DataFrame(rows, columns=["node", "level", "group"], dtype=object)


def _node_key(name: str) -> list:
    """Natural order: digit runs (odd positions of the split) compare as numbers."""
    return [int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name))]


def _clusters(ticks: np.ndarray, codes: np.ndarray, need: int, width: int) -> list[tuple[int, int]]:
    """Merged qualifying spans ``(first, last)`` (positions) of one group's time-sorted events."""
    n = len(ticks)
    stop = np.searchsorted(ticks, ticks + width, side="right")  # window i = [i, stop_i)
    prev = np.full(n, -1, dtype=np.int64)                        # previous event of the same node
    last: dict[int, int] = {}
    for p, c in enumerate(codes.tolist()):
        prev[p] = last.get(c, -1)
        last[c] = p
    spans: list[tuple[int, int]] = []
    for i in range(n):
        if stop[i] - i < need:
            continue
        if int(np.count_nonzero(prev[i:stop[i]] < i)) >= need:
            first, end = i, int(stop[i]) - 1
            if spans and ticks[first] <= ticks[spans[-1][1]]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], end))
            else:
                spans.append((first, end))
    return spans


def correlated_events(events: pd.DataFrame, groups: Mapping[str, Mapping[str, str]], *,
                      window: pd.Timedelta = pd.Timedelta("30min"), min_nodes: int = 3,
                      min_share: float = 0.25) -> pd.DataFrame:
    """Facility issues: clusters of events of one kind among the nodes of one group.

    ``events``: columns node, time, kind (as :func:`events_from_results` returns). ``groups``:
    ``node -> {level: group}`` for *every* node of the topology (``topology.node_groups(table)``),
    since each group's size is counted from it. Returns columns level, group, kind, start, end
    (first and last event of the cluster), nodes (comma list, natural order), n_nodes, group_size,
    share (n_nodes / group_size); sorted by start, level, group, kind.
    """
    window = pd.Timedelta(window)
    if pd.isna(window) or window < pd.Timedelta(0):
        raise ValueError(f"window must be a non-negative duration, not {window!r}")
    if min_nodes < 1:
        raise ValueError(f"min_nodes must be at least 1, not {min_nodes!r}")
    if not 0.0 <= min_share <= 1.0:
        raise ValueError(f"min_share must be in [0, 1], not {min_share!r}")
    member = _membership(groups)
    ev = prepare(events, ["node", "time", "kind"], frame="events", time_col="time")
    if ev.empty or member.empty:
        return empty(CORRELATED_COLUMNS)
    ev = ev.assign(node=ev["node"].astype(object).astype(str),
                   kind=ev["kind"].astype(object).where(ev["kind"].notna(), "").astype(str),
                   time=ev["time"].dt.as_unit("ns"))
    sizes = member.groupby(["level", "group"], sort=True).size().rename("group_size")
    ev = ev.merge(member, on="node", how="inner")
    if ev.empty:
        return empty(CORRELATED_COLUMNS)
    ev = ev.sort_values(["level", "group", "kind", "time", "node"], kind="stable")
    ev["_node"] = pd.factorize(ev["node"])[0]
    width = int(window / pd.Timedelta(1, "ns"))
    rows = []
    for (level, group, kind), part in ev.groupby(["level", "group", "kind"], sort=True):
        size = int(sizes.loc[(level, group)])
        if size < 2:
            continue
        need = max(min_nodes, 2, math.ceil(min_share * size - 1e-9))
        if need > size:
            continue
        ticks = pd.DatetimeIndex(part["time"]).asi8
        nodes = part["node"].to_numpy()
        for first, last in _clusters(ticks, part["_node"].to_numpy(), need, width):
            who = sorted(set(nodes[first:last + 1].tolist()), key=_node_key)
            rows.append({"level": level, "group": group, "kind": kind,
                         "start": part["time"].iloc[first], "end": part["time"].iloc[last],
                         "nodes": ",".join(who), "n_nodes": len(who), "group_size": size,
                         "share": len(who) / size})
    if not rows:
        return empty(CORRELATED_COLUMNS)
    out = pd.DataFrame(rows).sort_values(["start", "level", "group", "kind"], kind="stable")
    return out[list(CORRELATED_COLUMNS)].astype(CORRELATED_COLUMNS).reset_index(drop=True)


def facility_nodes(correlated: pd.DataFrame) -> set[str]:
    """Nodes explained by a facility issue in a :func:`correlated_events` frame (so a caller can
    hold off draining them one by one)."""
    if "nodes" not in correlated.columns:
        raise ValueError("correlated frame lacks column: nodes")
    out: set[str] = set()
    for nodes in correlated["nodes"].dropna():
        out.update(n for n in str(nodes).split(",") if n)
    return out
