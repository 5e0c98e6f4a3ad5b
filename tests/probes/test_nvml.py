"""NVML probe: the real pynvml API (constants, exceptions, structs) behind a fake driver, plus sysfs."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pynvml
import pytest

from healthcheck.core.model import THROTTLE_REASONS, GpuInfo, Snapshot
from healthcheck.probes.nvml import NvmlUnavailable, nvidia_gpu_present, probe_gpus
from tests.fakes.fake_pynvml import FakeGpu, FakeNvml, h100_node, old_gpu

MIB = 1024 * 1024


def probe(gpus: list[FakeGpu], **kwargs) -> tuple[list[GpuInfo], FakeNvml]:
    fake = FakeNvml(gpus, **kwargs)
    return probe_gpus(nvml=fake), fake


# ------------------------------------------------------------------------------------ healthy node


def test_healthy_h100_node_exact_values():
    infos, fake = probe(h100_node())
    assert [g.index for g in infos] == list(range(8))
    assert [g.pci_bus_id for g in infos] == [
        "0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
        "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0",
    ]
    g = infos[3]
    assert g.uuid == "GPU-4f6c2a1e-7b3d-4c55-9e2a-000000000003"
    assert g.serial == "1652321010003"  # bytes decoded
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.vbios == "96.00.89.00.01"
    assert g.driver_version == "550.90.07"
    assert g.cuda_driver_version == "12.4"
    assert (g.lost, g.error) == (False, None)
    assert (g.ecc_mode_current, g.ecc_mode_pending) == (True, True)
    assert (g.ecc_corrected_volatile, g.ecc_uncorrected_volatile) == (0, 0)
    assert (g.ecc_corrected_aggregate, g.ecc_uncorrected_aggregate) == (0, 0)
    assert (g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) == (0, 0, False)
    assert (g.remap_correctable, g.remap_uncorrectable, g.remap_pending, g.remap_failure) == (0, 0, False, False)
    assert g.temperature_c == 33.0
    assert (g.temp_slowdown_c, g.temp_shutdown_c, g.temp_max_operating_c) == (89.0, 92.0, 87.0)
    assert (g.mem_temperature_c, g.mem_temp_max_c) == (41.0, 95.0)
    assert g.throttle_reasons == []
    assert g.power_draw_w == pytest.approx(71.234)
    assert g.power_limit_w == 700.0
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (5, 5, 16, 16)
    assert g.pcie_replay_count == 0
    assert len(g.nvlinks) == 18
    assert [nl.link for nl in g.nvlinks] == list(range(18))
    assert all(nl.active for nl in g.nvlinks)
    assert all(nl.speed_gbps == pytest.approx(26.562) for nl in g.nvlinks)
    assert all((nl.replay_errors, nl.recovery_errors, nl.crc_flit_errors, nl.crc_data_errors) == (0, 0, 0, 0)
               for nl in g.nvlinks)
    assert g.persistence_mode is True
    assert g.processes == []
    assert (g.memory_used_mib, g.memory_total_mib) == (1.0, 81559.0)
    assert (g.fabric_state, g.fabric_status) == ("completed", "Success")
    assert (g.recovery_action, g.reset_required) == ("none", False)
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)
    assert not fake.initialized


def test_result_round_trips_through_snapshot_json():
    infos, _ = probe(h100_node(2))
    snap = Snapshot(node="gpu01", taken_at="2024-05-01T00:00:00Z", gpus=infos, gpu_source="nvml")
    assert Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap


# -------------------------------------------------------------------------------- unsupported / old


def test_not_supported_fields_stay_none_without_error():
    gpu = h100_node(1)[0]
    gpu.unsupported = {"nvmlDeviceGetSerial", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors",
                       "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetCurrentClocksEventReasons",
                       "field:82", "threshold:3"}
    (g,), _ = probe([gpu])
    assert g.serial is None and g.power_draw_w is None and g.pcie_replay_count is None
    assert g.ecc_corrected_volatile is None and g.ecc_uncorrected_aggregate is None
    assert g.throttle_reasons is None
    assert g.mem_temperature_c is None and g.temp_max_operating_c is None
    assert g.power_limit_w == 700.0 and g.temp_slowdown_c == 89.0  # neighbours unaffected
    assert (g.lost, g.error) == (False, None)


def test_old_gpu_without_nvlink_fabric_remapping():
    (g,), _ = probe([old_gpu()])
    assert g.nvlinks is None
    assert (g.fabric_state, g.fabric_status) == (None, None)
    assert (g.remap_correctable, g.remap_uncorrectable, g.remap_pending, g.remap_failure) == (None,) * 4
    assert (g.recovery_action, g.reset_required) == (None, None)
    assert (g.retired_pages_sbe, g.retired_pages_dbe) == (2, 1)
    assert (g.pcie_gen_current, g.memory_total_mib) == (3, 32510.0)
    assert (g.lost, g.error) == (False, None)


def test_older_pynvml_without_functions_falls_back():
    """pynvml < 12.535 lacks *ClocksEventReasons; a very old one lacks fabric and remapped rows."""
    gpu = h100_node(1)[0]
    gpu.clock_reasons = pynvml.nvmlClocksThrottleReasonSwPowerCap
    missing = {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetGpuFabricInfoV",
               "nvmlDeviceGetRemappedRows"}
    (g,), fake = probe([gpu], missing=missing)
    assert g.throttle_reasons == ["sw_power_cap"]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls
    assert g.fabric_state == "completed"  # via the deprecated nvmlDeviceGetGpuFabricInfo
    assert "nvmlDeviceGetGpuFabricInfo" in fake.calls
    assert g.remap_pending is None


def test_other_nvml_error_leaves_field_none_and_is_noted():
    gpu = h100_node(1)[0]
    gpu.errors = {"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_UNKNOWN}
    (g,), _ = probe([gpu])
    assert g.power_draw_w is None and not g.lost
    assert g.error == "nvmlDeviceGetPowerUsage: Unknown Error"


# --------------------------------------------------------------------------------------- lost GPUs


def test_lost_gpu_others_still_probed():
    gpus = h100_node()
    gpus[2].lost = True
    infos, fake = probe(gpus)
    assert len(infos) == 8
    assert infos[2].lost is True and "GPU is lost" in infos[2].error
    assert infos[2].pci_bus_id is None and infos[2].temperature_c is None
    assert all(not g.lost and g.temperature_c == 33.0 for i, g in enumerate(infos) if i != 2)
    assert fake.shutdown_calls == 1


def test_gpu_lost_mid_probe_keeps_pci_bus_id():
    gpus = h100_node(2)
    gpus[1].errors = {"nvmlDeviceGetNvLinkErrorCounter": pynvml.NVML_ERROR_GPU_IS_LOST}
    infos, _ = probe(gpus)
    assert infos[1] == GpuInfo(index=1, pci_bus_id="0000:2a:00.0", lost=True,
                               error="nvmlDeviceGetNvLinkErrorCounter: GPU is lost")
    assert not infos[0].lost


def test_gpu_without_handle_is_lost():
    gpus = h100_node(2)
    gpus[0].no_handle = pynvml.NVML_ERROR_UNKNOWN
    infos, _ = probe(gpus)
    assert infos[0].lost and infos[0].error.startswith("Unable to determine the device handle for GPU0")
    assert not infos[1].lost and infos[1].uuid


# ------------------------------------------------------------------------------------ init/shutdown


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
                                  pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH])
def test_init_failure_raises_nvml_unavailable(code):
    fake = FakeNvml(h100_node(), init_error=code)
    with pytest.raises(NvmlUnavailable, match="nvmlInit failed"):
        probe_gpus(nvml=fake)
    assert fake.init_calls == 1 and fake.calls == []


def test_fake_raises_real_exception_classes():
    fake = FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        fake.nvmlInit()
    assert fake.NVMLError is pynvml.NVMLError


def test_shutdown_called_once_even_when_probing_raises():
    fake = FakeNvml(h100_node(2))

    def boom():
        raise RuntimeError("unexpected")

    fake.nvmlDeviceGetCount = boom
    with pytest.raises(RuntimeError):
        probe_gpus(nvml=fake)
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)


def test_init_once_per_run():
    fake = FakeNvml(h100_node())
    probe_gpus(nvml=fake)
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)


def test_close_false_leaves_the_session_to_the_process_exit():
    fake = FakeNvml(h100_node(2))
    infos = probe_gpus(nvml=fake, close=False)
    assert len(infos) == 2 and not any(g.lost for g in infos)
    assert (fake.init_calls, fake.shutdown_calls, fake.sessions) == (1, 0, 1)


# ------------------------------------------------------------------------------- devices at once


class _Meeting(FakeNvml):
    """Every device's name query waits until all devices that answer are inside theirs: only a probe
    that queries the devices at once gets past it (one after the other, the barrier breaks after its
    timeout)."""

    def __init__(self, gpus, timeout: float = 30.0):
        super().__init__(gpus)
        import threading

        self.barrier = threading.Barrier(sum(not g.lost for g in gpus), timeout=timeout)

    def nvmlDeviceGetName(self, h):
        self.barrier.wait()
        return super().nvmlDeviceGetName(h)


def test_the_devices_are_probed_at_once_with_the_same_values_in_index_order():
    gpus = h100_node(8)
    gpus[5].ecc[(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)] = 3
    gpus[6].lost = True
    fake = _Meeting(gpus)
    infos = probe_gpus(nvml=fake)
    assert not fake.barrier.broken
    assert [g.index for g in infos] == list(range(8))
    uuids = [f"GPU-4f6c2a1e-7b3d-4c55-9e2a-{i:012x}" for i in range(8) if i != 6]
    assert [g.uuid for g in infos if not g.lost] == uuids
    assert infos[5].ecc_uncorrected_volatile == 3 and infos[4].ecc_uncorrected_volatile == 0
    assert infos[6].lost and "GPU is lost" in infos[6].error
    # one device after the other gives the same GpuInfo for each
    sequential = [probe_gpus(nvml=FakeNvml([g]))[0] for g in gpus]
    assert [dataclasses.replace(g, index=0) for g in infos] == sequential
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)


def test_an_error_in_one_device_thread_is_raised_once_all_are_done():
    gpus = h100_node(4)

    class Broken(FakeNvml):
        def nvmlDeviceGetSerial(self, h):
            if h is gpus[2]:
                raise RuntimeError("pynvml bug on GPU 2")
            return super().nvmlDeviceGetSerial(h)

    fake = Broken(gpus)
    with pytest.raises(RuntimeError, match="GPU 2"):
        probe_gpus(nvml=fake)
    assert (fake.init_calls, fake.shutdown_calls) == (1, 1)


# ---------------------------------------------------------------------------------------- decoding


def test_throttle_bits_decode_with_real_constants():
    assert pynvml.nvmlClocksEventReasonHwSlowdown == 0x8
    assert pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown == 0x80
    gpu = h100_node(1)[0]
    gpu.clock_reasons = 0x8 | 0x80
    (g,), _ = probe([gpu])
    assert g.throttle_reasons == ["hw_slowdown", "hw_power_brake_slowdown"]


def test_all_throttle_bits_decode_in_canonical_order():
    gpu = h100_node(1)[0]
    gpu.clock_reasons = 0x1FF | 0x400  # 0x400 (reliability) has no canonical name: ignored
    (g,), _ = probe([gpu])
    assert g.throttle_reasons == list(THROTTLE_REASONS)


def test_faults_decoded():
    gpu = h100_node(1)[0]
    gpu.ecc = {(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC): 2,
               (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_AGGREGATE_ECC): 117}
    gpu.remapped_rows = (3, 1, 1, 0)
    gpu.nvlink_states[5] = 0
    gpu.nvlink_errors = {(7, pynvml.NVML_NVLINK_ERROR_DL_REPLAY): 12,
                         (7, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT): 4}
    gpu.fabric_state = pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS
    gpu.recovery_action = pynvml.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET
    gpu.pcie = (4, 5, 8, 16)
    (g,), _ = probe([gpu])
    assert (g.ecc_uncorrected_volatile, g.ecc_corrected_aggregate, g.ecc_corrected_volatile) == (2, 117, 0)
    assert (g.remap_correctable, g.remap_uncorrectable, g.remap_pending, g.remap_failure) == (3, 1, True, False)
    assert g.nvlinks[5].active is False and g.nvlinks[5].speed_gbps is None
    assert (g.nvlinks[7].replay_errors, g.nvlinks[7].crc_flit_errors, g.nvlinks[7].recovery_errors) == (12, 4, 0)
    assert (g.fabric_state, g.fabric_status) == ("in_progress", None)
    assert (g.recovery_action, g.reset_required) == ("drain_and_reset", True)
    assert (g.pcie_gen_current, g.pcie_width_current) == (4, 8)


@pytest.mark.parametrize("action,name", [
    (pynvml.NVML_GPU_RECOVERY_ACTION_GPU_RESET, "gpu_reset"),
    (pynvml.NVML_GPU_RECOVERY_ACTION_NODE_REBOOT, "node_reboot"),
    (pynvml.NVML_GPU_RECOVERY_ACTION_DRAIN_P2P, "drain_p2p"),
])
def test_recovery_actions(action, name):
    gpu = h100_node(1)[0]
    gpu.recovery_action = action
    (g,), _ = probe([gpu])
    assert (g.recovery_action, g.reset_required) == (name, True)


def test_fabric_failure_status_text():
    gpu = h100_node(1)[0]
    gpu.fabric_status = pynvml.NVML_ERROR_NOT_READY
    (g,), _ = probe([gpu])
    assert g.fabric_state == "completed"
    assert g.fabric_status == str(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_READY))


def test_reset_required_error_marks_gpu():
    gpu = h100_node(1)[0]
    gpu.errors = {"nvmlDeviceGetTotalEccErrors": pynvml.NVML_ERROR_RESET_REQUIRED}
    (g,), _ = probe([gpu])
    assert g.reset_required is True and not g.lost


def test_processes_with_names():
    gpu = h100_node(1)[0]
    gpu.processes = [(4242, 40_000 * MIB, "python3"), (4300, None, "/usr/bin/nccl-tests/all_reduce_perf")]
    (g,), _ = probe([gpu])
    assert [(p.pid, p.name, p.used_memory_mib) for p in g.processes] == [
        (4242, "python3", 40000.0), (4300, "/usr/bin/nccl-tests/all_reduce_perf", None)]


def test_process_name_unavailable_leaves_name_none():
    gpu = h100_node(1)[0]
    gpu.processes = [(77, MIB, "x")]
    fake = FakeNvml([gpu])
    fake.nvmlSystemGetProcessName = lambda pid: fake._raise(pynvml.NVML_ERROR_NOT_FOUND)
    (g,) = probe_gpus(nvml=fake)
    assert g.processes[0].pid == 77 and g.processes[0].name is None


def test_process_listing_falls_back_to_v2_on_library_mismatch():
    """pynvml's unversioned call raises NVMLLibraryMismatchError against a driver without the _v3 symbol."""
    gpu = h100_node(1)[0]
    gpu.processes = [(4242, 2 * MIB, "python3")]
    fake = FakeNvml([gpu])
    v3 = fake.nvmlDeviceGetComputeRunningProcesses

    def mismatch(handle):
        raise pynvml.NVMLLibraryMismatchError("Unversioned function called")

    fake.nvmlDeviceGetComputeRunningProcesses = mismatch
    fake.nvmlDeviceGetComputeRunningProcesses_v2 = v3
    (g,) = probe_gpus(nvml=fake)
    assert [(p.pid, p.name, p.used_memory_mib) for p in g.processes] == [(4242, "python3", 2.0)]
    assert g.error is None


