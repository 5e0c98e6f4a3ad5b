"""Judge the NIC phase of the burn-in (pure: measurements + line rates -> findings).

Check ``burnin.nic.loopback``, one finding per HCA port (component ``mlx5_0:1``): ``ib_write_bw`` with
server and client on the same port (:mod:`healthcheck.burnin.nic`), from the memory of the GPU nearest
the HCA where the perftest build and the node allow it, else from host memory (the message and the
``gpu_memory`` metric say which). Its bandwidth (Gb/s, the client's average at its message size) is
judged against ``fraction x line rate`` of the rail:

- no line rate known (no class expectation, the port reports none): PASS with the figure, "not judged";
- the run failed (no connection, a QP that did not reach RTR, a completion error, a deadline): FAIL
  with perftest's first error line;
- below the floor: FAIL; at or above: PASS.

Check ``burnin.nic.nccl``, one finding (component ``all_reduce@nic``): ``all_reduce_perf`` on every GPU
of the node with P2P, shared memory and NVLink SHARP disabled and the IB transport forced, so every step
of the ring goes through the NICs. Its bus bandwidth at the large sizes (GB/s) is judged against
``fraction x rail line rate / 8 x min(1, NICs / GPUs)``; a failed run, a ``#wrong`` value or an
out-of-bounds summary FAILs (:func:`healthcheck.burnin.judge_nccl.judge_run` wording); fewer than two
GPUs: SKIP (no ring to send through the NICs).

Either is SKIP, with the reason, where the node has no HCA with an active port, no perftest or no
nccl-tests; the phase never passes a node it did not measure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.model import Finding, Status

CHECK_LOOPBACK = "burnin.nic.loopback"
CHECK_NCCL = "burnin.nic.nccl"


@dataclass(frozen=True)
class LineRate:
    gbps: float
    source: str   # "class ib.per_port", "class ib.rate_gbps", "port rate"


@dataclass
class LoopbackRun:
    """One HCA port's loopback: what ran and what it gave (filled by nic.py, or by a test)."""

    device: str
    port: int
    gpu_memory: str | None = None      # the GPU's PCI address when its memory was used, else None (host)
    memory_note: str = ""              # why host memory ("perftest built without CUDA", "no GPU", ...)
    argv: list[str] = field(default_factory=list)
    value_gbps: float | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None         # not run, and why (port down, ...)
    duration_s: float = 0.0

    @property
    def component(self) -> str:
        return f"{self.device}:{self.port}"

    def to_dict(self) -> dict:
        return {"device": self.device, "port": self.port, "gpu_memory": self.gpu_memory,
                "memory_note": self.memory_note, "argv": list(self.argv), "value_gbps": self.value_gbps,
                "error": self.error, "warnings": list(self.warnings), "skipped": self.skipped,
                "duration_s": round(self.duration_s, 3)}


def _memory(run: LoopbackRun) -> str:
    if run.gpu_memory:
        return f"from GPU memory ({run.gpu_memory})"
    return f"from host memory ({run.memory_note})" if run.memory_note else "from host memory"


def judge_loopback(run: LoopbackRun, line: LineRate | None, fraction: float, source: str = "") -> Finding:
    """One HCA port's loopback against ``fraction`` of its rail's line rate (see the module docstring)."""
    comp = run.component
    if run.skipped:
        return Finding(CHECK_LOOPBACK, Status.SKIP, f"{comp}: {run.skipped}", comp)
    metrics: dict[str, float] = {"gpu_memory": 1.0 if run.gpu_memory else 0.0}
    if run.value_gbps is not None:
        metrics["bw_gbps"] = round(run.value_gbps, 3)
    if line is not None:
        metrics["line_rate_gbps"] = line.gbps
    memory = _memory(run)
    if run.value_gbps is None:
        return Finding(CHECK_LOOPBACK, Status.FAIL, f"{comp}: loopback ib_write_bw {memory} failed: "
                       f"{run.error or 'no result'}"[:300], comp, metrics)
    figure = f"loopback {run.value_gbps:.1f} Gb/s {memory}"
    if line is None:
        return Finding(CHECK_LOOPBACK, Status.PASS, f"{comp}: {figure}; no line rate known (set ib.rate_gbps "
                       "in the node class): not judged"[:300], comp, metrics)
    floor = fraction * line.gbps
    metrics["efficiency_pct"] = round(100.0 * run.value_gbps / line.gbps, 2)
    label = f"{fraction:.0%} of the {line.gbps:g} Gb/s line rate ({line.source})"
    if run.value_gbps < floor:
        why = f"{comp}: {figure}, below {label}: the HCA's PCIe link, its slot or NUMA placement"
        why += ", or the GPU-NIC path (GPUDirect)" if run.gpu_memory else ""
        return Finding(CHECK_LOOPBACK, Status.FAIL, why[:300], comp, metrics)
    tail = f" (error after the result: {run.error})" if run.error else ""
    return Finding(CHECK_LOOPBACK, Status.PASS, f"{comp}: {figure}, at least {label}{tail}"[:300], comp, metrics)


