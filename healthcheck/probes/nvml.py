"""Live GPU probe through NVML (``pynvml`` from the ``nvidia-ml-py`` package).

Two entry points:

- :func:`nvidia_gpu_present` reads the PCI bus from sysfs (no NVML, no driver): it decides whether NVML is
  worth opening at all and lets ``gpu.count`` catch GPUs that the driver lost.
- :func:`probe_gpus` opens one NVML session (``nvmlInit`` once; ``nvmlShutdown`` unless the caller is a
  process that exits once it has answered) and fills one :class:`~healthcheck.core.model.GpuInfo` per device,
  each device in a thread of its own.

Cost on a real driver (an H200, driver 580, docs/performance.md): the session's first query of a kind is
what costs, not the query: ``nvmlInit`` ~10 ms, the first handle of a device ~7 ms, the first reads of
its temperature, power, ECC mode, thresholds... 0.3-1.9 ms each (a firmware round trip), together
~27-31 ms for one GPU, against ~4 ms for the same probe in a session already open. A session is never
kept open between runs (a process holding the GPUs open stands in the way of a GPU reset), so what is
left to gain is overlap: the devices are probed at once (NVML is thread-safe; a call into it releases
the GIL), so a node pays about one device's first-query cost, not eight; and a process that exits
right after (the hooks' child) leaves the session to its exit (``close=False``, ~3.5 ms), which overlaps
the hook's next steps.

Conventions (see ``healthcheck.core.model``): a field the GPU or the installed ``pynvml`` does not offer stays
``None`` (NotSupported, FunctionNotFound, a function or constant absent from an older pynvml).
A device whose handle cannot be obtained, or that reports ``GPU is lost`` on any call, becomes
``GpuInfo(index, lost=True, error=...)``. Any other NVML error on one field (Unknown, ResetRequired,
NoPermission, Timeout, CorruptedInforom, ...) leaves that field ``None``, records nvidia-smi's words for
it in ``GpuInfo.field_errors`` (so the checks judge it: ERROR or FAIL, never "not reported") and is
noted in ``GpuInfo.error`` (``lost`` stays False): nothing is silently swallowed.
``pynvml`` is imported lazily: the prolog path pays for it only where an NVIDIA device exists.
"""
from __future__ import annotations

from typing import Any, Callable

from healthcheck.core.model import (FABRIC_CLIQUE_TYPES, FABRIC_STATES, THROTTLE_REASONS, GpuInfo, GpuProcess, NvLink,
                                    normalize_pci_bus_id)

from .pcibus import GPU_CLASS_PREFIXES, NVIDIA_VENDOR, nvidia_gpu_present  # noqa: F401 - re-exported

MIB = 1024 * 1024


class NvmlUnavailable(RuntimeError):
    """NVML could not be opened (pynvml missing, libnvidia-ml not found, driver not loaded, ...)."""


class _GpuLost(Exception):
    """Internal: the device answered NVML_ERROR_GPU_IS_LOST (or its handle could not be obtained)."""


# ------------------------------------------------------------------------------------------ sysfs


# nvidia_gpu_present lives in probes/pcibus.py (every prolog calls it; this module is for GPU nodes)


# ------------------------------------------------------------------------------------------- NVML