def test_fake_uses_real_structures():
    """If pynvml renames these structures, the fake (and this test) break loudly."""
    fake = FakeNvml(h100_node(1))
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(fake.nvmlDeviceGetMemoryInfo(h), pynvml.c_nvmlMemory_t)
    assert isinstance(fake.nvmlDeviceGetPciInfo(h), pynvml.nvmlPciInfo_t)
    assert {f.name for f in dataclasses.fields(FakeGpu)} >= {"lost", "unsupported", "errors"}


# ------------------------------------------------------------------------------------------- sysfs


def _pci(root: Path, addr: str, vendor: str, cls: str) -> None:
    d = root / "bus" / "pci" / "devices" / addr
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(cls + "\n")


def test_nvidia_gpu_present_from_sysfs(tmp_path):
    _pci(tmp_path, "0000:18:00.0", "0x10de", "0x030200")  # H100 SXM: 3D controller
    _pci(tmp_path, "0000:2a:00.0", "0x10de", "0x030200")
    _pci(tmp_path, "0000:03:00.0", "0x10de", "0x030000")  # VGA-class NVIDIA GPU
    _pci(tmp_path, "0000:05:00.0", "0x10de", "0x068000")  # NVSwitch
    _pci(tmp_path, "0000:18:00.1", "0x10de", "0x040300")  # NVIDIA HD audio function
    _pci(tmp_path, "0000:1a:00.0", "0x15b3", "0x020700")  # Mellanox ConnectX-7 (InfiniBand)
    _pci(tmp_path, "0000:00:00.0", "0x8086", "0x060000")  # host bridge
    (tmp_path / "bus" / "pci" / "devices" / "0000:99:00.0").mkdir()  # unreadable: no files
    assert nvidia_gpu_present(tmp_path) == ["0000:03:00.0", "0000:18:00.0", "0000:2a:00.0"]


