"""The alpha-beta (latency / bandwidth) model of an nccl-tests size sweep, and bus-bandwidth efficiency.

Model: ``time_us = alpha_us + size_bytes / (beta_gbps * 1e3)`` -- ``alpha`` is the fixed cost of one
collective (launch, synchronisation, network latency) and ``beta`` the bandwidth the time grows with
(GB/s = 1e3 bytes per microsecond). The time column is the one nccl-tests derives ``algbw`` from, so
``beta`` is an *algorithm* bandwidth: compare it with ``algbw``, or multiply it by the collective's bus
factor (all_reduce: 2(n-1)/n) to compare it with ``busbw``.

Fit: weighted linear least squares with weights ``1 / time_us**2``, i.e. every point counts by its
*relative* error. With the usual factor-2 sweep (8 B .. 8 GB) an unweighted fit is decided by the
few largest sizes alone (their times are 1000x larger), and ``alpha`` comes out as noise, even
negative; in relative terms the small, latency-dominated sizes pin ``alpha`` and the large ones pin
``beta``. Zero-byte rows (nccl-tests skips the collective: ~1 us) and points without a positive,
finite time are not used. The fit is computed on centred sums in plain Python (no numpy).

``fit`` returns None for fewer than 3 usable points or a degenerate fit (a single size, or a time that
does not grow with size, which would need an infinite or negative bandwidth). ``alpha_us`` may come out
negative when the sweep does not follow the model; it is returned as computed, for the caller to judge.
``r2`` is the weighted coefficient of determination.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from healthcheck.parsers.nccl_tests import NcclRow


@dataclass
class AlphaBeta:
    alpha_us: float   # latency: the time of a zero-size collective
    beta_gbps: float  # algorithm bandwidth the time grows with (GB/s)
    r2: float         # weighted (relative-error) coefficient of determination, 1.0 = exact
    points: int       # points the fit used


def _points(rows: Iterable[NcclRow | tuple[int, float]], side: str) -> list[tuple[float, float]]:
    out = []
    for row in rows:
        if isinstance(row, NcclRow):
            size, time_us = row.size_bytes, getattr(row, side).time_us
        else:
            size, time_us = row
        if time_us is None or size is None:
            continue
        size, time_us = float(size), float(time_us)
        if size > 0 and math.isfinite(size) and time_us > 0 and math.isfinite(time_us):
            out.append((size, time_us))
    return out


def fit(rows: Sequence[NcclRow] | Sequence[tuple[int, float]], side: str = "oop") -> AlphaBeta | None:
    """Least-squares alpha/beta over a size sweep: NcclRows (their ``side`` "oop" or "ip" time) or
    ``(size_bytes, time_us)`` pairs; None when fewer than 3 usable points or degenerate."""
    if side not in ("oop", "ip"):
        raise ValueError(f"side must be 'oop' or 'ip', got {side!r}")
    points = _points(rows, side)
    if len(points) < 3:
        return None
    weights = [1.0 / (t * t) for _, t in points]
    total = math.fsum(weights)
    mean_s = math.fsum(w * s for w, (s, _) in zip(weights, points)) / total
    mean_t = math.fsum(w * t for w, (_, t) in zip(weights, points)) / total
    sxx = math.fsum(w * (s - mean_s) ** 2 for w, (s, _) in zip(weights, points))
    sxy = math.fsum(w * (s - mean_s) * (t - mean_t) for w, (s, t) in zip(weights, points))
    if not (sxx > 0 and math.isfinite(sxx) and math.isfinite(sxy)):
        return None
    slope = sxy / sxx  # microseconds per byte
    if not (slope > 0 and math.isfinite(slope)):
        return None
    alpha = mean_t - slope * mean_s
    residual = math.fsum(w * (t - alpha - slope * s) ** 2 for w, (s, t) in zip(weights, points))
    spread = math.fsum(w * (t - mean_t) ** 2 for w, (_, t) in zip(weights, points))
    r2 = 1.0 - residual / spread if spread > 0 else 1.0
    beta = 1.0 / (slope * 1e3)
    if not (math.isfinite(alpha) and math.isfinite(beta) and math.isfinite(r2)):
        return None
    return AlphaBeta(alpha_us=alpha, beta_gbps=beta, r2=r2, points=len(points))


def efficiency(busbw_gbps: float, line_rate_gbps: float) -> float:
    """``busbw_gbps`` as a percentage of ``line_rate_gbps`` (both GB/s; 100.0 = at line rate)."""
    if not (line_rate_gbps > 0 and math.isfinite(line_rate_gbps)):
        raise ValueError(f"line rate must be a positive number of GB/s, got {line_rate_gbps!r}")
    return 100.0 * busbw_gbps / line_rate_gbps


# nccl-tests' bus factor (busbw = algbw x factor) per collective, for n ranks (its src/*.cu, described
# in its PERFORMANCE.md): what a rank's link carries relative to the algorithm bandwidth.
_BUS_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def bus_factor(rows: Sequence[NcclRow], collective: str | None = None, nranks: int | None = None) -> float | None:
    """``busbw / algbw`` as nccl-tests printed it: the median ratio over the (up to 5) rows with the
    largest out-of-place algbw (the most significant digits); else the collective's formula for
    ``nranks``; else None."""
    pairs = sorted(((r.oop.algbw_gbps, r.oop.busbw_gbps) for r in rows
                    if r.oop.algbw_gbps and r.oop.busbw_gbps is not None and r.oop.algbw_gbps >= 0.1
                    and math.isfinite(r.oop.algbw_gbps) and math.isfinite(r.oop.busbw_gbps)), reverse=True)[:5]
    if pairs:
        ratios = sorted(bus / alg for alg, bus in pairs)
        return ratios[len(ratios) // 2]
    formula = _BUS_FACTORS.get(collective or "")
    if formula is not None and nranks and nranks >= 1:
        return formula(nranks)
    return None


# What a sweep must cover for its fit to judge: alpha needs small sizes (their times are mostly
# latency), beta large ones (mostly bandwidth), and the model must describe the sweep at all.
SMALL_BYTES = 64 << 10
MIN_SMALL_POINTS = 3
LARGE_BYTES = 64 << 20
MIN_R2 = 0.5


def coverage(rows: Sequence[NcclRow], side: str = "oop") -> tuple[int, int]:
    """(points at or below SMALL_BYTES, points at or above LARGE_BYTES) among the usable fit points."""
    points = _points(rows, side)
    return (sum(1 for s, _ in points if s <= SMALL_BYTES), sum(1 for s, _ in points if s >= LARGE_BYTES))
