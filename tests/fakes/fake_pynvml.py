"""A fake ``pynvml`` module for tests, faked at the module boundary.

Driven by plain data (:class:`FakeGpu`, one per device). It reuses the REAL pynvml's exception classes
(``pynvml.NVMLError(code)`` maps a code to its ``NVMLError_*`` subclass), constants and ctypes structures,
so these tests break when the real API drifts. Functions the fake does not implement raise
AttributeError, exactly like an older pynvml that lacks them.

Faults: ``FakeGpu.unsupported`` (function names, or ``"field:<id>"`` for field values, that answer
NotSupported), ``FakeGpu.errors`` (function name -> NVML error code), ``FakeGpu.lost`` (every call on the
device answers GPU_IS_LOST), ``FakeGpu.no_handle`` (nvmlDeviceGetHandleByIndex fails with that code),
``FakeNvml(init_error=code)`` and ``FakeNvml(missing={"nvmlDeviceGetX"})``.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import pynvml as real

_THRESHOLDS = {
    real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92,
    real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 89,
    real.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: 87,
    real.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: 95,
}


@dataclass
class FakeGpu:
    """What one GPU reports; NVML units (bytes, mW, raw codes)."""

    pci_bus_id: str = "00000000:18:00.0"  # NVML's 8-digit-domain, upper-case form
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    serial: str = "1650000000000"
    name: str = "NVIDIA H100 80GB HBM3"
    vbios: str = "96.00.89.00.01"
    ecc_mode: tuple[int, int] = (1, 1)
    ecc: dict[tuple[int, int], int] = field(default_factory=dict)  # (error type, counter type) -> count
    retired_pages: dict[int, list[int]] = field(default_factory=dict)  # cause -> page addresses
    retired_pending: int = 0
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)  # corr, unc, pending, failure
    temperature: int = 33
    thresholds: dict[int, int] = field(default_factory=lambda: dict(_THRESHOLDS))
    mem_temperature: int = 41
    clock_reasons: int = 0
    power_mw: int = 71_234
    power_limit_mw: int = 700_000
    pcie: tuple[int, int, int, int] = (5, 5, 16, 16)  # gen cur, gen max, width cur, width max
    pcie_replay: int = 0
    nvlink_states: list[int] | None = field(default_factory=lambda: [1] * 18)  # None: no NVLink at all
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, counter) -> count
    nvlink_speed_mbps: int = 26_562
    persistence: int = 1
    processes: list[tuple[int, int | None, str]] = field(default_factory=list)  # pid, used bytes, name
    memory_total: int = 81_559 * 1024 * 1024
    memory_used: int = 1 * 1024 * 1024
    memory_reserved: int = 0  # what the driver holds for itself (616 MiB on an idle H200, driver 580)
    fabric_state: int | None = real.NVML_GPU_FABRIC_STATE_COMPLETED  # None: NotSupported
    fabric_status: int = real.NVML_SUCCESS
    # GpuFabricInfo detail (issue 33): clique id, cluster UUID (16 bytes), health mask (v2+) and summary (v3).
    # fabric_struct: the newest struct version the fake driver knows (4, 3, 2); a newer one answers
    # ARGUMENT_VERSION_MISMATCH (v3), FUNCTION_NOT_FOUND (v4's own call), as an older driver does.
    # fabric_cliques: v4's (type, id) entries; None: the unicast and multicast pointer cliques of
    # fabric_clique (0: none), as a GB200 tray of one NVL72 rack would report.
    fabric_cliques: list[tuple[int, int]] | None = None
    fabric_clique: int = 0
    fabric_cluster_uuid: bytes = bytes(16)
    fabric_health_mask: int = 0
    fabric_health_summary: int = 0  # NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED
    fabric_struct: int = 3
    unrepairable_memory: int | None = None  # None: nvmlDeviceGetUnrepairableMemoryFlag_v1 NotSupported
    # per-link field values (NVLink5 counters): (field id, link) -> value; unlisted ones answer NotSupported
    nvlink_field_values: dict[tuple[int, int], int] = field(default_factory=dict)
    recovery_action: int = real.NVML_GPU_RECOVERY_ACTION_NONE
    margin_temperature: int = 56  # degrees below the slowdown threshold (89 - 33)
    pstate: int = real.NVML_PSTATE_0  # H100 stays in P0 at idle with persistence mode on
    utilization: tuple[int, int] = (0, 0)  # gpu %, memory %
    # nvmlEccSramErrorStatus_v1_t members (aggregateUncParity, volatileUncSecDed, bThresholdExceeded, ...);
    # unset members read 0. "nvmlDeviceGetSramEccErrorStatus" in `unsupported` answers NotSupported.
    sram: dict[str, int] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    lost: bool = False
    no_handle: int | None = None


def h100_node(n: int = 8) -> list[FakeGpu]:
    """A healthy n x H100 SXM node (HGX): 18 NVLinks each, PCIe gen5 x16, 80 GB, fabric completed."""
    buses = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
    return [
        FakeGpu(
            pci_bus_id=f"00000000:{(buses[i] if i < len(buses) else f'{0xe0 + i:02x}').upper()}:00.0",
            uuid=f"GPU-4f6c2a1e-7b3d-4c55-9e2a-{i:012x}",
            serial=f"165232101{i:04d}",
        )
        for i in range(n)
    ]


def fabric_health_mask(bandwidth: str = "FALSE", route_recovery: str = "FALSE", route_unhealthy: str = "FALSE",
                       access_timeout_recovery: str = "FALSE", incorrect_configuration: str = "NONE",
                       partition_assigned: str = "TRUE", gfm_state: str = "CONNECTED") -> int:
    """A GpuFabricInfo healthMask from the NVML constants' suffixes (bandwidth "TRUE" = degraded)."""
    fields = (("DEGRADED_BW", bandwidth), ("ROUTE_RECOVERY", route_recovery), ("ROUTE_UNHEALTHY", route_unhealthy),
              ("ACCESS_TIMEOUT_RECOVERY", access_timeout_recovery),
              ("INCORRECT_CONFIGURATION", incorrect_configuration), ("PARTITION_ASSIGNED", partition_assigned),
              ("GFM_STATE", gfm_state))
    mask = 0
    for name, value in fields:
        mask |= getattr(real, f"NVML_GPU_FABRIC_HEALTH_MASK_{name}_{value}") << getattr(
            real, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{name}")
    return mask


# A cluster UUID of an NVL72 rack's NVLink domain (made up; the corpus's are scrubbed by their publisher)
NVL72_CLUSTER_UUID = bytes.fromhex("5d1e7a2c9b3f4e61a0c2d4e6f8091a2b")


# NVML's encoded BER with mantissa 15, exponent 255 (1.5e-254): what DCGM's tests inject as a clean link
CLEAN_BER = 0xFFF


def nvlink5_counters(links: int = 18, symbol_errors: int = 0, effective_errors: int = 0,
                     effective_ber: int = CLEAN_BER, symbol_ber: int = CLEAN_BER,
                     fec_history: list[int] | None = None) -> dict[tuple[int, int], int]:
    """Per-link NVLink5 field values for ``FakeGpu.nvlink_field_values`` (every link alike);
    ``fec_history``: the 16 FEC history bins (NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0..15), where given."""
    out = {}
    for link in range(links):
        out[(real.NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, link)] = symbol_errors
        out[(real.NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS, link)] = effective_errors
        out[(real.NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_BER, link)] = effective_ber
        out[(real.NVML_FI_DEV_NVLINK_COUNT_SYMBOL_BER, link)] = symbol_ber
        for i, count in enumerate(fec_history or []):
            out[(getattr(real, f"NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_{i}"), link)] = count
    return out


def gb200_nvl72_tray(clique: int = 32766, cluster_uuid: bytes = NVL72_CLUSTER_UUID) -> list[FakeGpu]:
    """One healthy GB200 NVL72 compute tray: 4 GPUs (PCI domains 0008/0009/0018/0019 as in the corpus's
    GB200 captures), 18 NVLink5 links each at 53.125 GB/s, fabric completed in the rack's NVLink domain
    (clique id and cluster UUID set, equal on all four), health v3: summary healthy, bandwidth full."""
    return [
        FakeGpu(
            pci_bus_id=f"0000{domain}:01:00.0", name="NVIDIA GB200", uuid=f"GPU-9b2c41d7-6a0e-4f1b-8c3d-{i:012x}",
            serial=f"165242400{i:04d}", vbios="97.00.82.00.3B", pcie=(6, 6, 16, 16),
            memory_total=189_471 * 1024 * 1024, power_limit_mw=1_200_000,
            nvlink_speed_mbps=53_125, fabric_clique=clique, fabric_cluster_uuid=cluster_uuid,
            fabric_health_mask=fabric_health_mask(),
            fabric_health_summary=real.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, unrepairable_memory=0,
            nvlink_field_values=nvlink5_counters(),
        )
        for i, domain in enumerate(("0008", "0009", "0018", "0019"))
    ]


def b200_hgx_node(n: int = 8) -> list[FakeGpu]:
    """A healthy B200 HGX node: 8 GPUs behind NVSwitch trays, 18 NVLink5 links each; fabric completed
    with clique 0 and an all-zero cluster UUID (a single-node NVLink domain: the corpus's B200 capture),
    health summary healthy, bandwidth and route fields not reported (N/A there)."""
    not_reported = 0  # every mask field NOT_SUPPORTED but the access timeout (False) and the configuration
    mask = (not_reported
            | real.NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE
            << real.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY)
    buses = ["1b", "43", "52", "61", "9d", "c3", "d1", "df"]
    return [
        FakeGpu(
            pci_bus_id=f"00000000:{buses[i % len(buses)].upper()}:00.0", name="NVIDIA B200",
            uuid=f"GPU-2e7f90c4-3d1a-4b6e-9f05-{i:012x}", serial=f"165242500{i:04d}", vbios="97.00.6C.00.05",
            pcie=(5, 5, 16, 16), memory_total=183_359 * 1024 * 1024, power_limit_mw=1_000_000,
            nvlink_speed_mbps=53_125, fabric_health_mask=mask,
            fabric_health_summary=real.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, unrepairable_memory=0,
        )
        for i in range(n)
    ]


def old_gpu() -> FakeGpu:
    """A V100-PCIe-like GPU: no NVLink, no fabric, no row remapping (page retirement instead), no
    margin temperature."""
    return FakeGpu(
        name="Tesla V100-PCIE-32GB", vbios="88.00.80.00.01", pcie=(3, 3, 16, 16), nvlink_states=None,
        fabric_state=None, pstate=real.NVML_PSTATE_8,
        unsupported={"nvmlDeviceGetRemappedRows", "field:230", "nvmlDeviceGetMarginTemperature",
                     "nvmlDeviceGetSramEccErrorStatus"},
        retired_pages={real.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: [0x1000, 0x2000],
                       real.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: [0x3000]},
        memory_total=32_510 * 1024 * 1024,
    )


class FakeNvml:
    """Module-like object: ``probe_gpus(nvml=FakeNvml(h100_node()))``."""

    def __init__(self, gpus: list[FakeGpu], *, driver: str = "550.90.07", cuda: int = 12040,
                 init_error: int | None = None, missing: set[str] | None = None) -> None:
        self.gpus = gpus
        self.driver = driver
        self.cuda = cuda
        self.init_error = init_error
        self.missing = set(missing or ())
        self.init_calls = 0
        self.shutdown_calls = 0
        self.sessions = 0
        self.calls: list[str] = []

    # Constants, exception classes and ctypes structures come from the real module; nvml* functions
    # the fake does not define (or lists in `missing`) are absent, as in an older pynvml.
    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML", "c_nvml", "nvmlClocks", "nvmlStructToFriendlyObject", "nvmlMemory_v")):
            return getattr(real, name)
        raise AttributeError(name)

    # ------------------------------------------------------------------------------- plumbing
    def _raise(self, code: int) -> None:
        raise real.NVMLError(code)

    def _dev(self, handle: FakeGpu, fn: str, key: str | None = None) -> FakeGpu:
        self.calls.append(fn)
        if not self.initialized:
            self._raise(real.NVML_ERROR_UNINITIALIZED)
        if handle.lost:
            self._raise(real.NVML_ERROR_GPU_IS_LOST)
        if fn in handle.errors:
            self._raise(handle.errors[fn])
        if fn in handle.unsupported or (key is not None and key in handle.unsupported):
            self._raise(real.NVML_ERROR_NOT_SUPPORTED)
        return handle

    # ---------------------------------------------------------------------------- system calls
    # NVML counts its sessions: each nvmlInit needs its nvmlShutdown, and the library stays open until the last
    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            self._raise(self.init_error)
        self.sessions += 1

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1
        if not self.sessions:
            self._raise(real.NVML_ERROR_UNINITIALIZED)
        self.sessions -= 1

    @property
    def initialized(self) -> bool:
        return self.sessions > 0

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        if not self.initialized:
            self._raise(real.NVML_ERROR_UNINITIALIZED)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        if not self.initialized:
            self._raise(real.NVML_ERROR_UNINITIALIZED)
        if not 0 <= index < len(self.gpus):
            self._raise(real.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        if gpu.no_handle is not None:
            self._raise(gpu.no_handle)
        return gpu

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:
        for gpu in self.gpus:
            for p, _used, name in gpu.processes:
                if p == pid:
                    return name.encode()
        self._raise(real.NVML_ERROR_NOT_FOUND)

    # ---------------------------------------------------------------------------- device calls
    def nvmlDeviceGetPciInfo(self, h: FakeGpu) -> Any:
        g = self._dev(h, "nvmlDeviceGetPciInfo")
        return real.nvmlPciInfo_t(busId=g.pci_bus_id.encode(), busIdLegacy=g.pci_bus_id.encode())

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return self._dev(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetSerial(self, h: FakeGpu) -> bytes:
        return self._dev(h, "nvmlDeviceGetSerial").serial.encode()  # bytes, as undecorated calls return

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:
        return self._dev(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetVbiosVersion(self, h: FakeGpu) -> bytes:
        return self._dev(h, "nvmlDeviceGetVbiosVersion").vbios.encode()

    def nvmlDeviceGetEccMode(self, h: FakeGpu) -> list[int]:
        return list(self._dev(h, "nvmlDeviceGetEccMode").ecc_mode)

    def nvmlDeviceGetTotalEccErrors(self, h: FakeGpu, error_type: int, counter_type: int) -> int:
        return self._dev(h, "nvmlDeviceGetTotalEccErrors").ecc.get((error_type, counter_type), 0)

    def nvmlDeviceGetRetiredPages(self, h: FakeGpu, cause: int) -> list[int]:
        return list(self._dev(h, "nvmlDeviceGetRetiredPages").retired_pages.get(cause, []))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetRetiredPagesPendingStatus").retired_pending

    def nvmlDeviceGetRemappedRows(self, h: FakeGpu) -> tuple[int, int, int, int]:
        return self._dev(h, "nvmlDeviceGetRemappedRows").remapped_rows

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        g = self._dev(h, "nvmlDeviceGetTemperature")
        if sensor != real.NVML_TEMPERATURE_GPU:
            self._raise(real.NVML_ERROR_INVALID_ARGUMENT)
        return g.temperature

    def nvmlDeviceGetTemperatureThreshold(self, h: FakeGpu, threshold: int) -> int:
        g = self._dev(h, "nvmlDeviceGetTemperatureThreshold", f"threshold:{threshold}")
        if threshold not in g.thresholds:
            self._raise(real.NVML_ERROR_NOT_SUPPORTED)
        return g.thresholds[threshold]

    def nvmlDeviceGetMarginTemperature(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetMarginTemperature").margin_temperature

    def nvmlDeviceGetPerformanceState(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetPerformanceState").pstate

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        g = self._dev(h, "nvmlDeviceGetUtilizationRates")
        return real.c_nvmlUtilization_t(gpu=g.utilization[0], memory=g.utilization[1])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetCurrentClocksEventReasons").clock_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetCurrentClocksThrottleReasons").clock_reasons

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetCurrPcieLinkGeneration").pcie[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetMaxPcieLinkGeneration").pcie[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetCurrPcieLinkWidth").pcie[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetMaxPcieLinkWidth").pcie[3]

    def nvmlDeviceGetPcieReplayCounter(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetPcieReplayCounter").pcie_replay

    def nvmlDeviceGetNvLinkState(self, h: FakeGpu, link: int) -> int:
        g = self._dev(h, "nvmlDeviceGetNvLinkState")
        if g.nvlink_states is None:
            self._raise(real.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(g.nvlink_states):
            self._raise(real.NVML_ERROR_INVALID_ARGUMENT)  # what H100 answers for links 18..35
        return g.nvlink_states[link]

    def nvmlDeviceGetNvLinkErrorCounter(self, h: FakeGpu, link: int, counter: int) -> int:
        g = self._dev(h, "nvmlDeviceGetNvLinkErrorCounter")
        if g.nvlink_states is None or not 0 <= link < len(g.nvlink_states):
            self._raise(real.NVML_ERROR_INVALID_ARGUMENT)
        return g.nvlink_errors.get((link, counter), 0)

    def nvmlDeviceGetPersistenceMode(self, h: FakeGpu) -> int:
        return self._dev(h, "nvmlDeviceGetPersistenceMode").persistence

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[Any]:
        g = self._dev(h, "nvmlDeviceGetComputeRunningProcesses")
        out = []
        for pid, used, _name in g.processes:
            obj = real.nvmlStructToFriendlyObject(real.c_nvmlProcessInfo_v3_t(pid=pid, usedGpuMemory=used or 0))
            if used is None:
                obj.usedGpuMemory = None  # NVML_VALUE_NOT_AVAILABLE, as pynvml maps it
            out.append(obj)
        return out

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu, version: int | None = None) -> Any:
        """As pynvml: no version, the first struct, whose "used" counts the driver's reservation; with
        ``nvmlMemory_v2``, the second, "reserved" apart (an older driver: ``errors`` for
        "nvmlDeviceGetMemoryInfo_v2")."""
        if not version:
            g = self._dev(h, "nvmlDeviceGetMemoryInfo")
            used = g.memory_used + g.memory_reserved
            return real.c_nvmlMemory_t(total=g.memory_total, used=used, free=g.memory_total - used)
        g = self._dev(h, "nvmlDeviceGetMemoryInfo_v2")
        return real.c_nvmlMemory_v2_t(version=version, total=g.memory_total, reserved=g.memory_reserved,
                                      used=g.memory_used, free=g.memory_total - g.memory_reserved - g.memory_used)

    def _fabric(self, h: FakeGpu, fn: str, ref: Any, struct_cls: type | tuple[type, ...]) -> int:
        g = self._dev(h, fn)
        info = getattr(ref, "_obj", ref)  # ctypes.byref(struct) -> struct
        assert isinstance(info, struct_cls), f"{fn} expects a {struct_cls}"
        if isinstance(info, real.c_nvmlGpuFabricInfo_v4_t) and g.fabric_struct < 4:
            self._raise(real.NVML_ERROR_FUNCTION_NOT_FOUND)  # pynvml's wrapper on a driver before 615
        if isinstance(info, real.c_nvmlGpuFabricInfo_v3_t):
            assert info.version == real.nvmlGpuFabricInfo_v3, "the struct's version must be set"
            if g.fabric_struct < 3:
                self._raise(real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if g.fabric_state is None:
            self._raise(real.NVML_ERROR_NOT_SUPPORTED)
        info.state, info.status = g.fabric_state, g.fabric_status
        if isinstance(info, real.c_nvmlGpuFabricInfo_v4_t):
            entries = g.fabric_cliques
            if entries is None:
                entries = [(real.NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER, g.fabric_clique),
                           (real.NVML_GPU_FABRIC_CLIQUE_TYPE_MULTICAST_POINTER, g.fabric_clique)
                           ] if g.fabric_clique else []
            for i, (kind, ident) in enumerate(entries):
                info.cliques[i].type, info.cliques[i].id = kind, ident
            info.numCliques = len(entries)
        else:
            info.cliqueId = g.fabric_clique
        ctypes.memmove(info.clusterUuid, g.fabric_cluster_uuid, 16)
        if hasattr(info, "healthMask"):
            info.healthMask = g.fabric_health_mask
        if hasattr(info, "healthSummary"):
            info.healthSummary = g.fabric_health_summary
        return real.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfoV(self, h: FakeGpu, ref: Any) -> int:
        return self._fabric(h, "nvmlDeviceGetGpuFabricInfoV", ref,
                            (real.c_nvmlGpuFabricInfoV_t, real.c_nvmlGpuFabricInfo_v3_t))

    def nvmlDeviceGetGpuFabricInfo_v4(self, h: FakeGpu, ref: Any) -> int:
        return self._fabric(h, "nvmlDeviceGetGpuFabricInfo_v4", ref, real.c_nvmlGpuFabricInfo_v4_t)

    def nvmlDeviceGetUnrepairableMemoryFlag_v1(self, h: FakeGpu) -> int:
        g = self._dev(h, "nvmlDeviceGetUnrepairableMemoryFlag_v1")
        if g.unrepairable_memory is None:
            self._raise(real.NVML_ERROR_NOT_SUPPORTED)
        return g.unrepairable_memory

    def nvmlDeviceGetGpuFabricInfo(self, h: FakeGpu, ref: Any) -> int:
        return self._fabric(h, "nvmlDeviceGetGpuFabricInfo", ref, real.c_nvmlGpuFabricInfo_t)

    def nvmlDeviceGetSramEccErrorStatus(self, h: FakeGpu, ref: Any) -> int:
        g = self._dev(h, "nvmlDeviceGetSramEccErrorStatus")
        status = getattr(ref, "_obj", ref)  # ctypes.byref(struct) -> struct
        assert isinstance(status, real.c_nvmlEccSramErrorStatus_v1_t), "expects a c_nvmlEccSramErrorStatus_v1_t"
        assert status.version == real.nvmlEccSramErrorStatus_v1, "the struct's version must be set"
        for member, value in g.sram.items():
            setattr(status, member, value)
        return real.NVML_SUCCESS

    def nvmlDeviceGetFieldValues(self, h: FakeGpu, field_ids: list[Any]) -> Any:
        g = self._dev(h, "nvmlDeviceGetFieldValues")
        values = (real.c_nvmlFieldValue_t * len(field_ids))()
        for slot, fid in zip(values, field_ids):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            slot.fieldId, slot.scopeId = fid, scope
            slot.valueType, slot.nvmlReturn = real.NVML_VALUE_TYPE_UNSIGNED_INT, real.NVML_SUCCESS
            known = {
                real.NVML_FI_DEV_MEMORY_TEMP: g.mem_temperature,
                real.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: g.recovery_action,
                real.NVML_FI_DEV_NVLINK_GET_SPEED: g.nvlink_speed_mbps if g.nvlink_states else None,
            }
            if (fid, scope) in g.nvlink_field_values and f"field:{fid}" not in g.unsupported:
                slot.valueType = real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                slot.value.ullVal = g.nvlink_field_values[(fid, scope)]
            elif f"field:{fid}" in g.unsupported or known.get(fid) is None:
                slot.nvmlReturn = real.NVML_ERROR_NOT_SUPPORTED
            else:
                slot.value.uiVal = ctypes.c_uint(known[fid]).value
        return values
