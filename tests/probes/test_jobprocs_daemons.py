"""A job's processes are the job's whatever they are named; daemons are spared by what they are.

A job's process may call itself ``slurmd`` or ``munged`` (``prctl``, a binary of that name in the user's
home or in /tmp): it is still a stray. A daemon is told by its real uid (0) and its executable, a binary
only root could have put in place (the fixture trees link ``exe`` to this machine's own
``/usr/sbin/slurmstepd``/``slurmd``, Debian's links through /etc/alternatives to ``*-wlm``); in the job's
cgroup the only daemon is the job's slurmstepd, never in a task's cgroup.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from healthcheck.probes.jobprocs import daemon_binary, find_job_processes, in_task_cgroup
from tests.fixtures.proc_builder import FakeProcess, build_proc

JOB = "987654"
USER = 51234
V2_STEPD = f"0::/system.slice/slurmstepd.scope/job_{JOB}/step_extern/slurm\n"
V2_STEP0_STEPD = f"0::/system.slice/slurmstepd.scope/job_{JOB}/step_0/slurm\n"
V2_TASK = f"0::/system.slice/slurmstepd.scope/job_{JOB}/step_0/user/task_0\n"
V1_STEPD = (f"9:name=systemd:/system.slice/slurmd.service\n6:freezer:/slurm/uid_{USER}/job_{JOB}/step_0\n"
            f"4:memory:/slurm/uid_{USER}/job_{JOB}/step_0\n")
V1_TASK = (f"6:freezer:/slurm/uid_{USER}/job_{JOB}/step_0\n"
           f"4:memory:/slurm/uid_{USER}/job_{JOB}/step_0/task_0\n")
SLURMD_UNIT = "0::/system.slice/slurmd.service\n"


def _trusted(path: str) -> bool:
    """This machine's binary at ``path`` is one only root could have put there (the fixture's daemons)."""
    real = os.path.realpath(path)
    try:
        chain = [os.stat(real)] + [os.stat(p) for p in Path(real).parents]
    except OSError:
        return False
    return all(s.st_uid == 0 and not s.st_mode & 0o022 for s in chain)


needs_slurm_binaries = pytest.mark.skipif(
    not (_trusted("/usr/sbin/slurmstepd") and _trusted("/usr/sbin/slurmd")),
    reason="needs root-owned /usr/sbin/slurmstepd and /usr/sbin/slurmd (Debian's slurm-wlm)")


def _tree(tmp_path: Path, procs: list[tuple[FakeProcess, str | None, str | None, bool]]) -> Path:
    """A /proc tree of ``(process, cgroup, exe, carries the job's environment)``."""
    proc_root = tmp_path / "proc"
    build_proc(proc_root, processes=[p for p, *_ in procs])
    for proc, cgroup, exe, env in procs:
        base = proc_root / str(proc.pid)
        (base / "cgroup").write_text(cgroup or "0::/user.slice/user-51234.slice/session-3.scope\n")
        (base / "environ").write_bytes(f"SLURM_JOB_ID={JOB}\0HOME=/home/alice\0".encode() if env else b"HOME=/\0")
        if exe is not None:
            (base / "exe").symlink_to(exe)
    return proc_root


def _own_binary(tmp_path: Path, name: str, uid: int) -> str:
    """A copy of a program named like a daemon, in a folder under /tmp (a user's home stands for it),
    owned by ``uid``."""
    home = tmp_path / "home" / "alice"
    home.mkdir(parents=True, exist_ok=True)
    path = home / name
    shutil.copyfile("/bin/true", path)
    path.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(path, uid, uid)
    return str(path)


def _found(proc_root: Path, job_uid: int | None = USER) -> list[int]:
    return sorted(p["pid"] for p in find_job_processes(JOB, str(proc_root), exclude=set(), job_uid=job_uid))


def test_a_job_process_named_like_a_daemon_is_a_stray(tmp_path):
    """The issue's case: comm ``slurmd``/``munged``/``slurmstepd``, the job's uid, in the job's cgroup or
    carrying its environment, a binary in the user's home: all strays (the old code spared them by name)."""
    slurmd = _own_binary(tmp_path, "slurmd", USER)
    munged = _own_binary(tmp_path, "munged", USER)
    proc_root = _tree(tmp_path, [
        (FakeProcess(41001, "slurmd", USER, ("slurmd",)), V2_TASK, slurmd, False),         # renamed, in the cgroup
        (FakeProcess(41002, "munged", USER, ("munged",)), None, munged, True),             # own munged, job's env
        (FakeProcess(41003, "slurmstepd", USER, ("slurmstepd",)), V1_STEPD, None, True),   # prctl, no exe read
        (FakeProcess(41004, "slurmctld", USER, ("x",)), SLURMD_UNIT, slurmd, True),        # linuxproc: slurmd's cgroup
    ])
    assert _found(proc_root) == [41001, 41002, 41003, 41004]
    assert {p["comm"] for p in find_job_processes(JOB, str(proc_root), job_uid=USER)} == {
        "slurmd", "munged", "slurmstepd", "slurmctld"}


@needs_slurm_binaries
def test_the_jobs_real_slurmstepd_is_spared_in_its_cgroup_but_not_a_task_or_another_binary(tmp_path):
    """The job's own slurmstepd: uid 0, the real binary, in the job's cgroup where slurmstepd sits (v2
    ``step_*/slurm``, v1 ``step_*``). Uid 0 with the same binary in a task's cgroup, or another daemon's
    binary in the job's cgroup, or a root copy under /tmp, is the job's."""
    root_copy = _own_binary(tmp_path, "slurmstepd", 0)  # root-owned, but under /tmp: anyone could have put it
    stepd = "/usr/sbin/slurmstepd"
    proc_root = _tree(tmp_path, [
        (FakeProcess(42001, "slurmstepd", 0, ("slurmstepd: [987654.extern]",)), V2_STEPD, stepd, False),
        (FakeProcess(42002, "slurmstepd", 0, ("slurmstepd: [987654.0]",)), V2_STEP0_STEPD, stepd, False),
        (FakeProcess(42003, "slurmstepd", 0, ("slurmstepd: [987654.0]",)), V1_STEPD, stepd, False),
        (FakeProcess(42004, "slurmstepd", 0, ("x",)), V2_TASK, stepd, False),                 # a task
        (FakeProcess(42005, "slurmstepd", 0, ("x",)), V1_TASK, stepd, False),                 # a task (v1)
        (FakeProcess(42006, "slurmd", 0, ("slurmd",)), V2_STEPD, "/usr/sbin/slurmd", False),  # not slurmstepd
        (FakeProcess(42007, "slurmstepd", 0, ("x",)), V2_STEPD, root_copy, False),            # under /tmp
        (FakeProcess(42008, "slurmstepd", USER, ("x",)), V2_STEPD, stepd, False),             # not root
    ])
    assert _found(proc_root) == [42004, 42005, 42006, 42007, 42008]
    assert _found(proc_root, job_uid=None) == [42004, 42005, 42006, 42007, 42008]


@needs_slurm_binaries
def test_root_daemons_carrying_the_job_are_spared_by_their_binary(tmp_path):
    """A root process named slurmd in slurmd.service carrying the job's environment: not the job's for a
    user's job (its uid); for a root job, spared because it runs the real slurmd. A root job's process
    renamed slurmd, in slurmd.service too (proctrack/linuxproc leaves the job there), is the job's."""
    root_copy = _own_binary(tmp_path, "slurmd", 0)
    proc_root = _tree(tmp_path, [
        (FakeProcess(43001, "slurmd", 0, ("/usr/sbin/slurmd", "-D")), SLURMD_UNIT, "/usr/sbin/slurmd", True),
        (FakeProcess(43002, "slurmd", 0, ("slurmd",)), SLURMD_UNIT, root_copy, True),
        (FakeProcess(43003, "slurmd", 0, ("slurmd",)), SLURMD_UNIT, None, True),  # no binary to show
    ])
    assert _found(proc_root) == []  # a user's job: root's processes are not its
    assert _found(proc_root, job_uid=0) == [43002, 43003]


@needs_slurm_binaries
def test_the_job_users_own_run_of_the_real_daemon_binary_is_a_stray(tmp_path):
    """A daemon runs as root: the job's user running the real /usr/sbin/slurmd (or slurmstepd) with the
    job's environment or in its cgroup is the job's process."""
    proc_root = _tree(tmp_path, [
        (FakeProcess(44001, "slurmd", USER, ("/usr/sbin/slurmd",)), None, "/usr/sbin/slurmd", True),
        (FakeProcess(44002, "slurmstepd", USER, ("slurmstepd",)), V2_STEPD, "/usr/sbin/slurmstepd", False),
    ])
    assert _found(proc_root) == [44001, 44002]


def test_a_binary_owned_by_another_user_or_writable_by_others_is_never_a_daemon(tmp_path):
    proc_root = tmp_path / "proc"
    build_proc(proc_root, processes=[FakeProcess(45001, "slurmstepd", 0, ("x",))])
    system = tmp_path / "sbin"
    system.mkdir()
    binary = system / "slurmstepd"
    shutil.copyfile("/bin/true", binary)
    (proc_root / "45001" / "exe").symlink_to(binary)
    binary.chmod(0o755)
    assert daemon_binary(str(proc_root), "45001") is None  # a folder under the sticky, world-writable /tmp
    if os.geteuid() == 0:
        os.chown(binary, USER, USER)
    binary.chmod(0o777)
    assert daemon_binary(str(proc_root), "45001") is None
    assert daemon_binary(str(proc_root), "99999") is None  # gone


@needs_slurm_binaries
def test_daemon_binary_follows_a_link_in_the_daemons_folder(tmp_path):
    """Debian's /usr/sbin/slurmstepd -> /etc/alternatives/slurmstepd -> /usr/sbin/slurmstepd-wlm: the
    kernel shows the last; the name in the same folder that leads to it names the daemon."""
    real = os.path.realpath("/usr/sbin/slurmstepd")
    proc_root = tmp_path / "proc"
    build_proc(proc_root, processes=[FakeProcess(46001, "x", 0, ("x",)), FakeProcess(46002, "x", 0, ("x",))])
    (proc_root / "46001" / "exe").symlink_to(real)
    (proc_root / "46002" / "exe").symlink_to("/usr/sbin/slurmd")
    assert daemon_binary(str(proc_root), "46001") == "slurmstepd"
    assert daemon_binary(str(proc_root), "46001", frozenset({"slurmd"})) is None
    assert daemon_binary(str(proc_root), "46002") == "slurmd"


def test_task_cgroups_of_both_layouts():
    assert in_task_cgroup(V2_TASK, JOB) and in_task_cgroup(V1_TASK, JOB)
    assert not in_task_cgroup(V2_STEPD, JOB) and not in_task_cgroup(V1_STEPD, JOB)
    assert not in_task_cgroup(V2_TASK, JOB + "1")


def test_a_real_process_is_judged_by_the_binary_the_kernel_shows(tmp_path):
    """Against this machine's /proc: a root job's process whose binary is a root-owned copy named slurmd
    under /tmp is the job's (the old code spared it by its comm); the kernel's exe path of a program in
    a root-only system folder names it."""
    if os.geteuid() != 0:
        pytest.skip("reading another process's environ and exe as the epilog does needs root")
    fake = Path(_own_binary(tmp_path, "slurmd", 0))
    shutil.copyfile(shutil.which("sleep"), fake)
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": JOB, "SLURM_JOB_UID": "0"}
    renamed = subprocess.Popen([str(fake), "600"], env=env, start_new_session=True, stdin=subprocess.DEVNULL)
    sleeper = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if Path(f"/proc/{renamed.pid}/comm").read_text().strip() == "slurmd":
                break
            time.sleep(0.01)
        assert renamed.pid in [p["pid"] for p in find_job_processes(JOB, job_uid=0)]
        sleep_path = os.path.realpath(shutil.which("sleep"))
        if _trusted(sleep_path):
            name = os.path.basename(sleep_path)
            for _ in range(500):
                if os.readlink(f"/proc/{sleeper.pid}/exe") == sleep_path:
                    break
                time.sleep(0.01)
            assert daemon_binary("/proc", str(sleeper.pid), frozenset({name})) == name
        assert daemon_binary("/proc", str(renamed.pid), frozenset({"slurmd"})) is None
    finally:
        for proc in (renamed, sleeper):
            proc.kill()
            proc.wait(timeout=10)


def test_a_zombie_in_the_jobs_cgroup_is_not_a_stray_but_its_living_parent_is(tmp_path):
    """A zombie is dead already (no exe to tell a daemon by, nothing a SIGKILL can do): never reported,
    whatever its name; a living process beside it in the same cgroup still is."""
    proc_root = _tree(tmp_path, [
        (FakeProcess(42001, "slurmstepd", 0, (), state="Z (zombie)"), V2_STEPD, None, False),
        (FakeProcess(42002, "python3", USER, (), state="Z (zombie)", ppid=42003), V2_TASK, None, False),
        (FakeProcess(42003, "python3", USER, ("python3", "train.py")), V2_TASK, None, True),
    ])
    for pid, comm, state in ((42001, "slurmstepd", "Z"), (42002, "python3", "Z"), (42003, "python3", "S")):
        rest = " ".join(["0"] * 17 + ["7777"] + ["0"] * 30)  # fields 5..52: the start time is field 22
        (proc_root / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} 1 {rest}\n")
    assert _found(proc_root) == [42003]
    assert [p["start"] for p in find_job_processes(JOB, str(proc_root), job_uid=USER)] == [7777]
