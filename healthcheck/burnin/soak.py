"""The soak phase: the verified GEMM in slices for a configured duration (hours), with the telemetry and
the error counters of every slice kept, so that degradation *inside* the run is seen (throughput
falling while the clocks hold, a GPU heating over time, counters growing, power capping appearing),
not only the end-of-run figures. The judging is :mod:`.judge_soak` (pure).

Each slice is one :func:`.gemm.run_gemm` of ``slice_s`` seconds on every device at once (so each
slice verifies its products against its own first one, and its first product's digest is compared
with the first slice's: a product that changes between slices is silent data corruption too). While a
slice runs, the existing :class:`.telemetry.Sampler` samples the GPUs (its own NVML session per slice,
period ``slice_s / 5``, at most 5 s) and its summary becomes the slice's point: hottest temperature,
mean power, median SM clock, clock event reasons. Before the first slice and after each one, the
cumulative error counters (ECC volatile, PCIe replay, NVLink error counters summed over the links)
are read through :func:`healthcheck.probes.nvml.probe_gpus` (or the ``read_counters`` seam).

Cost: every slice regenerates the inputs on the host and runs an untimed reference product (at
n = 8192 about 1-2 s); with the default 60 s slices that is a few per cent of the stress.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .gemm import run_gemm
from .judge_soak import SoakPoint, SoakSeries

ReadCounters = Callable[[], "tuple[dict[int, dict[str, int]], dict[int, float | None]]"]


@dataclass
class SoakRun:
    series: list[SoakSeries]
    slices: int = 0
    notes: list[str] = field(default_factory=list)  # counters or telemetry that could not be read


def nvml_counters(nvml: Any) -> tuple[dict[int, dict[str, int]], dict[int, float | None]]:
    """Per GPU index the cumulative error counters, and the slowdown temperature, from one NVML probe."""
    from ..probes.nvml import probe_gpus

    counters: dict[int, dict[str, int]] = {}
    slowdown: dict[int, float | None] = {}
    for g in probe_gpus(nvml):
        got: dict[str, int] = {}
        for name in ("ecc_uncorrected_volatile", "ecc_corrected_volatile", "pcie_replay_count"):
            value = getattr(g, name, None)
            if isinstance(value, int):
                got[name] = value
        for counter in ("replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors"):
            values = [getattr(link, counter) for link in g.nvlinks or () if getattr(link, counter) is not None]
            if values:
                got[f"nvlink_{counter}"] = int(sum(values))
        counters[g.index] = got
        slowdown[g.index] = g.temp_slowdown_c
    return counters, slowdown


def run_soak(backend: Any, indices: list[int], *, duration_s: float, slice_s: float, n: int, dtype: str,
             seed: int = 1234, nvml: Any = None, read_counters: ReadCounters | None = None,
             on_slice: Callable[[int], None] | None = None, clock: Callable[[], float] = time.monotonic) -> SoakRun:
    """Slices of ``slice_s`` until ``duration_s`` has passed (at least one). ``nvml``: the pynvml module
    (or a fake) for the telemetry, None for none; ``read_counters``: the counters' source (default: an
    NVML probe when ``nvml`` is given); ``on_slice(k)``: called after slice ``k`` (1-based) is recorded."""
    if not (duration_s > 0 and slice_s > 0):  # also rejects NaN
        raise ValueError(f"soak duration_s and slice_s must be > 0, got {duration_s!r} and {slice_s!r}")
    if read_counters is None and nvml is not None:
        read_counters = lambda: nvml_counters(nvml)  # noqa: E731
    run = SoakRun(series=[])
    by_index: dict[int, SoakSeries] = {}
    first_digest: dict[int, str | None] = {}

    def counters() -> tuple[dict[int, dict[str, int]], dict[int, float | None]]:
        if read_counters is None:
            return {}, {}
        try:
            return read_counters()
        except Exception as exc:  # noqa: BLE001 - a probe failing costs that point's counters, not the soak
            note = f"error counters not read: {type(exc).__name__}: {exc}"[:200]
            if note not in run.notes:
                run.notes.append(note)
            return {}, {}

    before, slowdown = counters()
    t0 = clock()
    k = 0
    while True:
        k += 1
        remaining = duration_s - (clock() - t0)
        if k > 1 and remaining <= 0:
            break
        length = min(slice_s, max(remaining, 0.0)) if k > 1 else min(slice_s, duration_s)
        summary: dict[int, Any] = {}
        if nvml is not None:
            from .telemetry import Sampler

            with Sampler(nvml, indices, period_s=min(5.0, max(slice_s / 5, 0.05))) as sampler:
                results = run_gemm(backend, indices, duration_s=length, n=n, dtype=dtype, seed=seed)
            summary = sampler.summary()
        else:
            results = run_gemm(backend, indices, duration_s=length, n=n, dtype=dtype, seed=seed)
        t = clock() - t0
        after, more_slowdown = counters()
        for idx, temp in more_slowdown.items():
            slowdown.setdefault(idx, temp)
        for r in results:
            s = by_index.get(r.device)
            if s is None:
                start = SoakPoint(0.0, counters=dict(before.get(r.device, {})))
                s = by_index[r.device] = SoakSeries(r.component, [start], slowdown.get(r.device))
                run.series.append(s)
                first_digest[r.device] = r.digest
            tel = summary.get(r.device)
            s.points.append(SoakPoint(
                t_s=max(t, s.points[-1].t_s + 1e-6), tflops=r.tflops,
                temp_c=getattr(tel, "temp_max_c", None), power_w=getattr(tel, "power_mean_w", None),
                sm_clock_mhz=getattr(tel, "sm_clock_median_mhz", None),
                reasons=dict(tel.reasons) if tel is not None and tel.reason_samples else None,
                counters=dict(after.get(r.device, {})), problem=_problem(r, first_digest[r.device])))
            if s.slowdown_c is None:
                s.slowdown_c = slowdown.get(r.device)
        run.slices = k
        if on_slice is not None:
            on_slice(k)
    return run


def _problem(r: Any, first: str | None) -> str | None:
    if r.errors:
        return "; ".join(r.errors)[:200]
    if r.mismatches:
        return f"{r.mismatches} product(s) differed from the slice's first (first at iteration {r.first_mismatch})"
    if r.reference_error is not None and not r.reference_error <= r.tolerance:
        return f"first product off the float64 reference by {r.reference_error:.3g} (tolerance {r.tolerance:g})"
    if first is not None and r.digest is not None and r.digest != first:
        return f"product digest {r.digest[:12]} differs from the first slice's {first[:12]}"
    return None


def record(run: SoakRun) -> dict[str, Any]:
    """The soak's series, compact (a list per field), for the node's record (history, report)."""
    out: dict[str, Any] = {"slices": run.slices, "notes": list(run.notes), "devices": {}}
    for s in run.series:
        pts = s.points
        out["devices"][s.component] = {
            "t_s": [round(p.t_s, 1) for p in pts], "tflops": [p.tflops for p in pts],
            "temp_c": [p.temp_c for p in pts], "power_w": [p.power_w for p in pts],
            "sm_clock_mhz": [p.sm_clock_mhz for p in pts], "slowdown_c": s.slowdown_c,
            "counters": [p.counters for p in pts], "problems": [p.problem for p in pts if p.problem]}
    return out


def phase(ctx: Any, backend: Any, devices: list[Any], nvml: Any) -> list[Any]:
    """The node phase (called by node_run): run, keep the series in the record, judge."""
    from ..core.model import Finding, Status
    from .judge_soak import judge_soak

    s = ctx.settings
    numpy = backend.name == "numpy"
    run = run_soak(backend, [d.index for d in devices], duration_s=s.soak_duration_s, slice_s=s.soak_sample_s,
                   n=min(s.gemm_n, 512) if numpy else s.gemm_n, dtype="fp32" if numpy else s.gemm_dtype,
                   seed=s.seed, nvml=nvml)
    ctx.extra["soak"] = record(run)
    findings = judge_soak(run.series)
    if nvml is None:
        findings.append(Finding("burnin.soak.telemetry", Status.SKIP,
                                "no NVML on this node: throughput trend only (no clocks, temperatures, counters)"))
    for note in run.notes:
        findings.append(Finding("burnin.soak.telemetry", Status.WARN, note))
    return findings
