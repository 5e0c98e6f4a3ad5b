"""healthcheck.safeio.atomic: whole-or-nothing writes with an exact mode, never through a planted link; the
spool's append-only open; the private-folder rule for root; folders made with an exact mode. (The
writers that use it are tried against planted links in tests/safety/test_planted_links.py.)"""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from healthcheck.safeio import atomic as atomicio
from healthcheck.safeio.atomic import (UnsafePath, atomic_file, atomic_write, check_private_dir, make_dirs, open_append,
                                      unlink_if_present)


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask0():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("wanted", [0o600, 0o644, 0o755])
def test_the_mode_asked_whatever_the_umask(tmp_path, wanted):
    for umask in (0, 0o077):
        old = os.umask(umask)
        try:
            atomic_write(tmp_path / f"f{umask}", "text", wanted)
        finally:
            os.umask(old)
        assert mode(tmp_path / f"f{umask}") == wanted and (tmp_path / f"f{umask}").read_text() == "text"


def test_a_name_already_taken_by_a_link_is_skipped_not_opened(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    planted = str(tmp_path / ".out.planted.tmp")
    os.symlink(victim, planted)
    names = iter([planted, str(tmp_path / ".out.fresh.tmp")])
    monkeypatch.setattr(atomicio, "temp_name", lambda path: next(names))
    atomic_write(tmp_path / "out", b"new")
    assert victim.read_text() == "keep" and os.path.islink(planted)
    assert (tmp_path / "out").read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == [".out.planted.tmp", "out", "victim"]


def test_a_failed_write_leaves_the_target_and_no_temporary(tmp_path):
    (tmp_path / "target").mkdir()  # os.replace of a file onto a folder fails
    with pytest.raises(OSError):
        atomic_write(tmp_path / "target", "x")
    assert os.listdir(tmp_path) == ["target"]
    (tmp_path / "file").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_file(tmp_path / "file", 0o644) as fh:
            fh.write(b"half")
            raise RuntimeError("writer died")
    assert (tmp_path / "file").read_text() == "old" and sorted(os.listdir(tmp_path)) == ["file", "target"]


def test_atomic_file_streams_and_replaces_a_link_at_the_target(tmp_path, umask0):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "out").symlink_to(victim)
    with atomic_file(tmp_path / "out", 0o644) as fh:
        for i in range(3):
            fh.write(b"%d\n" % i)
    assert victim.read_text() == "keep" and not (tmp_path / "out").is_symlink()
    assert (tmp_path / "out").read_bytes() == b"0\n1\n2\n" and mode(tmp_path / "out") == 0o644


def test_open_append_creates_with_the_mode_and_tightens_a_loose_file_of_ours(tmp_path, umask0):
    fd, created = open_append(tmp_path / "log", 0o600)
    os.write(fd, b"a\n")
    os.close(fd)
    assert created and mode(tmp_path / "log") == 0o600
    os.chmod(tmp_path / "log", 0o666)
    fd, created = open_append(tmp_path / "log", 0o600)
    os.write(fd, b"b\n")
    os.close(fd)
    assert not created and mode(tmp_path / "log") == 0o600 and (tmp_path / "log").read_bytes() == b"a\nb\n"


@pytest.mark.parametrize("plant,error,words", [
    (lambda p, victim: p.symlink_to(victim), UnsafePath, "symlink"),
    (lambda p, victim: os.link(victim, p), UnsafePath, "hard link"),
    (lambda p, victim: os.mkfifo(p), UnsafePath, "not a regular file"),
    (lambda p, victim: p.mkdir(), IsADirectoryError, "Is a directory"),
], ids=["symlink", "hard-link", "fifo", "folder"])
def test_open_append_refuses_what_was_planted(tmp_path, plant, error, words):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    plant(tmp_path / "log", victim)
    with pytest.raises(error, match=words):
        open_append(tmp_path / "log")
    assert victim.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule applies to root")
def test_check_private_dir_as_root(tmp_path):
    tmp_path.chmod(0o700)
    good = tmp_path / "good"
    good.mkdir(0o700)
    check_private_dir(good)  # under /tmp: a sticky root-owned folder above is accepted
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o770)
    with pytest.raises(UnsafePath, match="writable by group or others.*chmod go-w"):
        check_private_dir(shared, "spool directory")
    below = shared / "below"
    below.mkdir(0o700)
    with pytest.raises(UnsafePath, match=r"directory .*shared \(above"):
        check_private_dir(below)
    theirs = tmp_path / "theirs"
    theirs.mkdir(0o700)
    os.chown(theirs, 4321, 4321)
    with pytest.raises(UnsafePath, match="owned by uid 4321.*chown"):
        check_private_dir(theirs)
    link = tmp_path / "link"
    link.symlink_to(good)
    with pytest.raises(UnsafePath, match="is a symlink"):
        check_private_dir(link)
    with pytest.raises(UnsafePath):
        atomic_write(shared / "f", "x", private_dir=True)
    assert os.listdir(shared) == ["below"]


def test_make_dirs_gives_every_new_folder_the_mode(tmp_path, umask0):
    make_dirs(tmp_path / "a" / "b" / "c", 0o755)
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o755] * 3
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        make_dirs(tmp_path / "file" / "x")


def test_unlink_if_present_a_missing_file_is_never_an_error_other_errors_only_when_not_quiet(tmp_path):
    (tmp_path / "f").write_text("x")
    unlink_if_present(tmp_path / "f")
    assert not (tmp_path / "f").exists()
    unlink_if_present(tmp_path / "f")  # already gone: nothing to say, quiet or not
    unlink_if_present(str(tmp_path / "f"), quiet=True)
    (tmp_path / "d").mkdir()  # unlink(2) on a folder: EISDIR, for root too
    with pytest.raises(OSError):
        unlink_if_present(tmp_path / "d")  # the spool's rotation: a file not removed must not pass for removed
    unlink_if_present(tmp_path / "d", quiet=True)  # cleanup of our own temporary: the first error stands
    assert (tmp_path / "d").is_dir()


def test_cheap_enough_for_the_prolog():
    code = ("import sys\nbefore = set(sys.modules)\nimport healthcheck.safeio.atomic\n"
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    new = set(out.stdout.split())
    assert "healthcheck.safeio.atomic" in new, out.stderr
    # healthcheck.safeio.trust: os and stat only (the trusted-folder rule and make_dirs live there)
    assert new <= {"__future__", "errno", "stat", "healthcheck", "healthcheck.safeio", "healthcheck.safeio.atomic",
                   "healthcheck.safeio.trust"}, \
        sorted(new)
