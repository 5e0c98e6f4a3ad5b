"""probe_host against fixture /proc and /sys trees (tests/fixtures/proc_builder.py)."""
from __future__ import annotations

import errno
import os
import pwd
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.core.model import HostInfo, Mount, Snapshot
from healthcheck.probes.host import (is_real_filesystem, parse_cpu_list, parse_mounts, probe_host,
                                     unescape_mount_field)
from tests.fixtures.proc_builder import (DEFAULT_MOUNTS, FakeProcess, build_proc, build_sys,
                                         make_statvfs)

SERVICES = ("slurmd", "munged", "nvidia-persistenced", "sshd", "nv-hostengine", "dcgm")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@pytest.fixture
def node(tmp_path):
    return build_proc(tmp_path / "proc"), build_sys(tmp_path / "sys", cpu_topology=False)


def _by_point(host: HostInfo) -> dict[str, Mount]:
    return {m.mountpoint: m for m in host.mounts}


def test_default_node_cpu_memory_load(node):
    proc, sys_ = node
    host = probe_host(proc, sys_, statvfs=make_statvfs())
    assert (host.cpu_sockets, host.cpu_cores, host.cpu_threads) == (2, 96, 192)
    assert host.cpu_model == "AMD EPYC 9474F 48-Core Processor"
    assert host.hostname == "gpu-a01"
    assert host.mem_total_kib == 2_113_470_196
    assert host.mem_available_kib == 2_051_311_804
    assert (host.swap_total_kib, host.swap_free_kib) == (0, 0)
    assert (host.load_1m, host.load_5m, host.load_15m) == (3.12, 2.87, 2.40)
    assert host.uptime_s == pytest.approx(1_209_733.52)


def test_hostname_argument_wins(node):
    proc, sys_ = node
    assert probe_host(proc, sys_, statvfs=make_statvfs(), hostname="gpu-b07").hostname == "gpu-b07"


def test_smt_off_shows_fewer_threads(tmp_path):
    host = probe_host(build_proc(tmp_path / "proc", threads_per_core=1), tmp_path / "nosys",
                      statvfs=make_statvfs())
    assert (host.cpu_sockets, host.cpu_cores, host.cpu_threads) == (2, 96, 96)


def test_arm_cpuinfo_falls_back_to_sysfs_topology(tmp_path):
    """Grace (aarch64): /proc/cpuinfo has no physical id / core id / model name."""
    proc = build_proc(tmp_path / "proc", arm=True, sockets=1, cores_per_socket=72, threads_per_core=1)
    sys_ = build_sys(tmp_path / "sys", sockets=1, cores_per_socket=72, threads_per_core=1)
    text = (proc / "cpuinfo").read_text()
    assert "physical id" not in text and "CPU part" in text
    host = probe_host(proc, sys_, statvfs=make_statvfs())
    assert (host.cpu_sockets, host.cpu_cores, host.cpu_threads) == (1, 72, 72)
    assert host.cpu_model is None


def test_sysfs_topology_when_cpuinfo_missing(tmp_path):
    proc = build_proc(tmp_path / "proc")
    (proc / "cpuinfo").unlink()
    sys_ = build_sys(tmp_path / "sys", offline=(191,))
    host = probe_host(proc, sys_, statvfs=make_statvfs())
    assert (host.cpu_sockets, host.cpu_cores, host.cpu_threads) == (2, 96, 191)


def test_parse_cpu_list():
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpu_list("0") == [0]
    assert parse_cpu_list("") == []
    assert parse_cpu_list("x,2-y,5") == [5]


# ---------------------------------------------------------------------------------------- mounts


def test_mounts_parsed_and_unescaped(node):
    proc, sys_ = node
    host = probe_host(proc, sys_, statvfs=make_statvfs())
    mounts = _by_point(host)
    assert len(host.mounts) == len(DEFAULT_MOUNTS)
    home = mounts["/home"]
    assert (home.device, home.fstype) == ("nfs01.cluster:/export/home", "nfs4")
    assert "hard" in home.options and not home.read_only
    assert mounts["/scratch"].fstype == "lustre"
    vendor = mounts["/mnt/vendor images"]
    assert vendor.read_only and vendor.size_bytes == 50 * 1024 ** 3
    assert unescape_mount_field(r"/a\040b\011c\134d") == "/a b\tc\\d"