def test_nvidia_gpu_present_without_sysfs(tmp_path):
    assert nvidia_gpu_present(tmp_path / "nope") == []
    _pci(tmp_path, "0000:1a:00.0", "0x15b3", "0x020700")
    assert nvidia_gpu_present(str(tmp_path)) == []


def test_nvidia_gpu_present_does_not_import_pynvml():
    import subprocess
    import sys
    code = ("import sys; from healthcheck.probes.nvml import nvidia_gpu_present; nvidia_gpu_present('/nonexistent');"
            "print('pynvml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------- real driver


@pytest.mark.gpu
def test_real_driver_probe():
    present = nvidia_gpu_present()
    if not present:
        pytest.skip("no NVIDIA GPU on the PCI bus")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        pytest.skip(f"NVML cannot init: {exc}")
    infos = probe_gpus()
    assert infos, "NVML reports no GPU although the PCI bus shows some"
    assert len(infos) <= len(present)
    for g in infos:
        assert not g.lost, g.error
        assert g.pci_bus_id in present
        assert g.uuid and g.uuid.startswith(("GPU-", "MIG-"))
        assert g.name and g.driver_version and g.cuda_driver_version
        assert g.memory_total_mib and g.memory_total_mib > 1000
        assert g.temperature_c is not None and 0 < g.temperature_c < 120
        assert g.throttle_reasons is None or set(g.throttle_reasons) <= set(THROTTLE_REASONS)


# ------------------------------------------------------------- the session left to the hooks' child's exit


def test_live_probe_closes_the_session_unless_told_the_process_exits_right_after():
    from healthcheck.probes.live import LiveOptions, _gpus

    for close, sessions in ((True, 0), (False, 1)):
        fake = FakeNvml(h100_node(2))
        snap = Snapshot(node="n1", taken_at="2026-12-04T00:00:00+00:00")
        gpus = _gpus(LiveOptions(nvml=fake, nvml_close=close), snap)
        assert len(gpus) == 2 and snap.gpu_source == "nvml"
        assert fake.sessions == sessions


def test_snapshot_for_hands_nvml_close_to_the_live_probes(monkeypatch):
    from healthcheck.pipeline import acquire
    from healthcheck.config.model import default_expectations
    from healthcheck.probes import live

    seen = []
    monkeypatch.setattr(live, "snapshot_live", lambda opts, taken_at, sources=None: seen.append(opts.nvml_close))
    acquire.snapshot_for("n1", default_expectations(), "2026-12-04T00:00:00+00:00")
    acquire.snapshot_for("n1", default_expectations(), "2026-12-04T00:00:00+00:00", nvml_close=False)
    assert seen == [True, False]


# ----------------------------------------------------------------------- memory the driver reserves


def test_memory_the_driver_reserves_is_not_counted_as_used_as_nvidia_smi_does_not():
    """An idle H200 on driver 580: nvidia-smi "Reserved 616 MiB, Used 0 MiB"; the first version of the
    NVML call counts the reservation as used, the second (what nvidia-smi reads) does not."""
    gpu = h100_node(1)[0]
    gpu.memory_used, gpu.memory_reserved = 0, 616 * MIB
    (g,), fake = probe([gpu])
    assert (g.memory_used_mib, g.memory_total_mib) == (0.0, 81559.0)
    assert "nvmlDeviceGetMemoryInfo_v2" in fake.calls and "nvmlDeviceGetMemoryInfo" not in fake.calls


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NOT_SUPPORTED,
                                  pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH])
