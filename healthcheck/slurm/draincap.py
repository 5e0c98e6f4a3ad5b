"""The drain cap of the hooks (pure): one check may not drain more than a bounded part of the cluster.

A site that deploys a wrong expectation (or a check with a bug) to every node would otherwise see each
node drain itself, one prolog at a time. Before a hook drains its node for a check it counts the nodes
already drained by us for that same check (our reason names it first) whose reason was set within the
window, among the nodes that share a partition with this one (all nodes when the node is in none). When
that count has reached the cap, ``max(drain_cap_nodes, floor(drain_cap_fraction * nodes))``, the check is
held back on this node: the node is not drained for it, and the run says so (``slurm.drain_cap``). A
node with other, uncapped failures is still drained, for those.

A reason time that cannot be read counts (the cap errs on the side of draining less).
"""
from __future__ import annotations

import math
from .reasons import reason_check, slurm_time_epoch


def _partitions(state) -> set[str]:
    text = (state.fields or {}).get("Partitions") or ""
    return {p for p in text.split(",") if p and p != "(null)"}


def cap_for(population: int, settings) -> int:
    return max(int(settings.drain_cap_nodes), math.floor(settings.drain_cap_fraction * population))


def held_back(node: str, checks: list[str], nodes: dict, settings, now_epoch: float) -> dict[str, dict]:
    """The checks among ``checks`` that the cap holds back on ``node``, each with its figures
    ``{"drained": n, "cap": c, "nodes": population, "examples": [...]}``. ``nodes``: name -> NodeState."""
    if not settings.drain_cap or not checks:
        return {}
    mine = nodes.get(node)
    parts = _partitions(mine) if mine is not None else set()
    peers = [s for name, s in nodes.items() if not parts or _partitions(s) & parts]
    population = max(len(peers), 1)
    cap = cap_for(population, settings)
    counts: dict[str, list[str]] = {}
    for state in peers:
        if state.name == node or not (state.drained or state.down):
            continue
        check = reason_check(state.reason)
        if check is None or check not in checks:
            continue
        when = slurm_time_epoch(state.reason_time)
        if when is not None and now_epoch - when > settings.drain_cap_window_s:
            continue
        counts.setdefault(check, []).append(state.name)
    return {check: {"drained": len(names), "cap": cap, "nodes": population, "examples": sorted(names)[:5]}
            for check, names in counts.items() if len(names) >= cap}
