"""The door under attack and on a bad day (issue 30): the root agent acts only for the root hook that
knocked, no line however malformed stops it, the hooks knock only at a door and pid file that are root's
and name a live agent, a worker killed after it began to drain fails the hook closed, the door's wait
counts in the hook's budget, and install-hooks refuses an agent directory others could write."""
from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.hook import client as agentclient
from healthcheck.core import agentpaths
from healthcheck.agent import door
from healthcheck.deploy import install
from healthcheck.slurm.backend_base import slurm_env, untrusted_conf
from tests.slurm.test_agent import agent, env_for, fake_agent, runs, start_agent, stop  # noqa: F401 - a fixture
from tests.slurm.test_door import NO_PYTHON, FakeAgent, hook_script, run_hook
from tests.slurm.test_hooks import bundles, spool, write_config  # noqa: F401 - the bundles fixture

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a process of another user, chown")
NOT_KNOCKED = "no answer at its door"  # what a hook says after it knocked and waited its second


def start_of(pid: int) -> int:
    return door.parse_start(Path(f"/proc/{pid}/stat").read_bytes())


def bash_holding_a_pipe(user: int | None = None) -> subprocess.Popen:
    """A bash that holds a pipe on its descriptor 3, as a hook at the door does (run as ``user``)."""
    proc = subprocess.Popen(["/bin/bash", "-c", "exec 3<> <(:); echo ready; while :; do sleep 1; done"], user=user,
                            stdout=subprocess.PIPE, text=True, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout.readline() == "ready\n"
    return proc


def unread(pid: int) -> bytes:
    """What waits in process ``pid``'s pipe on descriptor 3 (b"" when nothing was written into it)."""
    fd = os.open(f"/proc/{pid}/fd/3", os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""
    finally:
        os.close(fd)


def knock_at(sock: Path, line: str) -> None:
    fd = os.open(agentpaths.paths_for(str(sock))[0], os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, line.encode("utf-8", "surrogateescape") + b"\n")
    finally:
        os.close(fd)


def journal_until(proc, needle: str, timeout: float = 30) -> str:
    """The agent's stderr until it holds ``needle`` (what it said so far, when it never comes). Read from the
    pipe itself: a buffered readline after select() can take two lines into its buffer and return one, and
    select() then never reports the second (the refusal line was lost that way under load)."""
    fd, got, deadline = proc.stderr.fileno(), b"", time.monotonic() + timeout
    while needle.encode() not in got and time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.2)[0]:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        got += chunk
    return got.decode("utf-8", "replace")


# -- the worker acts only for the root process that knocked ------------------------------------------

@root_only
@pytest.mark.parametrize("version", ["1", "2"])
def test_a_line_naming_a_bash_of_another_user_is_refused_nothing_read_run_or_written(tmp_path, bundles, version):  # noqa: F811
    """Reproduction: a root-written line naming a bash run by nobody ran the prolog for it (its
    environment, its SLURM_CONF, its pipe). Now the worker refuses it before it reads anything."""
    config = write_config(tmp_path, str(bundles / "faulty"))
    theirs = bash_holding_a_pipe(NOBODY)
    proc, sock = start_agent(tmp_path, config)
    try:
        start = f" {start_of(theirs.pid)}" if version == "2" else ""
        line = f"{version} {theirs.pid} 3 {int(time.time() * 1e6)}{start} /bin/bash prolog /x/hc.toml /x/slurm.conf"
        with pytest.raises(door.DoorError, match="not root"):
            door.request_of(line)
        knock_at(sock, line)
        said = journal_until(proc, "not root: refused")  # the agent refuses it, or a spare does ("not taken")
        assert "not root: refused" in said, said
        assert unread(theirs.pid) == b""  # no answer written into their pipe
        assert spool(tmp_path) == []  # nothing judged, nothing acted on
    finally:
        stop(proc)
        theirs.kill()
        theirs.wait()


def test_a_line_whose_start_time_is_not_the_processes_is_refused(tmp_path):
    """A pid reused by another root process (the hook gave up; any process may take its pid) is told
    apart by its start time: the worker acts for no one."""
    ours = bash_holding_a_pipe()
    try:
        line = f"2 {ours.pid} 3 {int(time.time() * 1e6)} {start_of(ours.pid) + 1} /bin/bash prolog /c"
        with pytest.raises(door.DoorError, match="not the hook that knocked"):
            door.request_of(line)
        assert unread(ours.pid) == b""
        request, reply = door.request_of(line.replace(f" {start_of(ours.pid) + 1} ", f" {start_of(ours.pid)} "))
        reply.close()
        assert request["pid"] == ours.pid and request["argv"][0] == "prolog"
    finally:
        ours.kill()
        ours.wait()


def test_a_pid_taken_over_while_its_environment_is_read_is_refused(tmp_path, monkeypatch):
    """The check is made again after the environment was read: a process that ended and whose pid was
    taken in between (another start time) gives nothing the worker uses."""
    proc = tmp_path / "proc"
    (proc / "123").mkdir(parents=True)
    stat_file = proc / "123" / "stat"
    stat_file.write_text("123 (bash) S 1 123 123 0 -1 4194560 " + "0 " * 12 + "4242 0 0\n")
    uid = os.getuid()
    (proc / "123" / "status").write_text(f"Name:\tbash\nUmask:\t0022\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    (proc / "123" / "environ").write_bytes(b"SLURM_CONF=/home/mallory/slurm.conf\0")
    (proc / "123" / "cwd").symlink_to(tmp_path)
    from healthcheck.probes import jobprocs

    real = jobprocs.read_proc

    def read_and_reuse(root, pid, name, limit):
        data = real(root, pid, name, limit)
        if name == "environ":  # the hook is gone; another process now holds pid 123
            stat_file.write_text(stat_file.read_text().replace(" 4242 ", " 9999 "))
        return data

    monkeypatch.setattr(jobprocs, "read_proc", read_and_reuse)
    with pytest.raises(door.DoorError, match="not the hook that knocked"):
        door.client_context(123, str(proc), start=4242)
    stat_file.write_text(stat_file.read_text().replace(" 9999 ", " 4242 "))
    with pytest.raises(door.DoorError, match="not the hook that knocked"):  # protocol 1: no START, still re-checked
        door.client_context(123, str(proc))


def test_a_process_root_in_some_uids_only_is_refused(tmp_path):
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "stat").write_text("7 (bash) S 1 7 7 0 -1 4194560 " + "0 " * 12 + "55 0 0\n")
    (proc / "7" / "status").write_text("Name:\tbash\nUid:\t0\t0\t0\t1000\n")  # a set-uid helper's fs uid
    with pytest.raises(door.DoorError, match="runs as uid 0/0/0/1000, not root"):
        door.check_process(7, 55, str(proc))
    (proc / "7" / "status").write_text("Name:\tbash\n")  # no Uid line at all
    with pytest.raises(door.DoorError, match="not root"):
        door.check_process(7, 55, str(proc))


# -- no line stops the agent --------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(["1", "2", "0", "3", "prolog", "epilog", "slurm-check", "/bin/bash", "/c",
                                        "\u00b2", "\u0663", "\uff11", "-1", "", " ", "9" * 30, "9" * 5000]),
                       st.text(max_size=12), st.integers().map(str)), max_size=11).map(" ".join)))
