"""Compute backends for the burn-in (GEMM stress, HBM and PCIe copies): one small interface, three
implementations, so that the verification and accounting code in ``gemm.py`` / ``bandwidth.py`` is the
same whatever runs the kernels.

- ``torch``: PyTorch with CUDA (cuBLAS GEMM, bf16/fp16/fp32, pinned host memory).
- ``cupy``: CuPy with CUDA. CuPy has no bfloat16: a "bf16" request runs in fp16 (same tensor-core
  rate) and the result says "fp16".
- ``numpy``: the CPU (BLAS). One "device" ``cpu0``; NumPy has no bf16 and no BLAS fp16, so every dtype
  runs in fp32 and results say "fp32". No device memory: the PCIe test is skipped (``host_only``).

:func:`select_backend` picks one ("auto": torch if it sees a CUDA device, else CuPy if it does, else
NumPy). torch / cupy / numpy are imported only inside the backends, never at module import.
The interface is in :mod:`backend_base`, which this module and :mod:`backend_cupy` import.

Arrays are opaque to callers (a torch tensor, a CuPy or NumPy array). Host arrays handed to
``upload`` and returned by ``download`` / ``host_view`` are NumPy arrays. Dtype names: "bf16", "fp16",
"fp32" (GEMM) and "i32" (copy buffers).

``checksum`` is the 64-bit wrapping sum of the array's bytes read as signed 64-bit integers (where its
size is a multiple of 8 bytes; else as its 16- or 32-bit elements: ``backend_base.word_bytes``), left
on the device (no synchronisation; ``scalars`` fetches many at once). Any single flipped bit changes
it; it costs one read of the array with a native 64-bit reduction (0.04 ms for an n=8192 bf16 product
on an H200, where summing the 16-bit elements into 64 bits took 0.36 ms and cost the stress 18 % of its rate).
The same sum computed by NumPy on the host (:func:`word_sum`) is bit-for-bit comparable.
"""
from __future__ import annotations

import os
import platform
from typing import Any

from .backend_base import BUFFER_DTYPE, DTYPES, Backend, BackendUnavailable, DeviceInfo, word_bytes, word_sum
from .backend_cupy import CupyBackend

# The interface lives in backend_base; its names are importable from here as before.
__all__ = ["BUFFER_DTYPE", "DTYPES", "Backend", "BackendUnavailable", "CupyBackend", "DeviceInfo",
           "NumpyBackend", "TorchBackend", "cpu_model", "select_backend", "word_sum"]

def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else platform.processor(), else "cpu"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip().lower() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


class NumpyBackend(Backend):
    name = "numpy"
    host_only = True

    def __init__(self) -> None:
        try:
            import numpy as np  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - numpy is a dependency
            raise BackendUnavailable(f"numpy: not importable ({exc})") from exc
        self.np = np

    def library(self) -> str:
        return f"numpy {self.np.__version__}"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(0, cpu_model(), kind="cpu")]

    def device_dtype(self, dtype: str) -> str:
        super().device_dtype(dtype)
        return "fp32"

    def _np_dtype(self, dtype: str) -> Any:
        if dtype == BUFFER_DTYPE:
            return self.np.int32
        return self.np.float32 if dtype in DTYPES else self.np.dtype(dtype)

    def upload(self, device: int, host: Any, dtype: str | None = None) -> Any:
        if dtype is None:
            return self.np.array(host, copy=True, order="C")
        return self.np.array(host, dtype=self._np_dtype(dtype), copy=True, order="C")

    def empty(self, device: int, shape: tuple[int, ...], dtype: str) -> Any:
        return self.np.empty(shape, dtype=self._np_dtype(dtype))

    def matmul(self, device: int, a: Any, b: Any, out: Any) -> None:
        self.np.matmul(a, b, out=out)

    def copy(self, device: int, dst: Any, src: Any) -> None:
        self.np.copyto(dst, src)

    def synchronize(self, device: int) -> None:
        return None

    def download(self, device: int, arr: Any) -> Any:
        return self.np.array(arr, copy=True)

    def checksum(self, device: int, arr: Any) -> Any:
        return word_sum(arr)

    def scalars(self, device: int, values: list[Any]) -> list[int]:
        return [int(v) for v in values]


# ------------------------------------------------------------------------------------------ torch


