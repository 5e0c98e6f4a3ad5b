"""Judge nccl-tests runs (pure: runs + references -> findings).

Check ``burnin.nccl``, one finding per run, component ``<collective>@<scope>`` (``all_reduce@node``,
``all_reduce@gpu[01-08]``):
- the binary is absent: SKIP (nccl-tests not installed is a configuration fact, not a node fault);
- the run failed (CUDA/NCCL failure lines, no result table, timeout, non-zero exit): FAIL with the first
  error line;
- any ``#wrong`` value or an out-of-bounds summary that is not ``OK``: FAIL (data corruption in the
  collective);
- bus bandwidth at the large sizes below the reference's lower bound: FAIL; above its upper bound: WARN
  (the run probably did not do what it claims); no reference for the SKU: PASS with the figure and a
  note, never a guess.

Every finding carries the metrics: ``busbw_gbps`` (large sizes), ``avg_busbw_gbps`` (nccl-tests' own
average), ``efficiency_pct`` (against the line rate), ``alpha_us`` / ``beta_gbps`` (α-β fit of the sweep).
"""
from __future__ import annotations

import re

from ..model import Finding, Status
from .alphabeta import efficiency, fit
from .nccl_run import NcclRun
from .references import Reference

CHECK = "burnin.nccl"
LARGE_BYTES = 256 << 20  # "large sizes": at and above 256 MiB the busbw plateau is reached on NVLink and IB


def nodes_label(nodes: list[str]) -> str:
    """A short hostlist label (``gpu[01-04]``) for a component name; plain join when folding fails."""
    try:
        from ClusterShell.NodeSet import NodeSet

        label = str(NodeSet.fromlist(nodes))
    except Exception:  # noqa: BLE001 - odd names: fall back to the list
        label = ",".join(nodes)
    return label if len(label) <= 100 else f"{len(nodes)} nodes"


def component(run: NcclRun) -> str:
    where = "node" if run.scope == "node" else nodes_label(run.nodes)
    return f"{run.collective}@{where}"


def large_busbw(run: NcclRun) -> float | None:
    if run.result is None:
        return None
    return run.result.busbw_at_large_sizes(min_bytes=LARGE_BYTES) or run.result.busbw_at_large_sizes()


_SUMMARY = re.compile(r"^#\s*Out of bounds values\s*:", re.IGNORECASE)


def judge_run(run: NcclRun, ref: Reference | None, line_rate: Reference | None, sku_name: str | None,
              unjudged: str | None = None) -> Finding:
    """``unjudged``: without a reference, a WARN saying this (why nothing judged the figure) instead of
    the PASS "no reference for SKU"."""
    comp = component(run)
    if run.missing:
        return Finding(CHECK, Status.SKIP, f"{run.collective}: {run.error}", comp)
    res = run.result
    metrics: dict[str, float] = {}
    busbw = large_busbw(run)
    if busbw is not None:
        metrics["busbw_gbps"] = round(busbw, 3)
    if res is not None and res.avg_busbw_gbps is not None:
        metrics["avg_busbw_gbps"] = res.avg_busbw_gbps
    if res is not None and res.rows:
        ab = fit(res.rows)
        if ab is not None:
            metrics["alpha_us"], metrics["beta_gbps"] = round(ab.alpha_us, 3), round(ab.beta_gbps, 3)
    if busbw is not None and line_rate is not None:
        metrics["efficiency_pct"] = round(efficiency(busbw, line_rate.value), 2)
    where = "on the node" if run.scope == "node" else f"across {nodes_label(run.nodes)}"
    # the summary's out-of-bounds FAILED line is judged below, by what it counts (wrong values, out of bounds)
    failures = [e for e in res.errors if not _SUMMARY.match(e)] if res is not None else []
    if failures:
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where} failed: {_first(failures)}", comp, metrics)
    if run.error is not None and (res is None or not res.rows):
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: {run.error}", comp, metrics)
    if res is None or not res.rows:
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: no results in the output", comp, metrics)
    if res.wrong_total:
        metrics["wrong_values"] = float(res.wrong_total)
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: {res.wrong_total} wrong values "
                       "(data corruption in the collective)", comp, metrics)
    if res.out_of_bounds or res.out_of_bounds_ok is False:
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: out-of-bounds values: {res.out_of_bounds}",
                       comp, metrics)
    if run.error is not None:  # a table, but the run did not end cleanly (timeout or exit status)
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: {run.error}", comp, metrics)
    # the α-β fit and the efficiency travel as metrics; the message stays short (it may become a drain reason)
    figure = f"busbw {busbw:.1f} GB/s" if busbw is not None else "no busbw"
    if ref is None:
        if unjudged:
            return Finding(CHECK, Status.WARN, f"{run.collective} {where}: {figure}; {unjudged}"[:300], comp, metrics)
        return Finding(CHECK, Status.PASS, f"{run.collective} {where}: {figure}; no reference for "
                       f"{sku_name or 'this GPU'}", comp, metrics)
    verdict = ref.judge(busbw)
    label = f"{sku_name + ' ' if sku_name else ''}reference {ref.describe()}"
    if verdict == "low":
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: {figure} below {label}", comp, metrics)
    if verdict == "high":
        return Finding(CHECK, Status.WARN, f"{run.collective} {where}: {figure} above {label} (check the test "
                       "setup)", comp, metrics)
    return Finding(CHECK, Status.PASS, f"{run.collective} {where}: {figure} within {label}", comp, metrics)


def _first(lines: list[str]) -> str:
    line = lines[0].strip()
    return line if len(line) <= 200 else line[:197] + "..."


def judge_runs(runs: list[NcclRun], refs_for, sku_name: str | None) -> list[Finding]:
    """``refs_for(collective, scope) -> (Reference | None, line rate Reference | None)``."""
    out = []
    for run in runs:
        ref, line = refs_for(run.collective, run.scope)
        out.append(judge_run(run, ref, line, sku_name))
    return out
