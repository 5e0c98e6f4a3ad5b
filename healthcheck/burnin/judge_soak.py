"""Pure judge of the soak phase: a series of points per device -> findings. No I/O, no clock.

The soak (:mod:`.soak`) runs the verified GEMM in slices and, for each slice, keeps one
:class:`SoakPoint` per device: the slice's throughput, the telemetry sampled during it (hottest
temperature, mean power, median SM clock, the share of samples each clock event reason was active)
and the error counters read after it. Point 0 (``t_s`` 0) may carry only the counters read before the
load. This module looks for degradation *inside* the run, each finding naming when it started
(``since t=...``, seconds from the start of the soak; metric ``onset_s``):

- ``burnin.soak.throughput``: the throughput trend (least squares over the judged points) and the
  level at the end (median of the last points) both lost more than ``throughput_drop`` against the
  baseline (median of the first judged points). FAIL "while the SM clock held" when the median SM
  clock stayed within ``clock_hold`` of its baseline (nothing the clocks explain: memory, a failing
  part, retries); FAIL "throttling" naming the clock event reasons when the clock fell with it.
- ``burnin.soak.thermal``: the temperature trend rose more than ``temp_slope_c_per_h`` *and* more than
  ``temp_rise_min_c`` over the judged span (heating: the cooling is not holding a steady state), WARN;
  FAIL when it also came within ``slowdown_margin_c`` of the GPU's slowdown temperature. Within the
  margin without a trend: WARN.
- ``burnin.soak.clocks``: a clock event reason that was (almost) absent in the baseline and became
  active in a later slice: FAIL for the reasons the throttle table fails under load (hardware brakes,
  SW thermal slowdown), WARN for power capping (``sw_power_cap``: normal at the limit, but appearing
  mid-run at the same load means the board draws more for the same work, or the limit moved).
- ``burnin.soak.errors``: an error counter (ECC, PCIe replay, NVLink) that grew during the run by more
  than its allowance in :data:`COUNTERS`; its status and reason are data there.
- ``burnin.soak.verify``: a slice whose GEMM raised, or whose product differed from its own first
  product or from the first slice's digest (silent data corruption during the soak).

Warm-up: the points in the first ``warmup_fraction`` of the run (at least the first point when there
are ``min_points`` or more) are not judged for trends (clocks, temperatures and fans settle). With
fewer than ``min_points`` judged points the trend checks SKIP and say why.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping

from healthcheck.policies import throttle
from healthcheck.core.model import Finding, Status

THROUGHPUT = "burnin.soak.throughput"
THERMAL = "burnin.soak.thermal"
CLOCKS = "burnin.soak.clocks"
ERRORS = "burnin.soak.errors"
VERIFY = "burnin.soak.verify"


@dataclass(frozen=True)
class Threshold:
    value: float
    reason: str


# Thresholds as data, each with its one-line reason (docs/burnin.md, "Soak", repeats them).
THRESHOLDS: dict[str, Threshold] = {
    "warmup_fraction": Threshold(0.1, "clocks, temperatures and fans settle in the first minutes; a trend is "
                                      "judged after them"),
    "min_points": Threshold(4, "fewer judged points than this give no trend worth a verdict"),
    "baseline_points": Threshold(3, "the baseline is the median of the first judged points (one slow slice "
                                    "does not set it)"),
    "throughput_drop": Threshold(0.05, "a GPU under the same GEMM holds its throughput within 1-2 % run to run; "
                                       "5 % lost over the run is a degradation, not noise"),
    "clock_hold": Threshold(0.02, "an SM clock within 2 % of its baseline explains no 5 % loss of throughput"),
    "temp_slope_c_per_h": Threshold(5.0, "after warm-up a cooled GPU under constant load sits at a steady "
                                         "temperature; rising 5 C an hour means the cooling is losing ground"),
    "temp_rise_min_c": Threshold(3.0, "a fitted rise under 3 C is within sensor steps and load variation"),
    "slowdown_margin_c": Threshold(5.0, "within 5 C of its slowdown temperature the GPU is about to throttle"),
    "reason_absent": Threshold(0.1, "a reason active in under 10 % of the baseline's samples was absent"),
    "reason_active": Threshold(0.5, "a reason active in half a slice's samples or more is present"),
}


@dataclass(frozen=True)
class Counter:
    allowance: int  # growth over the run that is still accepted
    status: Status  # when the growth exceeds it
    reason: str


# Error counters (cumulative, as read after each slice) -> what growth during the soak means.
COUNTERS: dict[str, Counter] = {
    "ecc_uncorrected_volatile": Counter(0, Status.FAIL, "an uncorrectable ECC error under load kills the job "
                                                        "that hit it; the memory needs a row remap or an RMA"),
    "ecc_corrected_volatile": Counter(0, Status.WARN, "correctable ECC errors appearing under load point at a "
                                                      "weak memory row; uncorrectable ones often follow"),
    "pcie_replay_count": Counter(10, Status.WARN, "PCIe replays under load mean a marginal link (riser, slot, "
                                                  "retimer); a few over hours are tolerated"),
    "nvlink_replay_errors": Counter(10, Status.WARN, "NVLink replays retransmit data: a marginal link or "
                                                     "NVSwitch port"),
    "nvlink_recovery_errors": Counter(0, Status.FAIL, "an NVLink that had to retrain under load stalls "
                                                      "collectives and can hang NCCL"),
    "nvlink_crc_flit_errors": Counter(100, Status.WARN, "flit CRC errors are corrected by replay, but a "
                                                        "growing count is a degrading link"),
    "nvlink_crc_data_errors": Counter(0, Status.WARN, "data CRC errors on an NVLink are payload corrupted "
                                                      "on the wire (replayed)"),
}

THERMAL_FAIL = tuple(throttle.reasons_at("load", throttle.FAIL))
CAP_REASONS = ("sw_power_cap",)


@dataclass
class SoakPoint:
    t_s: float  # seconds since the soak began, at the end of the slice (0: before the load)
    tflops: float | None = None
    temp_c: float | None = None  # hottest sample of the slice
    power_w: float | None = None  # mean power of the slice
    sm_clock_mhz: float | None = None  # median SM clock of the slice
    reasons: dict[str, float] | None = None  # reason -> share of the slice's samples; None: not read
    counters: dict[str, int] = field(default_factory=dict)  # cumulative error counters after the slice
    problem: str | None = None  # the slice's GEMM raised or its product was wrong (verification)


@dataclass
class SoakSeries:
    component: str  # "gpu3" / "cpu0"
    points: list[SoakPoint]
    slowdown_c: float | None = None  # the GPU's slowdown temperature (NVML threshold), if known


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _t(seconds: float) -> str:
    """"t=1h02m" / "t=3m20s" / "t=12s"."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"t={h}h{m:02d}m"
    return f"t={m}m{sec:02d}s" if m else f"t={sec}s"