class TorchBackend(Backend):
    name = "torch"

    def __init__(self) -> None:
        # CUDA's default order is "fastest first"; PCI bus order matches nvidia-smi / NVML indices.
        # Only effective before CUDA initialises in this process (set only when the user did not).
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        try:
            import torch  # noqa: PLC0415
        except Exception as exc:  # ImportError, or OSError from a broken CUDA install
            raise BackendUnavailable(f"torch: not importable ({type(exc).__name__}: {exc})") from exc
        try:
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        except Exception as exc:
            raise BackendUnavailable(f"torch: CUDA unusable ({type(exc).__name__}: {exc})") from exc
        if count < 1:
            raise BackendUnavailable("torch: no CUDA device (torch.cuda.is_available() is False)")
        self.torch = torch
        self._dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                        BUFFER_DTYPE: torch.int32}
        self._words = {torch.bfloat16: torch.int16, torch.float16: torch.int16,
                       torch.float32: torch.int32, torch.int32: torch.int32}

    def _dev(self, device: int) -> Any:
        return self.torch.device("cuda", device)

    def library(self) -> str:
        return f"torch {self.torch.__version__} cuda {self.torch.version.cuda}"

    def devices(self) -> list[DeviceInfo]:
        out = []
        for i in range(self.torch.cuda.device_count()):
            props = self.torch.cuda.get_device_properties(i)
            uuid = getattr(props, "uuid", None)
            uuid = None if uuid is None else (str(uuid) if str(uuid).startswith("GPU-") else f"GPU-{uuid}")
            bus = getattr(props, "pci_bus_id", None)
            pci = None
            if bus is not None:
                pci = (f"{int(getattr(props, 'pci_domain_id', 0)):04x}:{int(bus):02x}:"
                       f"{int(getattr(props, 'pci_device_id', 0)):02x}.0")
            out.append(DeviceInfo(i, str(props.name), uuid, pci))
        return out

    def upload(self, device: int, host: Any, dtype: str | None = None) -> Any:
        t = self.torch.from_numpy(host).to(self._dev(device))
        return t if dtype is None else t.to(self._dtypes[dtype]).contiguous()

    def empty(self, device: int, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.empty(shape, dtype=self._dtypes[dtype], device=self._dev(device))

    def matmul(self, device: int, a: Any, b: Any, out: Any) -> None:
        self.torch.matmul(a, b, out=out)

    def copy(self, device: int, dst: Any, src: Any) -> None:
        dst.copy_(src)

    def synchronize(self, device: int) -> None:
        self.torch.cuda.synchronize(self._dev(device))

    def download(self, device: int, arr: Any) -> Any:
        if arr.dtype == self.torch.bfloat16:
            arr = arr.float()
        return arr.cpu().numpy()

    def checksum(self, device: int, arr: Any) -> Any:
        words = arr.reshape(-1)
        if word_bytes(words.numel() * words.element_size(), words.element_size()) == 8:
            return words.view(self.torch.int64).sum()
        return words.view(self._words[arr.dtype]).sum(dtype=self.torch.int64)

    def scalars(self, device: int, values: list[Any]) -> list[int]:
        if not values:
            return []
        return [int(v) for v in self.torch.stack(values).cpu().tolist()]

    def pinned_empty(self, words: int) -> Any:
        return self.torch.empty(words, dtype=self.torch.int32, pin_memory=True)

    def host_view(self, host_buffer: Any) -> Any:
        return host_buffer.numpy()

    def host_to_device(self, device: int, dst: Any, host_src: Any) -> None:
        dst.copy_(host_src, non_blocking=True)

    def device_to_host(self, device: int, host_dst: Any, src: Any) -> None:
        host_dst.copy_(src, non_blocking=True)


_BACKENDS = {"torch": TorchBackend, "cupy": CupyBackend, "numpy": NumpyBackend}


def select_backend(name: str = "auto") -> Backend:
    """"auto": torch with a CUDA device, else CuPy with one, else NumPy on the CPU. An explicit
    "torch" | "cupy" | "numpy" raises :class:`BackendUnavailable` (saying why) when it cannot run."""
    if name == "auto":
        why = []
        for cls in (TorchBackend, CupyBackend):
            try:
                return cls()
            except BackendUnavailable as exc:
                why.append(str(exc))
        fallback = NumpyBackend()
        fallback.fallback = tuple(why)
        return fallback
    cls = _BACKENDS.get(name)
    if cls is None:
        raise BackendUnavailable(f"unknown backend {name!r} (choose auto, {', '.join(_BACKENDS)})")
    return cls()
