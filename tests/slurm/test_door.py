"""The agent's door, as slurmd and systemd run them: the installed bash hook hands its work to the agent
through a FIFO and reads the answer from a pipe of its own. The verdict, exit status, log lines and
spool record are the in-process hook's; no interpreter starts for a hook the agent takes; without an
agent, with a stale door, a silent or refusing one, the hook runs its Python client; past the budget
the worker's group is killed and nothing is judged. The line protocol's parts, alone."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from healthcheck.core import agentpaths
from healthcheck.agent import door
from healthcheck.deploy import install
from tests.slurm.test_agent import agent, env_for, results, runs, start_agent, stop  # noqa: F401 - a fixture
from tests.slurm.test_hooks import bundles, spool, write_config  # noqa: F401 - the bundles fixture

NO_PYTHON = "/nonexistent/python"  # a hook rendered with it can only succeed through the door


def hook_script(tmp_path: Path, name: str, config: Path, sock: Path | None, python: str = sys.executable,
                slurm_conf: str | None = None) -> Path:
    path = tmp_path / f"{name}-{abs(hash((str(sock), python, slurm_conf)))}.sh"
    path.write_text(install.render(name, python, str(config), slurm_conf=slurm_conf,
                                   agent=str(sock) if sock else None, site=install.package_path(sys.executable)))
    path.chmod(0o755)
    return path


def run_hook(script: Path, env: dict[str, str], timeout: float = 120, cwd: str = "/", argv: list[str] = ()):
    start = time.monotonic()
    proc = subprocess.run([str(script), *argv], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    return proc, time.monotonic() - start


def test_at_the_door_the_hook_judges_acts_and_records_as_in_its_own_process(tmp_path, agent):  # noqa: F811
    config, sock, proc = agent
    via, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
    here, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, None), env_for(tmp_path, job="4243"))
    assert via.returncode == here.returncode == 1, (via.stderr[-2000:], here.stderr[-2000:])  # the faulty GPU
    records = sorted(runs(tmp_path, 2), key=lambda r: r["job_id"])
    assert [r["job_id"] for r in records] == ["4242", "4243"]
    assert results(records[0]) == results(records[1]) and records[0]["status"] == "fail"
    logged = [[line for line in p.stderr.splitlines() if line.startswith("healthcheck:")] for p in (via, here)]
    assert logged[0] == logged[1] and any("prolog on node1: fail" in line for line in logged[0])
    served = stop(proc)  # the agent's journal: one line per hook, saying how it came
    assert [line for line in served.splitlines() if "for job 4242: exit 1 after" in line][0].endswith(", at the door")


def test_the_door_and_pid_file_are_private_and_go_with_the_agent(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    door_path, pid_path = (Path(p) for p in agentpaths.paths_for(str(sock)))
    try:
        assert stat.S_ISFIFO(door_path.stat().st_mode) and stat.S_IMODE(door_path.stat().st_mode) == 0o600
        start = door.parse_start(Path(f"/proc/{proc.pid}/stat").read_bytes())
        assert pid_path.read_text() == f"{proc.pid} {start}\n"  # a pid reused later is told apart
        import fcntl

        fd = os.open(door_path, os.O_RDWR | os.O_NONBLOCK)
        try:  # room for ~10,000 lines: a hook's write into a full door would block it
            assert fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) == door.DOOR_BYTES
        finally:
            os.close(fd)
    finally:
        stop(proc)
    assert not door_path.exists() and not pid_path.exists()


def test_the_hook_at_the_door_carries_its_environment_directory_umask_and_slurm_conf(tmp_path, bundles):  # noqa: F811
    """The worker takes what /proc says of the hook; SLURM_CONF set by install-hooks travels in the line."""
    config = write_config(tmp_path, str(bundles / "healthy"), scontrol=str(tmp_path / "scontrol"))
    seen = tmp_path / "seen"
    (tmp_path / "scontrol").write_text(f'#!/bin/sh\necho "$SLURM_CONF $(pwd) $(umask)" >> {seen}\nexit 1\n')
    (tmp_path / "scontrol").chmod(0o755)
    proc, sock = start_agent(tmp_path, config)
    work = tmp_path / "work dir"
    work.mkdir()
    other = tmp_path / "other.conf"  # root's, and no one else can write it or a directory above it
    other.write_text("")
    try:
        script = hook_script(tmp_path, "healthcheck.sh", config, sock, python=NO_PYTHON, slurm_conf=str(other))
        env = {k: v for k, v in env_for(tmp_path).items() if not k.startswith("SLURM_JOB")}
        check = subprocess.run(["/bin/sh", "-c", f"umask 027; exec {script}"], capture_output=True, text=True,
                               env={**env, "SLURMD_NODENAME": "node7"}, timeout=120, cwd=str(work))
    finally:
        stop(proc)
    assert check.returncode == 0, check.stderr[-2000:]
    assert seen.read_text().splitlines()[0] == f"{other} {work} 0027"  # what scontrol was given
    record = runs(tmp_path, 1)[-1]
    assert record["context"] == "slurm-check" and record["node"] == "node7"  # the hook's SLURMD_NODENAME


def test_a_malformed_line_at_the_door_is_refused_and_the_agent_serves_on(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    r, w = os.pipe()  # a pipe this process holds, named by a well-formed line that waited too long
    os.set_blocking(r, False)
    try:
        fd = os.open(agentpaths.paths_for(str(sock))[0], os.O_WRONLY | os.O_NONBLOCK)
        old = int((time.time() - door.GIVEN_UP_S - 1) * 1e6)
        os.write(fd, f"1 {os.getpid()} {r} {old} {sys.executable} prolog {config}\n".encode())
        os.write(fd, b"1 1 3 0 /bin/bash prolog /etc/passwd\nrm -rf /\n" + b"x" * 9000 + b"\n")
        os.close(fd)
        via, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
        with pytest.raises(BlockingIOError):
            os.read(r, 64)  # the stale line was dropped: no worker answered it
    finally:
        err = stop(proc)
        os.close(r)
        os.close(w)
    assert via.returncode == 0 and proc.returncode == 0, via.stderr[-2000:]
    assert err.count("a request at the door refused") == 3, err[-2000:]
    assert "1 request(s) at the door dropped: older than 2 s" in err, err[-2000:]
    assert [r["job_id"] for r in runs(tmp_path, 1)] == ["4242"]


def test_every_context_and_concurrent_hooks_at_the_door(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    try:
        # with the Python client behind them: six at once outnumber the two spares, and on a loaded machine
        # a new spare may take longer than the second a hook waits at the door
        prolog = hook_script(tmp_path, "prolog.sh", config, sock)
        hooks = [subprocess.Popen([str(prolog)], env=env_for(tmp_path, job=str(100 + i)), stderr=subprocess.PIPE,
                                  text=True, cwd="/") for i in range(6)]
        codes = [p.wait(timeout=120) for p in hooks]
        errors = [p.stderr.read() for p in hooks]
        epilog, _ = run_hook(hook_script(tmp_path, "epilog.sh", config, sock, python=NO_PYTHON),
                             env_for(tmp_path, job="100"))
        done = runs(tmp_path, 7)
    finally:
        served = stop(proc)
    assert codes == [0] * 6 and epilog.returncode == 0, (errors, epilog.stderr)
    assert sorted(r["job_id"] for r in done if r["context"] == "prolog") == [str(100 + i) for i in range(6)]
    assert [r["context"] for r in done if r["context"] != "prolog"] == ["epilog"]
    at_door = [line for line in served.splitlines() if line.endswith(", at the door")]
    assert any(": prolog on node1 for job 10" in line for line in at_door) and len(at_door) >= 2, served


def test_without_an_agent_or_with_a_dead_ones_door_the_hook_runs_its_python_client(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    script = hook_script(tmp_path, "prolog.sh", config, sock)
    first, _ = run_hook(script, env_for(tmp_path, job="1"))  # nothing there
    sock.parent.mkdir(mode=0o700)
    door_path, pid_path = agentpaths.paths_for(str(sock))
    os.mkfifo(door_path, 0o600)
    dead = subprocess.Popen(["true"])
    dead.wait()
    Path(pid_path).write_text(f"{dead.pid}\n")  # a pid no process has now
    second, _ = run_hook(script, env_for(tmp_path, job="2"))
    for proc in (first, second):  # quietly: no agent is the usual case of an install without one
        assert proc.returncode == 0 and "agent" not in proc.stderr, proc.stderr[-2000:]
    assert sorted(r["job_id"] for r in spool(tmp_path)) == ["1", "2"]


class FakeAgent:
    """A stand-in at the door: reads one request line, then answers the hook's pipe with ``answers``
    (strings, or a callable given the request, for a line or None to close the pipe)."""

    def __init__(self, sock: Path, *answers, delay_s: float = 0.0):
        sock.parent.mkdir(mode=0o700, exist_ok=True)
        self.door_path, self.pid_path = agentpaths.paths_for(str(sock))
        self.fd = door.open_door(self.door_path, self.pid_path)  # the pid file names this (live) process
        self.answers, self.requests, self.delay_s, self.refused = answers, [], delay_s, None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import select

        lines = door.Lines()
        while not self.requests:
            if not select.select([self.fd], [], [], 60)[0]:
                return
            for line in lines.feed(os.read(self.fd, 4096)):
                self.requests.append(door.parse_request(line))
        req = self.requests[0]
        time.sleep(self.delay_s)
        try:
            reply = door.Reply(req.pid, req.fd, shell=req.shell)
        except door.DoorError as exc:
            self.refused = exc
            return
        for answer in self.answers:
            text = answer(req) if callable(answer) else answer
            if text is None:
                break
            os.write(reply.fd, text.encode())
        reply.close()

    def close(self) -> None:
        door.close_door(self.fd, self.door_path, self.pid_path)


def test_a_door_no_one_reads_costs_a_second_then_the_hook_runs_its_python_client(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    sock.parent.mkdir(mode=0o700)
    fd = door.open_door(*agentpaths.paths_for(str(sock)))  # a live pid, a door nobody reads
    try:
        proc, took = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
    finally:
        door.close_door(fd, *agentpaths.paths_for(str(sock)))
    assert proc.returncode == 0 and "agent not used, the hook runs here: no answer at its door" in proc.stderr
    assert took >= 1.0
    assert spool(tmp_path)[-1]["status"] == "pass"


def test_a_refusal_at_the_door_says_why_and_the_hook_runs_its_python_client(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    fake = FakeAgent(sock, "refused protocol 9, this agent speaks 1\n")
    try:
        proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
    finally:
        fake.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "agent not used, the hook runs here: agent refused: protocol 9, this agent speaks 1" in proc.stderr
    assert fake.requests[0].context == "prolog" and fake.requests[0].config == str(config)
    assert spool(tmp_path)[-1]["status"] == "pass"


def test_a_late_answer_never_reaches_the_python_client_the_hook_became(tmp_path, bundles):  # noqa: F811
    """The agent takes the request after the hook gave up (a second) and exec'd its Python client, which
    has descriptors of its own by then (its watchdog's pipes): the worker opens the pipe named in the
    line, sees the process runs something else than the bash that knocked, and answers nothing."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    fake = FakeAgent(sock, "accepted 5000000 0\n", "done 1\n", delay_s=2.5)
    try:
        proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock), env_for(tmp_path))
        fake.thread.join(timeout=30)
    finally:
        fake.close()
    assert proc.returncode == 0 and "no answer at its door" in proc.stderr, proc.stderr[-2000:]
    assert isinstance(fake.refused, door.DoorError)  # no longer runs bash (or the descriptor is gone)
    assert [r["status"] for r in spool(tmp_path) if r["kind"] == "run"] == ["pass"]


