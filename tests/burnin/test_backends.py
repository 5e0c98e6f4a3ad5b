"""Backends: selection (auto / explicit / unavailable), the NumPy backend, the word-sum checksum."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.burnin import backends
from healthcheck.burnin.backends import (BackendUnavailable, DeviceInfo, NumpyBackend, cpu_model,
                                         select_backend, word_sum)


@pytest.fixture
def no_gpu_libs(monkeypatch):
    """torch and cupy not importable (None in sys.modules makes `import` raise ImportError)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setitem(sys.modules, "cupyx", None)


def fake_torch(available: bool, count: int = 0) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: available, device_count=lambda: count)
    return torch


def test_auto_falls_back_to_numpy_without_gpu_libraries(no_gpu_libs):
    backend = select_backend("auto")
    assert isinstance(backend, NumpyBackend)
    assert backend.name == "numpy" and backend.host_only is True


def test_auto_skips_torch_without_a_cuda_device(no_gpu_libs, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch(False))
    assert select_backend().name == "numpy"


@pytest.mark.parametrize("name, message", [("torch", "torch: not importable"), ("cupy", "cupy: not importable")])
def test_explicit_backend_unavailable_says_why(no_gpu_libs, name, message):
    with pytest.raises(BackendUnavailable, match=message):
        select_backend(name)


def test_explicit_torch_without_cuda_device(no_gpu_libs, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch(False))
    with pytest.raises(BackendUnavailable, match=r"torch: no CUDA device \(torch.cuda.is_available\(\) is False\)"):
        select_backend("torch")


def test_explicit_torch_whose_cuda_query_raises(no_gpu_libs, monkeypatch):
    torch = fake_torch(True)
    torch.cuda.device_count = lambda: (_ for _ in ()).throw(RuntimeError("CUDA driver version is insufficient"))
    monkeypatch.setitem(sys.modules, "torch", torch)
    with pytest.raises(BackendUnavailable, match="torch: CUDA unusable .*RuntimeError: CUDA driver version"):
        select_backend("torch")


def test_unknown_backend_name():
    with pytest.raises(BackendUnavailable, match=r"unknown backend 'tpu' \(choose auto, torch, cupy, numpy\)"):
        select_backend("tpu")


def test_numpy_device_is_the_cpu():
    (dev,) = NumpyBackend().devices()
    assert dev == DeviceInfo(0, cpu_model(), None, None, "cpu")
    assert dev.component == "cpu0"
    assert dev.name and dev.name == dev.name.strip()


def test_cpu_model_reads_proc_cpuinfo_model_name(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(info if path == "/proc/cpuinfo" else path,
                                                                         *a, **k))
    assert cpu_model() == "AMD EPYC 9654 96-Core Processor"


def test_cpu_model_without_proc(monkeypatch):
    def refuse(*_a, **_k):
        raise FileNotFoundError("/proc/cpuinfo")

    monkeypatch.setattr("builtins.open", refuse)
    monkeypatch.setattr(backends.platform, "processor", lambda: "")
    assert cpu_model() == "cpu"
    monkeypatch.setattr(backends.platform, "processor", lambda: "x86_64")
    assert cpu_model() == "x86_64"


@pytest.mark.parametrize("requested", ["bf16", "fp16", "fp32"])
def test_numpy_runs_everything_in_fp32_and_says_so(requested):
    assert NumpyBackend().device_dtype(requested) == "fp32"


def test_unknown_dtype():
    with pytest.raises(ValueError, match=r"unknown dtype 'int8' \(choose one of bf16, fp16, fp32\)"):
        NumpyBackend().device_dtype("int8")


def test_numpy_primitives():
    be = NumpyBackend()
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = be.upload(0, host, "bf16")
    assert a.dtype == np.float32 and a is not host and np.array_equal(a, host)
    b = be.upload(0, np.ones((3, 2), dtype=np.float32), "fp32")
    out = be.empty(0, (2, 2), "fp32")
    be.matmul(0, a, b, out)
    be.synchronize(0)
    assert be.download(0, out).tolist() == [[3.0, 3.0], [12.0, 12.0]]
    buf = be.upload(0, np.array([1, -2, 7], dtype=np.int32))
    dst = be.empty(0, (3,), "i32")
    be.copy(0, dst, buf)
    assert dst.tolist() == [1, -2, 7]
    assert be.scalars(0, [be.checksum(0, dst), be.checksum(0, buf)]) == [6, 6]


def test_numpy_has_no_pinned_memory():
    be = NumpyBackend()
    for call in (lambda: be.pinned_empty(4), lambda: be.host_view(None),
                 lambda: be.host_to_device(0, None, None), lambda: be.device_to_host(0, None, None)):
        with pytest.raises(BackendUnavailable, match="numpy: no device: host memory only"):
            call()


def test_word_sum_reads_the_bit_pattern():
    # 1.0f is 0x3F800000; -0.0f is 0x80000000 (as int32: -2**31); 0.0 and -0.0 differ
    assert word_sum(np.array([1.0], dtype=np.float32)) == 0x3F800000
    assert word_sum(np.array([-0.0], dtype=np.float32)) == -(2 ** 31)
    assert word_sum(np.array([0.0], dtype=np.float32)) == 0
    assert word_sum(np.array([1.0, 1.0], dtype=np.float16)) == 2 * 0x3C00
    # a size that is a multiple of 8 bytes is summed as 64-bit words (little-endian here): two 32-bit
    # ones make one word, 1.0f in its low half
    assert word_sum(np.array([1.0, 0.0], dtype=np.float32)) == 0x3F800000
    assert word_sum(np.array([0.0, 1.0], dtype=np.float32)) == 0x3F800000 << 32
    assert word_sum(np.array([1.0] * 4, dtype=np.float16)) == 0x3C00_3C00_3C00_3C00
    # wraps modulo 2**64 exactly as the device sums do (int64 accumulation)
    assert word_sum(np.full(4, 2 ** 62, dtype=np.int64)) == 0
    big = np.full(8, 2 ** 31 - 1, dtype=np.int32)
    assert word_sum(big) == (4 * 0x7FFFFFFF_7FFFFFFF + 2 ** 63) % 2 ** 64 - 2 ** 63
    assert word_sum(np.full(3, 2 ** 31 - 1, dtype=np.int32)) == 3 * (2 ** 31 - 1)  # 12 bytes: 32-bit words


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=1, max_size=64), st.data())
def test_any_single_bit_flip_changes_the_checksum(words, data):
    arr = np.array(words, dtype=np.int32)
    before = word_sum(arr)
    pos = data.draw(st.integers(0, len(words) - 1))
    bit = data.draw(st.integers(0, 31))
    arr.view(np.uint32)[pos] ^= np.uint32(1 << bit)
    assert word_sum(arr) != before