def test_a_driver_without_the_second_version_gives_the_first_ones_figure(code):
    gpu = h100_node(1)[0]
    gpu.memory_used, gpu.memory_reserved = 0, 616 * MIB
    gpu.errors["nvmlDeviceGetMemoryInfo_v2"] = code
    (g,), _ = probe([gpu])
    assert g.memory_used_mib == 616.0 and g.field_errors == {} and g.error is None


def test_a_pynvml_without_the_version_argument_gives_the_first_ones_figure():
    class OldPynvml(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, h):  # no version argument: TypeError when given one
            return super().nvmlDeviceGetMemoryInfo(h)

    gpu = h100_node(1)[0]
    gpu.memory_reserved = 616 * MIB
    (g,) = probe_gpus(nvml=OldPynvml([gpu]))
    assert g.memory_used_mib == 617.0 and g.error is None


def test_an_error_of_the_second_version_is_that_fields_error():
    gpu = h100_node(1)[0]
    gpu.errors["nvmlDeviceGetMemoryInfo_v2"] = pynvml.NVML_ERROR_UNKNOWN
    (g,), _ = probe([gpu])
    assert g.memory_used_mib is None and g.memory_total_mib is None
    assert g.field_errors["memory_used_mib"] == "Unknown Error (nvmlDeviceGetMemoryInfo_v2)"
    assert not g.lost
