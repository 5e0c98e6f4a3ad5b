"""HBM and PCIe bandwidth tests with data verification, the same for every backend.

- :func:`run_hbm_copy`: device-to-device copy of ``size_bytes`` on each device. Bandwidth counts the
  bytes read AND written, ``2 * size / time`` (the convention of cuda-samples' bandwidthTest and of
  the ``hbm_copy_gbps`` references), so it compares with the HBM datasheet figure.
- :func:`run_pcie`: host-to-device and device-to-host copies from/to pinned host memory,
  ``size / time`` per direction. Devices are measured one after the other, so each figure is that
  GPU's own link, not a share of a common uplink. The NumPy backend (the CPU, no device memory)
  gets results skipped "no device: host memory only" (its host-RAM copy is still measured and
  verified by ``run_hbm_copy``, so the code path runs everywhere).

Each figure is the best of ``repeats`` timed copies (each timed with ``time.perf_counter`` around a
copy and a synchronisation, after one untimed warm-up copy); the median is kept too. The copied
data is verified: the source holds a known pattern (a multiplicative hash of the word index, so no
two words are equal) and the destination's word sum (:func:`~healthcheck.burnin.backends.word_sum`,
the backend's exact integer checksum) must equal the pattern's, after the timed copies. A copy that
drops, zeroes or flips data fails (``corrupted``); blocks swapped in place would not (the sum is
position-independent), a failure mode no copy engine is known for.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from .backends import BUFFER_DTYPE, Backend, word_sum
from .gemm import pick_devices

NO_DEVICE = "no device: host memory only"
KINDS = ("hbm_copy", "h2d", "d2h")


@dataclass
class BandwidthResult:
    device: int
    name: str
    component: str
    backend: str
    kind: str  # "hbm_copy" | "h2d" | "d2h"
    size_bytes: int
    repeats: int = 0  # timed copies done
    gbps: float | None = None  # best of the repeats, GB/s (1e9 bytes/s)
    median_gbps: float | None = None
    corrupted: bool = False  # the copied data differed from the source
    detail: str | None = None  # what differed (expected / found checksums)
    skipped: str | None = None
    error: str | None = None


def pattern(words: int) -> Any:
    """int32 words, all different: the word index times Knuth's multiplicative hash constant."""
    import numpy as np  # noqa: PLC0415

    return (np.arange(words, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32).view(np.int32)


def _validate(size_bytes: int, repeats: int) -> int:
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes < 4:
        raise ValueError(f"bandwidth size_bytes must be an integer >= 4, got {size_bytes!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"bandwidth repeats must be an integer >= 1, got {repeats!r}")
    return size_bytes // 4


def _timed(backend: Backend, device: int, op: Callable[[], None], repeats: int) -> list[float]:
    op()  # warm-up
    backend.synchronize(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        op()
        backend.synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def _fill(r: BandwidthResult, times: list[float], moved_bytes: int) -> None:
    rates = [moved_bytes / t / 1e9 for t in times if t > 0]
    r.repeats = len(times)
    if rates:
        r.gbps, r.median_gbps = max(rates), statistics.median(rates)


def _verify(r: BandwidthResult, expected: int, found: int, where: str) -> None:
    if found != expected:
        r.corrupted = True
        r.detail = f"{where} checksum {found:#x}, expected {expected:#x}"


def run_hbm_copy(backend: Backend, devices: list[int] | None, *, size_bytes: int,
                 repeats: int) -> list[BandwidthResult]:
    words = _validate(size_bytes, repeats)
    moved = words * 4
    host = pattern(words)
    expected = word_sum(host)
    results = []
    for info in pick_devices(backend, devices):
        r = BandwidthResult(info.index, info.name, info.component, backend.name, "hbm_copy", moved)
        if backend.host_only:  # measured and verified all the same, but it is host RAM, not HBM
            r.skipped = NO_DEVICE
        results.append(r)
        try:
            dev = info.index
            src = backend.upload(dev, host)
            dst = backend.empty(dev, (words,), BUFFER_DTYPE)
            _fill(r, _timed(backend, dev, lambda: backend.copy(dev, dst, src), repeats), 2 * moved)
            found_src, found_dst = backend.scalars(dev, [backend.checksum(dev, src), backend.checksum(dev, dst)])
            _verify(r, expected, found_src, "source (after upload)")
            if not r.corrupted:
                _verify(r, expected, found_dst, "copy")
        except Exception as exc:  # one device failing must not stop the others
            r.error = f"{type(exc).__name__}: {exc}"
    return results


def run_pcie(backend: Backend, devices: list[int] | None, *, size_bytes: int,
             repeats: int) -> list[BandwidthResult]:
    words = _validate(size_bytes, repeats)
    moved = words * 4
    infos = pick_devices(backend, devices)
    results = []
    for info in infos:
        h2d = BandwidthResult(info.index, info.name, info.component, backend.name, "h2d", moved)
        d2h = BandwidthResult(info.index, info.name, info.component, backend.name, "d2h", moved)
        results += [h2d, d2h]
        if backend.host_only:
            h2d.skipped = d2h.skipped = NO_DEVICE
            continue
        _pcie_device(backend, info.index, words, repeats, h2d, d2h)
    return results


def _pcie_device(backend: Backend, dev: int, words: int, repeats: int,
                 h2d: BandwidthResult, d2h: BandwidthResult) -> None:
    current = h2d
    try:
        host_src = backend.pinned_empty(words)
        src_view = backend.host_view(host_src)
        src_view[:] = pattern(words)
        expected = word_sum(src_view)
        on_dev = backend.empty(dev, (words,), BUFFER_DTYPE)
        _fill(h2d, _timed(backend, dev, lambda: backend.host_to_device(dev, on_dev, host_src), repeats), words * 4)
        on_dev_sum = backend.scalars(dev, [backend.checksum(dev, on_dev)])[0]
        _verify(h2d, expected, on_dev_sum, "device copy")
        current = d2h
        host_dst = backend.pinned_empty(words)
        dst_view = backend.host_view(host_dst)
        dst_view[:] = 0
        _fill(d2h, _timed(backend, dev, lambda: backend.device_to_host(dev, host_dst, on_dev), repeats), words * 4)
        _verify(d2h, on_dev_sum, word_sum(dst_view), "host copy")  # what the device holds comes back
    except Exception as exc:
        current.error = f"{type(exc).__name__}: {exc}"
        if current is h2d:
            d2h.error = "not run: the host-to-device test failed"
