"""The CuPy backend, run for real over a NumPy-backed fake ``cupy`` (tests/fakes/fake_cupy.py): device
discovery, selection, the verified GEMM (and its silent-data-corruption detection), the HBM and PCIe
copies, and the node's gemm / bandwidth phases with ``backend = "cupy"``."""
from __future__ import annotations

import os

import numpy as np
import pytest

from healthcheck.burnin import backends
from healthcheck.policies import references
from healthcheck.burnin.backends import BackendUnavailable, CupyBackend, DeviceInfo, select_backend, word_sum
from healthcheck.burnin.bandwidth import run_hbm_copy, run_pcie
from healthcheck.burnin.gemm import make_inputs, run_gemm
from healthcheck.burnin.judge_compute import judge_bandwidth, judge_gemm
from healthcheck.burnin.node_run import PHASES, NodeContext
from healthcheck.burnin.settings import resolve
from healthcheck.core.model import Status
from tests.fakes.fake_cupy import DeviceArray, FakeCupy, FakeGpu, flip_bit, h100_node, install

UUID0 = "GPU-4f6c2a1e-7b3d-4c55-9e2a-000000000000"
UUID1 = "GPU-4f6c2a1e-7b3d-4c55-9e2a-000000000001"
NO_SKU = b"Fake CUDA GPU"  # matches no SKU of the built-in references: throughput is judged by the node only


def _torch_gone():
    class Gone:
        def __init__(self) -> None:
            raise BackendUnavailable("torch: not importable (ModuleNotFoundError: No module named 'torch')")
    return Gone


@pytest.fixture
def cupy_node(monkeypatch):
    """Install a fake cupy with the given GPUs (torch made unavailable); returns the fake."""
    monkeypatch.setattr(backends, "TorchBackend", _torch_gone())

    def make(gpus: list[FakeGpu], **kwargs) -> FakeCupy:
        return install(monkeypatch, FakeCupy(gpus, **kwargs))
    return make


# -- devices, library, dtypes -------------------------------------------------------------------------


def test_devices_parse_name_uuid_and_pci_address(cupy_node):
    cupy_node(h100_node(2))
    assert CupyBackend().devices() == [
        DeviceInfo(0, "NVIDIA H100 80GB HBM3", UUID0, "0000:18:00.0"),
        DeviceInfo(1, "NVIDIA H100 80GB HBM3", UUID1, "0000:2a:00.0"),
    ]


def test_devices_without_optional_properties(cupy_node):
    cupy_node([FakeGpu(name=b"NVIDIA A100-SXM4-80GB\x00\x00", uuid=b"short", pci=(1, 0xC1, 3)),
               FakeGpu(name=None, uuid=None, pci=None)])
    first, second = CupyBackend().devices()
    assert (first.name, first.uuid, first.pci_bus_id) == ("NVIDIA A100-SXM4-80GB", None, "0001:c1:03.0")
    assert (second.name, second.uuid, second.pci_bus_id, second.component) == ("cuda1", None, None, "gpu1")


@pytest.mark.parametrize("runtime, label", [(12040, "cuda 12.4"), (11080, "cuda 11.8"), (None, "cuda unknown")])
def test_library_names_cupy_and_the_cuda_runtime(cupy_node, runtime, label):
    cupy_node(h100_node(1), runtime=runtime)
    assert CupyBackend().library() == f"cupy 13.3.0 {label}"


def test_bf16_runs_as_fp16(cupy_node):
    cupy_node(h100_node(1))
    be = CupyBackend()
    assert [be.device_dtype(d) for d in ("bf16", "fp16", "fp32")] == ["fp16", "fp16", "fp32"]
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        be.device_dtype("int8")
    arr = be.upload(0, np.ones((4, 4), dtype=np.float32), "bf16")
    assert isinstance(arr, DeviceArray) and arr.dtype == np.float16 and arr.flags.c_contiguous
    assert be.empty(0, (3,), "i32").dtype == np.int32


