"""The epilog's leftover-process scan: only the job's processes, never the hook's callers.

The chain tests run real processes: a shell wrapper carrying the job's environment (a site epilog
chain, ``timeout``) that runs the scan in the watchdog's child, as the epilog hook does, next to a stray
process the job left behind.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from healthcheck.probes.jobprocs import (PF_KTHREAD, ancestors, find_job_processes, in_job_cgroup, kernel_threads,
                                         kill_all)
from tests.fixtures.proc_builder import FakeProcess, build_proc

ROOT = Path(__file__).resolve().parents[2]
JOB = "987654"
NOBODY = 65534

# What the epilog hook does in its watchdog child, printed as JSON: the pids it found and killed.
SCAN = textwrap.dedent("""
    import json, os, sys
    from healthcheck.hook.watchdog import run_in_child
    from healthcheck.probes.jobprocs import find_job_processes, kill_all
    uid = int(os.environ["SLURM_JOB_UID"])
    def work():
        return sorted(p["pid"] for p in kill_all(find_job_processes(os.environ["SLURM_JOB_ID"], job_uid=uid)))
    outcome = run_in_child(work, 20)
    print(json.dumps({"status": outcome.status, "killed": outcome.value, "error": outcome.error}))
""")


def _job_env(uid: int) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "SLURM_JOB_ID": JOB, "SLURM_JOB_UID": str(uid),
            "SLURM_JOB_USER": "nobody" if uid == NOBODY else "root"}


def _spawn(argv: list[str], env: dict[str, str], uid: int | None = None) -> subprocess.Popen:
    def drop() -> None:
        os.setgid(uid)
        os.setuid(uid)
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=drop if uid is not None else None)


def _wait_started(proc: subprocess.Popen) -> None:
    for _ in range(500):  # until the exec happened (the environment is the new program's)
        try:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep"):
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError("the stray process did not start")


def _run_wrapper(tmp_path: Path, job_uid: int) -> tuple[subprocess.CompletedProcess, Path]:
    """A site epilog: a root shell with the job's environment runs `timeout ... python SCAN`, then
    writes a marker (what the rest of a site's epilog chain would do)."""
    marker = tmp_path / "rest-of-epilog-ran"
    script = tmp_path / "site-epilog.sh"
    script.write_text(f'#!/bin/sh\ntimeout 120 "{sys.executable}" -I -c "$SCAN" || exit $?\ntouch "{marker}"\n')
    script.chmod(0o755)
    env = {**_job_env(job_uid), "SCAN": f"import sys; sys.path.insert(0, {str(ROOT)!r})\n{SCAN}"}
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=120)
    return proc, marker


def _reap(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="reading other users' environ and setuid need root")


@needs_root
def test_wrapper_of_another_uid_survives_and_the_jobs_stray_is_killed(tmp_path):
    stray = _spawn(["sleep", "600"], _job_env(NOBODY), uid=NOBODY)
    bystander = _spawn(["sleep", "600"], _job_env(NOBODY))  # root, job env, not an ancestor: not the job's
    try:
        _wait_started(stray)
        _wait_started(bystander)
        proc, marker = _run_wrapper(tmp_path, NOBODY)
        assert proc.returncode == 0, (proc.returncode, proc.stderr)
        assert marker.exists()
        assert f'"killed": [{stray.pid}]' in proc.stdout, proc.stdout
        assert stray.wait(timeout=10) == -9
        assert bystander.poll() is None  # root's own process carrying the env is left alone
    finally:
        _reap(stray, bystander)


@needs_root
def test_root_job_the_wrapper_chain_is_spared_by_ancestry(tmp_path):
    """A job run as root (the local test cluster's): the uid rule cannot tell the wrapper from the job;
    being an ancestor of the hook does."""
    stray = _spawn(["sleep", "600"], _job_env(0))
    try:
        _wait_started(stray)
        proc, marker = _run_wrapper(tmp_path, 0)
        assert proc.returncode == 0, (proc.returncode, proc.stderr)
        assert marker.exists()
        assert f'"killed": [{stray.pid}]' in proc.stdout, proc.stdout
        assert stray.wait(timeout=10) == -9
    finally:
        _reap(stray)


def test_ancestors_walk_reaches_init_through_this_process():
    chain = ancestors()
    assert os.getpid() in chain and os.getppid() in chain and 1 in chain
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid not in chain
        assert {child.pid, os.getpid()} <= ancestors(pid=child.pid)
    finally:
        _reap(child)


def test_fixture_tree_uid_and_cgroup_decide(tmp_path):
    proc_root = tmp_path / "proc"
    build_proc(proc_root, extra_processes=[
        FakeProcess(40001, "python3", 51234, ("python3", "train.py"), ppid=1),   # the job's: uid + env
        FakeProcess(40002, "bash", 0, ("bash", "/etc/slurm/epilog.d/site.sh"), ppid=1),  # root + env
        FakeProcess(40003, "slurmstepd", 51234, ("slurmstepd",), ppid=1),       # named so, the user's: a stray
        FakeProcess(40004, "python3", 51234, ("python3", "other.py"), ppid=1),  # same user, other job
        FakeProcess(40005, "helper", 0, ("helper",), ppid=1),                   # root, in the job's cgroup
    ])
    env = {pid: {"SLURM_JOB_ID": JOB} for pid in (40001, 40002, 40003)} | {40004: {"SLURM_JOB_ID": "1"}}
    for pid, values in env.items():
        (proc_root / str(pid) / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in values.items()))
    (proc_root / "40005" / "cgroup").write_text(f"0::/system.slice/slurmstepd.scope/job_{JOB}/step_0/user/task_0\n")
    found = find_job_processes(JOB, str(proc_root), job_uid=51234)
    assert sorted(p["pid"] for p in found) == [40001, 40003, 40005]  # daemons: tests/probes/test_jobprocs_daemons.py
    assert {p["pid"]: p["uid"] for p in found} == {40001: 51234, 40003: 51234, 40005: 0}
    # the job's uid unknown: only the cgroup is proof
    assert [p["pid"] for p in find_job_processes(JOB, str(proc_root))] == [40005]


