"""A burn-in never passes a GPU node without touching its GPUs: the "auto" backend falling back to
NumPy on a node with NVIDIA GPUs fails the GEMM and bandwidth phases, saying why each GPU backend could
not run; an nccl-only run (nccl.sbatch) learns the GPU count and model from the bus and NVML, so it runs
`-g <GPUs>` and is judged against the SKU's references."""
from __future__ import annotations

import pytest

from healthcheck.burnin import backends, node_run
from healthcheck.policies import references
from healthcheck.burnin.backends import BackendUnavailable
from healthcheck.burnin.node_run import NodeContext, PHASES
from healthcheck.burnin.settings import resolve
from healthcheck.core.model import Status

BUS = [f"0000:{b:02x}:00.0" for b in (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb)]


def _unavailable(name: str):
    class Gone:
        def __init__(self) -> None:
            raise BackendUnavailable(f"{name}: not importable (ModuleNotFoundError: No module named '{name}')")
    return Gone


@pytest.fixture
def no_gpu_backend(monkeypatch):
    monkeypatch.setattr(backends, "TorchBackend", _unavailable("torch"))
    monkeypatch.setattr(backends, "CupyBackend", _unavailable("cupy"))


def ctx_for(tmp_path, gpus: int = 0, **settings) -> NodeContext:
    s = resolve({"gemm_duration_s": 0.1, "gemm_n": 32, "bandwidth_repeats": 1, "bandwidth_bytes": 1 << 20,
                 "nccl_dir": str(tmp_path / "no-nccl"), **settings})
    ctx = NodeContext("n1", s, references.load())
    ctx.gpu_count = gpus  # what the checks phase saw
    return ctx


def test_auto_says_why_it_fell_back(no_gpu_backend):
    chosen = backends.select_backend("auto")
    assert chosen.name == "numpy" and [w.split(":")[0] for w in chosen.fallback] == ["torch", "cupy"]


@pytest.mark.parametrize("phase, check", [("gemm", "burnin.gemm"), ("bandwidth", "burnin.bandwidth")])
def test_auto_on_a_gpu_node_without_a_gpu_backend_fails(tmp_path, no_gpu_backend, phase, check):
    ctx = ctx_for(tmp_path, gpus=8, phases=[phase])
    (finding,) = node_run.run_node(ctx, "2026-12-02T00:00:00+00:00").findings
    assert (finding.check, finding.status) == (check, Status.FAIL)
    assert finding.message.startswith("8 NVIDIA GPU(s) here but no GPU compute backend (torch: not importable")
    assert "cupy: not importable" in finding.message and "the GPUs were not stressed" in finding.message


def test_a_gpu_on_the_bus_counts_even_when_the_checks_did_not_run(tmp_path, no_gpu_backend, monkeypatch):
    monkeypatch.setattr("healthcheck.probes.nvml.nvidia_gpu_present", lambda *a: BUS[:2])
    (finding,) = node_run.run_node(ctx_for(tmp_path, phases=["gemm"]), "2026-12-02T00:00:00+00:00").findings
    assert finding.status is Status.FAIL and finding.message.startswith("2 NVIDIA GPU(s) here")


def test_numpy_on_purpose_or_a_cpu_only_node_runs(tmp_path, no_gpu_backend, monkeypatch):
    monkeypatch.setattr("healthcheck.probes.nvml.nvidia_gpu_present", lambda *a: [])
    for ctx in (ctx_for(tmp_path, gpus=8, backend="numpy"), ctx_for(tmp_path)):
        findings = PHASES["gemm"](ctx)
        verify = [f for f in findings if f.check == "burnin.gemm.verify"]
        assert verify and all(f.status is Status.PASS for f in verify), findings
        assert ctx.backend_name == "numpy"


class FakeNvml:
    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, _handle):
        return b"NVIDIA H100 80GB HBM3"


def test_an_nccl_only_run_learns_the_gpus_from_the_bus_and_nvml(tmp_path, monkeypatch):
    monkeypatch.setattr("healthcheck.probes.nvml.nvidia_gpu_present", lambda *a: BUS)
    monkeypatch.setattr(node_run, "_nvml", lambda indices: FakeNvml())
    ctx = ctx_for(tmp_path, phases=["nccl"], nccl_collectives=["all_reduce"])
    findings = PHASES["nccl"](ctx)
    assert ctx.gpu_count == 8 and ctx.gpu_name == "NVIDIA H100 80GB HBM3" and ctx.sku.name == "h100_sxm"
    (run,) = ctx.extra["nccl"]
    assert run["argv"][-2:] == ["-g", "8"]
    assert findings[0].status is Status.SKIP  # the binary is absent here; with it, judged as an H100 node


def test_no_gpu_on_the_bus_keeps_one_process_one_device(tmp_path, monkeypatch):
    monkeypatch.setattr("healthcheck.probes.nvml.nvidia_gpu_present", lambda *a: [])
    ctx = ctx_for(tmp_path, phases=["nccl"], nccl_collectives=["all_reduce"])
    PHASES["nccl"](ctx)
    assert ctx.gpu_count == 0 and ctx.extra["nccl"][0]["argv"][-2:] == ["-g", "1"]