def test_checksum_matches_word_sum_of_the_download(cupy_node):
    cupy_node(h100_node(2))
    be = CupyBackend()
    a, _ = make_inputs(32, "fp16", 7)
    dev = be.upload(1, a, "fp16")
    assert be.scalars(1, [be.checksum(1, dev)]) == [word_sum(be.download(1, dev))]
    assert be.download(1, dev).dtype == np.float16 and be.scalars(1, []) == []


# -- selection ------------------------------------------------------------------------------------------


def test_auto_picks_cupy_when_torch_is_unavailable(cupy_node):
    cupy_node(h100_node(2))
    chosen = select_backend("auto")
    assert isinstance(chosen, CupyBackend) and chosen.name == "cupy" and chosen.host_only is False
    assert chosen.fallback == ()


def test_auto_falls_back_to_numpy_when_cupy_sees_no_device(cupy_node):
    cupy_node([])
    chosen = select_backend("auto")
    assert chosen.name == "numpy"
    assert chosen.fallback[1] == ("cupy: no CUDA device (CUDARuntimeError: cudaErrorNoDevice: "
                                  "no CUDA-capable device is detected)")


@pytest.mark.parametrize("no_device_error, message", [
    (True, r"cupy: no CUDA device \(CUDARuntimeError: cudaErrorNoDevice"),
    (False, r"^cupy: no CUDA device$"),
])
def test_explicit_cupy_without_devices_says_why(cupy_node, no_device_error, message):
    cupy_node([], no_device_error=no_device_error)
    with pytest.raises(BackendUnavailable, match=message):
        select_backend("cupy")


# -- the fake catches misuse ----------------------------------------------------------------------------


def test_host_arrays_and_wrong_devices_are_refused(cupy_node):
    cupy_node(h100_node(2))
    be = CupyBackend()
    host = np.arange(8, dtype=np.int32)
    on0, other0 = be.upload(0, host), be.empty(0, (8,), "i32")
    with pytest.raises(TypeError, match="copyto: unsupported type ndarray"):
        be.copy(0, other0, host)
    with pytest.raises(ValueError, match="copyto: array on device 0, current device 1"):
        be.copy(1, other0, on0)
    with pytest.raises(TypeError, match="int64 array cannot be set to int32 array"):
        be.host_to_device(0, other0, host.astype(np.int64))
    with pytest.raises(TypeError, match="NumPy isfinite on a device array"):
        np.isfinite(on0)  # host code that forgot to download


# -- GEMM -----------------------------------------------------------------------------------------------


def test_gemm_on_two_devices_verifies_and_passes(cupy_node):
    fake = cupy_node(h100_node(2, name=NO_SKU))
    results = run_gemm(CupyBackend(), None, duration_s=0.05, n=64, dtype="bf16", max_iterations=40)
    assert [r.errors for r in results] == [[], []]
    assert {r.dtype for r in results} == {"fp16"} and {r.library for r in results} == {"cupy 13.3.0 cuda 12.4"}
    assert [r.uuid for r in results] == [UUID0, UUID1]
    assert results[0].digest == results[1].digest and len(results[0].digest) == 32
    for r in results:
        assert r.mismatches == 0 and r.verified == r.iterations >= 1 and r.tflops > 0
        assert 0 < r.reference_error <= r.tolerance == 5e-3
    assert all(fake.matmuls[d] == results[d].iterations + 1 for d in (0, 1))  # + iteration 0
    assert fake.synchronized[0] >= 2 and fake.synchronized[1] >= 2
    verify = [f for f in judge_gemm(results, None) if f.check == "burnin.gemm.verify"]
    assert [(f.component, f.status) for f in verify] == [("gpu0", Status.PASS), ("gpu1", Status.PASS)]
    assert "repeated products identical" in verify[0].message and "fp16 n=64" in verify[0].message