def test_any_line_at_the_door_is_a_request_or_a_door_error(line):
    try:
        req = door.parse_request(line)
    except door.DoorError:
        return
    assert req.context in ("prolog", "epilog", "slurm-check") and req.pid >= 2 and req.shell.startswith("/")


def hostile_lines(rng: random.Random, victim: int, victim_start: int) -> list[str]:
    t0 = int(time.time() * 1e6)
    lines = ["1 \u00b2 3 0 /bin/bash prolog /c", "1 7 \u0663 0 /b prolog /c", "2 1 3 0 \uff11 /bin/bash prolog /c",
             "1 " + "9" * 5000 + " 3 0 /bin/bash prolog /c", "\x00\x01\x02", "2 " * 2000, "\udcff\udcfe",
             f"2 1 3 {t0} 1 /bin/bash prolog /c",  # init, as the hook: wrong start, not bash
             f"2 {os.getpid()} 3 {t0} 1 /bin/bash prolog /c",  # a root process, another start
             f"2 {victim} 3 {t0} {victim_start + 7} /bin/bash prolog /c",  # a live bash, another start
             f"2 {victim} 999 {t0} {victim_start} /bin/bash epilog /c /etc/slurm.conf"]  # not a pipe it holds
    alphabet = "0123456789 /abc-\u00b2\n\t"
    for _ in range(200):
        if rng.random() < 0.5:
            lines.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))).replace("\n", " "))
        else:
            lines.append(f"2 {rng.randint(2, 4_000_000)} {rng.randint(0, 9)} {t0} {rng.randint(10**9, 10**12)} "
                         f"/bin/bash {rng.choice(['prolog', 'epilog', 'slurm-check'])} /c")
    return lines