def nccl_floor_gbytes(line: LineRate, fraction: float, nics: int, gpus: int) -> float:
    """The bus-bandwidth floor of the NIC-only all_reduce, GB/s: one rail's line rate in bytes, scaled
    by the share of a NIC each GPU has, times ``fraction``."""
    share = min(1.0, nics / gpus) if gpus > 0 and nics > 0 else 1.0
    return fraction * line.gbps / 8.0 * share


def judge_nccl_nic(run, line: LineRate | None, fraction: float, nics: int, gpus: int,
                   large_bytes: int = 256 << 20) -> Finding:
    """The NIC-only all_reduce (an :class:`healthcheck.burnin.nccl_run.NcclRun`, or None when it could
    not be started: SKIP) against its floor (:func:`nccl_floor_gbytes`)."""
    comp = "all_reduce@nic"
    if run is None:
        return Finding(CHECK_NCCL, Status.SKIP, "NIC-only all_reduce not run", comp)
    if run.missing:
        return Finding(CHECK_NCCL, Status.SKIP, f"NIC-only all_reduce: {run.error}", comp)
    res = run.result
    metrics: dict[str, float] = {"gpus": float(gpus), "nics": float(nics)}
    busbw = None
    if res is not None and res.rows:
        busbw = res.busbw_at_large_sizes(min_bytes=large_bytes) or res.busbw_at_large_sizes()
    if busbw is not None:
        metrics["busbw_gbps"] = round(busbw, 3)
    errors = [e for e in (res.errors if res is not None else []) if not e.lower().lstrip("# ").startswith("out of bounds")]
    where = f"NIC-only all_reduce over {gpus} GPUs and {nics} NIC(s)"
    if errors:
        return Finding(CHECK_NCCL, Status.FAIL, f"{where} failed: {errors[0].strip()[:200]}", comp, metrics)
    if res is None or not res.rows:
        return Finding(CHECK_NCCL, Status.FAIL, f"{where}: {run.error or 'no results in the output'}"[:300],
                       comp, metrics)
    if res.wrong_total:
        metrics["wrong_values"] = float(res.wrong_total)
        return Finding(CHECK_NCCL, Status.FAIL, f"{where}: {res.wrong_total} wrong values (data corrupted on the "
                       "way through the NICs)", comp, metrics)
    if res.out_of_bounds or res.out_of_bounds_ok is False:
        return Finding(CHECK_NCCL, Status.FAIL, f"{where}: out-of-bounds values: {res.out_of_bounds}", comp, metrics)
    if run.error is not None:
        return Finding(CHECK_NCCL, Status.FAIL, f"{where}: {run.error}"[:300], comp, metrics)
    figure = f"busbw {busbw:.1f} GB/s" if busbw is not None else "no busbw"
    if line is None or busbw is None:
        return Finding(CHECK_NCCL, Status.PASS, f"{where}: {figure}; no line rate known: not judged", comp, metrics)
    floor = nccl_floor_gbytes(line, fraction, nics, gpus)
    metrics["floor_gbps"] = round(floor, 3)
    metrics["efficiency_pct"] = round(100.0 * busbw / (line.gbps / 8.0), 2)
    label = (f"{floor:.1f} GB/s ({fraction:.0%} of a {line.gbps:g} Gb/s rail"
             f"{f' x {nics}/{gpus} NICs per GPU' if 0 < nics < gpus else ''})")
    if busbw < floor:
        return Finding(CHECK_NCCL, Status.FAIL, f"{where}: {figure}, below {label}: a NIC, its PCIe or "
                       "GPUDirect path, or the leaf switch"[:300], comp, metrics)
    return Finding(CHECK_NCCL, Status.PASS, f"{where}: {figure}, at least {label}"[:300], comp, metrics)