def test_gemm_catches_silent_data_corruption_on_one_device(cupy_node):
    cupy_node(h100_node(2, name=NO_SKU), fault=flip_bit(device=1, from_call=5))
    results = run_gemm(CupyBackend(), [0, 1], duration_s=0.0, n=64, dtype="fp16", max_iterations=12,
                       min_iterations=12)
    good, bad = results
    assert (good.mismatches, good.first_mismatch, good.verified) == (0, None, 12)
    assert (bad.mismatches, bad.first_mismatch, bad.verified) == (8, 5, 12)
    assert good.digest == bad.digest  # iteration 0 was still right
    verify = {f.component: f for f in judge_gemm(results, None) if f.check == "burnin.gemm.verify"}
    assert verify["gpu0"].status is Status.PASS
    assert verify["gpu1"].status is Status.FAIL
    assert ("8 of 12 repeated products differed from the first (silent data corruption, first at iteration 5)"
            in verify["gpu1"].message)
    assert verify["gpu1"].metrics["gemm_mismatches"] == 8.0


def test_gemm_device_wrong_from_the_start_is_outvoted(cupy_node):
    cupy_node(h100_node(3, name=NO_SKU), fault=flip_bit(device=2, from_call=0, bit=3))
    results = run_gemm(CupyBackend(), None, duration_s=0.0, n=32, dtype="fp32", max_iterations=4)
    assert results[0].digest == results[1].digest != results[2].digest
    assert results[2].mismatches == 0  # consistently wrong: only the peers can tell
    verify = {f.component: f for f in judge_gemm(results, None) if f.check == "burnin.gemm.verify"}
    assert [verify[c].status for c in ("gpu0", "gpu1", "gpu2")] == [Status.PASS, Status.PASS, Status.FAIL]
    assert "result differs from the other 2 Fake CUDA GPU" in verify["gpu2"].message


# -- bandwidth ------------------------------------------------------------------------------------------


def test_hbm_and_pcie_copies_verify_and_pass(cupy_node):
    fake = cupy_node(h100_node(2, name=NO_SKU))
    be = CupyBackend()
    results = run_hbm_copy(be, None, size_bytes=1 << 16, repeats=3) + run_pcie(be, None, size_bytes=1 << 16,
                                                                              repeats=3)
    assert [(r.component, r.kind) for r in results] == [
        ("gpu0", "hbm_copy"), ("gpu1", "hbm_copy"), ("gpu0", "h2d"), ("gpu0", "d2h"), ("gpu1", "h2d"), ("gpu1", "d2h")]
    for r in results:
        assert (r.error, r.skipped, r.corrupted, r.repeats) == (None, None, False, 3)
        assert r.gbps > 0 and r.median_gbps > 0 and r.size_bytes == 1 << 16
    assert fake.pinned == 4  # a source and a destination buffer per device
    findings = judge_bandwidth(results, None)
    assert [f.status for f in findings] == [Status.PASS] * 6
    assert {f.check for f in findings} == {"burnin.bandwidth.hbm", "burnin.bandwidth.pcie"}


@pytest.mark.parametrize("kind, result_kind", [("copyto", "hbm_copy"), ("set", "h2d"), ("get", "d2h")])
def test_corrupted_copies_fail(cupy_node, kind, result_kind):
    def zero_first_word(k: str, device: int, dst: np.ndarray) -> None:
        if k == kind and device == 1:
            dst.reshape(-1)[0] ^= 1

    cupy_node(h100_node(2, name=NO_SKU), copy_fault=zero_first_word)
    be = CupyBackend()
    results = run_hbm_copy(be, None, size_bytes=4096, repeats=2) + run_pcie(be, None, size_bytes=4096, repeats=2)
    bad = [(r.component, r.kind) for r in results if r.corrupted]
    assert bad == [("gpu1", result_kind)]
    (finding,) = [f for f in judge_bandwidth(results, None) if f.status is not Status.PASS]
    assert finding.status is Status.FAIL and "copied data differs from the source" in finding.message


# -- the node phases --------------------------------------------------------------------------------------