def test_a_worker_past_its_budget_is_killed_and_nothing_is_judged(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "faulty"))
    sock = tmp_path / "run" / "agent.sock"
    stuck = subprocess.Popen(["sleep", "600"], process_group=0)  # the worker's group, stuck on a wedged GPU
    fake = FakeAgent(sock, f"accepted 300000 {stuck.pid}\n", "budget 200000\n",
                     lambda req: time.sleep(30))  # holds the pipe open, never answers
    try:
        proc, took = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
        assert stuck.wait(timeout=30) == -signal.SIGKILL
    finally:
        fake.close()
        stuck.kill()
    assert proc.returncode == 0, proc.stderr[-2000:]  # our failure never drains a node
    assert "the agent's worker gave no verdict (timed out); nothing judged" in proc.stderr
    assert took < 25  # the budget (0.2 s), the margin, not the fake's 30 s
    assert spool(tmp_path) == []


def test_a_worker_that_ends_without_a_verdict_ends_the_hook_at_once(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "faulty"))
    sock = tmp_path / "run" / "agent.sock"
    fake = FakeAgent(sock, "accepted 60000000 0\n", "log healthcheck: a line before it died\n", None)
    try:
        proc, took = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
    finally:
        fake.close()
    assert proc.returncode == 0
    assert proc.stderr.splitlines()[:2] == ["healthcheck: a line before it died",
                                            "healthcheck: the agent's worker gave no verdict (it ended); "
                                            "nothing judged"]
    assert took < 30  # not the 60 s the worker was given


