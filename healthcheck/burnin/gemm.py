"""GEMM stress with silent-data-corruption (SDC) verification, the same for every backend.

Inputs: A and B (n x n, standard normal, seeded) are generated ONCE on the host with NumPy and
rounded there to the dtype that runs (bf16 round-to-nearest-even, fp16, fp32), so every device, on
every node, multiplies the very same numbers and the host knows them exactly. Each device runs in its
own thread (cuBLAS / BLAS release the GIL) and repeats ``C = A @ B`` into one output buffer.

Iteration 0 is untimed (warm-up: cuBLAS heuristics, clocks) and is the reference product:

1. it is downloaded and checked against a float64 recomputation (on the host, from the rounded
   inputs) of a few sampled rows: ``reference_error`` = max over the rows of
   ``max_j |C_ij - R_ij| / max_j |R_ij|`` (inf when any element of the whole product is not
   finite), which must stay within :data:`TOLERANCE` for the dtype
   (bf16 2e-2: its output rounding alone is 2^-9 = 2e-3 of an element; fp16 5e-3: 2^-11 plus cuBLAS
   reduced-precision reductions; fp32 1e-4: true fp32 accumulates ~sqrt(n) * 6e-8; TF32 would fail);
2. its ``digest`` (blake2b-128 of the full downloaded bytes) identifies the product for the
   cross-device and cross-fleet comparisons (first 48 bits as ``digest_metric``, exact in a float).

Every timed iteration 1..N (every ``verify_every``-th) is checked against iteration 0 with the
backend's on-device ``checksum`` (the 64-bit wrapping sum of the output's bytes as 64-bit words): the
same kernel on the same inputs must give bitwise the same output, and any single flipped bit changes
the sum. Trade-off, documented: downloading and hashing every product (n=8192 bf16: 128 MiB, ~3 ms over
PCIe against a ~1.7 ms GEMM on an H200) would cut the stress by two thirds; the checksum reads C once
(0.04 ms on an H200, measured: the stress runs at 95-99 % of a bare matmul loop) and never leaves the
device (fetched in batches), but compensating multi-bit changes could in principle cancel in the sum.
To close that gap the last product is downloaded and hashed in full as well (a digest differing from
iteration 0's counts as a mismatch). Throughput: ``tflops = 2 n^3 iterations / elapsed / 1e12`` with
``elapsed`` taken by ``time.perf_counter`` around the timed iterations, after a final synchronisation.

``fault(device, iteration, out)`` is a test seam called right after each product (iteration 0 too)
with the backend's output array: it may corrupt it to simulate SDC. A device that raises records the
error in its result (tflops None) and does not stop the others.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .backends import DTYPES, Backend, DeviceInfo

TOLERANCE = {"bf16": 2e-2, "fp16": 5e-3, "fp32": 1e-4}
SAMPLE_ROWS = 8
FLUSH_EVERY = 32  # checksums fetched (one synchronisation) every this many verified iterations
_REF_CHUNK = 1024  # columns per float64 reference block (bounds host memory for large n)

Fault = Callable[[int, int, Any], None]


@dataclass
class GemmResult:
    device: int
    name: str
    component: str  # "gpu3" / "cpu0"
    backend: str
    dtype: str  # the dtype that ran (see Backend.device_dtype)
    n: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    iterations: int = 0  # timed products (iteration 0, the reference, excluded)
    elapsed_s: float = 0.0
    tflops: float | None = None  # None when the device raised
    digest: str | None = None  # blake2b-128 hex of iteration 0's output bytes
    digest_metric: int | None = None  # first 48 bits of the digest
    mismatches: int = 0  # verified iterations whose output differed from iteration 0's
    verified: int = 0  # iterations compared with iteration 0 (checksum; the last one also by digest)
    first_mismatch: int | None = None
    reference_error: float | None = None  # vs float64, relative to the row's largest element
    tolerance: float = 0.0
    errors: list[str] = field(default_factory=list)
    library: str = ""  # Backend.library(): part of the fleet key
    seed: int = 0  # the inputs' seed: part of the fleet key


def digest_of(host_array: Any) -> str:
    import numpy as np  # noqa: PLC0415

    return hashlib.blake2b(np.ascontiguousarray(host_array).tobytes(), digest_size=16).hexdigest()


def digest48(digest: str) -> int:
    """The first 48 bits of a hex digest as an int (< 2^53: exact as a float metric)."""
    return int(digest[:12], 16)


def round_to(host: Any, dtype: str) -> Any:
    """float32 ``host`` rounded to ``dtype`` and back (exactly what the device will hold)."""
    import numpy as np  # noqa: PLC0415

    a = np.ascontiguousarray(host, dtype=np.float32)
    if dtype == "fp16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "bf16":  # round to nearest even on the upper 16 bits (inputs are finite)
        bits = a.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    return a.copy()


def make_inputs(n: int, dtype: str, seed: int) -> tuple[Any, Any]:
    """The deterministic (A, B), float32 arrays holding values exactly representable in ``dtype``."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return round_to(a, dtype), round_to(b, dtype)


