"""The CuPy compute backend of the burn-in (interface: :mod:`healthcheck.burnin.backend_base`; selection:
:mod:`healthcheck.burnin.backends`): CUDA through CuPy when torch is not there; bf16 runs as fp16 (CuPy
has no bf16 matmul)."""
from __future__ import annotations

import os
from typing import Any

from .backend_base import BUFFER_DTYPE, DTYPES, Backend, BackendUnavailable, DeviceInfo, word_bytes


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self) -> None:
        # as TorchBackend: PCI bus order, the order of NVML's indices (telemetry), unless the user chose
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        try:
            import cupy  # noqa: PLC0415
            import cupyx  # noqa: PLC0415
            import numpy as np  # noqa: PLC0415
        except Exception as exc:
            raise BackendUnavailable(f"cupy: not importable ({type(exc).__name__}: {exc})") from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # CUDARuntimeError: no driver / no device
            raise BackendUnavailable(f"cupy: no CUDA device ({type(exc).__name__}: {exc})") from exc
        if count < 1:
            raise BackendUnavailable("cupy: no CUDA device")
        self.cp, self.cupyx, self.np = cupy, cupyx, np
        self._dtypes = {"fp16": np.float16, "fp32": np.float32, BUFFER_DTYPE: np.int32}

    def device_dtype(self, dtype: str) -> str:
        super().device_dtype(dtype)
        return "fp16" if dtype == "bf16" else dtype

    def library(self) -> str:
        try:
            runtime = self.cp.cuda.runtime.runtimeGetVersion()  # 12040 -> 12.4
            cuda = f"{runtime // 1000}.{runtime % 1000 // 10}"
        except Exception:  # noqa: BLE001 - the version is a label; the library still runs
            cuda = "unknown"
        return f"cupy {self.cp.__version__} cuda {cuda}"

    def devices(self) -> list[DeviceInfo]:
        out = []
        for i in range(self.cp.cuda.runtime.getDeviceCount()):
            props = self.cp.cuda.runtime.getDeviceProperties(i)
            name = props.get("name", b"")
            name = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
            pci = None
            if "pciBusID" in props:
                pci = f"{int(props.get('pciDomainID', 0)):04x}:{int(props['pciBusID']):02x}:" \
                      f"{int(props.get('pciDeviceID', 0)):02x}.0"
            raw = props.get("uuid")
            uuid = None
            if isinstance(raw, bytes) and len(raw) == 16:
                h = raw.hex()
                uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            out.append(DeviceInfo(i, name.strip("\x00 ") or f"cuda{i}", uuid, pci))
        return out

    def _dtype(self, dtype: str) -> Any:
        return self._dtypes[self.device_dtype(dtype) if dtype in DTYPES else dtype]

    def upload(self, device: int, host: Any, dtype: str | None = None) -> Any:
        with self.cp.cuda.Device(device):
            arr = self.cp.asarray(host)
            return arr if dtype is None else self.cp.ascontiguousarray(arr.astype(self._dtype(dtype)))

    def empty(self, device: int, shape: tuple[int, ...], dtype: str) -> Any:
        with self.cp.cuda.Device(device):
            return self.cp.empty(shape, dtype=self._dtype(dtype))

    def matmul(self, device: int, a: Any, b: Any, out: Any) -> None:
        with self.cp.cuda.Device(device):
            self.cp.matmul(a, b, out=out)

    def copy(self, device: int, dst: Any, src: Any) -> None:
        with self.cp.cuda.Device(device):
            self.cp.copyto(dst, src)

    def synchronize(self, device: int) -> None:
        self.cp.cuda.Device(device).synchronize()

    def download(self, device: int, arr: Any) -> Any:
        with self.cp.cuda.Device(device):
            return self.cp.asnumpy(arr)

    def checksum(self, device: int, arr: Any) -> Any:
        with self.cp.cuda.Device(device):
            words = arr.reshape(-1).view(self.np.dtype(f"i{word_bytes(arr.nbytes, arr.dtype.itemsize)}"))
            return words.sum(dtype=self.np.int64)

    def scalars(self, device: int, values: list[Any]) -> list[int]:
        if not values:
            return []
        with self.cp.cuda.Device(device):
            return [int(v) for v in self.cp.stack(values).get().tolist()]

    def pinned_empty(self, words: int) -> Any:
        return self.cupyx.empty_pinned((words,), dtype=self.np.int32)

    def host_view(self, host_buffer: Any) -> Any:
        return host_buffer

    def host_to_device(self, device: int, dst: Any, host_src: Any) -> None:
        with self.cp.cuda.Device(device):
            dst.set(host_src)

    def device_to_host(self, device: int, host_dst: Any, src: Any) -> None:
        with self.cp.cuda.Device(device):
            src.get(out=host_dst)


