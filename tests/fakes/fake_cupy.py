"""A fake ``cupy`` / ``cupyx`` pair for tests, faked at the module boundary and backed by NumPy.

It covers exactly the API :class:`healthcheck.burnin.backends.CupyBackend` uses:
``cupy.cuda.runtime.getDeviceCount`` / ``getDeviceProperties`` / ``runtimeGetVersion`` /
``CUDARuntimeError``, ``cupy.cuda.Device(i)`` (a context manager, ``.synchronize()``, ``.id``),
``asarray``, ``ascontiguousarray``, ``empty``, ``matmul(out=)``, ``copyto``, ``asnumpy``, ``stack``,
the device array's ``get(out=)`` / ``set(host)`` / ``astype`` / ``reshape`` / ``view`` / ``sum``,
``cupyx.empty_pinned`` and ``cupy.__version__``. Anything else is absent (AttributeError).

Faithful where the burn-in could go wrong:

- Device arrays are :class:`DeviceArray` (an ndarray subclass) tagged with their device. The fake's
  functions refuse host arrays (TypeError, as CuPy does) and arrays of another device than the
  current one (ValueError), and NumPy ufuncs / functions applied to a device array raise TypeError
  (stricter than CuPy, which would dispatch them: host code must download first).
- The current device is per thread, like CuPy's ``Device`` context (run_gemm drives each device from
  its own thread).
- ``set`` / ``get(out=)`` check the host array's type, dtype and shape like CuPy's.
- No GPU: ``getDeviceCount`` raises ``CUDARuntimeError`` (cudaErrorNoDevice), as CuPy does when the
  driver finds none (``FakeCupy([], no_device_error=False)`` answers 0 instead).
- fp16 products accumulate in fp32 and round once to the output (cuBLAS's default compute type).

Faults: ``fault(device, call, out)`` runs after every ``matmul`` (``call`` counts that device's
products from 0; ``out`` is the output's writable host memory), e.g. :func:`flip_bit` to simulate
silent data corruption; ``copy_fault(kind, device, dst)`` after every ``copyto`` / ``set`` / ``get``.
Install with :func:`install` (``monkeypatch.setitem(sys.modules, ...)``).
"""
from __future__ import annotations

import sys
import threading
import types
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Fault = Callable[[int, int, np.ndarray], None]
CopyFault = Callable[[str, int, np.ndarray], None]


class CUDARuntimeError(RuntimeError):
    """Stand-in for ``cupy_backends.cuda.api.runtime.CUDARuntimeError``."""


@dataclass
class FakeGpu:
    """What ``getDeviceProperties`` reports for one device (None: the key is absent)."""

    name: bytes | None = b"NVIDIA H100 80GB HBM3"
    uuid: bytes | None = bytes(16)
    pci: tuple[int, int, int] | None = (0, 0x18, 0)  # pciDomainID, pciBusID, pciDeviceID
    total_memory: int = 81_559 * 1024 * 1024


def h100_node(n: int = 8, name: bytes = b"NVIDIA H100 80GB HBM3") -> list[FakeGpu]:
    """n GPUs with the same bus addresses and UUIDs as ``fake_pynvml.h100_node``."""
    buses = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
    return [FakeGpu(name=name, uuid=bytes.fromhex(f"4f6c2a1e7b3d4c559e2a{i:012x}"),
                    pci=(0, buses[i] if i < len(buses) else 0xE0 + i, 0)) for i in range(n)]


def flip_bit(device: int, from_call: int, bit: int = 0) -> Fault:
    """A fault flipping ``bit`` of the output's last word on ``device`` from its ``from_call``-th product."""
    def fault(dev: int, call: int, out: np.ndarray) -> None:
        if dev == device and call >= from_call:
            words = out.reshape(-1).view(np.dtype(f"u{out.dtype.itemsize}"))
            words[-1] ^= np.array(1 << bit, dtype=words.dtype)
    return fault


