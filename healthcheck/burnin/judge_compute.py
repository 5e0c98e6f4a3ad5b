"""Pure judges of the burn-in's compute side: GEMM results, bandwidth results, telemetry summaries
-> :class:`~healthcheck.core.model.Finding` lists. No I/O.

Checks (one finding per device, or per device and direction; component "gpu3" / "cpu0"):

- ``burnin.gemm.verify``: FAIL when the device raised, when iteration 0 is further from the float64
  recomputation than the dtype's tolerance, when any repeated product differed from the first
  (silent data corruption), when its digest disagrees with the majority of the node's devices of the
  same model (same backend, dtype, n; no majority: every disagreeing device is named), or when it
  differs from the fleet's majority digest for :func:`fleet_key` (``fleet_digests``, from the
  history: a full hex digest, its first 12 hex digits, or the ``gemm_digest48`` value).
  Metrics: ``gemm_digest48`` (first 48 bits of the digest), ``gemm_mismatches``, ``gemm_verified``,
  ``gemm_iterations``, ``gemm_reference_error``.
- ``burnin.gemm.tflops``: vs the SKU reference ``gemm_<dtype>_tflops`` (FAIL below its low bound,
  WARN above its high bound) and vs the median of the node's devices of the same model (FAIL when
  more than ``node_spread`` below it; said only when the reference did not already fail it).
  Without a reference only the node median judges and the message says "no reference for <sku or
  GPU name>". Metrics: ``gemm_tflops``, ``node_median_tflops``, ``reference_tflops``.
- ``burnin.bandwidth.hbm`` / ``burnin.bandwidth.pcie``: vs ``hbm_copy_gbps`` / ``h2d_gbps`` /
  ``d2h_gbps`` (best of the repeats judged); FAIL on corrupted data or a failed copy; SKIP with the
  reason for skipped results (the NumPy backend: "no device: host memory only").
  Metrics: ``<kind>_gbps``, ``<kind>_median_gbps``.
- ``burnin.telemetry``: the ``load`` column of the one throttle table (:mod:`healthcheck.policies.throttle`):
  FAIL when a hardware brake (HW slowdown, HW thermal, HW power brake) or SW thermal slowdown was
  active under load, never milder than ``gpu.throttle`` at idle; ERROR when nothing could be read;
  metrics ``temp_max_c``, ``power_mean_w``,
  ``power_max_w``, ``sm_clock_min_mhz``, ``sm_clock_median_mhz``, ``<reason>_pct``.

- ``burnin.thermal.spread``: the hottest GPU under load vs its siblings at similar power (mean power
  within ``power_band`` (15 %) of its own): more than ``delta_c`` above their median maximum temperature
  -> FAIL naming the GPU (a cooling fault local to it: thermal interface, cold plate, heat sink, a fan
  or airflow path, or a sensor); SKIP with fewer than ``min_peers`` (3) such siblings. ``delta_c`` is
  data: the SKU's ``thermal_spread_c`` reference (``data/burnin_references.toml``, with its source),
  else :data:`DEFAULT_SPREAD_C`. Metrics ``temp_max_c``, ``peer_median_temp_c``, ``temp_over_median_c``.

Metrics are always finite floats (a NaN or inf measurement is reported in the message, not stored).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any, Iterable

from healthcheck.policies import throttle
from healthcheck.core.model import Finding, Status, worst

from .bandwidth import BandwidthResult
from .gemm import GemmResult
from ..policies.references import Sku
from .telemetry import TelemetrySummary

VERIFY = "burnin.gemm.verify"
TFLOPS = "burnin.gemm.tflops"
HBM = "burnin.bandwidth.hbm"
PCIE = "burnin.bandwidth.pcie"
TELEMETRY = "burnin.telemetry"
SPREAD = "burnin.thermal.spread"
# Used when the SKU has no thermal_spread_c reference; the reasoning is that reference's source in
# data/burnin_references.toml (a healthy node's GPUs under one load sit within a few degrees).
DEFAULT_SPREAD_C = 10.0
# Under load (the throttle table's "load" column): the reasons that FAIL, and those that WARN.
THERMAL_FAIL = tuple(throttle.reasons_at("load", throttle.FAIL))
LOAD_WARN = tuple(throttle.reasons_at("load", throttle.WARN))
BANDWIDTH_KEYS = {"hbm_copy": "hbm_copy_gbps", "h2d": "h2d_gbps", "d2h": "d2h_gbps"}


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _metrics(**values: Any) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if _finite(v)}


def _num(x: Any, fmt: str = ".1f") -> str:
    return format(x, fmt) if _finite(x) else str(x)


def fleet_key(r: GemmResult) -> str:
    """The key of a fleet-wide majority digest: the same product (dtype, size, input seed) computed by
    the same GPU model with the same library stack must give the same bits."""
    return f"{r.name}|{r.library or r.backend}|{r.dtype}|n={r.n}|seed={r.seed}"


def _group_key(r: Any) -> tuple:
    return (r.name, r.backend, getattr(r, "dtype", None), getattr(r, "n", None))


def _groups(results: Iterable[Any]) -> dict[tuple, list[Any]]:
    out: dict[tuple, list[Any]] = {}
    for r in results:
        out.setdefault(_group_key(r), []).append(r)
    return out


# ------------------------------------------------------------------------------------------- GEMM


def _cross_device(results: list[GemmResult]) -> dict[str, str]:
    """component -> why its digest disagrees with its peers (same model, backend, dtype, n)."""
    out: dict[str, str] = {}
    for group in _groups(r for r in results if r.digest and not r.errors).values():
        if len(group) < 2:
            continue
        counts = Counter(r.digest for r in group)
        top, top_n = counts.most_common(1)[0]
        if top_n * 2 > len(group):
            for r in group:
                if r.digest != top:
                    out[r.component] = (f"result differs from the other {top_n} {r.name} "
                                        f"({r.digest[:12]} vs majority {top[:12]})")
        else:
            names = ", ".join(f"{r.component} {r.digest[:12]}" for r in group)
            for r in group:
                out[r.component] = f"no majority: the {len(group)} {r.name} disagree ({names})"
    return out


def _fleet_hex(expected: Any) -> str | None:
    """A fleet digest as lower-case hex: a full hex digest, its first 12 hex digits, or the 48-bit
    ``gemm_digest48`` history metric (int or float); None when unusable."""
    if _finite(expected) and 0 <= expected < 2 ** 48 and float(expected).is_integer():
        return f"{int(expected):012x}"
    if isinstance(expected, str) and len(expected) >= 12 and all(c in "0123456789abcdef" for c in expected.lower()):
        return expected.lower()
    return None


def _verify(r: GemmResult, peer: str | None, fleet: str | None, whole_node: bool) -> Finding:
    problems = []
    if r.errors:
        more = f" (+{len(r.errors) - 1} more)" if len(r.errors) > 1 else ""
        problems.append(f"GEMM raised: {r.errors[0]}{more}")
    err = r.reference_error
    if err is not None and not (_finite(err) and err <= r.tolerance):
        problems.append(f"wrong result: error {_num(err, '.2g')} vs float64 above the {r.dtype} "
                        f"tolerance {r.tolerance:g}")
    if r.mismatches:
        where = f", first at iteration {r.first_mismatch}" if r.first_mismatch is not None else ""
        problems.append(f"{r.mismatches} of {r.verified} repeated products differed from the first "
                        f"(silent data corruption{where})")
    if peer:
        problems.append(peer)
    if fleet and r.digest and not r.digest.startswith(fleet[:len(r.digest)]):
        hint = " (the whole node differs: driver or library change?)" if whole_node else ""
        problems.append(f"differs from the fleet ({r.digest[:12]} vs {fleet[:12]} for {r.dtype} n={r.n}){hint}")
    metrics = _metrics(gemm_digest48=r.digest_metric, gemm_mismatches=r.mismatches, gemm_verified=r.verified,
                       gemm_iterations=r.iterations, gemm_reference_error=err)
    if problems:
        return Finding(VERIFY, Status.FAIL, f"{r.component}: " + "; ".join(problems), r.component, metrics)
    if r.digest is None:
        return Finding(VERIFY, Status.FAIL, f"{r.component}: no product verified", r.component, metrics)
    same = ", same result as the fleet" if fleet else ""
    return Finding(VERIFY, Status.PASS,
                   f"{r.component}: {r.verified} repeated products identical, error {_num(err, '.1e')} vs "
                   f"float64 (tolerance {r.tolerance:g}, {r.dtype} n={r.n}){same}", r.component, metrics)


def _tflops(r: GemmResult, sku: Sku | None, median: float | None, node_spread: float) -> Finding:
    t = r.tflops
    if not _finite(t):
        why = r.errors[0] if r.errors else "no timed product"
        return Finding(TFLOPS, Status.FAIL, f"{r.component}: no GEMM throughput measured ({why})", r.component)
    key = f"gemm_{r.dtype}_tflops"
    ref = sku.get(key) if sku is not None else None
    parts: list[tuple[Status, str]] = []
    if ref is not None:
        verdict = ref.judge(t)
        source = f"({sku.name} {key} {ref.value:g} {ref.unit})"
        if verdict == "low":
            parts.append((Status.FAIL, f"{t:.1f} TFLOP/s below reference >= {ref.low_bound:.4g} {source}"))
        elif verdict == "high":
            parts.append((Status.WARN, f"{t:.1f} TFLOP/s above reference <= {ref.high_bound:.4g} {source}: "
                                       "not the load it claims?"))
    reference_failed = any(status is Status.FAIL for status, _ in parts)
    if not reference_failed and median is not None and median > 0 and t < median * (1.0 - node_spread):
        parts.append((Status.FAIL, f"{t:.1f} TFLOP/s is {100 * (1 - t / median):.0f}% below the node median "
                                   f"{median:.1f} (allowed {100 * node_spread:g}%)"))
    metrics = _metrics(gemm_tflops=t, node_median_tflops=median, reference_tflops=ref.value if ref else None)
    if parts:
        return Finding(TFLOPS, worst(s for s, _ in parts), f"{r.component}: " + "; ".join(m for _, m in parts),
                       r.component, metrics)
    against = [f"reference {ref.describe()}" if ref is not None else
               f"no reference for {sku.name + ' ' + key if sku is not None else r.name}"]
    if median is not None:
        against.append(f"node median {median:.1f}")
    return Finding(TFLOPS, Status.PASS, f"{r.component}: {t:.1f} TFLOP/s {r.dtype} n={r.n} ({', '.join(against)})",
                   r.component, metrics)


def judge_gemm(results: list[GemmResult], sku: Sku | None, *, fleet_digests: dict[str, Any] | None = None,
               node_spread: float = 0.10) -> list[Finding]:
    """``fleet_digests``: :func:`fleet_key` -> the fleet's majority digest (full hex, its first 12 hex
    digits, or the 48-bit ``gemm_digest48`` value)."""
    peers = _cross_device(results)
    fleet = fleet_digests or {}
    medians: dict[tuple, float | None] = {}
    for key, group in _groups(results).items():
        figures = [r.tflops for r in group if _finite(r.tflops)]
        medians[key] = statistics.median(figures) if len(figures) >= 2 else None
    digests = {r.digest for r in results if r.digest}
    findings = []
    for r in results:
        expected = _fleet_hex(fleet.get(fleet_key(r)))
        whole_node = len(digests) == 1 and len(results) > 1
        findings.append(_verify(r, peers.get(r.component), expected, whole_node))
    for r in results:
        findings.append(_tflops(r, sku, medians[_group_key(r)], node_spread))
    return findings


# -------------------------------------------------------------------------------------- bandwidth


def _bandwidth(r: BandwidthResult, sku: Sku | None) -> Finding:
    check = HBM if r.kind == "hbm_copy" else PCIE
    label = r.component if r.kind == "hbm_copy" else f"{r.component} {r.kind}"
    key = BANDWIDTH_KEYS.get(r.kind, f"{r.kind}_gbps")
    metrics = _metrics(**{f"{r.kind}_gbps": r.gbps, f"{r.kind}_median_gbps": r.median_gbps})
    if r.error:
        return Finding(check, Status.FAIL, f"{label}: copy failed: {r.error}", r.component, metrics)
    if r.corrupted:
        return Finding(check, Status.FAIL, f"{label}: copied data differs from the source ({r.detail})",
                       r.component, metrics)
    if r.skipped:
        figure = f" ({_num(r.gbps)} GB/s measured)" if _finite(r.gbps) else ""
        return Finding(check, Status.SKIP, f"{label}: {r.skipped}{figure}", r.component, metrics)
    g = r.gbps
    if not _finite(g):
        return Finding(check, Status.FAIL, f"{label}: no bandwidth measured", r.component, metrics)
    ref = sku.get(key) if sku is not None else None
    figure = f"{g:.1f} GB/s (median {_num(r.median_gbps)})"
    if ref is None:
        who = f"{sku.name} {key}" if sku is not None else r.name
        return Finding(check, Status.PASS, f"{label}: {figure}; no reference for {who}", r.component, metrics)
    metrics["reference_gbps"] = float(ref.value)
    source = f"({sku.name} {key} {ref.value:g} {ref.unit})"
    verdict = ref.judge(g)
    if verdict == "low":
        return Finding(check, Status.FAIL, f"{label}: {g:.1f} GB/s below reference >= {ref.low_bound:.4g} {source}",
                       r.component, metrics)
    if verdict == "high":
        return Finding(check, Status.WARN, f"{label}: {g:.1f} GB/s above reference <= {ref.high_bound:.4g} "
                                           f"{source}: not the copy it claims?", r.component, metrics)
    return Finding(check, Status.PASS, f"{label}: {figure} within reference {ref.describe()}", r.component, metrics)


def judge_bandwidth(results: list[BandwidthResult], sku: Sku | None) -> list[Finding]:
    return [_bandwidth(r, sku) for r in results]


# -------------------------------------------------------------------------------------- telemetry


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


def judge_telemetry(summary: dict[int, TelemetrySummary], *, thermal_fail: tuple[str, ...] = THERMAL_FAIL,
                    min_fraction: float = 0.0, warn: tuple[str, ...] = LOAD_WARN) -> list[Finding]:
    findings = []
    for index in sorted(summary):
        s = summary[index]
        comp = s.component
        reasons = {k: v for k, v in s.reasons.items() if _finite(v)}
        metrics = _metrics(temp_max_c=s.temp_max_c, power_mean_w=s.power_mean_w, power_max_w=s.power_max_w,
                           sm_clock_min_mhz=s.sm_clock_min_mhz, sm_clock_median_mhz=s.sm_clock_median_mhz,
                           telemetry_samples=s.samples,
                           **{f"{k}_pct": 100 * v for k, v in reasons.items()})
        read_nothing = all(v is None for v in (s.temp_max_c, s.power_mean_w, s.sm_clock_min_mhz)) \
            and not s.reason_samples
        if s.samples == 0 or read_nothing:
            why = s.errors[0] if s.errors else "no samples"
            findings.append(Finding(TELEMETRY, Status.ERROR, f"{comp}: no telemetry read ({why})", comp, metrics))
            continue
        temp = f"max {s.temp_max_c:.0f} C" if _finite(s.temp_max_c) else "temperature not read"
        failing = [f"{k} {_pct(v)}" for k, v in reasons.items() if k in thermal_fail and v > min_fraction]
        warning = [f"{k} {_pct(v)}" for k, v in reasons.items()
                   if k in warn and k not in thermal_fail and v > min_fraction]
        if failing:
            findings.append(Finding(TELEMETRY, Status.FAIL, f"{comp}: {', '.join(failing)} of samples under load "
                                                            f"({temp})", comp, metrics))
            continue
        if warning:
            findings.append(Finding(TELEMETRY, Status.WARN, f"{comp}: {', '.join(warning)} of samples under load "
                                                            f"({temp})", comp, metrics))
            continue
        parts = [temp]
        if _finite(s.power_mean_w):
            parts.append(f"mean {s.power_mean_w:.0f} W")
        if _finite(s.sm_clock_min_mhz):
            parts.append(f"SM clock >= {s.sm_clock_min_mhz:.0f} MHz")
        seen = [f"{k} {_pct(v)}" for k, v in reasons.items()]
        if seen:
            parts.append("reasons: " + ", ".join(seen))
        if s.errors:
            parts.append(f"{len(s.errors)} NVML error(s): {s.errors[0]}")
        findings.append(Finding(TELEMETRY, Status.PASS, f"{comp}: " + ", ".join(parts), comp, metrics))
    return findings


# ---------------------------------------------------------------------------------- thermal spread


def judge_thermal_spread(summary: dict[int, TelemetrySummary], delta_c: float = DEFAULT_SPREAD_C, *,
                         power_band: float = 0.15, min_peers: int = 3, source: str = "") -> list[Finding]:
    """The hottest GPU vs the median of its siblings at similar power (see the module docstring)."""
    readings = {i: s for i, s in summary.items() if _finite(s.temp_max_c) and _finite(s.power_mean_w)
                and s.power_mean_w > 0}
    if len(readings) < min_peers + 1:
        return [Finding(SPREAD, Status.SKIP, f"{len(readings)} GPU(s) with temperature and power under load: "
                                             f"too few to compare (needs {min_peers + 1})")]
    hottest = max(readings, key=lambda i: (readings[i].temp_max_c, -i))
    hot = readings[hottest]
    peers = [s for i, s in readings.items() if i != hottest
             and abs(s.power_mean_w - hot.power_mean_w) <= power_band * hot.power_mean_w]
    comp = hot.component
    if len(peers) < min_peers:
        return [Finding(SPREAD, Status.SKIP, f"{comp} is the hottest ({hot.temp_max_c:.0f} C at {hot.power_mean_w:.0f} W) "
                                             f"but only {len(peers)} sibling(s) drew within {100 * power_band:g}% of its "
                                             f"power: not compared", comp, _metrics(temp_max_c=hot.temp_max_c))]
    median = statistics.median(s.temp_max_c for s in peers)
    over = hot.temp_max_c - median
    metrics = _metrics(temp_max_c=hot.temp_max_c, peer_median_temp_c=median, temp_over_median_c=over,
                       power_mean_w=hot.power_mean_w)
    why = f" ({source})" if source else ""
    text = (f"{comp} max {hot.temp_max_c:.0f} C at {hot.power_mean_w:.0f} W mean vs median {median:.0f} C of "
            f"{len(peers)} sibling(s) at similar power: {over:+.0f} C")
    if over > delta_c:
        return [Finding(SPREAD, Status.FAIL, f"{text}, more than {delta_c:g} C above{why}: check its cooling "
                                             "(thermal interface, heat sink or cold plate, airflow) and its sensor",
                        comp, metrics)]
    return [Finding(SPREAD, Status.PASS, f"{text} (limit {delta_c:g} C)", comp, metrics)]
