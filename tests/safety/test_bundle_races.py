"""A bundle folder changed while it is read (a support ticket's folder someone else can still write)
gives clear errors only: never a read through a symlink swapped in after the check, never a wait on a
FIFO, never a mix of two files. The races are made deterministic by swapping the entry at the seam,
between the check (lstat) and the open, through a wrapper around the ``os`` module the copier uses.
A folder only this user or root can change is read in place; any other is read through a private copy.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from healthcheck.bundles import archive as bundle_mod
from healthcheck.bundles import files as bundle_files
from healthcheck.bundles.archive import BundleError, snapshot_from_bundle

ROOT = Path(__file__).resolve().parents[2]
SECRET = "root:$6$SECRETHASH:19000::::::"
HARD_S = 20  # a read blocked on a FIFO would never return: fail instead of hanging the suite


class _Hung(BaseException):
    pass


def no_hang(fn: Callable[[], object]) -> object:
    def alarm(*_):
        raise _Hung()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HARD_S)
    try:
        return fn()
    except _Hung:
        pytest.fail(f"still reading after {HARD_S} s: blocked (on a FIFO?)")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def shared(tmp_path, node_bundles) -> Path:
    """The healthy collected bundle in a folder anyone may write (a ticket dropped in a shared place)."""
    root = tmp_path / "ticket"
    shutil.copytree(node_bundles / "healthy", root)
    os.chmod(root, 0o777)
    (tmp_path / "secret").write_text(SECRET + "\n")
    return root


class _OsAtTheSeam:
    """The ``os`` module as bundle_files sees it, with ``open`` running ``before(name, dir_fd)`` first:
    the moment between the entry's lstat and its open."""

    def __init__(self, before: Callable[[str, int | None], None]) -> None:
        self._before = before

    def open(self, path, flags, mode=0o777, *, dir_fd=None):
        self._before(os.fspath(path), dir_fd)
        return os.open(path, flags, mode, dir_fd=dir_fd)

    def __getattr__(self, name):
        return getattr(os, name)


def swap_at_open(monkeypatch, folder: Path, name: str, swap: Callable[[], None]) -> list[str]:
    """Run ``swap`` once, just before the copier opens the entry ``name`` of ``folder``."""
    done: list[str] = []
    inode = folder.stat().st_ino

    def before(path: str, dir_fd: int | None) -> None:
        if path == name and dir_fd is not None and not done and os.fstat(dir_fd).st_ino == inode:
            done.append(path)
            swap()

    monkeypatch.setattr(bundle_files, "os", _OsAtTheSeam(before))
    return done


def refused_cleanly(root: Path, *words: str) -> str:
    with pytest.raises(BundleError) as info:
        no_hang(lambda: snapshot_from_bundle(root))
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert "SECRETHASH" not in message
    return message


# ------------------------------------------------------------------------- which path is taken


def test_a_private_folder_is_read_in_place_a_shared_one_through_a_copy(tmp_path, node_bundles, shared, monkeypatch):
    private = tmp_path / "private"
    shutil.copytree(node_bundles / "healthy", private)
    os.chmod(private, 0o755)
    copies: list[str] = []
    real_copy = bundle_files.copy_tree_safely
    monkeypatch.setattr(bundle_files, "copy_tree_safely",
                        lambda src, *a, **kw: (copies.append(os.fspath(src)), real_copy(src, *a, **kw))[1])
    a, b = snapshot_from_bundle(private), snapshot_from_bundle(shared)
    assert copies == [str(shared)]
    assert a.node == b.node == "gpu017" and len(a.gpus) == len(b.gpus) == 8
    assert b.source == f"bundle:{shared}" and not b.probe_errors


@pytest.mark.parametrize("make_shared,needs_root", [
    (lambda root: os.chmod(root, 0o777), False),                       # the folder itself
    (lambda root: os.chmod(root / "meta.json", 0o666), False),         # one file in it
    (lambda root: os.chmod(root / "sys", 0o775), False),               # a folder inside (group)
    (lambda root: os.chmod(root.parent, 0o777), False),                # the folder above
    (lambda root: os.chown(root / "dmesg.txt", 4321, 4321), True),     # a file someone else owns
], ids=["root-world-writable", "file-writable", "subfolder-group-writable", "parent-writable", "foreign-owner"])
def test_what_makes_a_folder_shared(tmp_path, node_bundles, make_shared, needs_root):
    if needs_root and os.geteuid() != 0:
        pytest.skip("chown needs root")
    root = tmp_path / "above" / "ticket"
    root.parent.mkdir(mode=0o755)
    shutil.copytree(node_bundles / "healthy", root)
    (root / "dmesg.txt").write_text("[ 1.0] kernel: hello\n")
    for folder, dirs, files in os.walk(root):
        for entry in dirs:
            os.chmod(os.path.join(folder, entry), 0o755)
    os.chmod(root, 0o755)
    os.chmod(tmp_path, 0o755)
    vet = lambda: bundle_files.vet_tree(root, max_file_bytes=1 << 26, max_entries=50_000, error=BundleError)
    assert vet() is True
    make_shared(root)
    assert vet() is False
    assert snapshot_from_bundle(root).node == "gpu017"  # still read, through a copy


