"""host.* checks on snapshots probed from the fixture trees (and hand-built HostInfo for edge cases)."""
from __future__ import annotations

import dataclasses
import errno

import pytest

from healthcheck.checks import host as host_checks  # noqa: F401  (registers the checks)
from healthcheck.checks.registry import _REGISTRY
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import HostInfo, Mount, Snapshot, Status
from healthcheck.probes.host import probe_host
from tests.fixtures.proc_builder import DEFAULT_FIGURES, GIB, build_proc, build_sys, make_statvfs

EXP = Expectations(cpu_sockets=2, cpu_cores=96, cpu_threads=192, mem_total_gib=2015.5,
                   services=("slurmd", "munged", "nvidia-persistenced"),
                   mounts=("/", "/home", "/scratch", "/tmp", "/dev/shm"))


def judge(name: str, snap: Snapshot, exp: Expectations = Expectations()):
    spec = _REGISTRY[name]
    return spec.func(snap, exp, exp.thresholds_for(name, spec.thresholds))


def snap_of(host: HostInfo) -> Snapshot:
    return Snapshot("gpu-a01", "2024-05-01T00:00:00Z", host=host)


@pytest.fixture
def probed(tmp_path):
    def make(statvfs=None, **proc_options):
        proc = build_proc(tmp_path / "proc", **proc_options)
        sys_ = build_sys(tmp_path / "sys", cpu_topology=False)
        return snap_of(probe_host(proc, sys_, services=EXP.services + ("dcgm",),
                                  statvfs=statvfs or make_statvfs(), statvfs_timeout=0.3))
    return make


def by_component(findings):
    return {f.component: f for f in findings}


def test_contexts():
    for name in ("host.disk", "host.mounts", "host.services", "host.memory"):
        assert "prolog" in _REGISTRY[name].contexts, name
    for name in ("host.cpu", "host.load", "host.swap", "sw.versions"):
        assert "prolog" not in _REGISTRY[name].contexts, name
    # (host.events judges the kernel log: its source is kernel_events; host.edac the EDAC counters)
    assert all(_REGISTRY[n].needs == ("host",) for n in _REGISTRY
               if n.startswith("host.") and n not in ("host.events", "host.edac"))


# ------------------------------------------------------------------------------------------- cpu


def test_cpu_pass(probed):
    (f,) = judge("host.cpu", probed(), EXP)
    assert f.status is Status.PASS and f.component == "cpu"
    assert f.metrics == {"cpu_sockets": 2, "cpu_cores": 96, "cpu_threads": 192}
    assert "AMD EPYC 9474F" in f.message


def test_cpu_smt_off_fails(probed):
    (f,) = judge("host.cpu", probed(threads_per_core=1), EXP)
    assert f.status is Status.FAIL and f.message == "96 threads (expected 192)"


def test_cpu_without_expectations_passes(probed):
    (f,) = judge("host.cpu", probed(threads_per_core=1))
    assert f.status is Status.PASS


def test_cpu_unknown_but_expected_is_error():
    (f,) = judge("host.cpu", snap_of(HostInfo(cpu_threads=192)), EXP)
    assert f.status is Status.ERROR and "sockets" in f.message


# ---------------------------------------------------------------------------------------- memory


def test_memory_pass(probed):
    (f,) = judge("host.memory", probed(), EXP)
    assert f.status is Status.PASS
    assert f.metrics["mem_total_gib"] == pytest.approx(2015.56, abs=0.01)


def test_memory_dimm_loss_fails(probed):
    # one 64 GiB DIMM of 32 gone: -3.2 %
    (f,) = judge("host.memory", probed(mem_total_kib=2_113_470_196 - 64 * 1024 ** 2,
                                       mem_available_kib=1_900_000_000), EXP)
    assert f.status is Status.FAIL and "expected 2015.5 GiB" in f.message


def test_memory_small_drop_within_tolerance(probed):
    (f,) = judge("host.memory", probed(mem_total_kib=2_113_470_196 - 20 * 1024 ** 2), EXP)
    assert f.status is Status.PASS


def test_memory_tolerance_override(probed):
    exp = dataclasses.replace(EXP, thresholds={"host.memory": {"tolerance": 0.001}})
    (f,) = judge("host.memory", probed(mem_total_kib=2_113_470_196 - 20 * 1024 ** 2), exp)
    assert f.status is Status.FAIL