@pytest.mark.parametrize("rc_line,code", [("done 1\n", 1), ("done 0\n", 0), ("done 300\n", 0), ("done x\n", 0)])
def test_the_hook_exits_with_the_workers_status_and_anything_else_is_0(tmp_path, bundles, rc_line, code):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    fake = FakeAgent(sock, "accepted 5000000 0\n", "log  two  spaces kept \n", "what a newer agent may say\n", rc_line)
    try:
        proc, _ = run_hook(hook_script(tmp_path, "prolog.sh", config, sock, python=NO_PYTHON), env_for(tmp_path))
    finally:
        fake.close()
    assert proc.returncode == code and proc.stderr == " two  spaces kept \n"


def test_a_request_line_is_read_strictly():
    req = door.parse_request("2 4242 3 1796409693219737 8812 /bin/bash prolog /etc/hc.toml /etc/slurm/s.conf\n")
    assert (req.pid, req.fd, req.t0_us, req.start, req.shell, req.context, req.config, req.slurm_conf) == (
        4242, 3, 1796409693219737, 8812, "/bin/bash", "prolog", "/etc/hc.toml", "/etc/slurm/s.conf")
    assert door.parse_request("2 7 3 0 1 /bin/bash slurm-check /c").slurm_conf is None
    # the previous release's hooks (protocol 1, no START) are still served, bound by uid and shell
    old = door.parse_request("1 4242 3 1796409693219737 /bin/bash prolog /etc/hc.toml /etc/slurm/s.conf\n")
    assert (old.pid, old.start, old.context, old.slurm_conf) == (4242, None, "prolog", "/etc/slurm/s.conf")
    for bad in ("", "2 4242 3 0 /b prolog /c", "1 x 3 0 /b prolog /c", "1 1 3 0 /b prolog /c", "1 7 3 0 /b rm /c",
                "1 7 3 0 /b prolog c", "1 7 3 0 bash prolog /c", "1 7 3 0 /b prolog /c /d /e",
                "1 7 -3 0 /b prolog /c", "1 7 3 0 /b prolog /c\x1b[2J", "1 7 3 0 prolog /c",
                "1 7 3 0 /b prolog /" + "c" * 5000, "3 7 3 0 1 /b prolog /c",
                "2 7 3 0 x /b prolog /c", "2 7 3 0 \u00b2 /b prolog /c", "2 7 3 0 1 /b prolog /c /d /e",
                # digits Python's int() takes but that are not ASCII: an uncaught ValueError killed the agent
                "1 \u00b2 3 0 /bin/bash prolog /c", "1 7 \u0663 0 /b prolog /c", "2 7 3 \uff11 1 /b prolog /c",
                "1 " + "9" * 5000 + " 3 0 /b prolog /c"):
        with pytest.raises(door.DoorError):
            door.parse_request(bad)


