"""A read-only or full /var never fails a job: the prolog still judges the node (exit 0 healthy, 1
failing), within its budget, and says what it could not write in one warning line each, no traceback.

Read-only: no bind mounts or chmod (root ignores 0500): the spool/state paths lie under a regular
file (mkdir fails with ENOTDIR) or under /proc (read-only to everyone). Full: a 64 KiB tmpfs filled to
the last byte (ENOSPC), when this process may mount one (root here); skipped otherwise, the
under-a-file case standing in for it."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.safety._hookrun import hook, write_config

BUDGET_S = 2.0
STARTUP_S = 3.0  # interpreter start-up on a loaded 2-core runner


def check_run(proc, elapsed: float, expected_rc: int, warnings: tuple[str, ...]) -> None:
    assert proc.returncode == expected_rc, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert elapsed < BUDGET_S + STARTUP_S
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert all(line.startswith("healthcheck: ") for line in lines), lines
    for words in warnings:
        assert sum(words in line for line in lines) == 1, (words, lines)


def run_prolog(tmp_path: Path, bundle: Path, state_dir: str, spool_dir: str):
    config = write_config(tmp_path / "site.toml", str(bundle), state_dir, spool_dir, prolog_budget_s=BUDGET_S)
    return hook("prolog", config, tmp_path / "cache")


@pytest.fixture
def blocker(tmp_path) -> Path:
    path = tmp_path / "var-is-a-file"
    path.write_text("not a directory\n")
    return path


@pytest.mark.parametrize("kind,rc", [("healthy", 0), ("faulty", 1)])
def test_spool_under_a_file(tmp_path, node_bundles, blocker, kind, rc):
    proc, elapsed = run_prolog(tmp_path, node_bundles / kind, str(tmp_path / "state"), str(blocker / "spool"))
    check_run(proc, elapsed, rc, ("spool not written",))
    assert (tmp_path / "state" / "node1" / "baselines" / "4242.json").exists()


def test_state_dir_under_a_file(tmp_path, node_bundles, blocker):
    proc, elapsed = run_prolog(tmp_path, node_bundles / "healthy", str(blocker / "state"), str(tmp_path / "spool"))
    check_run(proc, elapsed, 0, ("baseline for job 4242 not saved",))
    assert (tmp_path / "spool" / "records.jsonl").exists()


@pytest.mark.parametrize("kind,rc", [("healthy", 0), ("faulty", 1)])
def test_everything_under_read_only_proc(tmp_path, node_bundles, kind, rc):
    proc, elapsed = run_prolog(tmp_path, node_bundles / kind, "/proc/self/healthcheck-state",
                               "/proc/self/healthcheck-spool")
    check_run(proc, elapsed, rc, ("spool not written", "baseline for job 4242 not saved"))


@pytest.fixture
def full_disk(tmp_path):
    mnt = tmp_path / "var"
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mnt)],
                       check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot mount a tmpfs here (not root / no CAP_SYS_ADMIN): see test_spool_under_a_file")
    try:
        (mnt / "state").mkdir()
        (mnt / "spool").mkdir()
        try:
            with open(mnt / "filler", "wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError:
            pass
        # fill the inode-and-metadata slack too
        try:
            for i in range(100_000):
                (mnt / f"f{i}").write_bytes(b"")
        except OSError:
            pass
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)


@pytest.mark.parametrize("kind,rc", [("healthy", 0), ("faulty", 1)])
def test_full_disk(tmp_path, node_bundles, full_disk, kind, rc):
    with pytest.raises(OSError):
        (full_disk / "probe").write_bytes(b"x" * 8192)
    proc, elapsed = run_prolog(tmp_path, node_bundles / kind, str(full_disk / "state"), str(full_disk / "spool"))
    check_run(proc, elapsed, rc, ("spool not written",))
    assert not (full_disk / "spool" / "records.jsonl").exists() or \
        (full_disk / "spool" / "records.jsonl").read_bytes().endswith(b"\n") or \
        (full_disk / "spool" / "records.jsonl").stat().st_size == 0
