"""Pure judges of a training run (no torch, no I/O, no clock): its loss curve against the reference
curve of its configuration, the ranks' agreement on the common probe sequence, a resumed run against
the uninterrupted one, tokens/s per GPU against its reference, SM activity. Each returns findings of
the ``burnin.train.*`` checks; the thresholds come from ``data/train.toml`` (the callers pass them).

The convergence finding carries the loss curve into the history (a finding's metrics are name -> number,
one history row each): at most :data:`CURVE_POINTS` steps, evenly spread, the first and the last always,
the first step that left the band on a FAIL, as ``loss@NNNNNNN`` (the run's loss at step N, seven digits:
steps are at most 2^20, so the names sort as the steps do) and ``loss_ref@NNNNNNN`` (the reference's at
the same step, where it has one), with ``band_rel`` and ``band_abs`` (the tolerances the run was judged
with). :func:`curve_name` writes a name, :func:`parse_curve_name` reads one back (strictly)."""
from __future__ import annotations

import math
from statistics import median
from typing import Mapping, Sequence

from ...core.model import Finding, Status
from .spec import Curve, Figure

CONVERGENCE = "burnin.train.convergence"
RANKS = "burnin.train.ranks"
RESUME = "burnin.train.resume"
THROUGHPUT = "burnin.train.throughput"
ACTIVITY = "burnin.train.activity"
CHECKPOINT = "burnin.train.checkpoint"
RUN = "burnin.train"
CURVE_POINTS = 32            # steps of the loss curve recorded per run (metrics: two history rows per step)
LOSS = "loss@"               # loss@0000010: the run's loss at step 10
LOSS_REF = "loss_ref@"       # loss_ref@0000010: the reference curve's at step 10
STEP_DIGITS = 7              # spec: steps <= 2^20 < 10^7


def judge_convergence(loss: Sequence[float], ref: Curve | None, band_rel: float, band_abs: float,
                      what: str) -> Finding:
    """Every step's loss within max(band_abs, band_rel * ref) of the reference; FAIL naming the first
    step that left the band (and how far), SKIP without a reference for ``what`` (the configuration).
    The metrics carry the curve (:func:`curve_metrics`), the reference's beside it where there is one."""
    if ref is None:
        return Finding(CONVERGENCE, Status.SKIP, f"no reference curve for {what}: record one on a golden allocation "
                       "(healthcheck burnin train --record-reference FILE)",
                       metrics={**_final(loss), **curve_metrics(loss)})
    band = {"band_rel": float(band_rel), "band_abs": float(band_abs)}
    n = min(len(loss), len(ref.loss))
    if len(loss) < len(ref.loss):
        return Finding(CONVERGENCE, Status.FAIL, f"the run recorded {len(loss)} steps, the reference {len(ref.loss)}",
                       metrics={**_final(loss), **band, **curve_metrics(loss, ref.loss)})
    for i in range(n):
        width = max(band_abs, band_rel * ref.loss[i])
        if not math.isfinite(loss[i]) or abs(loss[i] - ref.loss[i]) > width:
            return Finding(CONVERGENCE, Status.FAIL,
                           f"loss left the reference band at step {i + 1}: {loss[i]:.4g} vs {ref.loss[i]:.4g} "
                           f"(band ±{width:.3g}, {what})",
                           metrics={**_final(loss), "first_bad_step": float(i + 1), **band,
                                    **curve_metrics(loss, ref.loss, keep=(i + 1,))})
    worst = max(abs(loss[i] - ref.loss[i]) / max(band_abs, band_rel * ref.loss[i]) for i in range(n))
    return Finding(CONVERGENCE, Status.PASS, f"{n} steps within the reference band ({what}; at most "
                   f"{100 * worst:.0f} % of the band used)",
                   metrics={**_final(loss), "band_used": round(worst, 4), **band, **curve_metrics(loss, ref.loss)})


def _final(loss: Sequence[float]) -> dict[str, float]:
    return {"final_loss": float(loss[-1])} if loss and math.isfinite(loss[-1]) else {}