def test_a_line_older_than_a_hooks_wait_is_given_up():
    req = door.parse_request("2 7 3 1000000000000000 1 /bin/bash prolog /c")  # T0: 1e9 s on the wall clock
    assert not door.given_up(req, wall=1e9 + door.GIVEN_UP_S - 0.1)
    assert door.given_up(req, wall=1e9 + door.GIVEN_UP_S + 0.1)


def test_the_hooks_start_counts_on_this_clock_and_a_stepped_clock_counts_from_now():
    assert door.start_of(999_998_000_000, wall=1_000_000.0, mono=50.0) == pytest.approx(48.0)
    assert door.start_of(1_000_100_000_000, wall=1_000_000.0, mono=50.0) == 50.0  # from the future
    assert door.start_of(900_000_000_000, wall=1_000_000.0, mono=50.0) == 50.0  # older than MAX_AGE_S


def test_the_hooks_context_from_proc_is_what_the_process_has():
    env, cwd, umask = door.client_context(os.getpid())
    assert cwd == os.getcwd()
    current = os.umask(0o022)
    os.umask(current)
    assert umask == current
    started_with = door.parse_environ(Path(f"/proc/{os.getpid()}/environ").read_bytes())
    assert env == started_with and "PATH" in env
    assert door.parse_environ(b"A=1\0B=caf\xe9\0NOEQUALS\0=x\0C=a=b\0") == {"A": "1", "B": "caf\udce9", "C": "a=b"}
    assert door.parse_umask("Name:\tbash\nUmask:\t0027\n") == 0o027 and door.parse_umask("Name:\tbash\n") == 0o022
    with pytest.raises(door.DoorError, match="process 999999999"):
        door.client_context(999_999_999)


