"""Human-readable verdicts of a burn-in: one node, the whole job (per node and per GPU), and reading a
job back from its results directory for `healthcheck burnin report`."""
from __future__ import annotations

import json
import os
import re
from typing import Any

from ..output import clean

_GPU = re.compile(r"^gpu(\d+)$")


class SummaryError(ValueError):
    pass


def _per_gpu(results: list[dict[str, Any]]) -> dict[str, str]:
    """component gpuN -> worst status among its findings."""
    order = {"pass": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}
    out: dict[str, str] = {}
    for r in results:
        comp = r.get("component") or ""
        if _GPU.match(comp):
            if order.get(r["status"], 0) >= order.get(out.get(comp, "pass"), 0):
                out[comp] = r["status"]
    return dict(sorted(out.items(), key=lambda kv: int(_GPU.match(kv[0]).group(1))))


def _problems(results: list[dict[str, Any]], limit: int = 8) -> list[str]:
    bad = [r for r in results if r.get("status") in ("fail", "error", "warn")]
    bad.sort(key=lambda r: {"fail": 0, "error": 1, "warn": 2}[r["status"]])
    lines = [f"  {clean(r['status']).upper():5} {clean(r['check'])}"
             f"{' ' + clean(r['component']) if r.get('component') else ''}: {clean(r.get('message', ''))}"
             for r in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"  ... and {len(bad) - limit} more")
    return lines


def node_text(record: dict[str, Any]) -> str:
    b = record.get("burnin", {})
    results = record.get("results", [])
    head = (f"{clean(record['node'])}: {clean(record['status']).upper()}  (burn-in {clean(b.get('suite'))}, "
            f"{clean(b.get('gpu_count') or 0)} GPU {clean(b.get('gpu_name') or '-')}, reference "
            f"{clean(b.get('sku') or 'none')}, backend {clean(b.get('backend') or '-')})")
    lines = [head]
    gpus = _per_gpu(results)
    if gpus:
        lines.append("  per GPU: " + "  ".join(f"{clean(g)}={clean(s)}" for g, s in gpus.items()))
    figures = [f"{clean(r['component'] or r['check'])} {k}={v:g}" for r in results for k, v in (r.get("metrics") or {}).items()
               if k in ("gemm_tflops", "busbw_gbps", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps", "bandwidth_gbps")]
    if figures:
        lines.append("  figures: " + ", ".join(figures[:16]))
    lines += _problems(results)
    return "\n".join(lines)


def allocation_text(data: dict[str, Any]) -> str:
    lines = [f"burn-in job {clean(data.get('job_id') or '-')}: {clean(data.get('status', '?')).upper()} "
             f"({len(data.get('nodes', []))} nodes)"]
    for f in data.get("collective", []):
        lines.append(f"  {clean(f['status']).upper():5} {clean(f['check'])} {clean(f.get('component') or '')}: "
                     f"{clean(f['message'])}")
    loc = data.get("localisation")
    if loc:
        lines.append(f"  localisation: {len(loc.get('rounds', []))} rounds; slow: "
                     f"{clean(', '.join(loc.get('bad', []))) or 'none'}"
                     f"{'; suspects: ' + clean(', '.join(loc['suspects'])) if loc.get('suspects') else ''}")
    for node, o in sorted(data.get("per_node", {}).items()):
        lines.append(f"{clean(node)}: {clean(o['status']).upper()}")
        gpus = _per_gpu(o.get("findings", []))
        if gpus:
            lines.append("  per GPU: " + "  ".join(f"{clean(g)}={clean(s)}" for g, s in gpus.items()))
        lines += _problems(o.get("findings", []), limit=5)
    if data.get("drain"):
        lines.append(f"drain: {clean(', '.join(data['drain']))}")
    for a in data.get("actions", []):
        lines.append(f"  {clean(a['node'])}: {clean(a['action'])} ({clean(a.get('why') or '')})")
    if data.get("suspect_shared_cause"):
        lines.append(f"WARNING: {data['suspect_shared_cause']}")
    return "\n".join(lines)


def load_job(results_dir: str, job_id: str) -> dict[str, Any]:
    """The job's summary-<job>.json when its allocation step wrote one; else the nodes' own results."""
    if not os.path.isdir(results_dir):
        raise SummaryError(f"no results directory {results_dir} for job {job_id} (give --results-dir)")
    summary = os.path.join(results_dir, f"summary-{job_id}.json")
    try:
        if os.path.exists(summary):
            with open(summary, encoding="utf-8") as fh:
                return json.load(fh)
        per_node, nodes = {}, []
        for name in sorted(os.listdir(results_dir)):
            if name.endswith(".json") and not name.startswith("summary"):
                with open(os.path.join(results_dir, name), encoding="utf-8") as fh:
                    rec = json.load(fh)
                nodes.append(rec["node"])
                per_node[rec["node"]] = {"status": rec["status"], "findings": rec.get("results", [])}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SummaryError(f"{results_dir}: unreadable burn-in result: {exc}") from None
    if not per_node:
        raise SummaryError(f"{results_dir}: no node results for job {job_id}")
    order = {"pass": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}
    status = max((o["status"] for o in per_node.values()), key=lambda s: order.get(s, 0))
    return {"job_id": job_id, "nodes": nodes, "status": status, "per_node": per_node, "collective": [],
            "drain": [], "actions": [], "localisation": None, "suspect_shared_cause": None}