def curve_steps(n: int, keep: Sequence[int] = (), points: int = CURVE_POINTS) -> list[int]:
    """The steps (1-based) of an ``n``-step curve to record: all of them up to ``points``, else ``points``
    at most: the steps of ``keep`` (within 1..n), the first and the last, the rest evenly spread."""
    if n <= points:
        return list(range(1, n + 1))
    extra = set(sorted({k for k in keep if 1 < k < n})[: max(points - 2, 0)])
    best: set[int] = set()
    for k in range(max(points - len(extra), 2), points + 1):  # a kept step may fall on the grid: one more
        got = extra | {1 + (i * (n - 1) + (k - 1) // 2) // (k - 1) for i in range(k)}  # distinct: n - 1 > k - 1
        if len(got) > points:
            break
        best = got
    return sorted(best)


def curve_name(step: int, ref: bool = False) -> str:
    """The metric name of the run's (``ref``: the reference's) loss at ``step``."""
    if isinstance(step, bool) or not isinstance(step, int) or not 0 < step < 10 ** STEP_DIGITS:
        raise ValueError(f"a curve step must be an integer in [1, {10 ** STEP_DIGITS - 1}], got {step!r}")
    return f"{LOSS_REF if ref else LOSS}{step:0{STEP_DIGITS}d}"


def parse_curve_name(name: str) -> tuple[bool, int] | None:
    """(is the reference's, step) of a name :func:`curve_name` wrote; None for any other name (another
    prefix, not exactly seven ASCII digits, step 0)."""
    if not isinstance(name, str):
        return None
    for prefix, ref in ((LOSS, False), (LOSS_REF, True)):
        digits = name[len(prefix):]
        if name.startswith(prefix) and len(digits) == STEP_DIGITS and digits.isascii() and digits.isdigit():
            step = int(digits)
            return (ref, step) if step > 0 else None
    return None


def curve_metrics(loss: Sequence[float], ref: Sequence[float] | None = None, keep: Sequence[int] = (),
                  points: int = CURVE_POINTS) -> dict[str, float]:
    """The downsampled curve as metrics: the run's finite losses and the reference's at the same steps
    (where the reference reaches them). A non-finite loss is left out (the history drops it anyway); its
    step keeps the reference's value."""
    out: dict[str, float] = {}
    for step in curve_steps(len(loss), keep, points):
        value = float(loss[step - 1])
        if math.isfinite(value):
            out[curve_name(step)] = value
        if ref is not None and step <= len(ref) and math.isfinite(ref[step - 1]):
            out[curve_name(step, ref=True)] = float(ref[step - 1])
    return out


def curve_from_metrics(metrics: Mapping[str, float]) -> tuple[dict[int, float], dict[int, float]]:
    """The run's and the reference's recorded points ({step: loss}) back from a finding's metrics."""
    run: dict[int, float] = {}
    ref: dict[int, float] = {}
    for name, value in metrics.items():
        got = parse_curve_name(name)
        if got is not None and isinstance(value, (int, float)) and math.isfinite(value):
            (ref if got[0] else run)[got[1]] = float(value)
    return run, ref


def judge_ranks(probes: Sequence[Sequence[float]], rel: float, nodes: dict[int, str] | None = None,
                grads: Sequence[Sequence[float]] | None = None) -> list[Finding]:
    """``probes[step][rank]``: each rank's loss on the probe sequence every rank forwards; ``grads[step][rank]``:
    the sum of the reduced gradient each rank applied. Both must agree (within ``rel``) at every step. A
    rank outside the majority is named (FAIL, component ``rank R``, with its node, the first step and which
    figure): silent data corruption or a bad reduction on it. Without a majority (2 ranks) every rank that
    differs from rank 0 is named with rank 0."""
    nodes = nodes or {}
    rows = []  # step by step, the gradient first: a bad reduction shows there at its own step
    for i, probe in enumerate(probes):
        if grads and i < len(grads) and grads[i]:
            rows.append((i, "reduced gradient", grads[i]))
        if probe:
            rows.append((i, "probe loss", probe))
    for i, what, row in rows:
        groups = _groups(row, rel)
        if len(groups) == 1:
            continue
        ranked = sorted(groups, key=lambda k: -len(groups[k]))
        top = ranked[0]
        tie = len(groups[ranked[1]]) == len(groups[top])
        base = next(k for k in groups if 0 in groups[k]) if tie else top
        odd = sorted(r for k, ranks in groups.items() if k != base for r in ranks)
        other = odd[0]
        out = []
        for r in sorted(set(odd) | ({0} if tie else set())):
            where = f" on {nodes[r]}" if r in nodes else ""
            versus = other if r == 0 else base
            why = (f"no majority among {len(row)} ranks: rank {r}{where} disagrees with rank {versus}" if tie else
                   f"rank {r}{where} disagrees with {len(groups[top])} of {len(row)} ranks")
            out.append(Finding(RANKS, Status.FAIL, f"{why} on the {what} from step {i + 1} "
                               f"({row[r]:.7g} vs {row[versus]:.7g}): silent data corruption or a bad reduction",
                               f"rank {r}", {"first_bad_step": float(i + 1), "rank": float(r)}))
        return out
    steps = len(probes)
    return [Finding(RANKS, Status.PASS, f"{len(probes[0]) if probes else 0} ranks agree on the probe loss"
                    f"{' and the reduced gradient' if grads else ''} at all {steps} steps")]


def _groups(row: Sequence[float], rel: float) -> dict[int, list[int]]:
    """Ranks grouped by value (within ``rel`` of the group's first): {first rank: [ranks]}."""
    groups: dict[int, list[int]] = {}
    for r, v in enumerate(row):
        for k in groups:
            ref = row[k]
            if math.isfinite(v) and abs(v - ref) <= rel * max(abs(ref), 1e-12):
                groups[k].append(r)
                break
        else:
            groups[r] = [r]
    return groups


def judge_resume(resumed: dict[int, float], uninterrupted: dict[int, float], max_rel: float,
                 recovery_s: float | None, restart_step: int | None) -> Finding:
    """The resumed run's loss at every step after the restart against the uninterrupted run's:
    deviation under ``max_rel`` (relative); FAIL naming the first step over it, or steps it lacks."""
    metrics = {"recovery_s": round(recovery_s, 3)} if recovery_s is not None else {}
    if restart_step is not None:
        metrics["restart_step"] = float(restart_step)
    if not resumed:
        return Finding(RESUME, Status.FAIL, "the resumed run recorded no step", metrics=metrics)
    missing = sorted(set(uninterrupted) - set(resumed) - set(range(1, min(resumed))))
    if missing:
        return Finding(RESUME, Status.FAIL, f"the resumed run lacks step(s) {missing[0]}..{missing[-1]}", metrics=metrics)
    worst = 0.0
    for step in sorted(resumed):
        base = uninterrupted.get(step)
        if base is None:
            continue
        dev = abs(resumed[step] - base) / max(abs(base), 1e-12)
        if not dev <= max_rel:
            return Finding(RESUME, Status.FAIL, f"the resumed run deviates {100 * dev:.3g} % from the uninterrupted "
                           f"one at step {step} (limit {100 * max_rel:g} %)",
                           metrics={**metrics, "first_bad_step": float(step), "deviation_rel": dev})
        worst = max(worst, dev)
    took = f", recovered in {recovery_s:.1f} s" if recovery_s is not None else ""
    return Finding(RESUME, Status.PASS, f"resumed from the checkpoint of step {restart_step} and matched the "
                   f"uninterrupted run within {100 * worst:.2g} % (limit {100 * max_rel:g} %){took}",
                   metrics={**metrics, "deviation_rel": worst})


def judge_throughput(tokens_per_s: dict[str, Sequence[float]], ref: Figure | None, what: str,
                     warmup: int) -> list[Finding]:
    """Per GPU (rank) the median tokens/s of the steps after ``warmup`` against the reference's floor;
    one finding per component (``rank R``/its device). With a reference (PASS and FAIL) the metrics
    also carry ``tokens_per_s_ref``, ``tokens_per_s_floor`` and ``pct_of_reference`` (100 x measured /
    reference; left out for a reference of 0)."""
    out = []
    for component, series in sorted(tokens_per_s.items()):
        judged = list(series[warmup:]) or list(series)
        if not judged:
            continue
        value = median(judged)
        metrics = {"tokens_per_s": round(value, 1)}
        if ref is None or ref.floor is None:
            out.append(Finding(THROUGHPUT, Status.WARN, f"{value:.4g} tokens/s, not judged: no reference for {what}",
                               component, metrics))
            continue
        metrics.update(tokens_per_s_ref=float(ref.value), tokens_per_s_floor=round(ref.floor, 1))
        pct = ""
        if ref.value > 0:
            metrics["pct_of_reference"] = round(100 * value / ref.value, 2)
            pct = f", {metrics['pct_of_reference']:.3g} % of the reference"
        if value < ref.floor:
            out.append(Finding(THROUGHPUT, Status.FAIL, f"{value:.4g} tokens/s{pct}, below the floor {ref.floor:.4g} "
                               f"({what}: {ref.value:.4g}; {ref.source[:80]})", component, metrics))
        else:
            out.append(Finding(THROUGHPUT, Status.PASS, f"{value:.4g} tokens/s{pct} (floor {ref.floor:.4g}, {what})",
                               component, metrics))
    return out


def judge_activity(samples: dict[str, Sequence[float]], source: str, min_pct: float, spread_pct: float,
                   warmup_samples: int = 2) -> list[Finding]:
    """Per GPU the mean SM activity (``source``: ``dcgm_sm_active`` or ``nvml_utilization``, named in
    every message) at least ``min_pct``; the GPUs' means within ``spread_pct`` of each other. SKIP
    without samples (a CPU run, no NVML)."""
    means = {gpu: sum(v[warmup_samples:] or v) / len(v[warmup_samples:] or v) for gpu, v in samples.items() if v}
    label = {"dcgm_sm_active": "SM activity (DCGM field 1002)",
             "nvml_utilization": "GPU utilisation (NVML; DCGM profiling not available)"}.get(source, source)
    if not means:
        return [Finding(ACTIVITY, Status.SKIP, "no GPU activity sampled (a CPU run, or neither DCGM nor NVML answered)")]
    out = []
    for gpu, mean in sorted(means.items()):
        bad = mean < min_pct
        out.append(Finding(ACTIVITY, Status.FAIL if bad else Status.PASS,
                           f"{label} mean {mean:.1f} % ({'below' if bad else 'at least'} {min_pct:g} %)", gpu,
                           {"sm_activity_pct": round(mean, 2), "source_dcgm": float(source == "dcgm_sm_active")}))
    spread = max(means.values()) - min(means.values())
    if len(means) > 1:
        low = min(means, key=means.get)
        out.append(Finding(ACTIVITY, Status.FAIL if spread >= spread_pct else Status.PASS,
                           f"{label} spread {spread:.1f} points across {len(means)} GPUs (limit {spread_pct:g}; "
                           f"lowest {low})", None, {"sm_activity_spread_pct": round(spread, 2)}))
    return out


def judge_checkpoints(events: Sequence[dict]) -> Finding:
    """The checkpoints' write throughput (recorded, not judged: no reference exists for a site's shared
    filesystem); WARN when the run wrote none."""
    if not events:
        return Finding(CHECKPOINT, Status.WARN, "no checkpoint written (checkpoint_every above steps?)")
    total = sum(float(e.get("bytes", 0)) for e in events)
    secs = sum(float(e.get("seconds", 0)) for e in events)
    rate = total / secs / 1e6 if secs > 0 else 0.0
    return Finding(CHECKPOINT, Status.PASS, f"{len(events)} checkpoint(s) of {total / len(events) / 1e6:.3g} MB to "
                   f"the shared filesystem at {rate:.4g} MB/s", None,
                   {"checkpoint_mb_s": round(rate, 3), "checkpoint_mb": round(total / len(events) / 1e6, 3)})