def sample_rows(n: int, seed: int) -> list[int]:
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed + 1)
    picked = rng.choice(n, size=min(n, SAMPLE_ROWS), replace=False).tolist()
    return sorted({0, n - 1, *picked})


def reference_rows(a: Any, b: Any, rows: list[int]) -> Any:
    """float64 ``(A @ B)[rows]``, computed in column blocks."""
    import numpy as np  # noqa: PLC0415

    ar = a[rows].astype(np.float64)
    out = np.empty((len(rows), b.shape[1]), dtype=np.float64)
    for j in range(0, b.shape[1], _REF_CHUNK):
        out[:, j:j + _REF_CHUNK] = ar @ b[:, j:j + _REF_CHUNK].astype(np.float64)
    return out


def relative_error(got_rows: Any, ref_rows: Any) -> float:
    """Max over rows of max_j |got - ref| / max_j |ref| (inf when the result is not finite)."""
    import numpy as np  # noqa: PLC0415

    got = np.asarray(got_rows, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    scale = np.maximum(np.max(np.abs(ref_rows), axis=1), np.finfo(np.float64).tiny)
    return float(np.max(np.max(np.abs(got - ref_rows), axis=1) / scale))


def _validate(n: int, duration_s: float, verify_every: int, dtype: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"GEMM size n must be an integer >= 2, got {n!r}")
    if not duration_s >= 0:  # also rejects NaN
        raise ValueError(f"GEMM duration_s must be >= 0, got {duration_s!r}")
    if isinstance(verify_every, bool) or not isinstance(verify_every, int) or verify_every < 1:
        raise ValueError(f"verify_every must be an integer >= 1, got {verify_every!r}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown GEMM dtype {dtype!r} (choose one of {', '.join(DTYPES)})")


def pick_devices(backend: Backend, devices: list[int] | None) -> list[DeviceInfo]:
    known = backend.devices()
    if devices is None:
        return known
    by_index = {d.index: d for d in known}
    missing = [i for i in devices if i not in by_index]
    if missing:
        have = ", ".join(str(d.index) for d in known) or "none"
        raise ValueError(f"no device {', '.join(map(str, missing))} on backend {backend.name} (have: {have})")
    return [by_index[i] for i in devices]


def run_gemm(backend: Backend, devices: list[int] | None, *, duration_s: float, n: int, dtype: str,
             seed: int = 1234, verify_every: int = 1, fault: Fault | None = None,
             max_iterations: int | None = None, min_iterations: int = 1) -> list[GemmResult]:
    """Run the verified GEMM on ``devices`` (None: all) concurrently for ``duration_s`` each (or
    ``max_iterations`` timed products, whichever comes first; at least ``min_iterations``)."""
    _validate(n, duration_s, verify_every, dtype)
    if max_iterations is not None and (isinstance(max_iterations, bool) or not isinstance(max_iterations, int)
                                       or max_iterations < 1):
        raise ValueError(f"max_iterations must be an integer >= 1 or None, got {max_iterations!r}")
    infos = pick_devices(backend, devices)
    run_dtype = backend.device_dtype(dtype)
    a, b = make_inputs(n, run_dtype, seed)
    rows = sample_rows(n, seed)
    ref = reference_rows(a, b, rows)
    library = backend.library()
    results = [GemmResult(d.index, d.name, d.component, backend.name, run_dtype, n, d.uuid, d.pci_bus_id,
                          tolerance=TOLERANCE[run_dtype], library=library, seed=seed) for d in infos]
    job = _Job(backend, a, b, rows, ref, run_dtype, duration_s, verify_every, fault,
               max_iterations, max(1, min_iterations))
    threads = [threading.Thread(target=job.run, args=(r,), name=f"gemm-{r.component}", daemon=True)
               for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@dataclass
class _Job:
    backend: Backend
    a: Any
    b: Any
    rows: list[int]
    ref: Any
    dtype: str
    duration_s: float
    verify_every: int
    fault: Fault | None
    max_iterations: int | None
    min_iterations: int

    def run(self, r: GemmResult) -> None:
        try:
            self._run(r)
        except Exception as exc:  # one device failing must not stop the others
            r.errors.append(f"{type(exc).__name__}: {exc}")
            r.tflops = None

    def _run(self, r: GemmResult) -> None:
        import numpy as np  # noqa: PLC0415

        be, dev, n = self.backend, r.device, r.n
        a = be.upload(dev, self.a, self.dtype)
        b = be.upload(dev, self.b, self.dtype)
        out = be.empty(dev, (n, n), self.dtype)
        # iteration 0: warm-up and reference product
        be.matmul(dev, a, b, out)
        if self.fault is not None:
            self.fault(dev, 0, out)
        first_sum = be.checksum(dev, out)
        be.synchronize(dev)
        host = be.download(dev, out)
        r.reference_error = relative_error(host[self.rows], self.ref)
        if not np.isfinite(host).all():  # the whole product, not only the sampled rows
            r.reference_error = float("inf")
        r.digest = digest_of(host)
        r.digest_metric = digest48(r.digest)
        expected = be.scalars(dev, [first_sum])[0]
        del host

        bad: set[int] = set()
        pending: list[tuple[int, Any]] = []

        def flush() -> None:
            values = be.scalars(dev, [v for _, v in pending])
            for (it, _), value in zip(pending, values):
                r.verified += 1
                if value != expected:
                    bad.add(it)
            pending.clear()
            r.mismatches, r.first_mismatch = len(bad), min(bad) if bad else None

        it = 0
        t0 = time.perf_counter()
        deadline = t0 + self.duration_s
        while True:
            it += 1
            be.matmul(dev, a, b, out)
            r.iterations = it  # kept when a later product raises
            if self.fault is not None:
                self.fault(dev, it, out)
            if it % self.verify_every == 0:
                pending.append((it, be.checksum(dev, out)))
                if len(pending) >= FLUSH_EVERY:
                    flush()
            if self.max_iterations is not None and it >= self.max_iterations:
                break
            if it >= self.min_iterations and time.perf_counter() >= deadline:
                break
        be.synchronize(dev)
        r.elapsed_s = time.perf_counter() - t0
        r.iterations = it
        flush()
        last = digest_of(be.download(dev, out))
        if it % self.verify_every:
            r.verified += 1  # the last product is compared by digest only
        if last != r.digest:
            bad.add(it)
        r.mismatches = len(bad)
        r.first_mismatch = min(bad) if bad else None
        r.tflops = 2.0 * n ** 3 * it / r.elapsed_s / 1e12 if r.elapsed_s > 0 else None


def plain_matmul_tflops(backend: Backend, device: int, *, n: int, dtype: str, duration_s: float,
                        seed: int = 1234, chunk: int = 8) -> tuple[float, float]:
    """The baseline ``run_gemm`` is measured against: a bare ``matmul`` loop (no verification) on the
    same inputs, in chunks of ``chunk`` products each timed after a synchronisation. Returns
    ``(best chunk, whole-loop average)`` in TFLOP/s."""
    _validate(n, duration_s, 1, dtype)
    run_dtype = backend.device_dtype(dtype)
    ha, hb = make_inputs(n, run_dtype, seed)
    a, b = backend.upload(device, ha, run_dtype), backend.upload(device, hb, run_dtype)
    out = backend.empty(device, (n, n), run_dtype)
    backend.matmul(device, a, b, out)
    backend.synchronize(device)
    flop = 2.0 * n ** 3 * chunk
    best, done = 0.0, 0
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(chunk):
            backend.matmul(device, a, b, out)
        backend.synchronize(device)
        t1 = time.perf_counter()
        done += 1
        if t1 > t0:
            best = max(best, flop / (t1 - t0) / 1e12)
        if t1 - start >= duration_s:
            return best, flop * done / (t1 - start) / 1e12
