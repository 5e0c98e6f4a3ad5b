"""The fabric commands' results as spool run records (``healthcheck.spool.entries.run_record``: the shape the
Slurm hooks write and ``healthcheck history ingest`` stores), context ``fabric``.

Pure: results in, plain findings and records out; the spool append is the caller's (``record_to``).

- ``fabric check``: one finding per deviation, check ``fabric.topology`` (FAIL), component naming the
  HCA end ``node/hca/port`` or the switch; plus one finding per tier (``fabric.topology.tier``,
  component the tier) whose metrics are its links expected / found / misplaced / missing / degraded;
- ``fabric consistency``: one finding per item (check ``fabric.consistency``, component the item):
  PASS with the majority, FAIL naming the odd nodes and their values;
- ``fabric node``: its own findings as they are (``fabric.node.topology``, ``fabric.node.p2p``), plus
  the nvbandwidth GPU x GPU matrices cell by cell (:func:`p2p_matrix_findings`, check
  ``fabric.node.p2p.pair``, component ``TEST/GPUr>GPUc``, metric ``gbyte_s``): FAIL where the judge
  named that pair slow, else PASS; the report draws the matrix per node from them.

The record's node is the host that ran the command (or ``--node``); for ``fabric node`` the node judged.
"""
from __future__ import annotations

from typing import Any, Iterable

CONTEXT = "fabric"
TOPOLOGY = "fabric.topology"
TIER = "fabric.topology.tier"
CONSISTENCY = "fabric.consistency"
P2P_PAIR = "fabric.node.p2p.pair"
MAX_P2P_CELLS = 2048  # per record (16 GPUs x 15 peers x 8 tests); the rest counted in one SKIP
MAX_MESSAGE = 1000


def _where(d: Any) -> str | None:
    if d.node:
        return f"{d.node}/{d.hca or '?'}/{d.hca_port if d.hca_port is not None else '?'}"
    if d.switch:
        return f"{d.switch}/{d.port}" if d.port is not None else d.switch
    return None


def topology_findings(result: Any) -> list:
    """A :class:`healthcheck.fabric.compare.CheckResult` as findings (see the module docstring)."""
    from ..core.model import Finding, Status

    out = [Finding(TOPOLOGY, Status.FAIL, f"{d.kind}: {d.message}"[:MAX_MESSAGE], _where(d)) for d in result.deviations]
    for t in result.tiers:
        bad = t.missing + t.misplaced + t.degraded
        out.append(Finding(TIER, Status.FAIL if bad else Status.PASS,
                           f"tier {t.tier}: {t.found} of {t.expected} links in place, {t.misplaced} misplaced, "
                           f"{t.missing} missing, {t.degraded} degraded", t.tier,
                           {"links_expected": float(t.expected), "links_found": float(t.found),
                            "links_misplaced": float(t.misplaced), "links_missing": float(t.missing),
                            "links_degraded": float(t.degraded)}))
    if not result.deviations:
        out.insert(0, Finding(TOPOLOGY, Status.PASS, "the fabric matches its design", None,
                              {"deviations": 0.0}))
    return out


def consistency_findings(report: Any) -> list:
    """A :class:`healthcheck.fabric.software.Report` as findings (see the module docstring)."""
    from ..core.model import Finding, Status

    out = []
    for item in report.items:
        if item.consistent:
            msg = f"{item.item}: {item.majority} on {item.majority_nodes or report.nodes}"
            out.append(Finding(CONSISTENCY, Status.PASS, msg[:MAX_MESSAGE], item.item))
            continue
        odd = "; ".join(f"{value} on {nodes}" for value, nodes in item.odd)
        base = (f"expected {item.expected}" if item.expected is not None else
                f"majority {item.majority} on {item.majority_nodes}" if item.majority is not None else "no majority")
        out.append(Finding(CONSISTENCY, Status.FAIL, f"{item.item}: {odd} ({base})"[:MAX_MESSAGE], item.item,
                           {"odd_values": float(len(item.odd))}))
    if not out:
        out.append(Finding(CONSISTENCY, Status.SKIP, f"no item to compare across {report.n_nodes} node(s)"))
    return out


def p2p_matrix_findings(result: Any, judged: Iterable[Any]) -> list:
    """The GPU x GPU cells of an nvbandwidth result (:class:`healthcheck.parsers.nvbandwidth.NvbResult`)
    as findings (see the module docstring). ``judged``: ``healthcheck.fabric.p2p.judge``'s findings, whose
    FAILs (component ``GPUa-GPUb``, message ``TEST: ...``) mark their cells slow."""
    from ..core.model import Finding, Status
    from ..parsers.nvbandwidth import pairs

    slow = {(f.message.split(":", 1)[0], f.component) for f in judged
            if f.check == "fabric.node.p2p" and f.status is Status.FAIL and f.component}
    out = []
    for test in result.tests:
        if test.status != "passed" or test.row_kind != "GPU" or test.column_kind != "GPU" \
                or (test.unit or "GB/s") != "GB/s":
            continue
        for row, column, value in pairs(test):
            pair = "-".join(sorted({f"GPU{row}", f"GPU{column}"}))
            bad = (test.name, pair) in slow
            out.append(Finding(P2P_PAIR, Status.FAIL if bad else Status.PASS,
                               f"{test.name}: GPU{row} / GPU{column} {value:.1f} GB/s" + (" (slow)" if bad else ""),
                               f"{test.name}/GPU{row}>GPU{column}", {"gbyte_s": float(value)}))
    if len(out) > MAX_P2P_CELLS:
        extra = len(out) - MAX_P2P_CELLS
        out = out[:MAX_P2P_CELLS] + [Finding(P2P_PAIR, Status.SKIP, f"{extra} more matrix cell(s) not recorded")]
    return out


def fabric_record(findings: Iterable[Any], node: str, started_at: str, duration_s: float,
                  run_id: str | None = None) -> dict:
    """The spool run record (context ``fabric``) of one command's findings."""
    from ..core.model import Verdict
    from ..spool.entries import new_run_id, run_record

    findings = list(findings)
    if not findings:
        raise ValueError("a fabric record needs at least one finding")
    if not isinstance(node, str) or not node or "/" in node:
        raise ValueError(f"node must be a plain name, got {node!r}")
    verdict = Verdict.of(node, findings, started_at, duration_s, CONTEXT)
    return run_record(verdict, run_id or new_run_id(), None, None)


def record_to(spool_dir: str, record: dict) -> str:
    """Append ``record`` to the spool in ``spool_dir`` (created 0700 when absent); its file's path.
    ``healthcheck.spool.store.SpoolError`` / ValueError as the spool raises them."""
    from ..spool.store import append

    return str(append(spool_dir, record))
