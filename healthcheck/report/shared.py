"""One cause shared by a group of nodes, shown once: a rack whose 32 nodes all train their GPUs at x8
is one finding of the rack (a BIOS setting, a PCIe switch), not the first 32 ranks of the risk table.

The group: the ``[topology]`` rack when the report has one; without it, nodes with ADJACENT names
(``gpu00064`` .. ``gpu00095``, gaps of up to ``MAX_GAP`` numbers allowed), as racks are usually
numbered. A node's cause is the check (or metric) of its heaviest persistent evidence row; a cause
shared by at least ``MIN_NODES`` nodes of one group (and, with racks, more than half of the rack) is
a shared cause. Pure."""
from __future__ import annotations

import re
from typing import Any, Mapping

MIN_NODES = 4
MAX_GAP = 2
_NAME = re.compile(r"^(.*?)(\d+)$")


def _cause(why: list[dict[str, Any]]) -> str | None:
    """The check (or metric) of the heaviest persistent row: a floor of gpu.pcie.link and a failing
    gpu.pcie.link are one cause."""
    for w in why:
        if w.get("persistent") and (w.get("check") or w.get("metric")):
            return str(w.get("check") or w.get("metric"))
    return None


def _runs_of_adjacent(nodes: list[str]) -> list[list[str]]:
    """The nodes split into runs of adjacent names (same prefix, numbers at most MAX_GAP apart)."""
    keyed = []
    for n in nodes:
        m = _NAME.match(n)
        keyed.append((m.group(1), int(m.group(2)), n) if m else (n, -1, n))
    keyed.sort()
    runs: list[list[str]] = []
    prev = None
    for prefix, num, name in keyed:
        if prev is not None and num >= 0 and prev[0] == prefix and prev[1] >= 0 and num - prev[1] <= MAX_GAP:
            runs[-1].append(name)
        else:
            runs.append([name])
        prev = (prefix, num)
    return runs


def shared_causes(risks: list[Any], rack_of: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """[{group, kind, subject, nodes, n_nodes, group_size, score, text}] over the report's ranked nodes
    (``NodeRisk`` with ``why``), highest score first; each node in at most one group."""
    from .fold import fold

    by_cause: dict[str, list[Any]] = {}
    for r in risks:
        cause = _cause(getattr(r, "why", None) or [])
        if cause is not None:
            by_cause.setdefault(cause, []).append(r)
    sizes: dict[str, int] = {}
    for rack in (rack_of or {}).values():
        sizes[rack] = sizes.get(rack, 0) + 1
    out = []
    for subject, members in by_cause.items():
        score = {r.node: r.score for r in members}
        kinds = [str(w.get("kind")) for r in members for w in r.why[:1]]
        kind = max(sorted(set(kinds)), key=kinds.count)
        if rack_of:
            parts: dict[str, list[str]] = {}
            for r in members:
                if r.node in rack_of:
                    parts.setdefault(rack_of[r.node], []).append(r.node)
            groups = [(rack, ns, sizes[rack]) for rack, ns in parts.items() if 2 * len(ns) > sizes[rack]]
        else:
            groups = [(fold(ns), ns, len(ns)) for ns in _runs_of_adjacent(list(score))]
        for name, ns, size in groups:
            if len(ns) < MIN_NODES:
                continue
            where = f"rack {name}" if rack_of else fold(ns)
            out.append({"group": name, "kind": kind, "subject": subject, "nodes": sorted(ns), "n_nodes": len(ns),
                        "group_size": size, "score": max(score[n] for n in ns),
                        "text": f"{kind} {subject} on {len(ns):,} of {size:,} nodes of {where}: one shared cause "
                                "(a BIOS or firmware setting, a switch, the cooling or power of the group) before "
                                "any node fault"})
    out.sort(key=lambda c: (-c["score"], c["group"], c["subject"]))
    return out


def risk_rows(report: Any) -> list[dict[str, Any]]:
    """The risk table as every renderer shows it: the ranked nodes in order, except that the members of
    a shared cause (``report.shared_causes``) are one row, where its first member ranks. Each row:
    rank, node (a folded set for a group), score, state, why (the heaviest row: of the group's first
    member for a group), more (other evidence rows), text, group (True for a shared cause), n_nodes."""
    from .fold import fold

    group_of: dict[str, dict[str, Any]] = {}
    for c in getattr(report, "shared_causes", None) or []:
        for n in c["nodes"]:
            group_of.setdefault(n, c)
    out: list[dict[str, Any]] = []
    shown: set[int] = set()
    for x in report.risks:
        c = group_of.get(x.node)
        w = x.why[0] if x.why else {}
        if c is None:
            out.append({"rank": len(out) + 1, "node": x.node, "score": x.score, "state": x.state, "why": w,
                        "more": max(len(x.why) - 1, 0), "text": str(w.get("text") or "; ".join(x.evidence[:1])),
                        "group": False, "n_nodes": 1})
        elif id(c) not in shown:
            shown.add(id(c))
            states = sorted({r.state for r in report.risks if r.node in set(c["nodes"])})
            out.append({"rank": len(out) + 1, "node": fold(c["nodes"]), "score": c["score"],
                        "state": ", ".join(states), "why": w, "more": 0, "text": c["text"], "group": True,
                        "n_nodes": c["n_nodes"]})
    return out