def test_hostile_lines_at_the_door_neither_stop_the_agent_nor_make_it_act(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "faulty"))
    victim = bash_holding_a_pipe()  # a root bash whose pipe the hostile lines name with another start time
    proc, sock = start_agent(tmp_path, config)
    try:
        for line in hostile_lines(random.Random(30), victim.pid, start_of(victim.pid)):
            knock_at(sock, line)
        time.sleep(0.5)
        assert proc.poll() is None, stop(proc)  # still serving
        assert unread(victim.pid) == b""
        # a real hook afterwards is served at the door, as ever
        via, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
        assert via.returncode == 1, via.stderr[-2000:]  # the faulty GPU: judged and drained by the agent
        records = runs(tmp_path, 1)
        assert [r["job_id"] for r in records] == ["4242"]  # no run for any hostile line
    finally:
        said = stop(proc)
        victim.kill()
        victim.wait()
    assert "exit 1 after" in said and ", at the door" in said
    assert "Traceback" not in said


# -- the hooks knock only at the agent's door ---------------------------------------------------------

@root_only
def test_a_hook_never_knocks_at_a_door_or_pid_file_that_is_not_roots(tmp_path, bundles):  # noqa: F811
    """Reproduction: a user who planted a FIFO (full, or read by no one) in the agent's place held every
    root prolog until Slurm's timeout. The hook now passes a door or pid file it does not own."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    sock.parent.mkdir(mode=0o755)
    door_path, pid_path = agentpaths.paths_for(str(sock))
    fd = door.open_door(door_path, pid_path)  # a live pid and its start: all but the owner are right
    try:
        for planted in (door_path, pid_path):
            os.chown(planted, NOBODY, NOBODY)
            proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
            assert proc.returncode == 0 and NOT_KNOCKED not in proc.stderr, proc.stderr[-2000:]
            assert os.read(fd, 4096) if select.select([fd], [], [], 0)[0] else True  # (drained if anything)
            os.chown(planted, 0, 0)
        assert not select.select([fd], [], [], 0)[0]  # no line was written into it
    finally:
        door.close_door(fd, door_path, pid_path)
    assert [r["status"] for r in spool(tmp_path) if r["kind"] == "run"] == ["pass", "pass"]


def test_a_stale_pid_file_naming_another_live_process_costs_nothing(tmp_path, bundles):  # noqa: F811
    """A dead agent's pid, now another process's (same pid, another start time), or a pid file of the
    previous release (no start time): the hook does not knock, its Python client runs at once."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    sock.parent.mkdir(mode=0o700)
    door_path, pid_path = agentpaths.paths_for(str(sock))
    fd = door.open_door(door_path, pid_path)
    try:
        for text in (f"{os.getpid()} {start_of(os.getpid()) + 1}\n", f"{os.getpid()}\n", "x y\n"):
            Path(pid_path).write_text(text)
            proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
            assert proc.returncode == 0 and NOT_KNOCKED not in proc.stderr, (text, proc.stderr[-2000:])
        assert not select.select([fd], [], [], 0)[0]  # nothing was written into the door
        Path(pid_path).write_text(f"{os.getpid()} {start_of(os.getpid())}\n")  # right: it knocks (nobody reads)
        proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
        assert NOT_KNOCKED in proc.stderr
    finally:
        door.close_door(fd, door_path, pid_path)


