"""The burn-in compute backends' interface: :class:`Backend`, :class:`DeviceInfo`, the dtype names,
:class:`BackendUnavailable` and :func:`word_sum` (the host-side checksum every backend must match).

The implementations (:mod:`backends`: NumPy, torch and the selection; :mod:`backend_cupy`: CuPy) import
this module; it imports none of them, so the selection imports every backend one way, without a circle.
See :mod:`backends` for the contract (dtypes, opaque arrays, the checksum).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DTYPES = ("bf16", "fp16", "fp32")
BUFFER_DTYPE = "i32"


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here (not importable, no device, unsupported operation)."""


@dataclass(frozen=True)
class DeviceInfo:
    index: int  # the backend's device index (CUDA ordinal; 0 for the CPU)
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None  # "0000:18:00.0": the key to NVML's index when orders differ
    kind: str = "gpu"  # "gpu" | "cpu"

    @property
    def component(self) -> str:
        return f"{self.kind}{self.index}"


def word_bytes(nbytes: int, itemsize: int) -> int:
    """The word :meth:`Backend.checksum` sums an array in: 8 bytes where the array's size allows (a
    native 64-bit sum, a quarter of the elements of bf16: on an H200, 0.04 ms for an n=8192 bf16 product
    against 0.36 ms summing its 16-bit elements into 64 bits: the stress lost 5 % of its rate, not 18 %),
    else its element's size."""
    return 8 if nbytes % 8 == 0 else itemsize


def word_sum(host_array: Any) -> int:
    """:meth:`Backend.checksum` computed by NumPy on a host array (same value for the same bits): the
    array's bytes as signed words of :func:`word_bytes`, summed modulo 2^64 (any one flipped bit
    changes a word by +-2^k, k < 64, so it changes the sum)."""
    import numpy as np  # noqa: PLC0415 - lazy on purpose

    arr = np.ascontiguousarray(host_array)
    words = arr.reshape(-1).view(np.dtype(f"i{word_bytes(arr.nbytes, arr.dtype.itemsize)}"))
    return int(words.sum(dtype=np.int64))


class Backend:
    """The interface (NumPy implements it directly; GPU backends override)."""

    name = "abstract"
    host_only = False  # True: no device memory (the CPU); PCIe tests are skipped
    fallback: tuple[str, ...] = ()  # "auto" fell back to this backend: why each GPU backend could not run

    def devices(self) -> list[DeviceInfo]:
        raise NotImplementedError

    def library(self) -> str:
        """The library stack that computes the products ("torch 2.5.1 cuda 12.4"): part of the fleet
        key of a GEMM digest, since another library version may pick other kernels (other bits)."""
        return self.name

    def device_dtype(self, dtype: str) -> str:
        """The dtype that actually runs for a requested one (reported in results)."""
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r} (choose one of {', '.join(DTYPES)})")
        return dtype

    def upload(self, device: int, host: Any, dtype: str | None = None) -> Any:
        raise NotImplementedError

    def empty(self, device: int, shape: tuple[int, ...], dtype: str) -> Any:
        raise NotImplementedError

    def matmul(self, device: int, a: Any, b: Any, out: Any) -> None:
        raise NotImplementedError

    def copy(self, device: int, dst: Any, src: Any) -> None:
        """Device-to-device copy on one device."""
        raise NotImplementedError

    def synchronize(self, device: int) -> None:
        raise NotImplementedError

    def download(self, device: int, arr: Any) -> Any:
        """A host NumPy copy; bf16 comes back as float32 (exact: bf16 is a subset of fp32)."""
        raise NotImplementedError

    def checksum(self, device: int, arr: Any) -> Any:
        raise NotImplementedError

    def scalars(self, device: int, values: list[Any]) -> list[int]:
        raise NotImplementedError

    def pinned_empty(self, words: int) -> Any:
        """A pinned (page-locked) host buffer of ``words`` int32."""
        raise BackendUnavailable(f"{self.name}: no device: host memory only")

    def host_view(self, host_buffer: Any) -> Any:
        """A NumPy view of a buffer from :meth:`pinned_empty` (writes go to the buffer)."""
        raise BackendUnavailable(f"{self.name}: no device: host memory only")

    def host_to_device(self, device: int, dst: Any, host_src: Any) -> None:
        raise BackendUnavailable(f"{self.name}: no device: host memory only")

    def device_to_host(self, device: int, host_dst: Any, src: Any) -> None:
        raise BackendUnavailable(f"{self.name}: no device: host memory only")


# ------------------------------------------------------------------------------------------ NumPy