def test_a_hooks_context_from_a_proc_tree_and_an_environment_too_large(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    (proc / "123").mkdir(parents=True)
    (proc / "123" / "environ").write_bytes(b"SLURM_JOB_ID=7\0PATH=/bin\0")
    (proc / "123" / "status").write_text(f"Name:\tbash\nUmask:\t0077\nUid:\t{os.getuid()}\t{os.getuid()}\t"
                                         f"{os.getuid()}\t{os.getuid()}\n")
    (proc / "123" / "stat").write_text("123 (b) a) S 1 123 123 0 -1 4194560 " + "0 " * 12 + "4242 0 0\n")
    (proc / "123" / "cwd").symlink_to(tmp_path)
    assert door.client_context(123, str(proc)) == ({"SLURM_JOB_ID": "7", "PATH": "/bin"}, str(tmp_path), 0o077)
    assert door.client_context(123, str(proc), start=4242)[1] == str(tmp_path)
    monkeypatch.setattr(door, "MAX_ENVIRON", 10)
    with pytest.raises(door.DoorError, match="an environment over 10 bytes"):
        door.client_context(123, str(proc))


def test_the_answers_are_the_sockets_messages_as_lines():
    assert door.encode({"kind": "accepted", "wait_s": 10.0, "pid": 77}) == b"accepted 10000000 77\n"
    assert door.encode({"kind": "budget", "budget_s": 2.5}) == b"budget 2500000\n"
    assert door.encode({"kind": "done", "rc": 1, "log": "healthcheck: a\n\nhealthcheck: b\x00c\n"}) == (
        b"log healthcheck: a\nlog healthcheck: bc\ndone 1\n")
    assert door.encode({"kind": "done", "rc": 999, "log": ""}) == b"done 0\n"
    assert door.encode({"kind": "refused", "why": "two\nlines"}) == b"refused two lines\n"
    with pytest.raises(ValueError):
        door.encode({"kind": "other"})


def test_the_reply_must_be_a_pipe_the_hook_holds(tmp_path):
    plain = open(tmp_path / "f", "w")
    try:
        with pytest.raises(door.DoorError, match="not a pipe"):
            door.Reply(os.getpid(), plain.fileno())
    finally:
        plain.close()
    with pytest.raises(door.DoorError):
        door.Reply(os.getpid(), 987)  # no such descriptor
    r, w = os.pipe()
    try:
        open_fds = sorted(os.listdir("/proc/self/fd"))
        with pytest.raises(door.DoorError, match=f"process {os.getpid()} no longer runs /bin/sh"):
            door.Reply(os.getpid(), r, shell="/bin/sh")  # a hook that exec'd another program since
        assert sorted(os.listdir("/proc/self/fd")) == open_fds  # what it opened is closed again
        reply = door.Reply(os.getpid(), r, shell=sys.executable)
        reply.send({"kind": "done", "rc": 0, "log": ""})
        reply.close()
        assert os.read(r, 64) == b"done 0\n"
    finally:
        os.close(r)
        os.close(w)


def test_request_lines_are_split_as_they_come():
    lines = door.Lines()
    assert lines.feed(b"1 2 3 4 prolog /c\n1 5") == ["1 2 3 4 prolog /c"]
    assert lines.feed(b" 3 4 epilog /c\n") == ["1 5 3 4 epilog /c"]
    assert lines.feed(b"x" * (door.MAX_LINE + 10)) == [] and lines.partial == b""


def test_lines_handed_to_the_spares_are_one_atomic_record_each_and_one_reader_takes_each():
    import select as select_module

    assert door.RECORD == select_module.PIPE_BUF  # a write of one record is atomic: lines never interleave
    r, w = door.hand_over_pipe()
    try:
        first, second = "1 7 3 0 /bin/bash prolog /c\n", "1 8 3 0 /bin/bash epilog /c /s.conf"
        door.hand_over(w, first)
        door.hand_over(w, second)
        readers = [threading.Thread(target=lambda: taken.append(door.take_handed(r))) for _ in range(3)]
        taken: list = []
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        # two spares took a line each, whole; the third found the pipe empty (another spare took it)
        assert sorted(taken, key=str) == sorted([first.rstrip("\n"), second, None], key=str)
        with pytest.raises(ValueError):
            door.hand_over(w, "1 7 3 0 /bin/bash prolog /" + "c" * door.RECORD)
        with pytest.raises(ValueError):
            door.hand_over(w, "1 7 3 0 /bin/bash prolog /c\0x")
        waiting = 0
        with pytest.raises(BlockingIOError):  # a full pipe never holds the agent's loop
            while waiting < 10_000:
                door.hand_over(w, first)
                waiting += 1
        assert waiting >= 16 and door.take_handed(r) == first.rstrip("\n")
    finally:
        os.close(r)
        os.close(w)


def test_a_spare_drops_a_handed_line_that_waited_past_its_hooks_patience():
    from healthcheck.agent import main as agent_module

    r, w = door.hand_over_pipe()
    logged: list[str] = []
    try:
        stale = int((time.time() - door.GIVEN_UP_S - 1) * 1e6)
        fresh = int(time.time() * 1e6)
        door.hand_over(w, f"1 7 3 {stale} /bin/bash prolog /c")
        door.hand_over(w, f"1 7 3 {fresh} /bin/bash prolog /c")
        assert agent_module._handed(r, logged.append) is None
        assert logged and "waited over 2 s for a spare" in logged[0]
        assert agent_module._handed(r, logged.append) == f"1 7 3 {fresh} /bin/bash prolog /c"
        assert agent_module._handed(r, logged.append) is None and len(logged) == 1  # nothing there
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("through", ["door", "socket"])
def test_a_root_jobs_epilog_through_the_agent_spares_the_hook_and_its_callers(tmp_path, bundles, through):  # noqa: F811
    """A job run as root: its epilog's callers (slurmd's hook, a site's wrapper script) carry the job's
    id and root's uid, as the job's own processes do. Through the agent they are not the worker's
    ancestors, so the worker leaves out the hook's: killing them would end the epilog with a signal and
    Slurm would drain the node "Epilog error". The job's real leftover is still killed."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    env = {**env_for(tmp_path, job="555"), "SLURM_JOB_UID": "0", "SLURM_JOB_USER": "root"}
    leftover = subprocess.Popen(["sleep", "613"], env=env, start_new_session=True)  # the job's, as root
    try:
        if through == "door":
            hook = hook_script(tmp_path, "epilog.sh", config, sock, python=NO_PYTHON)
        else:
            hook = tmp_path / "epilog-socket.sh"
            code = install.python_part(install.render("epilog.sh", sys.executable, str(config), agent=str(sock),
                                                      site=install.package_path(sys.executable)))
            hook.write_text(f"#!/bin/sh\n{sys.executable} -IS -c '{code}' epilog\n")
            hook.chmod(0o755)
        wrapper = tmp_path / "site-epilog.sh"  # the site's Epilog= script calling ours, then finishing
        wrapper.write_text(f'#!/bin/sh\n"{hook}" || exit $?\necho finished\n')
        wrapper.chmod(0o755)
        done = subprocess.run([str(wrapper)], capture_output=True, text=True, env=env, timeout=120, cwd="/")
        assert leftover.wait(timeout=30) == -signal.SIGKILL
    finally:
        leftover.kill()
        stop(proc)
    assert done.returncode == 0 and done.stdout == "finished\n", (done.returncode, done.stderr[-2000:])
    record = runs(tmp_path, 1)[-1]
    strays = [r for r in record["results"] if r["check"] == "job.stray_processes"]
    assert strays and strays[0]["metrics"]["killed"] == 1, strays


def test_a_bash_without_epochrealtime_goes_straight_to_the_python_client(tmp_path, bundles):  # noqa: F811
    """bash before 5.0 (RHEL 8's 4.4) has no $EPOCHREALTIME, so the hook could not say when it started:
    it does not knock (a line the agent would refuse, then a second's wait) but runs its Python client,
    which the agent serves on its socket."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    try:
        hook = hook_script(tmp_path, "prolog.sh", config, sock)
        old_bash, took = run_hook(Path("/bin/bash"), env_for(tmp_path), argv=["-c", f"unset EPOCHREALTIME; . {hook}"])
    finally:
        served = stop(proc)
    assert old_bash.returncode == 0 and "agent not used" not in old_bash.stderr, old_bash.stderr[-2000:]
    assert took < 1.0 + 30 and "door" not in served.replace(", on the socket", ""), served
    assert [line for line in served.splitlines() if "for job 4242: exit 0 after" in line][0].endswith(", on the socket")


def test_an_answer_to_a_hook_that_is_gone_says_so():
    """The worker runs nothing for a hook whose ``accepted`` cannot be delivered (it gave up and ran its
    hook itself): the answer reports the hook gone."""
    from healthcheck.agent.main import _answer

    r, w = os.pipe()
    reply = door.Reply(os.getpid(), r)
    assert _answer(reply, {"kind": "accepted", "wait_s": 5.0, "pid": 1}) is True
    os.close(r)
    os.close(w)  # the hook's ends, closed: nobody reads the pipe now
    assert _answer(reply, {"kind": "accepted", "wait_s": 5.0, "pid": 1}) is False
    reply.close()