def slope(times: list[float], values: list[float]) -> float:
    """Least-squares slope (value per second); 0 for fewer than two distinct times."""
    if len(times) < 2:
        return 0.0
    mt, mv = statistics.fmean(times), statistics.fmean(values)
    den = sum((t - mt) ** 2 for t in times)
    if den <= 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in zip(times, values)) / den


def hinge(times: list[float], values: list[float]) -> float:
    """When a change started, by the best least-squares fit over every break point ``b`` (a point's
    time) of two shapes: flat until ``b`` then a straight trend (``v = c + m max(0, t - b)``: the trend
    began at ``b``), or flat until ``b`` then flat at another level (a step: first seen in the slice
    after ``b``). A trend from the start gives the first time; fewer than three points: the first."""
    best, best_sse = times[0], math.inf
    if len(times) < 3:
        return best
    for i, b in enumerate(times[:-1]):
        x = [max(0.0, t - b) for t in times]
        m = slope(x, values)
        c = statistics.fmean(values) - m * statistics.fmean(x)
        fits = [(sum((v - c - m * xi) ** 2 for xi, v in zip(x, values)), b)]
        before, after = values[:i + 1], values[i + 1:]
        c1, c2 = statistics.fmean(before), statistics.fmean(after)
        fits.append((sum((v - c1) ** 2 for v in before) + sum((v - c2) ** 2 for v in after), times[i + 1]))
        for sse, when in fits:
            if sse < best_sse * (1 - 1e-9):  # a later break must fit clearly better (ties: the earliest)
                best, best_sse = when, sse
    return best