def test_memory_low_available_warns(probed):
    (f,) = judge("host.memory", probed(mem_available_kib=60_000_000), EXP)
    assert f.status is Status.WARN and f.metrics["mem_available_fraction"] < 0.05


def test_memory_unreadable_is_error():
    (f,) = judge("host.memory", snap_of(HostInfo()), EXP)
    assert f.status is Status.ERROR


# ------------------------------------------------------------------------------------------ swap


def test_swap_absent_passes(probed):
    (f,) = judge("host.swap", probed())
    assert f.status is Status.PASS and f.message == "no swap"


def test_swap_heavily_used_warns(probed):
    (f,) = judge("host.swap", probed(swap_total_kib=8 * 1024 ** 2, swap_free_kib=2 * 1024 ** 2))
    assert f.status is Status.WARN and f.metrics["swap_used_fraction"] == pytest.approx(0.75)


def test_swap_lightly_used_passes(probed):
    (f,) = judge("host.swap", probed(swap_total_kib=8 * 1024 ** 2, swap_free_kib=7 * 1024 ** 2))
    assert f.status is Status.PASS


def test_swap_forbidden_fails(probed):
    exp = Expectations(thresholds={"host.swap": {"forbid": True}})
    (f,) = judge("host.swap", probed(swap_total_kib=8 * 1024 ** 2, swap_free_kib=8 * 1024 ** 2), exp)
    assert f.status is Status.FAIL
    (ok,) = judge("host.swap", probed(), exp)
    assert ok.status is Status.PASS


# ---------------------------------------------------------------------------------------- mounts


def test_mounts_expected_all_present(probed):
    found = by_component(judge("host.mounts", probed(), EXP))
    assert set(found) == set(EXP.mounts)
    assert all(f.status is Status.PASS for f in found.values())
    assert found["/scratch"].message == "/scratch lustre rw"


def test_mounts_missing_fails(probed):
    exp = dataclasses.replace(EXP, mounts=EXP.mounts + ("/projects",))
    found = by_component(judge("host.mounts", probed(), exp))
    assert found["/projects"].status is Status.FAIL and "not mounted" in found["/projects"].message


def test_mounts_read_only(probed):
    exp = dataclasses.replace(EXP, mounts=("/mnt/vendor images",))
    (f,) = judge("host.mounts", probed(), exp)
    assert f.status is Status.FAIL and "read-only" in f.message
    (ok,) = judge("host.mounts", probed(), dataclasses.replace(exp, ro_mounts=("/mnt/vendor images",)))
    assert ok.status is Status.PASS


def test_hung_mount_fails_expected_or_not(probed):
    snap = probed(statvfs=make_statvfs(hang=("/home",), hang_s=2.0))
    home = by_component(judge("host.mounts", snap, EXP))["/home"]
    assert home.status is Status.FAIL and "hung" in home.message and "nfs4" in home.message
    found = by_component(judge("host.mounts", snap))
    assert found["/home"].status is Status.FAIL and found["/"].status is Status.PASS


def test_stale_handle_fails(probed):
    snap = probed(statvfs=make_statvfs(errors={"/scratch": errno.ESTALE}))
    assert by_component(judge("host.mounts", snap, EXP))["/scratch"].status is Status.FAIL


def test_no_expectations_root_only(probed):
    findings = judge("host.mounts", probed())
    assert [(f.component, f.status) for f in findings] == [("/", Status.PASS)]  # ro /mnt/vendor ok


def test_no_expectations_root_read_only_fails():
    host = HostInfo(mounts=[Mount("/dev/md0", "/", "ext4", ["ro", "relatime"])])
    (f,) = judge("host.mounts", snap_of(host))
    assert f.status is Status.FAIL and f.message == "/ mounted read-only"


def test_stacked_mount_judges_visible_one():
    host = HostInfo(mounts=[Mount("/dev/md0", "/", "ext4", ["rw"]),
                            Mount("nfs01:/home", "/home", "nfs4", ["rw"]),
                            Mount("nfs02:/home", "/home", "nfs4", ["ro"])])
    found = by_component(judge("host.mounts", snap_of(host), Expectations(mounts=("/home",))))
    assert found["/home"].status is Status.FAIL


def test_mount_table_unreadable_is_error():
    (f,) = judge("host.mounts", snap_of(HostInfo()), EXP)
    assert f.status is Status.ERROR


# ------------------------------------------------------------------------------------------ disk


