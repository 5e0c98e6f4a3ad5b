"""probe_versions against fixture /sys, /proc and library trees; the ofed_info call through a fake run."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.safeio import subproc
from healthcheck.core.model import GpuInfo
from healthcheck.probes.versions import library_names, nccl_version, probe_versions, rdma_core_version
from tests.fixtures.proc_builder import build_lib_dir, build_proc, build_sys


class FakeRun:
    """Stands in for subproc.run: records calls; answers with ``stdout`` or raises ToolNotFound."""

    def __init__(self, stdout: str | None = None, timed_out: bool = False, returncode: int = 0):
        self.stdout, self.timed_out, self.returncode = stdout, timed_out, returncode
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv, timeout, env=None):
        self.calls.append((argv, timeout))
        if self.stdout is None:
            raise subproc.ToolNotFound(f"{argv[0]}: not found")
        return subproc.Result(argv, None if self.timed_out else self.returncode, self.stdout, "", 0.01,
                              self.timed_out)


@pytest.fixture
def tree(tmp_path):
    return (build_proc(tmp_path / "proc"), build_sys(tmp_path / "sys", cpu_topology=False),
            build_lib_dir(tmp_path / "lib"))


def _probe(tree, run=None, **kw):
    proc, sys_, lib = tree
    return probe_versions(sys_root=sys_, proc_root=proc, lib_dirs=[str(lib)], run=run or FakeRun(), **kw)


def test_default_node(tree):
    run = FakeRun()
    assert _probe(tree, run) == {
        "kernel": "5.15.0-105-generic", "driver": "550.54.15", "nccl": "2.21.5", "rdma_core": "50.0",
        "hca_firmware": "28.39.1002",
    }
    assert run.calls == [(["ofed_info", "-s"], 2.0)]  # tried, tool absent -> key omitted


def test_gpu_derived_versions(tree):
    gpus = [GpuInfo(i, vbios="96.00.89.00.01", cuda_driver_version="12.4") for i in range(8)]
    found = _probe(tree, gpus=gpus)
    assert found["cuda"] == "12.4" and found["vbios"] == "96.00.89.00.01"
    gpus[5].vbios = "96.00.74.00.0B"
    assert _probe(tree, gpus=gpus)["vbios"] == "96.00.89.00.01,96.00.74.00.0B"
    assert "cuda" not in _probe(tree, gpus=[GpuInfo(0)])


@pytest.mark.parametrize("open_module", [False, True])
def test_driver_from_proc_when_sysfs_lacks_it(tmp_path, open_module):
    proc = build_proc(tmp_path / "proc", nvidia_driver="535.161.08", open_kernel_module=open_module)
    sys_ = build_sys(tmp_path / "sys", cpu_topology=False, nvidia_driver=None)
    assert probe_versions(sys_, proc, lib_dirs=[], run=FakeRun())["driver"] == "535.161.08"


def test_sysfs_driver_wins_over_proc(tmp_path):
    proc = build_proc(tmp_path / "proc", nvidia_driver="535.161.08")
    sys_ = build_sys(tmp_path / "sys", cpu_topology=False, nvidia_driver="550.54.15")
    assert probe_versions(sys_, proc, lib_dirs=[], run=FakeRun())["driver"] == "550.54.15"


def test_highest_nccl_across_dirs(tmp_path):
    a = build_lib_dir(tmp_path / "a", nccl=("2.9.9",), ibverbs="1.14.39.0")
    b = build_lib_dir(tmp_path / "b", nccl=("2.18.3", "2.21.5"), ibverbs="1.14.50.0")
    dirs = [str(a), str(b), str(tmp_path / "missing")]
    assert nccl_version(dirs) == "2.21.5"
    assert rdma_core_version(dirs) == "50.0"
    assert nccl_version([str(tmp_path / "missing")]) is None
    # listed once for both (what the probe does): the same answers; nothing else kept
    (a / "libnccl-net.so").write_text("")  # a near miss of the glob libnccl.so.*
    names = library_names(dirs)
    assert names and all(n.startswith(("libnccl.so.", "libibverbs.so.1.")) for n in names)
    assert (nccl_version(dirs, names), rdma_core_version(dirs, names)) == ("2.21.5", "50.0")


def test_ofed_from_mlx_compat_skips_tool(tmp_path):
    sys_ = build_sys(tmp_path / "sys", cpu_topology=False, mlx_compat="23.10-1.1.9", mlx5_core="23.10-1.1.9")
    run = FakeRun("MLNX_OFED_LINUX-24.04-0.6.6.0:\n")
    found = probe_versions(sys_, tmp_path / "proc", lib_dirs=[], run=run)
    assert found["ofed"] == "23.10-1.1.9" and found["mlx5_core"] == "23.10-1.1.9"
    assert run.calls == []


@pytest.mark.parametrize("stdout, expected", [
    ("MLNX_OFED_LINUX-23.10-1.1.9.0:\n", "23.10-1.1.9.0"),
    ("OFED-internal-24.10-1.1.4:\n", "24.10-1.1.4"),
    ("weird-build\n", "weird-build"),
])
def test_ofed_info_output(tmp_path, stdout, expected):
    sys_ = build_sys(tmp_path / "sys", cpu_topology=False)
    assert probe_versions(sys_, tmp_path / "proc", lib_dirs=[], run=FakeRun(stdout))["ofed"] == expected


@pytest.mark.parametrize("run", [FakeRun("", timed_out=True), FakeRun("", returncode=1), FakeRun("\n")])
def test_ofed_info_failures_omit_key(tmp_path, run):
    sys_ = build_sys(tmp_path / "sys", cpu_topology=False)
    assert "ofed" not in probe_versions(sys_, tmp_path / "proc", lib_dirs=[], run=run)


def test_distinct_hca_firmware(tmp_path):
    hcas = {"mlx5_0": "28.39.1002", "mlx5_1": "28.39.1002", "mlx5_2": "22.38.1002"}
    sys_ = build_sys(tmp_path / "sys", cpu_topology=False, hcas=hcas)
    assert probe_versions(sys_, tmp_path / "proc", lib_dirs=[], run=FakeRun())["hca_firmware"] == \
        "22.38.1002,28.39.1002"


def test_nothing_installed(tmp_path):
    assert probe_versions(tmp_path / "s", tmp_path / "p", lib_dirs=[str(tmp_path)], run=FakeRun()) == {}


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.text(max_size=200))
def test_fuzz_driver_file_and_ofed_output(driver_text, ofed_out):
    with tempfile.TemporaryDirectory() as tmp:
        proc = Path(tmp) / "proc"
        (proc / "driver/nvidia").mkdir(parents=True)
        (proc / "driver/nvidia/version").write_bytes(driver_text.encode("utf-8", "surrogatepass"))
        found = probe_versions(Path(tmp) / "sys", proc, lib_dirs=[tmp], run=FakeRun(ofed_out))
        assert all(isinstance(v, str) and v for v in found.values())
        assert set(found) <= {"driver", "ofed"}
