"""The drain cap of the hooks (pure): one check may not drain more than a bounded part of the cluster.

A site that deploys a wrong expectation (or a check with a bug) to every node would otherwise see each
node drain itself, one prolog at a time. Before a hook drains its node for a check it counts the nodes
already drained by us for that same check (our reason names it first) whose reason was set within the
window, among the nodes that share a partition with this one (all nodes when the node is in none). When
that count has reached the cap, ``max(drain_cap_nodes, floor(drain_cap_fraction * nodes))``, the check is
held back on this node: the node is not drained for it, and the run says so (``slurm.drain_cap``). A
node with other, uncapped failures is still drained, for those.

A reason time that cannot be read counts (the cap errs on the side of draining less).

The NVLink domain (issue 33): where ``[slurm] drain_cap_level`` names a ``[topology]`` level (e.g. the
NVL72 racks: ``[topology.nvlink] nvl01 = "gb[001-018]"``), the cap also counts within this node's group
of that level, capped at ``max(drain_cap_nodes, floor(drain_cap_fraction * group size))``: a check that
already drained that many trays of one NVLink domain is held back on the next, and the finding blames the
domain (an NVLink switch tray, the backplane, the fabric manager), not each tray.
"""
from __future__ import annotations

import math
from .reasons import reason_check, slurm_time_epoch


def _partitions(state) -> set[str]:
    text = (state.fields or {}).get("Partitions") or ""
    return {p for p in text.split(",") if p and p != "(null)"}


def cap_for(population: int, settings) -> int:
    return max(int(settings.drain_cap_nodes), math.floor(settings.drain_cap_fraction * population))


def held_back(node: str, checks: list[str], nodes: dict, settings, now_epoch: float,
              domain: tuple[str, list[str]] | None = None) -> dict[str, dict]:
    """The checks among ``checks`` that the cap holds back on ``node``, each with its figures
    ``{"drained": n, "cap": c, "nodes": population, "examples": [...], "scope": where}``. ``nodes``: name
    -> NodeState. ``domain``: (its name, e.g. "nvlink nvl07", and its member nodes): counted on its own
    too; a check held back there names the domain (``scope``) even where the partition's cap holds too."""
    if not settings.drain_cap or not checks:
        return {}
    mine = nodes.get(node)
    parts = _partitions(mine) if mine is not None else set()
    peers = [s for name, s in nodes.items() if not parts or _partitions(s) & parts]
    held = _count(node, checks, peers, max(len(peers), 1), settings, now_epoch, "partition")
    if domain is not None:
        name, members = domain
        inside = [nodes[m] for m in members if m in nodes]
        held.update(_count(node, checks, inside, max(len(members), 1), settings, now_epoch, name))
    return held


def _count(node: str, checks: list[str], peers: list, population: int, settings, now_epoch: float,
           scope: str) -> dict[str, dict]:
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
    return {check: {"drained": len(names), "cap": cap, "nodes": population, "examples": sorted(names)[:5],
                    "scope": scope}
            for check, names in counts.items() if len(names) >= cap}
