"""Human-readable verdicts of a burn-in: one node, the whole job (per node and per GPU), and reading a
job back from its results directory for `healthcheck burnin report`."""
from __future__ import annotations

import json
import os
import re
from typing import Any

from ..output.render import clean

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
               if k in ("gemm_tflops", "busbw_gbps", "efficiency_pct", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps",
                        "bandwidth_gbps")]
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


_ORDER = {"pass": 0, "skip": 0, "warn": 1, "error": 2, "fail": 3}


def _load(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def node_results(results_dir: str) -> dict[str, dict[str, Any]]:
    """node -> its burn-in record (``<node>.json``), for every node result in the directory; the other
    files a results directory may hold (summaries, the sweep's sweep.json and fleet-digests.json) are
    not node results and are passed over. SummaryError for an unreadable node result."""
    out = {}
    for name in sorted(os.listdir(results_dir)):
        if not name.endswith(".json") or name.startswith("summary-"):
            continue
        try:
            rec = _load(os.path.join(results_dir, name))
        except (OSError, ValueError) as exc:
            raise SummaryError(f"{results_dir}: unreadable burn-in result {name}: {exc}") from None
        if isinstance(rec, dict) and rec.get("kind") == "run" and isinstance(rec.get("node"), str):
            out[rec["node"]] = rec
    return out


def _merge_tasks(paths: list[str], job_id: str) -> dict[str, Any]:
    """The per-task summaries of an array job (summary-<task job>_<task>.json) as one job summary."""
    merged: dict[str, Any] = {"job_id": job_id, "nodes": [], "status": "pass", "per_node": {}, "collective": [],
                              "drain": [], "actions": [], "localisation": None, "suspect_shared_cause": None}
    flags = []
    for path in paths:
        data = _load(path)
        for key in ("nodes", "collective", "drain", "actions"):
            merged[key] += data.get(key) or []
        merged["per_node"].update(data.get("per_node") or {})
        if data.get("suspect_shared_cause"):
            flags.append(data["suspect_shared_cause"])
        merged["status"] = max((merged["status"], data.get("status", "pass")), key=lambda s: _ORDER.get(s, 0))
    merged["nodes"] = sorted(set(merged["nodes"]))
    merged["suspect_shared_cause"] = "; ".join(flags) or None
    return merged


def load_job(results_dir: str, job_id: str) -> dict[str, Any]:
    """The job's summary-<job>.json when its allocation step (or ``report --drain``) wrote one; else the
    summaries of its array tasks merged (each task saw one node); else the nodes' own results."""
    if not os.path.isdir(results_dir):
        raise SummaryError(f"no results directory {results_dir} for job {job_id} (give --results-dir)")
    summary = os.path.join(results_dir, f"summary-{job_id}.json")
    try:
        if os.path.exists(summary):
            return _load(summary)
        tasks = sorted(os.path.join(results_dir, n) for n in os.listdir(results_dir)
                       if re.fullmatch(r"summary-[^_]+_\d+\.json", n))
        if tasks:
            return _merge_tasks(tasks, job_id)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SummaryError(f"{results_dir}: unreadable burn-in summary: {exc}") from None
    per_node = {n: {"status": rec.get("status", "error"), "findings": rec.get("results", [])}
                for n, rec in node_results(results_dir).items()}
    if not per_node:
        raise SummaryError(f"{results_dir}: no node results for job {job_id}")
    status = max((o["status"] for o in per_node.values()), key=lambda s: _ORDER.get(s, 0))
    return {"job_id": job_id, "nodes": sorted(per_node), "status": status, "per_node": per_node, "collective": [],
            "drain": [], "actions": [], "localisation": None, "suspect_shared_cause": None}