class DeviceArray(np.ndarray):
    """A "device" array: NumPy memory tagged with the device that owns it."""

    _fake: "FakeCupy | None" = None
    _device_id: int = 0

    def __array_finalize__(self, obj: Any) -> None:
        if obj is not None:
            self._fake = getattr(obj, "_fake", None)
            self._device_id = getattr(obj, "_device_id", 0)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        raise TypeError(f"fake cupy: NumPy {ufunc.__name__} on a device array (download it first)")

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        raise TypeError(f"fake cupy: numpy.{func.__name__} on a device array (download it first)")

    @property
    def device(self) -> "Device":
        return Device(self._require_fake(), self._device_id)

    def _require_fake(self) -> "FakeCupy":
        if self._fake is None:
            raise RuntimeError("fake cupy: a DeviceArray made outside the fake")
        return self._fake

    def _host(self) -> np.ndarray:
        return self.view(np.ndarray)

    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> "DeviceArray":
        fake = self._require_fake()
        fake._on_current(self, where="sum")
        if out is not None:
            raise NotImplementedError("fake cupy: sum(out=) is not faked")
        value = np.asarray(self._host().sum(axis=axis, dtype=dtype, keepdims=keepdims))
        return fake._wrap(value, self._device_id)

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None,
            blocking: bool = True) -> np.ndarray:
        fake = self._require_fake()
        if out is None:
            return np.array(self._host(), order=order, copy=True)
        if not isinstance(out, np.ndarray) or isinstance(out, DeviceArray):
            raise TypeError("Only numpy.ndarray can be obtained from cupy.ndarray")
        if out.dtype != self.dtype:
            raise TypeError(f"{out.dtype} array cannot be obtained from {self.dtype} array")
        if out.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {out.shape}")
        np.copyto(out, self._host())
        fake._copied("get", self._device_id, out)
        return out

    def set(self, arr: Any, stream: Any = None) -> None:
        fake = self._require_fake()
        if not isinstance(arr, np.ndarray) or isinstance(arr, DeviceArray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        if not self.flags.c_contiguous:
            raise RuntimeError("Cannot set to non-contiguous array")
        dst = self._host()
        np.copyto(dst, arr)
        fake._copied("set", self._device_id, dst)


class Device:
    """``cupy.cuda.Device``: entering makes it the current device of this thread."""

    def __init__(self, fake: "FakeCupy", device: int | None = None) -> None:
        self._fake = fake
        self.id = fake.current() if device is None else int(device)

    def _check(self) -> None:
        if not 0 <= self.id < len(self._fake.gpus):
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")

    def __enter__(self) -> "Device":
        self._check()
        self._fake._stack().append(self.id)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._fake._stack().pop()

    def synchronize(self) -> None:
        self._check()
        with self._fake._lock:
            self._fake.synchronized[self.id] = self._fake.synchronized.get(self.id, 0) + 1


class FakeCupy:
    """The fake's state; :meth:`modules` builds the ``cupy`` and ``cupyx`` module objects over it."""

    def __init__(self, gpus: list[FakeGpu], *, version: str = "13.3.0", runtime: int | None = 12040,
                 no_device_error: bool = True, fault: Fault | None = None,
                 copy_fault: CopyFault | None = None) -> None:
        self.gpus = gpus
        self.version = version
        self.runtime = runtime  # None: runtimeGetVersion raises
        self.no_device_error = no_device_error
        self.fault = fault
        self.copy_fault = copy_fault
        self.matmuls: dict[int, int] = {}  # device -> products so far
        self.synchronized: dict[int, int] = {}  # device -> synchronize() calls
        self.pinned = 0  # cupyx.empty_pinned calls
        self._lock = threading.Lock()
        self._local = threading.local()

    # ------------------------------------------------------------------------- devices, threads
    def _stack(self) -> list[int]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def current(self) -> int:
        stack = self._stack()
        return stack[-1] if stack else 0

    def _on_current(self, *arrays: Any, where: str) -> None:
        for a in arrays:
            if not isinstance(a, DeviceArray):
                raise TypeError(f"fake cupy: {where}: unsupported type {type(a).__name__} (a device array expected)")
            if a._device_id != self.current():
                raise ValueError(f"fake cupy: {where}: array on device {a._device_id}, current device "
                                 f"{self.current()}")

    def _wrap(self, host: np.ndarray, device: int) -> DeviceArray:
        arr = host.view(DeviceArray)
        arr._fake, arr._device_id = self, device
        return arr

    def _copied(self, kind: str, device: int, dst: np.ndarray) -> None:
        if self.copy_fault is not None:
            self.copy_fault(kind, device, dst)

    # ------------------------------------------------------------------------------- runtime API
    def getDeviceCount(self) -> int:
        if not self.gpus and self.no_device_error:
            raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return len(self.gpus)

    def getDeviceProperties(self, device: int) -> dict[str, Any]:
        if not 0 <= device < len(self.gpus):
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
        g = self.gpus[device]
        props: dict[str, Any] = {"totalGlobalMem": g.total_memory, "major": 9, "minor": 0,
                                 "multiProcessorCount": 132}
        if g.name is not None:
            props["name"] = g.name
        if g.uuid is not None:
            props["uuid"] = g.uuid
        if g.pci is not None:
            props["pciDomainID"], props["pciBusID"], props["pciDeviceID"] = g.pci
        return props

    def runtimeGetVersion(self) -> int:
        if self.runtime is None:
            raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
        return self.runtime

    # ---------------------------------------------------------------------------- array functions
    def asarray(self, a: Any, dtype: Any = None, order: Any = None) -> DeviceArray:
        if isinstance(a, DeviceArray):
            return a if dtype is None or a.dtype == dtype else a.astype(dtype)
        return self._wrap(np.array(a, dtype=dtype, copy=True, order="C"), self.current())

    def ascontiguousarray(self, a: Any, dtype: Any = None) -> DeviceArray:
        self._on_current(a, where="ascontiguousarray")
        return self._wrap(np.ascontiguousarray(a._host(), dtype=dtype), a._device_id)

    def empty(self, shape: Any, dtype: Any = float, order: str = "C") -> DeviceArray:
        return self._wrap(np.empty(shape, dtype=dtype, order=order), self.current())

    def matmul(self, a: Any, b: Any, out: Any = None) -> DeviceArray:
        self._on_current(a, b, *([] if out is None else [out]), where="matmul")
        ha, hb = a._host(), b._host()
        if ha.dtype == np.float16:  # fp32 accumulation, one rounding (cuBLAS's default for fp16)
            product = np.matmul(ha.astype(np.float32), hb.astype(np.float32))
        else:
            product = np.matmul(ha, hb)
        if out is None:
            out = self._wrap(np.empty(product.shape, dtype=np.result_type(ha, hb)), self.current())
        host_out = out._host()
        if host_out.shape != product.shape:
            raise ValueError(f"fake cupy: matmul: out shape {host_out.shape}, product {product.shape}")
        np.copyto(host_out, product, casting="same_kind")
        dev = out._device_id
        with self._lock:
            call = self.matmuls.get(dev, 0)
            self.matmuls[dev] = call + 1
        if self.fault is not None:
            self.fault(dev, call, host_out)
        return out

    def copyto(self, dst: Any, src: Any, casting: str = "same_kind") -> None:
        self._on_current(dst, src, where="copyto")
        host_dst = dst._host()
        np.copyto(host_dst, src._host(), casting=casting)
        self._copied("copyto", dst._device_id, host_dst)

    def asnumpy(self, a: Any, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
        if isinstance(a, DeviceArray):
            return a.get(stream=stream, order=order, out=out)
        return np.asarray(a, order=order)  # CuPy passes host arrays through too

    def stack(self, tup: Any, axis: int = 0) -> DeviceArray:
        arrays = list(tup)
        self._on_current(*arrays, where="stack")
        return self._wrap(np.stack([a._host() for a in arrays], axis=axis), self.current())

    def empty_pinned(self, shape: Any, dtype: Any = float, order: str = "C") -> np.ndarray:
        with self._lock:
            self.pinned += 1
        return np.empty(shape, dtype=dtype, order=order)  # a host NumPy array, as cupyx returns

    # -------------------------------------------------------------------------------- the modules
    def modules(self) -> tuple[types.ModuleType, types.ModuleType]:
        cupy = types.ModuleType("cupy")
        cupy.__version__ = self.version
        runtime = types.SimpleNamespace(getDeviceCount=self.getDeviceCount,
                                        getDeviceProperties=self.getDeviceProperties,
                                        runtimeGetVersion=self.runtimeGetVersion, CUDARuntimeError=CUDARuntimeError)
        cupy.cuda = types.SimpleNamespace(runtime=runtime, Device=lambda device=None: Device(self, device))
        for fn in ("asarray", "ascontiguousarray", "empty", "matmul", "copyto", "asnumpy", "stack"):
            setattr(cupy, fn, getattr(self, fn))
        cupy.ndarray = DeviceArray
        cupyx = types.ModuleType("cupyx")
        cupyx.empty_pinned = self.empty_pinned
        return cupy, cupyx


def install(monkeypatch: Any, fake: FakeCupy) -> FakeCupy:
    """Make ``import cupy`` / ``import cupyx`` give the fake for the test's duration."""
    cupy, cupyx = fake.modules()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    return fake