def _stat_line(pid: int, comm: str, flags: int, start: int) -> str:
    """A /proc/PID/stat line: pid (comm) state ppid ... flags (field 9) ... starttime (field 22)."""
    fields = ["S", "2", "0", "0", "0", "-1", str(flags)] + ["0"] * 12 + [str(start)] + ["0"] * 30
    return f"{pid} ({comm}) " + " ".join(fields) + "\n"


def test_kernel_threads_are_skipped_by_their_flags(tmp_path):
    """A kernel thread is never the job's, even in the job's cgroup (cgroup v1 lets root move one there):
    it cannot be killed, so it would stay a stray forever. It is told by PF_KTHREAD in its stat flags,
    read before anything else; a process whose stat cannot be read is judged as before."""
    proc_root = tmp_path / "proc"
    build_proc(proc_root, extra_processes=[
        FakeProcess(40011, "kworker/3:1", 0, (), ppid=2),       # a kernel thread, moved into the job's cgroup
        FakeProcess(40012, "python3 (x) y", 51234, ("python3",), ppid=1),  # the job's, in its cgroup
        FakeProcess(40013, "helper", 0, ("helper",), ppid=1),  # no stat file (a fixture, or gone): as before
    ])
    cgroup = f"4:freezer:/slurm/uid_51234/job_{JOB}/step_0\n"
    for pid in (40011, 40012, 40013):
        (proc_root / str(pid) / "cgroup").write_text(cgroup)
    (proc_root / "40011" / "stat").write_text(_stat_line(40011, "kworker/3:1", 0x00208040, 7))
    (proc_root / "40012" / "stat").write_text(_stat_line(40012, "python3 (x) y", 0x00400100, 123456))
    found = {p["pid"]: p for p in find_job_processes(JOB, str(proc_root), job_uid=51234)}
    assert sorted(found) == [40012, 40013]
    assert found[40012]["start"] == 123456  # from the same read, the comm's parentheses notwithstanding
    assert found[40013]["start"] is None


def test_kernel_threads_are_known_from_kthreadds_children_without_opening_them(tmp_path):
    """Where the kernel lists kthreadd's children, a kernel thread is skipped without a read of its own
    (here its stat flags even say otherwise: they are not read); the job's process is found as ever."""
    proc_root = tmp_path / "proc"
    build_proc(proc_root, extra_processes=[
        FakeProcess(2, "kthreadd", 0, (), ppid=0),
        FakeProcess(40021, "kworker/7:2", 0, (), ppid=2),
        FakeProcess(40022, "python3", 51234, ("python3",), ppid=1),
    ])
    (proc_root / "2" / "task" / "2").mkdir(parents=True)
    (proc_root / "2" / "task" / "2" / "children").write_text("40021 ")
    for pid in (40021, 40022):
        (proc_root / str(pid) / "cgroup").write_text(f"4:freezer:/slurm/uid_51234/job_{JOB}/step_0\n")
        (proc_root / str(pid) / "stat").write_text(_stat_line(pid, "x", 0x00400100, 99))
    assert kernel_threads(str(proc_root)) == {"2", "40021"}
    assert [p["pid"] for p in find_job_processes(JOB, str(proc_root), job_uid=51234)] == [40022]
    (proc_root / "2" / "comm").write_text("impostor\n")  # pid 2 is not kthreadd: its children say nothing
    assert kernel_threads(str(proc_root)) is None


def _flagged_kernel_threads() -> set[str]:
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            flags = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[6])
        except (OSError, IndexError, ValueError):
            continue
        if flags & PF_KTHREAD:
            out.add(pid)
    return out


def test_kthreadds_children_hold_every_kernel_thread_of_this_machine():
    listed = kernel_threads()
    if listed is None:
        pytest.skip("this kernel lists no children (CONFIG_PROC_CHILDREN unset)")
    before = _flagged_kernel_threads()
    listed = kernel_threads()
    stable = before & _flagged_kernel_threads()  # a kworker may come or go in between
    assert stable and stable <= listed and "2" in listed


def test_cgroup_component_must_match_exactly():
    assert in_job_cgroup(f"12:pids:/slurm/uid_1000/job_{JOB}/step_batch\n", JOB)
    assert not in_job_cgroup(f"0::/system.slice/slurmstepd.scope/job_{JOB}1/step_0\n", JOB)
    assert not in_job_cgroup("0::/user.slice/user-1000.slice\n", JOB)


def test_a_job_id_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a Slurm job id"):
        find_job_processes("1/../2", str(tmp_path))


def test_kill_all_skips_a_pid_that_now_names_another_process():
    victim = subprocess.Popen(["sleep", "30"])
    try:
        stale = {"pid": victim.pid, "comm": "sleep", "uid": os.getuid(), "start": 1}  # not its start time
        assert kill_all([stale], settle_s=0) == []
        assert victim.poll() is None
    finally:
        _reap(victim)