def _ctx(**table) -> NodeContext:
    s = resolve({"backend": "cupy", "gemm_duration_s": 0.1, "gemm_n": 64, "gemm_dtype": "bf16",
                 "bandwidth_bytes": 1 << 20, "bandwidth_repeats": 2, **table}, environ={})
    return NodeContext("n1", s, references.load())


@pytest.fixture
def no_gpu_on_bus(monkeypatch):
    """Telemetry stays skipped whatever GPUs the machine running the tests has."""
    monkeypatch.setattr("healthcheck.probes.nvml.nvidia_gpu_present", lambda *a: [])


def test_node_phases_run_on_cupy(cupy_node, no_gpu_on_bus):
    cupy_node(h100_node(2, name=NO_SKU))
    ctx = _ctx()
    gemm = PHASES["gemm"](ctx)
    assert ctx.backend_name == "cupy" and ctx.gpu_count == 2 and ctx.gpu_name == "Fake CUDA GPU"
    verify = [f for f in gemm if f.check == "burnin.gemm.verify"]
    assert [(f.component, f.status) for f in verify] == [("gpu0", Status.PASS), ("gpu1", Status.PASS)]
    assert all("fp16 n=64" in f.message for f in verify)
    # throughput: measured on both; its status depends on the test machine's load (the node median)
    tflops = [f for f in gemm if f.check == "burnin.gemm.tflops"]
    assert [f.component for f in tflops] == ["gpu0", "gpu1"] and all(f.metrics["gemm_tflops"] > 0 for f in tflops)
    assert [f.status for f in gemm if f.check == "burnin.telemetry"] == [Status.SKIP]
    (key, digest), = {tuple(v) for v in ctx.extra["gemm_digests"].values()}
    assert key == "Fake CUDA GPU|cupy 13.3.0 cuda 12.4|fp16|n=64|seed=1234" and len(digest) == 32
    bandwidth = PHASES["bandwidth"](ctx)
    assert len(bandwidth) == 6 and {f.status for f in bandwidth} == {Status.PASS}
    assert {f.check for f in bandwidth} == {"burnin.bandwidth.hbm", "burnin.bandwidth.pcie"}


def test_node_phase_judges_cupy_devices_against_their_sku(cupy_node, no_gpu_on_bus):
    cupy_node(h100_node(2))  # "NVIDIA H100 80GB HBM3": NumPy copies are far below an H100's HBM
    ctx = _ctx()
    gemm = PHASES["gemm"](ctx)
    assert ctx.sku is not None and ctx.sku.name == "h100_sxm"
    assert {f.status for f in gemm if f.check == "burnin.gemm.verify"} == {Status.PASS}
    hbm = [f for f in PHASES["bandwidth"](ctx) if f.check == "burnin.bandwidth.hbm"]
    assert [f.status for f in hbm] == [Status.FAIL, Status.FAIL]
    assert "below reference" in hbm[0].message and "h100_sxm hbm_copy_gbps 2900" in hbm[0].message


def test_cupy_bf16_run_is_judged_against_the_sku_throughput_reference(cupy_node, no_gpu_on_bus):
    cupy_node(h100_node(2))  # NumPy's TFLOP/s are far below an H100's: a reference would fail them
    tflops = [f for f in PHASES["gemm"](_ctx()) if f.check == "burnin.gemm.tflops"]
    assert len(tflops) == 2 and all("no reference" not in f.message for f in tflops)
    assert {f.status for f in tflops} == {Status.FAIL}


# -- CUDA device order ---------------------------------------------------------------------------


def test_cupy_backend_asks_for_pci_bus_order_like_torch(cupy_node, monkeypatch):
    seen: list[str | None] = []
    fake = cupy_node(h100_node(2))
    count = fake.getDeviceCount
    fake.getDeviceCount = lambda: (seen.append(os.environ.get("CUDA_DEVICE_ORDER")), count())[1]
    install(monkeypatch, fake)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "unset-by-the-test")  # remembered, restored after the test
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    CupyBackend()
    assert seen and seen[0] == "PCI_BUS_ID"
