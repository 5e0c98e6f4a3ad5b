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

- every collective is also judged against the line rate: ``efficiency_pct`` = busbw / the section's
  ``line_rate_gbps``, against the section's ``nccl_<collective>_efficiency_pct`` (data, usually
  inherited from its ``[link.*]`` type); below its lower bound FAIL, above its upper bound WARN, the
  worse of the two judgements wins.

Every finding carries the metrics: ``busbw_gbps`` (large sizes), ``avg_busbw_gbps`` (nccl-tests' own
average), ``efficiency_pct`` (against the line rate), ``alpha_us`` / ``beta_gbps`` (α-β fit of the sweep).

Check ``burnin.nccl.alphabeta``, one finding per cleanly finished run whose section has α-β references
(:func:`judge_fit`): the fitted latency ``alpha_us`` above its reference's upper bound is a FAIL (the
small-message path is broken, whatever the large sizes show); the fitted bandwidth as bus bandwidth
(``beta_gbps`` x the run's bus factor) in % of the line rate below its reference is a WARN (the
mid-to-large sizes are slow); a fit the sweep cannot support (too few small or large sizes, r² below
alphabeta.MIN_R2) says so as SKIP, never as a verdict.
"""
from __future__ import annotations

import re

from ..core.model import Finding, Status
from . import alphabeta
from .alphabeta import efficiency, fit
from .nccl_run import NcclRun
from ..policies.references import Reference, Sku

CHECK = "burnin.nccl"
CHECK_FIT = "burnin.nccl.alphabeta"
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
              unjudged: str | None = None, section: Sku | None = None) -> Finding:
    """``unjudged``: without a reference, a WARN saying this (why nothing judged the figure) instead of
    the PASS "no reference for SKU". ``section``: the SKU or fabric the references come from; its
    ``nccl_<collective>_efficiency_pct`` judges the line-rate efficiency (and its ``line_rate_gbps``
    stands in when ``line_rate`` is None)."""
    comp = component(run)
    eff_ref = section.get(f"nccl_{run.collective}_efficiency_pct") if section is not None else None
    if line_rate is None and section is not None:
        line_rate = section.get("line_rate_gbps")
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
    eff = metrics.get("efficiency_pct")
    eff_verdict = eff_ref.judge(eff) if eff_ref is not None and eff is not None else "unknown"
    eff_label = (f"{sku_name + ' ' if sku_name else ''}line-rate efficiency {eff_ref.describe()} of "
                 f"{line_rate.value:g} GB/s" if eff_ref is not None and line_rate is not None else "")
    if ref is None:
        if eff_verdict != "unknown":
            return _efficiency_finding(run, where, figure, eff, eff_verdict, eff_label, comp, metrics)
        if unjudged:
            return Finding(CHECK, Status.WARN, f"{run.collective} {where}: {figure}; {unjudged}"[:300], comp, metrics)
        return Finding(CHECK, Status.PASS, f"{run.collective} {where}: {figure}; no reference for "
                       f"{sku_name or 'this GPU'}", comp, metrics)
    verdict = ref.judge(busbw)
    label = f"{sku_name + ' ' if sku_name else ''}reference {ref.describe()}"
    if verdict == "low":
        return Finding(CHECK, Status.FAIL, f"{run.collective} {where}: {figure} below {label}", comp, metrics)
    if eff_verdict == "low" or (eff_verdict == "high" and verdict == "ok"):
        return _efficiency_finding(run, where, figure, eff, eff_verdict, eff_label, comp, metrics)
    if verdict == "high":
        return Finding(CHECK, Status.WARN, f"{run.collective} {where}: {figure} above {label} (check the test "
                       "setup)", comp, metrics)
    return Finding(CHECK, Status.PASS, f"{run.collective} {where}: {figure} within {label}", comp, metrics)


def fabric_gpu_mismatch(section: Sku, name: str, gpu_names: list[str | None]) -> str | None:
    """Why a ``[fabric.NAME]`` with ``match`` patterns (a domain measured on one GPU model, e.g. one
    GB200 NVL72 rack) does not apply to these nodes, or None when it does: every node's GPU name (its
    burn-in record's) must match. A fabric without ``match`` (a network between nodes) always applies."""
    if not section.match:
        return None
    for_what = f"fabric {name} describes {' / '.join(section.match)} GPUs"
    if not gpu_names or not all(gpu_names):
        return f"not judged: {for_what}, and not every node's burn-in record names its GPU"
    odd = [n for n in sorted(set(gpu_names)) if not section.matches(n)]
    if odd:
        return (f"not judged: {for_what}, the nodes report {odd[0]} (a [fabric.*] with a matching `match` in a "
                "site references file judges it)")
    return None


def _efficiency_finding(run: NcclRun, where: str, figure: str, eff: float, verdict: str, label: str, comp: str,
                        metrics: dict[str, float]) -> Finding:
    text = f"{run.collective} {where}: {figure}, {eff:.1f} % of the line rate"
    if verdict == "low":
        return Finding(CHECK, Status.FAIL, f"{text}, below {label}"[:300], comp, metrics)
    if verdict == "high":
        return Finding(CHECK, Status.WARN, f"{text}, above {label} (check the test setup)"[:300], comp, metrics)
    return Finding(CHECK, Status.PASS, f"{text}, within {label}"[:300], comp, metrics)


def _finished_cleanly(run: NcclRun) -> bool:
    res = run.result
    return (not run.missing and run.error is None and res is not None and bool(res.rows) and not res.wrong_total
            and not res.out_of_bounds and res.out_of_bounds_ok is not False
            and not [e for e in res.errors if not _SUMMARY.match(e)])