def _th(thresholds: Mapping[str, Threshold] | None, name: str) -> float:
    return (thresholds or THRESHOLDS).get(name, THRESHOLDS[name]).value


def _judged(points: list[SoakPoint], th: Mapping[str, Threshold] | None) -> list[SoakPoint]:
    """The points after warm-up (load points only: ``t_s`` > 0)."""
    load = [p for p in points if p.t_s > 0]
    if not load:
        return []
    end = load[-1].t_s * _th(th, "warmup_fraction")
    judged = [p for p in load if p.t_s > end]
    if len(judged) == len(load) and len(load) >= _th(th, "min_points") + 1:
        judged = judged[1:]  # the first slice holds the warm-up, however short the fraction
    return judged


def _pairs(points: list[SoakPoint], attr: str) -> tuple[list[float], list[float]]:
    got = [(p.t_s, getattr(p, attr)) for p in points if _finite(getattr(p, attr))]
    return [t for t, _ in got], [float(v) for _, v in got]


def judge_throughput(s: SoakSeries, th: Mapping[str, Threshold] | None = None) -> Finding:
    judged = _judged(s.points, th)
    times, values = _pairs(judged, "tflops")
    n_base = int(_th(th, "baseline_points"))
    if len(values) < max(_th(th, "min_points"), n_base + 1):
        return Finding(THROUGHPUT, Status.SKIP, f"{len(values)} judged slice(s) with a throughput after warm-up: "
                       f"too few for a trend (need {int(max(_th(th, 'min_points'), n_base + 1))}; "
                       "lengthen soak_duration_s or shorten soak_sample_s)", s.component)
    base = statistics.median(values[:n_base])
    end = statistics.median(values[-n_base:])
    span = times[-1] - times[0]
    fitted_drop = -slope(times, values) * span / base if base > 0 else 0.0
    end_drop = 1 - end / base if base > 0 else 0.0
    metrics = {"soak_baseline_tflops": base, "soak_end_tflops": end, "soak_tflops_drop_pct": 100 * end_drop,
               "soak_tflops_slope_pct_per_h": -100 * fitted_drop / span * 3600 if span > 0 else 0.0}
    limit = _th(th, "throughput_drop")
    if not (end_drop > limit and fitted_drop > limit):
        return Finding(THROUGHPUT, Status.PASS, f"throughput held: {base:.2f} -> {end:.2f} TFLOP/s "
                       f"({-100 * end_drop:+.1f} %) over {len(values)} slices", s.component, metrics)
    metrics["onset_s"] = hinge(times, values)
    ctimes, clocks = _pairs(judged, "sm_clock_mhz")
    since = _t(metrics["onset_s"])
    if len(clocks) > n_base:
        cbase, cend = statistics.median(clocks[:n_base]), statistics.median(clocks[-n_base:])
        clock_drop = 1 - cend / cbase if cbase > 0 else 0.0
        metrics.update(soak_baseline_clock_mhz=cbase, soak_end_clock_mhz=cend, soak_clock_drop_pct=100 * clock_drop)
        if clock_drop <= _th(th, "clock_hold"):
            return Finding(THROUGHPUT, Status.FAIL, f"throughput fell {100 * end_drop:.1f} % ({base:.2f} -> "
                           f"{end:.2f} TFLOP/s) since {since} while the SM clock held ({cbase:.0f} -> {cend:.0f} "
                           "MHz): degradation the clocks do not explain (memory, a failing part, retries)",
                           s.component, metrics)
        reasons = sorted({r for p in judged[-n_base:] for r, share in (p.reasons or {}).items()
                          if share >= _th(th, "reason_active") and r != "gpu_idle"})
        why = f"; active: {', '.join(reasons)}" if reasons else "; no clock event reason read"
        return Finding(THROUGHPUT, Status.FAIL, f"throttling: throughput fell {100 * end_drop:.1f} % ({base:.2f} -> "
                       f"{end:.2f} TFLOP/s) since {since} with the SM clock {100 * clock_drop:.1f} % lower "
                       f"({cbase:.0f} -> {cend:.0f} MHz){why}", s.component, metrics)
    return Finding(THROUGHPUT, Status.FAIL, f"throughput fell {100 * end_drop:.1f} % ({base:.2f} -> {end:.2f} "
                   f"TFLOP/s) since {since} (no SM clock read: cause not told)", s.component, metrics)