def _text(value: Any) -> str | None:
    """pynvml returns ``bytes`` from undecorated calls and ``str`` from ``@convertStrBytes`` ones."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return str(value).strip("\x00 ").strip() or None


def _milli(value: Any) -> float:
    return float(value) / 1000.0


def _pstate(value: Any) -> str | None:
    """NVML_PSTATE_0..15 -> "P0".."P15"; NVML_PSTATE_UNKNOWN (32) and anything else -> None."""
    return f"P{int(value)}" if 0 <= int(value) <= 15 else None


def _cuda_version(value: Any) -> str:
    """NVML encodes CUDA 12.4 as 12040 (1000 * major + 10 * minor)."""
    return f"{int(value) // 1000}.{(int(value) % 1000) // 10}"


# (GpuInfo field, pynvml function, argument constant names, conversion). Fields whose constants the
# installed pynvml lacks are skipped (left None).
_SIMPLE: tuple[tuple[str, str, tuple[str, ...], Callable[[Any], Any]], ...] = (
    ("uuid", "nvmlDeviceGetUUID", (), _text),
    ("serial", "nvmlDeviceGetSerial", (), _text),
    ("name", "nvmlDeviceGetName", (), _text),
    ("vbios", "nvmlDeviceGetVbiosVersion", (), _text),
    ("retired_pages_sbe", "nvmlDeviceGetRetiredPages",
     ("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS",), len),
    ("retired_pages_dbe", "nvmlDeviceGetRetiredPages", ("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR",), len),
    ("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", (), bool),
    ("temperature_c", "nvmlDeviceGetTemperature", ("NVML_TEMPERATURE_GPU",), float),
    ("temp_slowdown_c", "nvmlDeviceGetTemperatureThreshold", ("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",), float),
    ("temp_shutdown_c", "nvmlDeviceGetTemperatureThreshold", ("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",), float),
    ("temp_max_operating_c", "nvmlDeviceGetTemperatureThreshold", ("NVML_TEMPERATURE_THRESHOLD_GPU_MAX",), float),
    ("mem_temp_max_c", "nvmlDeviceGetTemperatureThreshold", ("NVML_TEMPERATURE_THRESHOLD_MEM_MAX",), float),
    ("power_draw_w", "nvmlDeviceGetPowerUsage", (), _milli),  # mW
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", (), _milli),  # mW
    ("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration", (), int),
    ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", (), int),
    ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth", (), int),
    ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", (), int),
    ("pcie_replay_count", "nvmlDeviceGetPcieReplayCounter", (), int),
    ("persistence_mode", "nvmlDeviceGetPersistenceMode", (), bool),
    # Degrees below the nearest slowdown threshold (c_nvmlMarginTemperature_v1_t); older drivers and
    # pynvml lack it (FunctionNotFound / AttributeError: stays None).
    ("temp_tlimit_margin_c", "nvmlDeviceGetMarginTemperature", (), float),
    ("performance_state", "nvmlDeviceGetPerformanceState", (), _pstate),
    ("utilization_gpu_pct", "nvmlDeviceGetUtilizationRates", (), lambda u: float(u.gpu)),
) + tuple(  # ecc_{corrected,uncorrected}_{volatile,aggregate}
    (f"ecc_{kind}_{scope}", "nvmlDeviceGetTotalEccErrors",
     (f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", f"NVML_{scope.upper()}_ECC"), int)
    for kind in ("corrected", "uncorrected") for scope in ("volatile", "aggregate")
)

# Canonical reason name -> suffix of pynvml's nvmlClocksEventReason* / nvmlClocksThrottleReason* constants.
_REASON_SUFFIX = {
    "gpu_idle": "GpuIdle",
    "applications_clocks_setting": "ApplicationsClocksSetting",
    "sw_power_cap": "SwPowerCap",
    "hw_slowdown": "HwSlowdown",
    "sync_boost": "SyncBoost",
    "sw_thermal_slowdown": "SwThermalSlowdown",
    "hw_thermal_slowdown": "HwThermalSlowdown",
    "hw_power_brake_slowdown": "HwPowerBrakeSlowdown",
    "display_clocks_setting": "DisplayClockSetting",
}
assert tuple(_REASON_SUFFIX) == THROTTLE_REASONS

_NVLINK_COUNTERS = (
    ("replay_errors", "NVML_NVLINK_ERROR_DL_REPLAY"),
    ("recovery_errors", "NVML_NVLINK_ERROR_DL_RECOVERY"),
    ("crc_flit_errors", "NVML_NVLINK_ERROR_DL_CRC_FLIT"),
    ("crc_data_errors", "NVML_NVLINK_ERROR_DL_CRC_DATA"),
)

# NVML_GPU_RECOVERY_ACTION_* suffixes; recovery_action is the lower-cased suffix ("gpu_reset").
_RECOVERY_ACTIONS = ("NONE", "GPU_RESET", "NODE_REBOOT", "DRAIN_P2P", "DRAIN_AND_RESET",
                     "RECOVER_IMEX_DOMAIN", "BUS_RESET", "SYSTEM_REBOOT")

# c_nvmlValue_t member per NVML_VALUE_TYPE_* (field values API).
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

# Errors meaning "this GPU / driver / pynvml does not offer that": the field stays None, nothing noted.
_QUIET_ERRORS = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")
# nvidia-smi's words for NVML's errors (nvmlErrorString), so GpuInfo.field_errors reads the same from
# either source (and without the library: pynvml's str() of an error needs libnvidia-ml).
_ERROR_WORDS = {
    "NVML_ERROR_UNKNOWN": "Unknown Error", "NVML_ERROR_RESET_REQUIRED": "GPU requires reset",
    "NVML_ERROR_GPU_IS_LOST": "GPU is lost", "NVML_ERROR_CORRUPTED_INFOROM": "Corrupted infoROM",
    "NVML_ERROR_NO_PERMISSION": "Insufficient Permissions", "NVML_ERROR_TIMEOUT": "Timeout",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "Driver/library version mismatch",
}


class _Reader:
    """Calls pynvml for one device; maps "not offered" to None and "GPU is lost" to :class:`_GpuLost`."""

    def __init__(self, nvml: Any, nvlink_fec: bool = False) -> None:
        self.nvml = nvml
        self.nvlink_fec = nvlink_fec  # read the NVLink5 FEC history bins (_nvlink_fec)
        self.notes: list[str] = []
        self.reset_required_error = False
        self._quiet = {getattr(nvml, n) for n in _QUIET_ERRORS if hasattr(nvml, n)}
        self._words = {getattr(nvml, n): w for n, w in _ERROR_WORDS.items() if hasattr(nvml, n)}
        self.field_errors: dict[str, str] = {}
        self._lost = getattr(nvml, "NVML_ERROR_GPU_IS_LOST", 15)
        self._reset = getattr(nvml, "NVML_ERROR_RESET_REQUIRED", 16)
        self._mismatch = getattr(nvml, "NVMLLibraryMismatchError", ())  # () when pynvml predates it

    def const(self, name: str) -> Any:
        return getattr(self.nvml, name, None)

    def call(self, name: str, *args: Any) -> Any:
        """Call ``nvml.<name>(*args)``; raises NVMLError as is, AttributeError if pynvml lacks it."""
        return getattr(self.nvml, name)(*args)

    def code(self, exc: BaseException) -> int | None:
        return getattr(exc, "value", None) if isinstance(exc, self.nvml.NVMLError) else None

    def get(self, name: str, *args: Any, fields: tuple[str, ...] = ()) -> Any:
        """``_get``: the value, or None when the call is not supported / fails (failure noted, and
        recorded as the error of each GpuInfo field in ``fields``)."""
        try:
            return self.call(name, *args)
        except (AttributeError, self._mismatch):
            return None  # older pynvml without the function, or unversioned call vs older driver
        except self.nvml.NVMLError as exc:
            self.failed(name, exc, fields)
            return None

    def failed(self, name: str, exc: BaseException, fields: tuple[str, ...] = ()) -> None:
        code = self.code(exc)
        if code == self._lost:
            raise _GpuLost(f"{name}: {exc}") from exc
        if code in self._quiet:
            return
        if code == self._reset:
            self.reset_required_error = True
        words = self._words.get(code) or f"NVML error {code}"
        for field_name in fields:
            self.field_errors.setdefault(field_name, f"{words} ({name})")
        self.notes.append(f"{name}: {words if code in self._words else exc}")

    def fields(self, handle: Any, field_ids: list[Any]) -> list[Any]:
        """Field values API: one value (or None) per requested id / (id, scope) tuple."""
        if not field_ids:
            return []
        values = self.get("nvmlDeviceGetFieldValues", handle, field_ids)
        if values is None:
            return [None] * len(field_ids)
        out: list[Any] = []
        for item in list(values)[: len(field_ids)]:
            ret = getattr(item, "nvmlReturn", 1)
            if ret == self._lost:
                raise _GpuLost(f"nvmlDeviceGetFieldValues({item.fieldId}): GPU is lost")
            member = _VALUE_MEMBER.get(getattr(item, "valueType", -1))
            out.append(getattr(item.value, member) if ret == 0 and member else None)
        return out + [None] * (len(field_ids) - len(out))


def open_nvml(nvml: Any = None) -> Any:
    """``nvml`` (pynvml, imported here when None) with its session started; the caller shuts it down.
    Raises :class:`NvmlUnavailable` when pynvml cannot be imported or NVML cannot start."""
    if nvml is None:
        try:
            import pynvml as nvml  # noqa: PLC0415 - lazy on purpose (hot path)
        except ImportError as exc:
            raise NvmlUnavailable(f"pynvml not importable: {exc}") from exc
    try:
        nvml.nvmlInit()
    except (nvml.NVMLError, OSError) as exc:
        raise NvmlUnavailable(f"nvmlInit failed: {exc}") from exc
    return nvml


def probe_gpus(nvml: Any = None, close: bool = True, nvlink_fec: bool = False) -> list[GpuInfo]:
    """Query every GPU through one NVML session, the devices at once. ``close=False``: the session is
    left to the process's exit (for a process that exits once it has answered; anything longer-lived
    must close it). ``nvlink_fec``: also read the NVLink5 FEC history bins (one more field values call
    per GPU whose links report NVLink5 counters; recorded, not judged: bundles ask for it, the hooks
    do not). Raises :class:`NvmlUnavailable` when NVML cannot start."""
    nvml = open_nvml(nvml)
    try:
        system = _Reader(nvml)
        driver = _text(system.get("nvmlSystemGetDriverVersion"))
        cuda_raw = system.get("nvmlSystemGetCudaDriverVersion")
        cuda = _cuda_version(cuda_raw) if cuda_raw else None
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            raise NvmlUnavailable(f"nvmlDeviceGetCount failed: {exc}") from exc
        return _probe_devices(nvml, count, driver, cuda, nvlink_fec)
    finally:
        try:
            if close:
                nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _probe_devices(nvml: Any, count: int, driver: str | None, cuda: str | None,
                   nvlink_fec: bool = False) -> list[GpuInfo]:
    """One GpuInfo per device, in index order; devices past the first each in a thread of their own, the
    first in this one. Same calls, same order per device as one after the other: only the waits overlap.
    An exception raised while probing a device is raised here, after every device is done. A device
    that never answers keeps this call waiting: the caller's deadline (the gpus probe's thread) bounds it."""
    if count <= 1:
        return [_probe_device(nvml, i, driver, cuda, nvlink_fec) for i in range(count)]
    import threading  # noqa: PLC0415 - loaded already where it runs (the probes' threads)

    results: list[Any] = [None] * count

    def probe(index: int) -> None:
        try:
            results[index] = _probe_device(nvml, index, driver, cuda, nvlink_fec)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            results[index] = exc

    threads = [threading.Thread(target=probe, args=(i,), name=f"nvml-gpu{i}", daemon=True) for i in range(1, count)]
    for thread in threads:
        thread.start()
    probe(0)
    for thread in threads:
        thread.join()
    for item in results:
        if isinstance(item, BaseException):
            raise item
    return results


def _probe_device(nvml: Any, index: int, driver: str | None, cuda: str | None,
                  nvlink_fec: bool = False) -> GpuInfo:
    """One GpuInfo; a lost device (or one without a handle) comes back as ``lost=True``."""
    reader = _Reader(nvml, nvlink_fec)
    info = GpuInfo(index=index)
    try:
        try:
            handle = reader.call("nvmlDeviceGetHandleByIndex", index)
        except nvml.NVMLError as exc:
            raise _GpuLost(f"Unable to determine the device handle for GPU{index}: {exc}") from exc
        pci = reader.get("nvmlDeviceGetPciInfo", handle)
        if pci is not None:
            info.pci_bus_id = normalize_pci_bus_id(_text(getattr(pci, "busId", None)))
        _fill(reader, handle, info)
    except _GpuLost as lost:
        return GpuInfo(index=index, pci_bus_id=info.pci_bus_id, lost=True, error=str(lost))
    info.driver_version, info.cuda_driver_version = driver, cuda
    if reader.reset_required_error:
        info.reset_required = True
    info.field_errors = dict(reader.field_errors)
    if reader.notes:
        info.error = "; ".join(reader.notes)
    return info


def _fill(reader: _Reader, handle: Any, info: GpuInfo) -> None:
    for field_name, fn, const_names, convert in _SIMPLE:
        args = [reader.const(c) for c in const_names]
        if any(a is None for a in args):
            continue
        value = reader.get(fn, handle, *args, fields=(field_name,))
        if value is not None:
            setattr(info, field_name, convert(value))
    ecc = reader.get("nvmlDeviceGetEccMode", handle, fields=("ecc_mode_current", "ecc_mode_pending"))
    if ecc is not None:
        info.ecc_mode_current, info.ecc_mode_pending = bool(ecc[0]), bool(ecc[1])
    rows = reader.get("nvmlDeviceGetRemappedRows", handle, fields=(
        "remap_correctable", "remap_uncorrectable", "remap_pending", "remap_failure"))
    if rows is not None:
        corr, unc, pending, failure = rows
        info.remap_correctable, info.remap_uncorrectable = int(corr), int(unc)
        info.remap_pending, info.remap_failure = bool(pending), bool(failure)
    info.throttle_reasons = _throttle(reader, handle)
    mem = _memory(reader, handle)
    if mem is not None:
        info.memory_used_mib, info.memory_total_mib = mem.used / MIB, mem.total / MIB
    info.processes = _processes(reader, handle)
    info.nvlinks = _nvlinks(reader, handle)
    _fabric(reader, handle, info)
    unrepairable = reader.get("nvmlDeviceGetUnrepairableMemoryFlag_v1", handle, fields=("unrepairable_memory",))
    if unrepairable is not None:
        info.unrepairable_memory = bool(unrepairable)
    _sram(reader, handle, info)
    _field_values(reader, handle, info)


_MEMORY_FIELDS = ("memory_used_mib", "memory_total_mib")


def _memory(reader: _Reader, handle: Any) -> Any:
    """Framebuffer memory: ``nvmlDeviceGetMemoryInfo_v2`` where the driver and pynvml have it (its "used"
    leaves out what the driver reserves, as nvidia-smi's "Used" does: an idle H200 on driver 580
    reserves 616 MiB, which the first version counts as used), else the first version."""
    version = reader.const("nvmlMemory_v2")
    if version is not None:
        try:
            return reader.call("nvmlDeviceGetMemoryInfo", handle, version)
        except (AttributeError, TypeError):
            pass  # a pynvml without the call or without its version argument
        except reader.nvml.NVMLError as exc:  # not offered (as _QUIET_ERRORS), or a struct version it lacks
            code = reader.code(exc)
            if code not in reader._quiet and code != reader.const("NVML_ERROR_ARGUMENT_VERSION_MISMATCH"):
                reader.failed("nvmlDeviceGetMemoryInfo_v2", exc, _MEMORY_FIELDS)
                return None
    return reader.get("nvmlDeviceGetMemoryInfo", handle, fields=_MEMORY_FIELDS)


def _throttle(reader: _Reader, handle: Any) -> list[str] | None:
    """Decode the clock event bitmask (pynvml >= 12.535: *ClocksEventReasons; older: *ThrottleReasons)."""
    for fn, prefix in (("nvmlDeviceGetCurrentClocksEventReasons", "nvmlClocksEventReason"),
                       ("nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlClocksThrottleReason")):
        if not hasattr(reader.nvml, fn):
            continue
        mask = reader.get(fn, handle, fields=("throttle_reasons",))
        return None if mask is None else clock_event_reasons(reader.nvml, int(mask), prefix)
    return None


def clock_event_reasons(nvml: Any, mask: int, prefix: str = "nvmlClocksEventReason") -> list[str]:
    """Canonical names (THROTTLE_REASONS order) of the bits set in an NVML clock event / throttle
    reason ``mask``. Bit values come from ``nvml``'s ``<prefix><Suffix>`` constants, falling back to
    the older ``nvmlClocksThrottleReason*`` aliases (same values); a reason whose constant the module
    lacks is never reported."""
    names = []
    for name, suffix in _REASON_SUFFIX.items():
        bit = getattr(nvml, prefix + suffix, None) or getattr(nvml, "nvmlClocksThrottleReason" + suffix, None)
        if bit and mask & int(bit):
            names.append(name)
    return names


def _processes(reader: _Reader, handle: Any) -> list[GpuProcess] | None:
    """Compute processes; the unversioned call raises NVMLLibraryMismatchError on older drivers -> _v2."""
    procs = None
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"):
        procs = reader.get(fn, handle, fields=("processes",))
        if procs is not None:
            reader.field_errors.pop("processes", None)  # the unversioned call failed, _v2 answered
            break
    if procs is None:
        return None
    out = []
    for proc in procs:
        used = getattr(proc, "usedGpuMemory", None)
        name = _text(reader.get("nvmlSystemGetProcessName", proc.pid))
        out.append(GpuProcess(pid=int(proc.pid), name=name, used_memory_mib=None if used is None else used / MIB))
    return out


def _nvlinks(reader: _Reader, handle: Any) -> list[NvLink] | None:
    """Links 0..NVML_NVLINK_MAX_LINKS-1 until NotSupported / InvalidArgument; None when link 0 has none."""
    stop = {reader.const("NVML_ERROR_NOT_SUPPORTED"), reader.const("NVML_ERROR_INVALID_ARGUMENT")}
    links: list[NvLink] = []
    for link in range(reader.const("NVML_NVLINK_MAX_LINKS") or 0):
        try:
            state = reader.call("nvmlDeviceGetNvLinkState", handle, link)
        except AttributeError:
            break
        except reader.nvml.NVMLError as exc:
            if reader.code(exc) not in stop:
                reader.failed("nvmlDeviceGetNvLinkState", exc, ("nvlinks",))
            break
        item = NvLink(link=link, active=bool(state))
        for attr, const_name in _NVLINK_COUNTERS:
            counter = reader.const(const_name)
            if counter is not None:
                value = reader.get("nvmlDeviceGetNvLinkErrorCounter", handle, link, counter,
                                   fields=("nvlink_counters",))
                setattr(item, attr, None if value is None else int(value))
        links.append(item)
    active = [nl for nl in links if nl.active]
    # per active link, in the one field values call the speed always took: the speed and, where NVML has
    # them (NVLink5), the symbol and effective error counts and rates (issue 33: no call more)
    wanted = [(attr, reader.const(name)) for attr, name in _NVLINK_FIELDS]
    wanted = [(attr, fid) for attr, fid in wanted if fid is not None]
    if wanted and active:
        values = reader.fields(handle, [(fid, nl.link) for nl in active for _, fid in wanted])
        for i, nl in enumerate(active):
            for j, (attr, _) in enumerate(wanted):
                value = values[i * len(wanted) + j]
                if attr == "speed_gbps":
                    nl.speed_gbps = None if not value else float(value) / 1000.0  # MB/s -> GB/s
                elif value is not None:
                    setattr(nl, attr, nvlink_ber(int(value)) if attr.endswith("_ber") else int(value))
    if reader.nvlink_fec:
        _nvlink_fec(reader, handle, active)
    return links or None


FEC_BINS = 16  # NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0 .. _15


def _nvlink_fec(reader: _Reader, handle: Any, active: list[NvLink]) -> None:
    """The FEC history bins of every active link that reported NVLink5 counters, in one field values call
    (none on a GPU without NVLink5, or with a pynvml that lacks the field ids)."""
    ids = [reader.const(f"NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_{i}") for i in range(FEC_BINS)]
    nvl5 = [nl for nl in active if nl.symbol_errors is not None or nl.effective_errors is not None]
    if not nvl5 or any(fid is None for fid in ids):
        return
    values = reader.fields(handle, [(fid, nl.link) for nl in nvl5 for fid in ids])
    for k, nl in enumerate(nvl5):
        bins = values[k * FEC_BINS:(k + 1) * FEC_BINS]
        if any(v is not None for v in bins):
            nl.fec_history = [None if v is None else int(v) for v in bins]


# NvLink attribute -> NVML field id constant, read per link (scope = link)
_NVLINK_FIELDS = (("speed_gbps", "NVML_FI_DEV_NVLINK_GET_SPEED"),
                  ("symbol_errors", "NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS"),
                  ("effective_errors", "NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS"),
                  ("symbol_ber", "NVML_FI_DEV_NVLINK_COUNT_SYMBOL_BER"),
                  ("effective_ber", "NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_BER"))


def nvlink_ber(raw: int) -> float:
    """NVML's encoded NVLink bit error rate: mantissa in bits 11:8, exponent in bits 7:0 (nvml.h
    NVML_NVLINK_BER_MANTISSA_SHIFT/WIDTH, NVML_NVLINK_BER_EXP_SHIFT/WIDTH), the rate mantissa x
    10^-exponent (as DCGM decodes it for its *_BER_FLOAT fields)."""
    mantissa, exponent = (raw >> 8) & 0xF, raw & 0xFF
    return mantissa * 10.0 ** -exponent


# GpuFabricInfo structs, newest first: (call, pynvml struct). v4 (its own call, driver 615+) replaces
# v3's one clique id by a clique per type; v3 adds the health summary to v2's health mask; a driver older
# than the struct answers ARGUMENT_VERSION_MISMATCH or FUNCTION_NOT_FOUND (the next one is tried), a
# pynvml older than it lacks the struct (skipped); the v1 call is the deprecated unversioned one.
_FABRIC_STRUCTS = (("nvmlDeviceGetGpuFabricInfo_v4", "c_nvmlGpuFabricInfo_v4_t"),
                   ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t"),
                   ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                   ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"))
# healthMask fields: (GpuInfo.fabric_health key, NVML_GPU_FABRIC_HEALTH_MASK_<NAME>, {value suffix: canonical})
_HEALTH_MASK = (
    ("bandwidth", "DEGRADED_BW", {"TRUE": "degraded", "FALSE": "full"}),
    ("route_recovery", "ROUTE_RECOVERY", {"TRUE": "true", "FALSE": "false"}),
    ("route_unhealthy", "ROUTE_UNHEALTHY", {"TRUE": "true", "FALSE": "false"}),
    ("access_timeout_recovery", "ACCESS_TIMEOUT_RECOVERY", {"TRUE": "true", "FALSE": "false"}),
    ("incorrect_configuration", "INCORRECT_CONFIGURATION", {
        "NONE": "none", "INCORRECT_SYSGUID": "incorrect_sysguid", "INCORRECT_CHASSIS_SN": "incorrect_chassis_sn",
        "NO_PARTITION": "no_partition", "INSUFFICIENT_NVLINKS": "insufficient_nvlinks",
        "INCOMPATIBLE_GPU_FW": "incompatible_gpu_fw", "INVALID_LOCATION": "invalid_location",
        "GPU_STATE_INVALID": "gpu_state_invalid"}),
    ("partition_assigned", "PARTITION_ASSIGNED", {"TRUE": "true", "FALSE": "false"}),
    ("gfm_state", "GFM_STATE", {"CONNECTED": "connected", "DISCONNECTED": "disconnected"}),
)
_HEALTH_SUMMARY = {"HEALTHY": "healthy", "UNHEALTHY": "unhealthy", "LIMITED_CAPACITY": "limited_capacity"}


def _fabric(reader: _Reader, handle: Any, info: GpuInfo) -> None:
    """GPU fabric (NVSwitch systems): state, status, clique id, cluster UUID and, where the struct has them,
    the health mask and summary (``_FABRIC_STRUCTS``). One call on a driver that knows the newest struct."""
    import ctypes  # noqa: PLC0415 - only once NVML is open; keeps nvidia_gpu_present() cheap
    mismatch = reader.const("NVML_ERROR_ARGUMENT_VERSION_MISMATCH")
    not_found = reader.const("NVML_ERROR_FUNCTION_NOT_FOUND")
    for fn, struct_name in _FABRIC_STRUCTS:
        struct_cls = reader.const(struct_name)
        if struct_cls is None or not hasattr(reader.nvml, fn):
            continue
        struct = struct_cls()
        try:
            reader.call(fn, handle, ctypes.byref(struct))
        except reader.nvml.NVMLError as exc:
            if reader.code(exc) in (mismatch, not_found):
                continue  # an older driver: the previous struct / the deprecated call
            reader.failed(fn, exc, ("fabric_state",))
            return
        except AttributeError:
            continue
        _fabric_fill(reader, struct, info)
        return


def _fabric_fill(reader: _Reader, struct: Any, info: GpuInfo) -> None:
    state = int(struct.state)
    info.fabric_state = FABRIC_STATES[state] if 0 <= state < len(FABRIC_STATES) else f"unknown({state})"
    if info.fabric_state == "completed":
        info.fabric_status = "Success" if struct.status == 0 else str(reader.nvml.NVMLError(struct.status))
    if info.fabric_state == "not_supported":
        return
    if hasattr(struct, "cliques"):
        info.fabric_cliques = _cliques(struct)
        info.fabric_clique_id = (info.fabric_cliques.get(FABRIC_CLIQUE_TYPES[0]) or [0])[0]
    else:
        info.fabric_clique_id = int(struct.cliqueId)
    raw = bytes(struct.clusterUuid)
    hexed = raw.hex()
    info.fabric_cluster_uuid = (f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"
                                if len(raw) == 16 else None)
    health: dict[str, str] = {}
    mask = getattr(struct, "healthMask", None)
    if mask is not None:
        for key, name, values in _HEALTH_MASK:
            shift = reader.const(f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{name}")
            width = reader.const(f"NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_{name}")
            if shift is None or width is None:
                continue  # a pynvml that predates the field
            field_value = (int(mask) >> int(shift)) & int(width)
            for suffix, canonical in values.items():
                if field_value == reader.const(f"NVML_GPU_FABRIC_HEALTH_MASK_{name}_{suffix}"):
                    health[key] = canonical
                    break
    summary = getattr(struct, "healthSummary", None)
    if summary is not None:
        for suffix, canonical in _HEALTH_SUMMARY.items():
            if int(summary) == reader.const(f"NVML_GPU_FABRIC_HEALTH_SUMMARY_{suffix}"):
                health["summary"] = canonical
    info.fabric_health = health or None


def _cliques(struct: Any) -> dict[str, list[int]]:
    """v4's clique entries: type name -> its ids, in NVML's order (sorted by type, then id)."""
    out: dict[str, list[int]] = {}
    for entry in list(struct.cliques)[:max(0, min(int(struct.numCliques), len(struct.cliques)))]:
        kind = int(entry.type)
        name = FABRIC_CLIQUE_TYPES[kind] if kind < len(FABRIC_CLIQUE_TYPES) else f"type{kind}"
        out.setdefault(name, []).append(int(entry.id))
    return out


SRAM_FIELDS = ("sram_uncorrectable_volatile", "sram_uncorrectable_aggregate", "sram_parity_volatile",
               "sram_parity_aggregate", "sram_secded_volatile", "sram_secded_aggregate",
               "sram_threshold_exceeded", "sram_sources")
# nvmlEccSramErrorStatus_v1_t bucket member -> sram_sources key (nvidia-smi's "SRAM L2", "SRAM SM", ...)
_SRAM_BUCKETS = (("aggregateUncBucketL2", "l2"), ("aggregateUncBucketSm", "sm"),
                 ("aggregateUncBucketMcu", "microcontroller"), ("aggregateUncBucketPcie", "pcie"),
                 ("aggregateUncBucketOther", "other"))


def _sram(reader: _Reader, handle: Any, info: GpuInfo) -> None:
    """SRAM ECC status (``nvmlDeviceGetSramEccErrorStatus``, NVML R550+, Ampere and newer, root only):
    uncorrectable parity and SEC-DED counts, the per-unit aggregate buckets and the RMA flag
    (``bThresholdExceeded``: the field diagnostic's threshold). NotSupported on older GPUs and
    FunctionNotFound on older drivers leave the fields None; any other error is recorded for each."""
    import ctypes  # noqa: PLC0415 - only once NVML is open

    struct_cls = reader.const("c_nvmlEccSramErrorStatus_v1_t")
    if struct_cls is None or not hasattr(reader.nvml, "nvmlDeviceGetSramEccErrorStatus"):
        return  # a pynvml that predates the call
    status = struct_cls()  # its __init__ sets the version (nvmlEccSramErrorStatus_v1)
    if reader.get("nvmlDeviceGetSramEccErrorStatus", handle, ctypes.byref(status), fields=SRAM_FIELDS) is None:
        return
    info.sram_parity_volatile, info.sram_secded_volatile = int(status.volatileUncParity), int(status.volatileUncSecDed)
    info.sram_parity_aggregate = int(status.aggregateUncParity)
    info.sram_secded_aggregate = int(status.aggregateUncSecDed)
    info.sram_uncorrectable_volatile = info.sram_parity_volatile + info.sram_secded_volatile
    info.sram_uncorrectable_aggregate = info.sram_parity_aggregate + info.sram_secded_aggregate
    info.sram_threshold_exceeded = bool(status.bThresholdExceeded)
    info.sram_sources = {key: int(getattr(status, member)) for member, key in _SRAM_BUCKETS}


def _field_values(reader: _Reader, handle: Any, info: GpuInfo) -> None:
    """Memory temperature and GPU recovery action, in one field values call (each where defined)."""
    wanted = [(attr, reader.const(name)) for attr, name in
              (("mem", "NVML_FI_DEV_MEMORY_TEMP"), ("recovery", "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"))]
    wanted = [(attr, fid) for attr, fid in wanted if fid is not None]
    values = dict(zip((attr for attr, _ in wanted), reader.fields(handle, [fid for _, fid in wanted])))
    if values.get("mem") is not None:
        info.mem_temperature_c = float(values["mem"])
    action = values.get("recovery")
    if action is not None:
        names = {reader.const("NVML_GPU_RECOVERY_ACTION_" + n): n.lower() for n in _RECOVERY_ACTIONS}
        info.recovery_action = names.get(int(action), f"unknown({int(action)})")
        info.reset_required = bool(info.reset_required) or info.recovery_action != "none"
    if info.remap_pending:
        info.reset_required = True


def sample_gpus(nvml: Any = None) -> list[dict]:
    """The job sampler's light reading (issue 32.6): per device only its key (UUID, else PCI address),
    utilisation, power draw, power limit and compute pids, five calls a device. One session, always
    closed before returning (the sampler runs every 30 s: nothing may stay open between samples, a GPU
    reset would find it). A device that cannot be read comes back with ``error`` and no readings.
    Raises :class:`NvmlUnavailable` when NVML cannot start."""
    nvml = open_nvml(nvml)
    try:
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            raise NvmlUnavailable(f"nvmlDeviceGetCount failed: {exc}") from exc
        out = []
        for index in range(count):
            reader = _Reader(nvml)
            item: dict[str, Any] = {"index": index}
            try:
                handle = reader.call("nvmlDeviceGetHandleByIndex", index)
                item["key"] = _text(reader.get("nvmlDeviceGetUUID", handle)) or f"index:{index}"
                util = reader.get("nvmlDeviceGetUtilizationRates", handle)
                item["utilization_gpu_pct"] = None if util is None else float(util.gpu)
                power = reader.get("nvmlDeviceGetPowerUsage", handle)
                item["power_draw_w"] = None if power is None else _milli(power)
                limit = reader.get("nvmlDeviceGetEnforcedPowerLimit", handle)
                item["power_limit_w"] = None if limit is None else _milli(limit)
                procs = None
                for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"):
                    procs = reader.get(fn, handle)
                    if procs is not None:
                        break
                item["pids"] = sorted({int(p.pid) for p in procs or []})
            except (nvml.NVMLError, _GpuLost) as exc:
                item = {"index": index, "key": f"index:{index}", "error": str(exc)}
            if reader.notes:
                item["error"] = "; ".join(reader.notes)
            out.append(item)
        return out
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
