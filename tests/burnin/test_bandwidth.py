"""HBM / PCIe copies: figures, verification of the copied data, skips, device isolation.

:class:`FakeDevice` is the NumPy backend pretending to have device memory (pinned host buffers are
plain arrays), so the PCIe path runs on the CPU; subclasses corrupt or fail one copy.
"""
from __future__ import annotations

import numpy as np
import pytest

from healthcheck.burnin.backends import DeviceInfo, NumpyBackend, word_sum
from healthcheck.burnin.bandwidth import NO_DEVICE, pattern, run_hbm_copy, run_pcie

SIZE = 1 << 20


class FakeDevice(NumpyBackend):
    host_only = False

    def __init__(self, count: int = 2) -> None:
        super().__init__()
        self.count = count

    def devices(self):
        return [DeviceInfo(i, "Fake GPU", f"GPU-{i:08d}", f"0000:{0x18 + i:02x}:00.0") for i in range(self.count)]

    def pinned_empty(self, words):
        return np.empty(words, dtype=np.int32)

    def host_view(self, host_buffer):
        return host_buffer

    def host_to_device(self, device, dst, host_src):
        np.copyto(dst, host_src)

    def device_to_host(self, device, host_dst, src):
        np.copyto(host_dst, src)


class CorruptingCopy(FakeDevice):
    """Device 1's copy engine flips one bit of word 7."""

    def copy(self, device, dst, src):
        super().copy(device, dst, src)
        if device == 1:
            dst.view(np.uint32)[7] ^= np.uint32(1 << 30)


class LossyDownload(FakeDevice):
    def device_to_host(self, device, host_dst, src):
        super().device_to_host(device, host_dst, src)
        host_dst[: len(host_dst) // 2] = 0  # half the transfer never lands


class BrokenUpload(FakeDevice):
    def host_to_device(self, device, dst, host_src):
        if device == 0:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        super().host_to_device(device, dst, host_src)


def test_pattern_words_all_differ():
    words = pattern(4096)
    assert words.dtype == np.int32 and len(set(words.tolist())) == 4096
    assert words[0] == 0 and words[1] == np.uint32(2654435761).view(np.int32)


def test_hbm_copy_figures_and_verification():
    results = run_hbm_copy(FakeDevice(), None, size_bytes=SIZE, repeats=4)
    assert [(r.component, r.kind, r.backend) for r in results] == [("gpu0", "hbm_copy", "numpy"),
                                                                  ("gpu1", "hbm_copy", "numpy")]
    for r in results:
        assert (r.size_bytes, r.repeats, r.corrupted, r.error, r.skipped) == (SIZE, 4, False, None, None)
        assert r.gbps >= r.median_gbps > 0


def test_hbm_copy_on_the_cpu_is_measured_but_skipped():
    (r,) = run_hbm_copy(NumpyBackend(), None, size_bytes=SIZE, repeats=2)
    assert r.component == "cpu0" and r.skipped == NO_DEVICE and r.gbps > 0 and not r.corrupted


def test_a_corrupting_copy_is_caught():
    results = run_hbm_copy(CorruptingCopy(), None, size_bytes=SIZE, repeats=2)
    assert [r.corrupted for r in results] == [False, True]
    expected = word_sum(pattern(SIZE // 4))
    corrupted = pattern(SIZE // 4)
    corrupted.view(np.uint32)[7] ^= np.uint32(1 << 30)
    found = word_sum(corrupted)
    assert found != expected
    assert results[1].detail == f"copy checksum {found:#x}, expected {expected:#x}"
    assert results[1].gbps > 0  # the figure is kept, the verdict comes from the corruption


def test_size_rounds_down_to_whole_words():
    (r,) = run_hbm_copy(NumpyBackend(), None, size_bytes=1001, repeats=1)
    assert r.size_bytes == 1000


def test_pcie_on_the_cpu_is_skipped():
    results = run_pcie(NumpyBackend(), None, size_bytes=SIZE, repeats=2)
    assert [(r.kind, r.skipped, r.gbps) for r in results] == [("h2d", NO_DEVICE, None), ("d2h", NO_DEVICE, None)]


def test_pcie_both_directions_verified():
    results = run_pcie(FakeDevice(), None, size_bytes=SIZE, repeats=3)
    assert [(r.component, r.kind) for r in results] == [("gpu0", "h2d"), ("gpu0", "d2h"), ("gpu1", "h2d"),
                                                        ("gpu1", "d2h")]
    for r in results:
        assert (r.repeats, r.corrupted, r.error, r.skipped) == (3, False, None, None)
        assert r.gbps >= r.median_gbps > 0


def test_pcie_lossy_download_is_caught():
    results = run_pcie(LossyDownload(1), None, size_bytes=SIZE, repeats=2)
    h2d, d2h = results
    assert not h2d.corrupted and d2h.corrupted
    assert d2h.detail.startswith("host copy checksum ")


def test_pcie_failing_device_does_not_stop_the_others():
    results = run_pcie(BrokenUpload(), None, size_bytes=SIZE, repeats=2)
    assert results[0].error == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert results[1].error == "not run: the host-to-device test failed"
    assert results[2].error is None and results[3].error is None and results[3].gbps > 0


def test_hbm_failing_device_does_not_stop_the_others():
    class NoMemory(FakeDevice):
        def empty(self, device, shape, dtype):
            if device == 0:
                raise MemoryError("out of memory")
            return super().empty(device, shape, dtype)
    results = run_hbm_copy(NoMemory(), None, size_bytes=SIZE, repeats=1)
    assert results[0].error == "MemoryError: out of memory" and results[0].gbps is None
    assert results[1].error is None and results[1].gbps > 0


def test_selected_devices_only():
    results = run_hbm_copy(FakeDevice(3), [2], size_bytes=SIZE, repeats=1)
    assert [r.component for r in results] == ["gpu2"]


@pytest.mark.parametrize("kwargs, message", [
    ({"size_bytes": 3}, "bandwidth size_bytes must be an integer >= 4, got 3"),
    ({"size_bytes": 1.5e6}, "bandwidth size_bytes must be an integer >= 4, got 1500000.0"),
    ({"repeats": 0}, "bandwidth repeats must be an integer >= 1, got 0"),
])
@pytest.mark.parametrize("run", [run_hbm_copy, run_pcie])
def test_bad_arguments(run, kwargs, message):
    args = {"size_bytes": SIZE, "repeats": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        run(NumpyBackend(), None, **args)
