"""gpu.processes, gpu.memory_used."""
from __future__ import annotations

from healthcheck.checks import registry
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import GpuProcess, Status

from tests.checks.gpu_builders import by_component, h100, only, run, snapshot, with_gpu

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP


def test_usage_contexts_include_prolog_epilog_not_running_jobs():
    specs = registry.load_all()
    for name in ("gpu.processes", "gpu.memory_used"):
        assert specs[name].contexts == {"check", "prolog", "epilog"}


# --------------------------------------------------------------------------------- gpu.processes

def test_no_processes_pass():
    found = run("gpu.processes", snapshot())
    assert {f.status for f in found} == {PASS} and found[0].metrics == {"processes": 0.0}


def test_leftover_processes_warn_with_pids_and_names():
    procs = [GpuProcess(4242, "/usr/bin/python3", 70_000.0), GpuProcess(4243, "python3", 512.0)]
    snap = with_gpu(snapshot(), 5, processes=procs)
    f = by_component(run("gpu.processes", snap))["gpu5"]
    assert f.status is WARN
    assert f.message == "2 compute processes on GPU: 4242 (python3), 4243 (python3)"
    assert f.metrics == {"processes": 2.0}


def test_fail_if_any_from_config():
    snap = with_gpu(snapshot(), 5, processes=[GpuProcess(77, None)])
    exp = Expectations(thresholds={"gpu.processes": {"fail_if_any": True}})
    f = by_component(run("gpu.processes", snap, exp))["gpu5"]
    assert f.status is FAIL and f.message == "1 compute process on GPU: 77 (?)"


def test_ignored_names_and_long_lists():
    procs = [GpuProcess(1, "nvidia-cuda-mps-server")]
    snap = snapshot(gpus=[h100(0, processes=procs)])
    assert only(run("gpu.processes", snap, ignore_names=["nvidia-cuda-mps-server"])).status is PASS
    many = snapshot(gpus=[h100(0, processes=[GpuProcess(i, "a.out") for i in range(10)])])
    f = only(run("gpu.processes", many))
    assert f.message.endswith("and 2 more") and f.metrics == {"processes": 10.0}


def test_process_list_not_reported_and_lost_gpu():
    snap = snapshot(gpus=[h100(0, processes=None), h100(1, lost=True, processes=None)])
    f = only(run("gpu.processes", snap))
    assert f.component == "gpu0" and f.status is SKIP


# ------------------------------------------------------------------------------- gpu.memory_used

def test_idle_memory_passes_with_metrics():
    f = run("gpu.memory_used", snapshot())[0]
    assert f.status is PASS and f.message == "memory used 2 of 81559 MiB"
    assert f.metrics == {"memory_used_mib": 2.0, "memory_total_mib": 81559.0}


def test_memory_used_above_limit_warns_or_fails():
    snap = with_gpu(snapshot(), 7, memory_used_mib=40_000.0)
    f = by_component(run("gpu.memory_used", snap))["gpu7"]
    assert f.status is WARN and f.message == "memory used 40000 of 81559 MiB (limit 1024 MiB)"
    assert by_component(run("gpu.memory_used", snap, fail=True))["gpu7"].status is FAIL


def test_memory_limit_override():
    snap = snapshot(gpus=[h100(0, memory_used_mib=600.0)])  # older drivers count the reservation
    assert only(run("gpu.memory_used", snap)).status is PASS
    exp = Expectations(thresholds={"gpu.memory_used": {"max_used_mib": 512}})
    assert only(run("gpu.memory_used", snap, exp)).status is WARN


def test_memory_not_reported():
    f = only(run("gpu.memory_used", snapshot(gpus=[h100(0, memory_used_mib=None)])))
    assert f.status is SKIP and f.message == "memory use not reported"
    f = only(run("gpu.memory_used", snapshot(gpus=[h100(0, memory_total_mib=None)])))
    assert f.status is PASS and f.message == "memory used 2 MiB"


def test_no_gpu_skips():
    assert only(run("gpu.memory_used", snapshot(gpus=[]))).status is SKIP