def _fit_refs(section: Sku, collective: str) -> tuple[Reference | None, Reference | None]:
    alpha = section.get(f"nccl_{collective}_alpha_us") or section.get("nccl_alpha_us")
    beta = section.get(f"nccl_{collective}_beta_efficiency_pct") or section.get("nccl_beta_efficiency_pct")
    return alpha, beta


def judge_fit(run: NcclRun, section: Sku | None, sku_name: str | None = None) -> Finding | None:
    """The α-β fit of a cleanly finished run against the section's references (``nccl_alpha_us`` or
    ``nccl_<collective>_alpha_us``; ``nccl_beta_efficiency_pct`` or ``nccl_<collective>_beta_...``);
    None when there is nothing to judge (no section, no such references, a failed run: the bandwidth
    finding names that failure)."""
    if section is None or not _finished_cleanly(run):
        return None
    alpha_ref, beta_ref = _fit_refs(section, run.collective)
    if alpha_ref is None and beta_ref is None:
        return None
    comp = component(run)
    where = "on the node" if run.scope == "node" else f"across {nodes_label(run.nodes)}"
    rows = run.result.rows
    ab = fit(rows)
    if ab is None:
        return Finding(CHECK_FIT, Status.SKIP, f"{run.collective} {where}: no alpha-beta fit (too few sizes, or times "
                       "that do not grow with the size)", comp)
    metrics = {"alpha_us": round(ab.alpha_us, 3), "beta_gbps": round(ab.beta_gbps, 3), "fit_r2": round(ab.r2, 4)}
    if ab.r2 < alphabeta.MIN_R2:
        return Finding(CHECK_FIT, Status.SKIP, f"{run.collective} {where}: the sweep does not follow the alpha-beta "
                       f"model (r2 {ab.r2:.2f} < {alphabeta.MIN_R2:g}); not judged", comp, metrics)
    small, large = alphabeta.coverage(rows)
    label = f"{sku_name + ' ' if sku_name else ''}"
    problems: list[tuple[Status, str]] = []
    judged: list[str] = []
    notes: list[str] = []
    if alpha_ref is not None:
        if small < alphabeta.MIN_SMALL_POINTS:
            notes.append(f"alpha not judged: {small} sizes <= {alphabeta.SMALL_BYTES >> 10} KiB in the sweep")
        else:
            verdict = alpha_ref.judge(ab.alpha_us)
            text = f"latency alpha {ab.alpha_us:.1f} us"
            if verdict == "high":
                problems.append((Status.FAIL, f"{text} above {label}reference {alpha_ref.describe()}: the "
                                 "small-message path is broken"))
            elif verdict == "low":
                problems.append((Status.WARN, f"{text} below {label}reference {alpha_ref.describe()} (check the "
                                 "test setup)"))
            else:
                judged.append(f"{text} within {alpha_ref.describe()}")
    line = section.get("line_rate_gbps")
    if beta_ref is not None:
        factor = alphabeta.bus_factor(rows, run.collective, len(run.result.ranks) or None)
        if line is None or factor is None:
            notes.append("beta not judged: " + ("no line rate" if line is None else "no bus factor"))
        elif large < 1:
            notes.append(f"beta not judged: no size >= {alphabeta.LARGE_BYTES >> 20} MiB in the sweep")
        else:
            beta_bus = ab.beta_gbps * factor
            beta_eff = efficiency(beta_bus, line.value)
            metrics["beta_busbw_gbps"], metrics["beta_efficiency_pct"] = round(beta_bus, 3), round(beta_eff, 2)
            verdict = beta_ref.judge(beta_eff)
            text = f"fitted bandwidth {beta_bus:.1f} GB/s bus ({beta_eff:.1f} % of {line.value:g})"
            if verdict == "low":
                problems.append((Status.WARN, f"{text} below {label}reference {beta_ref.describe()}: the "
                                 "mid-to-large sizes are slow"))
            elif verdict == "high":
                problems.append((Status.WARN, f"{text} above {label}reference {beta_ref.describe()} (check the "
                                 "test setup)"))
            else:
                judged.append(f"{text} within {beta_ref.describe()}")
    if problems:
        status = Status.FAIL if any(s is Status.FAIL for s, _ in problems) else Status.WARN
        problems.sort(key=lambda p: p[0] is not Status.FAIL)
        return Finding(CHECK_FIT, status, f"{run.collective} {where}: " + "; ".join(t for _, t in problems)[:260],
                       comp, metrics)
    if judged:
        return Finding(CHECK_FIT, Status.PASS, f"{run.collective} {where}: " + "; ".join(judged + notes)[:260], comp,
                       metrics)
    return Finding(CHECK_FIT, Status.SKIP, f"{run.collective} {where}: " + "; ".join(notes)[:260], comp, metrics)


def _first(lines: list[str]) -> str:
    line = lines[0].strip()
    return line if len(line) <= 200 else line[:197] + "..."


def judge_runs(runs: list[NcclRun], refs_for, sku_name: str | None, section: Sku | None = None) -> list[Finding]:
    """``refs_for(collective, scope) -> (Reference | None, line rate Reference | None)``; ``section``
    (the SKU) adds the line-rate efficiency to each run's finding and a ``burnin.nccl.alphabeta``
    finding per run where it has α-β references."""
    out = []
    for run in runs:
        ref, line = refs_for(run.collective, run.scope)
        out.append(judge_run(run, ref, line, sku_name, section=section))
        fitted = judge_fit(run, section, sku_name)
        if fitted is not None:
            out.append(fitted)
    return out