def judge_thermal(s: SoakSeries, th: Mapping[str, Threshold] | None = None) -> Finding:
    judged = _judged(s.points, th)
    times, temps = _pairs(judged, "temp_c")
    if len(temps) < _th(th, "min_points"):
        return Finding(THERMAL, Status.SKIP, f"{len(temps)} judged slice(s) with a temperature after warm-up: "
                       "too few for a trend", s.component)
    rate = slope(times, temps) * 3600
    rise = rate * (times[-1] - times[0]) / 3600
    hottest = max(temps)
    metrics = {"soak_temp_slope_c_per_h": rate, "soak_temp_rise_c": rise, "soak_temp_max_c": hottest}
    margin = _th(th, "slowdown_margin_c")
    near = _finite(s.slowdown_c) and hottest >= s.slowdown_c - margin
    if _finite(s.slowdown_c):
        metrics["temp_slowdown_c"] = float(s.slowdown_c)
    heating = rate > _th(th, "temp_slope_c_per_h") and rise >= _th(th, "temp_rise_min_c")
    if not heating and not near:
        return Finding(THERMAL, Status.PASS, f"temperature steady: {temps[0]:.0f} -> {temps[-1]:.0f} C "
                       f"({rate:+.1f} C/h), hottest {hottest:.0f} C", s.component, metrics)
    start = hinge(times, temps) if heating else None
    if start is not None:
        metrics["onset_s"] = start
    slow = f" (slowdown at {s.slowdown_c:.0f} C)" if _finite(s.slowdown_c) else ""
    if heating:
        since = f" since {_t(start)}" if start is not None else ""
        status = Status.FAIL if near else Status.WARN
        tail = f", within {margin:.0f} C of slowdown" if near else ""
        return Finding(THERMAL, status, f"heating over the run: {rate:+.1f} C/h{since}, {temps[0]:.0f} -> "
                       f"{temps[-1]:.0f} C (hottest {hottest:.0f} C{slow}){tail}: the cooling is not holding a "
                       "steady state", s.component, metrics)
    return Finding(THERMAL, Status.WARN, f"hottest {hottest:.0f} C is within {margin:.0f} C of slowdown{slow} "
                   f"(steady, {rate:+.1f} C/h): no headroom", s.component, metrics)


def judge_clocks(s: SoakSeries, th: Mapping[str, Threshold] | None = None) -> Finding:
    load = [p for p in s.points if p.t_s > 0 and p.reasons is not None]
    if not load:
        return Finding(CLOCKS, Status.SKIP, "no clock event reasons read during the soak", s.component)
    n_base = int(_th(th, "baseline_points"))
    base, rest = load[:n_base], load[n_base:]
    absent, active = _th(th, "reason_absent"), _th(th, "reason_active")
    base_share: dict[str, float] = {}
    for p in base:
        for r, share in p.reasons.items():
            base_share[r] = max(base_share.get(r, 0.0), share)
    appeared: dict[str, float] = {}
    for p in rest:
        for r, share in sorted(p.reasons.items()):
            if share >= active and base_share.get(r, 0.0) < absent and r not in appeared and \
                    (r in THERMAL_FAIL or r in CAP_REASONS):
                appeared[r] = p.t_s
    if not appeared:
        return Finding(CLOCKS, Status.PASS, "no clock event reason appeared during the soak", s.component)
    first = min(appeared.values())
    status = Status.FAIL if any(r in THERMAL_FAIL for r in appeared) else Status.WARN
    what = ", ".join(f"{r} since {_t(t)}" for r, t in sorted(appeared.items(), key=lambda kv: kv[1]))
    hint = " (power capping appearing at the same load: the board draws more for the same work, or the limit " \
           "moved)" if status is Status.WARN else ""
    return Finding(CLOCKS, status, f"appeared during the soak: {what}{hint}", s.component, {"onset_s": first})