def _figures(**changes):
    table = dict(DEFAULT_FIGURES)
    table.update(changes)
    return make_statvfs(table)


def test_disk_default_paths(probed):
    found = by_component(judge("host.disk", probed()))
    assert set(found) == {"/", "/tmp", "/dev/shm"}  # /var is not a mount point here
    assert all(f.status is Status.PASS for f in found.values())
    assert found["/"].metrics["free_gib"] == pytest.approx(1402)


@pytest.mark.parametrize("free_gib, status", [(200, Status.FAIL), (500, Status.WARN), (3000, Status.PASS)])
def test_disk_tmp_free_space(probed, free_gib, status):
    snap = probed(statvfs=_figures(**{"/tmp": (7168 * GIB, free_gib * GIB, 750_000_000, 700_000_000)}))
    assert by_component(judge("host.disk", snap))["/tmp"].status is status


@pytest.mark.parametrize("inodes_free, status", [(10_000, Status.FAIL), (9_000_000, Status.WARN)])
def test_disk_inodes(probed, inodes_free, status):
    snap = probed(statvfs=_figures(**{"/": (1787 * GIB, 1402 * GIB, 119_013_376, inodes_free)}))
    f = by_component(judge("host.disk", snap))["/"]
    assert f.status is status and "inodes" in f.message


def test_disk_absolute_floor(probed):
    # 10 GiB root with 0.8 GiB free: 8 % (only a WARN by fraction) but below the 1 GiB floor
    snap = probed(statvfs=_figures(**{"/": (10 * GIB, int(0.8 * GIB), 655_360, 600_000)}))
    assert by_component(judge("host.disk", snap))["/"].status is Status.FAIL


def test_disk_tiny_filesystem_judged_by_fraction_only(probed):
    snap = probed(statvfs=_figures(**{"/dev/shm": (GIB // 2, GIB // 4, 100_000, 99_000)}))
    assert by_component(judge("host.disk", snap))["/dev/shm"].status is Status.PASS


def test_disk_hung_path_is_error(probed):
    snap = probed(statvfs=make_statvfs(hang=("/tmp",), hang_s=2.0))
    f = by_component(judge("host.disk", snap))["/tmp"]
    assert f.status is Status.ERROR and "hung" in f.message


def test_disk_custom_paths_and_skip(probed):
    exp = Expectations(thresholds={"host.disk": {"paths": ["/scratch", "/home"]}})
    assert set(by_component(judge("host.disk", probed(), exp))) == {"/scratch", "/home"}
    exp = Expectations(thresholds={"host.disk": {"paths": ["/nonexistent"]}})
    (f,) = judge("host.disk", probed(), exp)
    assert f.status is Status.SKIP


# ------------------------------------------------------------------------------------------ load


def test_load_pass(probed):
    (f,) = judge("host.load", probed())
    assert f.status is Status.PASS and f.metrics["load_per_cpu"] == pytest.approx(3.12 / 192)


def test_load_warn_and_fail(probed):
    snap = probed(load=(500.0, 480.0, 300.0))
    (f,) = judge("host.load", snap)
    assert f.status is Status.WARN
    (f,) = judge("host.load", snap, Expectations(thresholds={"host.load": {"fail_per_cpu": 2.5}}))
    assert f.status is Status.FAIL


def test_load_unknown_is_error():
    (f,) = judge("host.load", snap_of(HostInfo(load_1m=1.0)))
    assert f.status is Status.ERROR


# -------------------------------------------------------------------------------------- services


def test_services_running(probed):
    found = by_component(judge("host.services", probed(), EXP))
    assert {k: f.status for k, f in found.items()} == {
        "slurmd": Status.PASS, "munged": Status.PASS, "nvidia-persistenced": Status.PASS}


def test_service_down_fails(probed):
    exp = dataclasses.replace(EXP, services=("slurmd", "dcgm"))
    found = by_component(judge("host.services", probed(), exp))
    assert found["dcgm"].status is Status.FAIL and found["dcgm"].message == "dcgm not running"


def test_service_not_probed_is_error(probed):
    exp = dataclasses.replace(EXP, services=("nv-fabricmanager",))
    (f,) = judge("host.services", probed(), exp)
    assert f.status is Status.ERROR


def test_no_services_expected_skips(probed):
    (f,) = judge("host.services", probed())
    assert f.status is Status.SKIP
