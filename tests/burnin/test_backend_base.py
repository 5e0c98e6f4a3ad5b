"""The burn-in backends' interface module: every implementation is built on it, and the host-only
defaults it gives say why an operation cannot run."""
from __future__ import annotations

import pytest

from healthcheck.burnin import backend_base, backend_cupy, backends


def test_every_backend_implements_the_one_interface():
    for cls in (backends.NumpyBackend, backends.TorchBackend, backend_cupy.CupyBackend):
        assert issubclass(cls, backend_base.Backend)
    assert backends.CupyBackend is backend_cupy.CupyBackend
    assert backends.BackendUnavailable is backend_base.BackendUnavailable
    assert backends.word_sum is backend_base.word_sum


def test_the_base_refuses_unknown_dtypes_and_device_memory():
    base = backend_base.Backend()
    assert base.device_dtype("bf16") == "bf16"
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        base.device_dtype("fp8")
    with pytest.raises(backend_base.BackendUnavailable, match="host memory only"):
        base.pinned_empty(16)
    with pytest.raises(NotImplementedError):
        base.devices()


def test_word_sum_sees_one_flipped_bit():
    np = pytest.importorskip("numpy")
    a = np.arange(1024, dtype=np.float32)
    b = a.copy()
    b.view(np.int32)[100] ^= 1
    assert backend_base.word_sum(a) != backend_base.word_sum(b)
    assert backend_base.DeviceInfo(3, "H100").component == "gpu3"