def judge_errors(s: SoakSeries, counters: Mapping[str, Counter] | None = None) -> Finding:
    table = COUNTERS if counters is None else counters
    grown: list[tuple[Status, str, float, str]] = []
    metrics: dict[str, float] = {}
    read = False
    backwards = []
    for name, rule in table.items():
        seq = [(p.t_s, p.counters[name]) for p in s.points if isinstance(p.counters.get(name), int)
               and not isinstance(p.counters.get(name), bool)]
        if len(seq) < 2:
            continue
        read = True
        growth, first_t = 0, None
        for (_, prev), (t, cur) in zip(seq, seq[1:]):
            if cur < prev:  # a reset (driver reload): count from the new value, and say so
                backwards.append(name)
                continue
            if cur > prev and first_t is None:
                first_t = t
            growth += cur - prev
        metrics[f"soak_{name}_growth"] = float(growth)
        if growth > rule.allowance:
            grown.append((rule.status, name, first_t or seq[-1][0], f"{name} +{growth} since {_t(first_t or 0)} "
                          f"(allowed {rule.allowance}): {rule.reason}"))
    if not read:
        return Finding(ERRORS, Status.SKIP, "no error counter read twice during the soak", s.component)
    note = f"; went backwards (reset?) and counted from the new value: {', '.join(sorted(set(backwards)))}" \
        if backwards else ""
    if not grown:
        return Finding(ERRORS, Status.PASS, f"no error counter grew past its allowance{note}", s.component, metrics)
    grown.sort(key=lambda g: (g[0] is not Status.FAIL, g[2]))
    metrics["onset_s"] = min(g[2] for g in grown)
    status = Status.FAIL if any(g[0] is Status.FAIL for g in grown) else Status.WARN
    return Finding(ERRORS, status, "; ".join(g[3] for g in grown) + note, s.component, metrics)


def judge_verify(s: SoakSeries) -> Finding:
    bad = [p for p in s.points if p.problem]
    if not bad:
        slices = sum(1 for p in s.points if p.t_s > 0)
        return Finding(VERIFY, Status.PASS, f"every product of {slices} slice(s) verified", s.component)
    return Finding(VERIFY, Status.FAIL, f"{len(bad)} slice(s) failed verification, the first at {_t(bad[0].t_s)}: "
                   f"{bad[0].problem}"[:400], s.component, {"onset_s": bad[0].t_s, "soak_bad_slices": float(len(bad))})


def judge_soak(series: list[SoakSeries], thresholds: Mapping[str, Threshold] | None = None,
               counters: Mapping[str, Counter] | None = None) -> list[Finding]:
    """Every check for every device; ValueError on a series that is not in time order."""
    out: list[Finding] = []
    for s in series:
        times = [p.t_s for p in s.points]
        if any(not _finite(t) or t < 0 for t in times) or times != sorted(times):
            raise ValueError(f"soak series of {s.component}: times must be finite, >= 0 and in order")
        if not any(t > 0 for t in times):
            out.append(Finding("burnin.soak", Status.ERROR, "no slice completed: nothing to judge", s.component))
            continue
        out += [judge_verify(s), judge_throughput(s, thresholds), judge_thermal(s, thresholds),
                judge_clocks(s, thresholds), judge_errors(s, counters)]
    return out