def test_statvfs_only_on_real_filesystems(node):
    proc, sys_ = node
    statvfs = make_statvfs()
    host = probe_host(proc, sys_, statvfs=statvfs)
    assert sorted(statvfs.calls) == sorted(["/", "/run", "/dev/shm", "/boot/efi", "/tmp", "/home",
                                            "/scratch", "/mnt/vendor images"])
    mounts = _by_point(host)
    shm = mounts["/dev/shm"]
    assert shm.size_bytes == 1008 * 1024 ** 3 and shm.free_bytes == 1008 * 1024 ** 3
    assert shm.inodes_total == 264_183_774 and shm.inodes_free == 264_183_770
    pseudo = ("/proc", "/sys", "/dev", "/sys/fs/cgroup", "/run/user/51234", "/run/lock", "/dev/hugepages")
    for point in pseudo:
        assert mounts[point].size_bytes is None, point


def test_is_real_filesystem():
    assert is_real_filesystem(Mount("overlay", "/", "overlay"))
    assert is_real_filesystem(Mount("tmpfs", "/dev/shm", "tmpfs"))
    assert not is_real_filesystem(Mount("tmpfs", "/sys/fs/cgroup", "tmpfs"))
    assert not is_real_filesystem(Mount("systemd-1", "/net", "autofs"))
    assert is_real_filesystem(Mount("sshfs#x:", "/mnt/remote", "fuse.sshfs"))


def test_hung_statvfs_is_bounded_and_marked(node):
    proc, sys_ = node
    statvfs = make_statvfs(hang=("/home", "/scratch"), hang_s=3.0)
    start = time.monotonic()
    host = probe_host(proc, sys_, statvfs=statvfs, statvfs_timeout=0.3)
    elapsed = time.monotonic() - start
    assert elapsed < 1.5  # one shared deadline, not 2 x 3 s
    mounts = _by_point(host)
    for point in ("/home", "/scratch"):
        assert "hung" in mounts[point].options
        assert mounts[point].size_bytes is None and mounts[point].free_bytes is None
    assert "hung" not in mounts["/"].options and mounts["/"].size_bytes is not None
    # the mark survives the JSON round trip of the snapshot
    snap = Snapshot("gpu-a01", "2024-05-01T00:00:00Z", host=host)
    again = Snapshot.from_dict(snap.to_dict())
    assert "hung" in {m.mountpoint: m for m in again.host.mounts}["/home"].options


def test_statvfs_errors_leave_figures_none(node):
    proc, sys_ = node
    statvfs = make_statvfs(errors={"/home": errno.ESTALE, "/scratch": errno.EACCES})
    mounts = _by_point(probe_host(proc, sys_, statvfs=statvfs))
    assert "stale" in mounts["/home"].options and mounts["/home"].size_bytes is None
    assert mounts["/scratch"].size_bytes is None and "stale" not in mounts["/scratch"].options


def test_statvfs_raising_anything_is_contained(node):
    proc, sys_ = node

    def broken(path):
        raise RuntimeError("boom")

    host = probe_host(proc, sys_, statvfs=broken)
    assert all(m.size_bytes is None for m in host.mounts)


def test_stacked_mount_point_stats_the_visible_one(tmp_path):
    proc = build_proc(tmp_path / "proc", extra_mounts=["nfs02:/home /home nfs4 ro,relatime 0 0"])
    statvfs = make_statvfs()
    host = probe_host(proc, tmp_path / "sys", statvfs=statvfs)
    homes = [m for m in host.mounts if m.mountpoint == "/home"]
    assert len(homes) == 2 and statvfs.calls.count("/home") == 1
    assert homes[0].size_bytes is None and homes[1].size_bytes is not None


def test_mounts_fall_back_to_self_mounts(tmp_path):
    proc = build_proc(tmp_path / "proc", mounts_in_self_only=True)
    host = probe_host(proc, tmp_path / "sys", statvfs=make_statvfs())
    assert "/scratch" in _by_point(host)


def test_parse_mounts_skips_short_lines():
    mounts = parse_mounts("rootfs\n/dev/sda1 / ext4 rw 0 0\n\n")
    assert [(m.device, m.mountpoint) for m in mounts] == [("/dev/sda1", "/")]


# ------------------------------------------------------------------------------ services, processes