def test_a_stopped_agent_is_passed_over_at_once(tmp_path, bundles):  # noqa: F811
    """An agent stopped (SIGSTOP, a debugger) reads nothing: its door fills and a write into a full FIFO
    would hold the hook (bash cannot time out a write). The hook does not knock at a stopped agent."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/stat").read_bytes().rpartition(b")")[2].split()[0] not in (b"T", b"t"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        hook, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
        assert hook.returncode == 0 and NOT_KNOCKED not in hook.stderr, hook.stderr[-2000:]
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        said = stop(proc)
    assert "at the door" not in said  # the hook ran in its own process (its socket try found it stopped too)
    assert [r["status"] for r in runs(tmp_path, 1)] == ["pass"]  # a worker records just after its answer


# -- a worker killed after it began to drain: the hook fails closed ------------------------------------

def test_a_worker_that_dies_after_it_began_to_drain_fails_the_hook_closed(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "faulty"))
    sock = tmp_path / "run" / "agent.sock"
    fake = FakeAgent(sock, "accepted 60000000 0\n", "acting 1\n", None)  # then its pipe ends: killed
    try:
        proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
    finally:
        fake.close()
    assert proc.returncode == 1  # Slurm requeues the job: it never starts on the node we drained
    assert "gave no verdict (it ended) after it began to drain the node; exit 1" in proc.stderr


def test_a_socket_worker_that_dies_after_it_began_to_drain_fails_the_client_closed(tmp_path):
    sock = tmp_path / "agent.sock"
    t0 = time.monotonic()
    with fake_agent(sock, {"kind": "accepted", "wait_s": 0.3, "pid": 0}, {"kind": "acting", "rc": 1}):
        code = agentclient.via_agent(str(sock), ["prolog", "--config", "/nonexistent"], t0)
    assert code == 1
    with fake_agent(tmp_path / "b.sock", {"kind": "accepted", "wait_s": 0.3, "pid": 0}):
        assert agentclient.via_agent(str(tmp_path / "b.sock"), ["prolog"], time.monotonic()) == 0


def test_a_real_worker_killed_right_after_slurm_drained_the_node_fails_the_prolog_closed(tmp_path, bundles):  # noqa: F811
    """Reproduction: the agent's worker drained the node, then was killed before its verdict reached the
    hook: the hook exited 0 and the job started on the node we had just drained. (scontrol kills the
    worker, its caller, once the drain is done.)"""
    scontrol = tmp_path / "scontrol"
    node = ("NodeName=node1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 State=IDLE ThreadsPerCore=1 "
            "Partitions=debug")
    scontrol.write_text(f"""#!/bin/bash
case "$*" in
  *show\\ node*) echo '{node}' ;;
  *State=DRAIN*) echo "$*" >> {tmp_path}/drained; kill -9 $PPID ;;