def test_a_folder_reached_through_a_symlink_is_copied(tmp_path, node_bundles):
    shutil.copytree(node_bundles / "healthy", tmp_path / "real")
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert bundle_files.vet_tree(tmp_path / "real", max_file_bytes=1 << 26, max_entries=50_000,
                                 error=BundleError) is True
    assert bundle_files.vet_tree(tmp_path / "link", max_file_bytes=1 << 26, max_entries=50_000,
                                 error=BundleError) is False
    assert snapshot_from_bundle(tmp_path / "link").node == "gpu017"


# --------------------------------------------------------------- swapped between check and open


def test_file_swapped_for_a_symlink_out_is_not_followed(shared, monkeypatch):
    def swap():
        (shared / "meta.json").unlink()
        os.symlink(shared.parent / "secret", shared / "meta.json")

    done = swap_at_open(monkeypatch, shared, "meta.json", swap)
    refused_cleanly(shared, "meta.json", "changed while being read")
    assert done == ["meta.json"]


def test_file_swapped_for_a_fifo_is_not_waited_on(shared, monkeypatch):
    def swap():
        (shared / "dmesg.txt").unlink()
        os.mkfifo(shared / "dmesg.txt")

    done = swap_at_open(monkeypatch, shared, "dmesg.txt", swap)
    refused_cleanly(shared, "dmesg.txt", "changed while being read")
    assert done == ["dmesg.txt"]


def test_file_replaced_by_another_file_is_refused(shared, monkeypatch):
    def swap():
        other = shared / "other.json"
        other.write_text(json.dumps({"hostname": "evil"}))
        os.replace(other, shared / "meta.json")

    done = swap_at_open(monkeypatch, shared, "meta.json", swap)
    refused_cleanly(shared, "meta.json", "changed while being read", "replaced by another file")
    assert done


def test_file_truncated_between_check_and_open_is_refused(shared, monkeypatch):
    done = swap_at_open(monkeypatch, shared, "versions.json", lambda: os.truncate(shared / "versions.json", 3))
    refused_cleanly(shared, "versions.json", "changed while being read")
    assert done


def test_file_growing_while_it_is_read_is_refused(shared, monkeypatch):
    """Opened first, then written to: the read sees a size that is not the one checked."""
    real_read = bundle_files.read_bounded

    def read_after_append(fd: int, limit: int) -> bytes:
        if os.fstat(fd).st_ino == os.stat(shared / "meta.json").st_ino:
            with open(shared / "meta.json", "a") as fh:
                fh.write(" " * 10)
        return real_read(fd, limit)

    monkeypatch.setattr(bundle_files, "read_bounded", read_after_append)
    refused_cleanly(shared, "meta.json", "changed while being read")


def test_file_removed_between_check_and_open_is_refused(shared, monkeypatch):
    done = swap_at_open(monkeypatch, shared, "statvfs.json", lambda: (shared / "statvfs.json").unlink())
    refused_cleanly(shared, "statvfs.json", "changed while being read")
    assert done


