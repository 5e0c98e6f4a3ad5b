"""One cause shared by a group of nodes, shown once: a rack whose 32 nodes all train their GPUs at x8
is one finding of the rack (a BIOS setting, a PCIe switch), not the first 32 ranks of the risk table.

The group: the ``[topology]`` rack when the report has one; without it, nodes with ADJACENT names
(``gpu00064`` .. ``gpu00095``, gaps of up to ``MAX_GAP`` numbers allowed), as racks are usually
numbered. A node's cause is the check (or metric) of its heaviest persistent evidence row; a cause
shared by at least ``MIN_NODES`` nodes of one group (and, with racks, more than half of the rack) is
a shared cause.

NVLink domains (issue 33.5): where the config declares them (``nvlink_of``: node -> domain, from
``[topology.<level>]``), an NVLink-fabric cause (gpu.fabric, gpu.nvlink.*, nvlink.imex, an SXid:
``healthcheck.policies.nvldomain``) shared by more than half of one domain's trays is that domain's row
("NVLink domain nvl01: check gpu.fabric on 17 of 18 trays: a switch tray or the backplane, not 17 node
faults"), before any rack or adjacent-name grouping; the other causes group as before. Pure."""
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


def _fabric_subject(why: list[dict[str, Any]]) -> str | None:
    """The NVLink-fabric cause of the heaviest persistent row (``SXid`` for a gpu.xid row of SXids)."""
    from ..policies.nvldomain import fabric_cause

    for w in why:
        if w.get("persistent") and (w.get("check") or w.get("metric")):
            metric = w.get("metric")
            return fabric_cause(str(w.get("check") or ""), {str(metric): 1.0} if metric else None)
    return None


def _sizes(group_of: Mapping[str, str] | None) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for group in (group_of or {}).values():
        sizes[group] = sizes.get(group, 0) + 1
    return sizes


def _kind(members: list[Any]) -> str:
    kinds = [str(w.get("kind")) for r in members for w in r.why[:1]]
    return max(sorted(set(kinds)), key=kinds.count)


def _domain_rows(risks: list[Any], nvlink_of: Mapping[str, str]) -> tuple[list[dict[str, Any]], set[str]]:
    """The NVLink domains' shared fabric causes, and the nodes they hold."""
    from ..policies.nvldomain import WHY, shared_by_domain

    sizes = _sizes(nvlink_of)
    parts: dict[tuple[str, str], list[Any]] = {}
    for r in risks:
        subject = _fabric_subject(getattr(r, "why", None) or [])
        if subject is not None and r.node in nvlink_of:
            parts.setdefault((nvlink_of[r.node], subject), []).append(r)
    rows, held = [], set()
    for (domain, subject), members in sorted(parts.items()):
        n, size = len(members), sizes[domain]
        if not shared_by_domain(n, size):
            continue
        nodes = sorted(r.node for r in members)
        held.update(nodes)
        rows.append({"group": domain, "kind": _kind(members), "subject": subject, "nodes": nodes, "n_nodes": n,
                     "group_size": size, "score": max(r.score for r in members), "level": "nvlink",
                     "text": f"NVLink domain {domain}: {_kind(members)} {subject} on {n:,} of {size:,} trays: {WHY}, "
                             f"not {n:,} node faults"})
    return rows, held


def shared_causes(risks: list[Any], rack_of: Mapping[str, str] | None = None,
                  nvlink_of: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """[{group, kind, subject, nodes, n_nodes, group_size, score, text}] over the report's ranked nodes
    (``NodeRisk`` with ``why``), highest score first; each node in at most one group. ``nvlink_of``:
    node -> declared NVLink domain (its rows also carry ``level: "nvlink"``)."""
    from .fold import fold

    out, held = _domain_rows(risks, nvlink_of) if nvlink_of else ([], set())
    by_cause: dict[str, list[Any]] = {}
    for r in risks:
        cause = _cause(getattr(r, "why", None) or [])
        if cause is not None and r.node not in held:
            by_cause.setdefault(cause, []).append(r)
    sizes = _sizes(rack_of)
    for subject, members in by_cause.items():
        score = {r.node: r.score for r in members}
        kind = _kind(members)
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
