"""sw.versions: probed versions (fixture trees) against the node class's expected versions."""
from __future__ import annotations

import pytest

from healthcheck.safeio import subproc
from healthcheck.checks import host as host_checks  # noqa: F401  (registers sw.versions)
from healthcheck.checks.host import version_matches
from healthcheck.checks.registry import _REGISTRY
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import GpuInfo, Snapshot, Status
from healthcheck.probes.versions import probe_versions
from tests.fixtures.proc_builder import build_lib_dir, build_proc, build_sys


def _no_tool(argv, timeout, env=None):
    raise subproc.ToolNotFound(argv[0])


def judge(versions: dict[str, str], expected: dict[str, str] | None = None):
    exp = Expectations(versions=expected or {})
    spec = _REGISTRY["sw.versions"]
    snap = Snapshot("gpu-a01", "2024-05-01T00:00:00Z", versions=versions)
    return spec.func(snap, exp, exp.thresholds_for("sw.versions", spec.thresholds))


@pytest.fixture
def probed(tmp_path):
    gpus = [GpuInfo(i, vbios="96.00.89.00.01", cuda_driver_version="12.4") for i in range(8)]
    return probe_versions(build_sys(tmp_path / "sys", cpu_topology=False), build_proc(tmp_path / "proc"),
                          lib_dirs=[str(build_lib_dir(tmp_path / "lib"))], run=_no_tool, gpus=gpus)


def test_all_expected_pass(probed):
    expected = {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.*", "kernel": "5.15.0-105-generic",
                "hca_firmware": "28.39.1002", "rdma_core": "50.0", "vbios": "96.00.89.*"}
    findings = judge(probed, expected)
    assert {f.component: f.status for f in findings} == {k: Status.PASS for k in expected}
    assert {f.component: f.message for f in findings}["driver"] == "driver 550.54.15"


def test_driver_mismatch_message(probed):
    (f,) = judge(probed | {"driver": "550.54.14"}, {"driver": "550.54.15"})
    assert f.status is Status.FAIL and f.message == "driver 550.54.14 (expected 550.54.15)"
    assert f.component == "driver" and f.metrics == {}


def test_expected_but_absent(probed):
    (f,) = judge(probed, {"ofed": "23.10-1.1.9.0"})
    assert f.status is Status.FAIL and f.message == "ofed not found (expected 23.10-1.1.9.0)"


def test_no_expectations_lists_versions(probed):
    (f,) = judge(probed)
    assert f.status is Status.PASS and f.metrics == {}
    assert "driver 550.54.15" in f.message and "nccl 2.21.5" in f.message


def test_mixed_vbios_fails_prefix(probed):
    mixed = probed | {"vbios": "96.00.89.00.01,96.00.74.00.0B"}
    (f,) = judge(mixed, {"vbios": "96.00.89*"})
    assert f.status is Status.FAIL


@pytest.mark.parametrize("expected, actual, ok", [
    ("550.54.15", "550.54.15", True),
    ("550.54.15", "550.54.150", False),
    ("550.*", "550.54.15", True),
    ("550*", "555.42.02", False),
    ("*", "anything", True),
    ("28.39.1002", "28.39.1002,28.39.1002", True),
    ("28.39.*", "22.38.1002,28.39.1002", False),
])
def test_version_matches(expected, actual, ok):
    assert version_matches(expected, actual) is ok