def test_folder_swapped_for_a_symlink_out_is_not_followed(shared, tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    (outside / "bus" / "pci" / "devices").mkdir(parents=True)
    (outside / "leak").write_text(SECRET)

    def swap():
        shutil.rmtree(shared / "sys")
        os.symlink(outside, shared / "sys")

    done = swap_at_open(monkeypatch, shared, "sys", swap)
    refused_cleanly(shared, "sys", "changed while being read")
    assert done


def test_folder_swapped_for_a_file_is_refused(shared, monkeypatch):
    def swap():
        shutil.rmtree(shared / "proc")
        (shared / "proc").write_text("not a folder")

    done = swap_at_open(monkeypatch, shared, "proc", swap)
    refused_cleanly(shared, "proc", "changed while being read")
    assert done


def test_a_copy_is_what_the_readers_see(shared, monkeypatch):
    """Once copied, changes to the folder do not reach the readers: the copy is private."""
    def swap():
        (shared / "meta.json").write_text(json.dumps({"hostname": "changed-too-late"}))

    done = swap_at_open(monkeypatch, shared, "nvml.json", swap)  # "meta.json" sorts before it: already copied
    snap = no_hang(lambda: snapshot_from_bundle(shared))
    assert done and snap.node == "gpu017"


# ------------------------------------------------------------------------ the copy's own checks


@pytest.mark.parametrize("name,target", [("meta.json", "/etc/passwd"), ("dmesg.txt", "../secret"),
                                         ("sys", "/sys")])
def test_symlinks_out_are_refused_in_the_copy_too(shared, name, target):
    path = shared / name
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
    os.symlink(target, path)
    message = refused_cleanly(shared, "refusing symlink", name)
    assert target in message


def test_relative_links_inside_a_copied_folder_still_work(shared):
    (shared / "recordings").mkdir()
    os.replace(shared / "meta.json", shared / "recordings" / "meta.json")
    os.symlink("recordings/meta.json", shared / "meta.json")
    assert snapshot_from_bundle(shared).node == "gpu017"


def test_a_chain_of_inside_links_that_climbs_out_is_refused(shared):
    """Each link looks inside on its own; resolved in the copy the chain leaves it."""
    (shared / "a" / "b").mkdir(parents=True)
    os.symlink("../../x", shared / "a" / "b" / "l")
    os.symlink("a/b/l/../..", shared / "escape")
    refused_cleanly(shared, "refusing symlink")


@pytest.mark.parametrize("make", [
    lambda p, limit: os.mkfifo(p),
    lambda p, limit: os.link(p.parent.parent / "secret", p),
    lambda p, limit: p.write_bytes(b"x" * (limit + 1)),
], ids=["fifo", "hard-link", "too-large"])
def test_the_copy_refuses_what_the_folder_check_refuses(shared, monkeypatch, make):
    """Made right after the folder check (vet_tree saw a clean folder): the copy catches it."""
    limit = max(f.stat().st_size for f in shared.rglob("*") if f.is_file()) + 1
    real_vet = bundle_files.vet_tree

    def vet_then_add(*args, **kwargs):
        private = real_vet(*args, **kwargs)
        (shared / "dmesg.txt").unlink(missing_ok=True)
        make(shared / "dmesg.txt", limit)
        return private

    monkeypatch.setattr(bundle_files, "vet_tree", vet_then_add)
    monkeypatch.setattr(bundle_mod, "MAX_FILE_BYTES", limit)
    refused_cleanly(shared, "dmesg.txt", "refusing")


def test_total_size_and_depth_limits_of_the_copy(shared, monkeypatch):
    monkeypatch.setattr(bundle_mod, "MAX_TOTAL_BYTES", 10_000)
    refused_cleanly(shared, "too large together")
    monkeypatch.undo()
    deep = shared.joinpath(*["d"] * (bundle_files.MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    refused_cleanly(shared, "nested deeper")


def test_the_cli_reads_a_shared_folder_and_refuses_a_swapped_one_with_exit_2(shared):
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "check", "--bundle", str(shared),
                           "--format", "json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["node"] == "gpu017"
    os.mkfifo(shared / "extra")
    proc = subprocess.run([sys.executable, "-m", "healthcheck.cli", "check", "--bundle", str(shared)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "refusing non-regular entry 'extra'" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------- readers of collect and of bundles


def test_collect_copies_bounded_attributes_and_skips_fifos(tmp_path):
    dev = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:18:00.0"
    dev.mkdir(parents=True)
    (dev / "vendor").write_text("0x10de\n")
    (dev / "device").write_bytes(b"d" * (bundle_files.MAX_FILE_BYTES + 4096))
    os.mkfifo(dev / "current_link_speed")
    out = tmp_path / "out"
    no_hang(lambda: bundle_files.copy_sys(tmp_path / "sys", out))
    copied = out / "bus" / "pci" / "devices" / "0000:18:00.0"
    assert (copied / "vendor").read_text() == "0x10de\n"
    assert (copied / "device").stat().st_size == bundle_files.MAX_FILE_BYTES
    assert not (copied / "current_link_speed").exists()


def test_the_bundle_text_reader_never_opens_a_fifo_or_a_folder(tmp_path):
    os.mkfifo(tmp_path / "dmesg.txt")
    (tmp_path / "ibstat.txt").mkdir()
    (tmp_path / "meta.json").write_bytes(b'{"hostname": "n\xff"}')
    assert no_hang(lambda: bundle_mod._text(tmp_path, "dmesg.txt")) is None
    assert bundle_mod._text(tmp_path, "ibstat.txt") is None
    assert bundle_mod._text(tmp_path, "meta.json") == '{"hostname": "n\ufffd"}'