def test_services_running(tmp_path):
    extra = [FakeProcess(5000, "python3", 0, ("/usr/local/bin/gpu-monitor", "--daemon"))]
    proc = build_proc(tmp_path / "proc", extra_processes=extra)
    host = probe_host(proc, tmp_path / "sys", services=SERVICES + ("gpu-monitor",), statvfs=make_statvfs())
    assert host.services == {
        "slurmd": True, "munged": True,
        "nvidia-persistenced": True,  # comm is cut to "nvidia-persiste"
        "sshd": True,
        "nv-hostengine": False,  # only a zombie is left
        "dcgm": False,
        "gpu-monitor": True,  # found by argv[0] basename, comm is "python3"
    }


def test_services_none_when_not_asked(node):
    proc, sys_ = node
    assert probe_host(proc, sys_, statvfs=make_statvfs()).services is None


def test_process_list(node):
    proc, sys_ = node
    host = probe_host(proc, sys_, statvfs=make_statvfs())
    by_pid = {p["pid"]: p for p in host.processes}
    assert by_pid[2345] == {"pid": 2345, "uid": 0, "user": "root", "comm": "slurmd"}
    assert by_pid[48213] == {"pid": 48213, "uid": 51234, "user": _user(51234), "comm": "python3"}
    assert by_pid[812]["user"] == _user(996)
    assert [p["pid"] for p in host.processes] == sorted(by_pid)


def test_process_list_is_bounded_and_optional(node):
    proc, sys_ = node
    assert len(probe_host(proc, sys_, statvfs=make_statvfs(), max_processes=3).processes) == 3
    host = probe_host(proc, sys_, statvfs=make_statvfs(), with_processes=False, services=("slurmd",))
    assert host.processes is None and host.services == {"slurmd": True}


def test_process_status_missing_uses_comm(tmp_path):
    proc = build_proc(tmp_path / "proc", processes=[FakeProcess(77, "munged", 0, ("/usr/sbin/munged",))])
    (proc / "77" / "status").unlink()
    (proc / "77" / "status").mkdir()  # unreadable as a file
    host = probe_host(proc, tmp_path / "sys", services=("munged",), statvfs=make_statvfs())
    assert host.processes == [] and host.services == {"munged": False}


# --------------------------------------------------------------------------------- robustness


def test_missing_roots_give_nones(tmp_path):
    host = probe_host(tmp_path / "absent-proc", tmp_path / "absent-sys", services=("slurmd",),
                      statvfs=make_statvfs())
    assert host == HostInfo()


def test_unreadable_files_leave_fields_none(tmp_path):
    proc = build_proc(tmp_path / "proc")
    for name in ("meminfo", "loadavg", "mounts", "uptime"):
        (proc / name).unlink()
        (proc / name).mkdir()
    (proc / "self" / "mounts").unlink()
    host = probe_host(proc, tmp_path / "sys", statvfs=make_statvfs())
    assert host.mem_total_kib is None and host.load_1m is None and host.mounts is None
    assert host.uptime_s is None and host.cpu_threads == 192


FILES = ("cpuinfo", "meminfo", "loadavg", "uptime", "mounts", "sys/kernel/hostname")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FILES), st.text(max_size=400) | st.binary(max_size=400))
def test_fuzz_any_file_content_never_raises(name, content):
    with tempfile.TemporaryDirectory() as tmp:
        proc = build_proc(Path(tmp) / "proc", processes=[], sockets=1, cores_per_socket=2)
        target = proc / name
        data = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
        target.write_bytes(data)
        host = probe_host(proc, Path(tmp) / "sys", services=("slurmd",), statvfs=make_statvfs())
        assert isinstance(host, HostInfo)
        for mount in host.mounts or []:
            assert isinstance(mount.mountpoint, str)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_parsers(text):
    for mount in parse_mounts(text):
        assert mount.fstype and mount.options
    assert all(isinstance(c, int) for c in parse_cpu_list(text[:40]))


def test_truncated_real_cpuinfo_never_raises(tmp_path):
    proc = build_proc(tmp_path / "proc")
    full = (proc / "cpuinfo").read_text()
    for cut in range(0, 4000, 97):
        (proc / "cpuinfo").write_text(full[:cut])
        host = probe_host(proc, tmp_path / "sys", statvfs=make_statvfs(), with_processes=False)
        assert host.cpu_threads in (None, 0) or host.cpu_threads >= 1


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="needs Linux /proc")
def test_live_smoke():
    host = probe_host(with_processes=False, statvfs_timeout=1.0)
    assert host.cpu_threads and host.cpu_threads >= 1
    assert host.mem_total_kib and host.mem_total_kib > 0
    assert host.mounts