esac
exit 0
""")
    scontrol.chmod(0o755)
    config = write_config(tmp_path, str(bundles / "faulty"), scontrol=str(scontrol))
    proc, sock = start_agent(tmp_path, config)
    try:
        hook, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
    finally:
        said = stop(proc)
    assert (tmp_path / "drained").read_text().count("State=DRAIN") == 1, said
    assert hook.returncode == 1, hook.stderr[-2000:]
    assert "after it began to drain the node; exit 1" in hook.stderr


# -- the door's wait is inside the hook's budget ------------------------------------------------------

def test_the_second_a_hook_waited_at_the_door_counts_in_its_budget(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    sock.parent.mkdir(mode=0o700)
    fd = door.open_door(*agentpaths.paths_for(str(sock)))  # a live agent's pid file, a door nobody reads
    try:
        proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
    finally:
        door.close_door(fd, *agentpaths.paths_for(str(sock)))
    assert proc.returncode == 0 and NOT_KNOCKED in proc.stderr
    (record,) = [r for r in spool(tmp_path) if r["kind"] == "run"]
    assert record["duration_s"] >= 1.0  # counted from the hook's start, the door's second included


def test_the_hooks_start_on_the_wall_clock_becomes_its_start_on_the_monotonic_clock():
    assert agentclient.started_at("999998000000", wall=1_000_000.0, mono=50.0) == pytest.approx(48.0)
    for bad in ("", "x", "\u00b2", "9" * 5000, "1000100000000", "900000000000", None):  # malformed, future, stale
        assert agentclient.started_at(bad, wall=1_000_000.0, mono=50.0) == 50.0


# -- install-hooks and slurm.conf: nothing another user can write steers root -------------------------

@root_only
def test_install_hooks_refuses_an_agent_directory_others_could_write(tmp_path):
    config = tmp_path / "hc.toml"
    config.write_text("")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    for sock, why in ((shared / "agent.sock", "must belong to root and not be writable"),
                      (shared / "hc" / "agent.sock", "anyone could make it first"),
                      (theirs / "agent.sock", "owner uid 65534"),
                      (loose / "agent.sock", "mode 777")):
        with pytest.raises(install.UnsafeAgentDir, match=why):
            install.install_hooks(str(tmp_path / "hooks"), str(config), sys.executable, agent=str(sock))
    ok = tmp_path / "run"
    ok.mkdir(mode=0o700)
    assert install.install_hooks(str(tmp_path / "hooks"), str(config), sys.executable, agent=str(ok / "a.sock"))
    assert install.install_hooks(str(tmp_path / "hooks2"), str(config), sys.executable,
                                 agent=str(tmp_path / "new" / "a.sock"))  # made later by the agent, 0700
    from click.testing import CliRunner

    from healthcheck.cli.main import cli

    result = CliRunner().invoke(cli, ["slurm", "install-hooks", "--prefix", str(tmp_path / "h3"), "--config",
                                      str(config), "--python", sys.executable, "--agent-socket",
                                      str(loose / "agent.sock"), "--no-enable-agent"])
    assert result.exit_code == 2 and "mode 777" in result.output, result.output


@root_only
def test_a_slurm_conf_another_user_can_write_never_reaches_scontrol(tmp_path):
    good = tmp_path / "slurm.conf"
    good.write_text("ClusterName=x\n")
    assert untrusted_conf(str(good)) is None and slurm_env({"SLURM_CONF": str(good)})["SLURM_CONF"] == str(good)
    theirs = tmp_path / "theirs.conf"
    theirs.write_text("PluginDir=/home/mallory\n")
    os.chown(theirs, NOBODY, NOBODY)
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    (loose / "slurm.conf").write_text("")
    warned = []
    for path in (theirs, loose / "slurm.conf", tmp_path / "missing.conf", "relative.conf"):
        env = slurm_env({"SLURM_CONF": str(path), "LD_PRELOAD": "/tmp/x.so", "PATH": "/home/mallory/bin"},
                        warn=warned.append)
        assert "SLURM_CONF" not in env and "LD_PRELOAD" not in env and "/home" not in env["PATH"], path
    assert len(warned) == 4 and all("not used" in w for w in warned)
    assert "owned by uid 65534" in warned[0] and "writable by group or others" in warned[1]
