"""The torch backend's own code (uploads, bf16 downloads, on-device checksums, copies, pinned-style host
buffers) run on the CPU device, with the same GEMM verification and accounting as on a GPU. Only the
CUDA-specific lines (device selection, synchronisation, pinned memory) are swapped, in a subclass here;
the real CUDA path runs in tests/gpu/. Skipped where torch is not installed (CI installs the CPU build:
HEALTHCHECK_TEST_TORCH=1)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from healthcheck.burnin import backends  # noqa: E402
from healthcheck.burnin.bandwidth import run_hbm_copy, run_pcie  # noqa: E402
from healthcheck.burnin.gemm import run_gemm  # noqa: E402
from healthcheck.burnin.judge_compute import judge_bandwidth, judge_gemm  # noqa: E402
from healthcheck.core.model import Status  # noqa: E402


class CpuTorch(backends.TorchBackend):
    """TorchBackend on the CPU device: two 'devices' that are both the CPU."""

    def __init__(self) -> None:  # noqa: D107 - the CUDA checks of the parent are what we skip
        self.torch = torch
        self._dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                        backends.BUFFER_DTYPE: torch.int32}
        self._words = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
                       torch.int32: torch.int32}

    def _dev(self, device: int):
        return torch.device("cpu")

    def devices(self):
        return [backends.DeviceInfo(i, "torch-cpu", None, None) for i in range(2)]

    def synchronize(self, device: int) -> None:
        pass

    def pinned_empty(self, words: int):
        return torch.empty(words, dtype=torch.int32)  # no CUDA: no page-locked memory to ask for


def test_bf16_gemm_on_torch_is_verified_and_accounted():
    results = run_gemm(CpuTorch(), [0, 1], duration_s=0.3, n=96, dtype="bf16", seed=7)
    assert [r.errors for r in results] == [[], []]
    assert all(r.dtype == "bf16" and r.iterations >= 2 and r.mismatches == 0 for r in results)
    assert results[0].digest == results[1].digest  # same inputs, same kernel: bit-identical on both
    assert all(r.reference_error is not None and r.reference_error < r.tolerance for r in results)
    findings = judge_gemm(results, None)
    assert all(f.status is Status.PASS for f in findings if f.check == "burnin.gemm.verify"), findings


def test_silent_corruption_on_one_torch_device_is_caught_and_named():
    def flip(device, iteration, out):
        if device == 1 and iteration == 3:
            out.view(-1)[5] += 1.0  # one element wrong on one device, once

    results = run_gemm(CpuTorch(), [0, 1], duration_s=0.3, n=64, dtype="fp32", seed=3, fault=flip,
                       min_iterations=6)
    assert results[0].mismatches == 0 and results[1].mismatches >= 1
    # (only the verification: on a shared CPU the two "devices" TFLOPS may differ by more than 10 %)
    fails = [f for f in judge_gemm(results, None) if f.status is Status.FAIL and f.check == "burnin.gemm.verify"]
    assert fails and {f.component for f in fails} == {"gpu1"}, fails


def test_torch_copies_are_verified():
    backend = CpuTorch()
    results = run_hbm_copy(backend, [0], size_bytes=1 << 20, repeats=2) + \
        run_pcie(backend, [0], size_bytes=1 << 20, repeats=2)
    assert {r.kind for r in results} == {"hbm_copy", "h2d", "d2h"}
    assert all(r.gbps and r.gbps > 0 and not r.corrupted and r.error is None for r in results), results
    assert all(f.status is not Status.FAIL for f in judge_bandwidth(results, None))


@pytest.mark.parametrize("shape, dtype", [((8, 8), "bf16"), ((3, 3), "bf16"), ((5,), "fp32"), ((6,), "i32")])
def test_the_on_device_checksum_is_the_hosts_word_sum_and_sees_one_flipped_bit(shape, dtype):
    """64-bit words where the size is a multiple of 8 bytes (8x8 bf16, 6 int32), the element's size
    otherwise (3x3 bf16, 5 fp32): the same value as NumPy's word_sum of the same bytes."""
    np = pytest.importorskip("numpy")
    backend = CpuTorch()
    host = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape) * 1.5
    arr = backend.upload(0, host.astype(np.int32) if dtype == "i32" else host, dtype)
    bits = arr.view(-1).view(backend._words[arr.dtype])  # the bytes as integers (NumPy has no bf16)

    def on_device_and_host():
        return backend.scalars(0, [backend.checksum(0, arr)])[0], backends.word_sum(bits.numpy())

    device, host_sum = on_device_and_host()
    assert device == host_sum != 0
    bits[-1] ^= 1 << 3  # one bit of the last element
    after, host_after = on_device_and_host()
    assert after == host_after != device
