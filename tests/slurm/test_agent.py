"""The warm hook agent and the wrappers' client, as slurmd and systemd run them (subprocesses, a real Unix
socket): the verdict, exit status and spool record are the in-process hook's; without an agent, with a
stale or a silent one, the hook runs in the wrapper's own process; the client imports nothing else."""
from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from healthcheck.hook import client as agentclient
from healthcheck.core.agentpaths import paths_for
from healthcheck.agent.main import Fingerprint
from healthcheck.deploy.install import package_path
from tests.slurm.test_hooks import bundles, spool, write_config  # noqa: F401 - the bundles fixture

ROOT = Path(__file__).resolve().parents[2]
# the installed scripts' lines (healthcheck/deploy/templates/prolog.sh), run as they are: python -IS
CLIENT = (f"import sys; sys.path.append({package_path(sys.executable)!r}); "
          "from healthcheck.hook.client import run; run()")


def env_for(tmp_path: Path, job: str = "4242") -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node1", "SLURM_JOB_ID": job, "SLURM_JOB_USER": "alice",
            "SLURM_JOB_UID": "1000", "HEALTHCHECK_CACHE_DIR": str(tmp_path / "cache")}


def start_agent(tmp_path: Path, config: Path, argv_prefix: list[str] | None = None, sock: Path | None = None):
    sock = sock or tmp_path / "run" / "agent.sock"
    argv = argv_prefix or [sys.executable, "-I", "-m", "healthcheck.agent.main"]
    proc = subprocess.Popen([*argv, "--socket", str(sock), "--config", str(config)], env=env_for(tmp_path),
                            stderr=subprocess.PIPE, text=True, cwd="/")
    deadline = time.monotonic() + 60
    pid_file = Path(paths_for(str(sock))[1])  # written after the socket is bound: the agent is up once both are
    while not (sock.exists() and pid_file.exists()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"agent did not start: {proc.communicate()[1]}")
        time.sleep(0.02)
    return proc, sock


def stop(proc) -> str:
    proc.terminate()
    try:
        return proc.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1]


def client(context: str, config: Path, sock: Path | None, env: dict[str, str], extra=()):
    argv = [sys.executable, "-IS", *extra, "-c", CLIENT, context, "--config", str(config)]
    if sock is not None:
        argv += ["--agent", str(sock)]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd="/")
    return proc, time.monotonic() - start


def runs(tmp_path: Path, n: int, timeout: float = 30) -> list[dict]:
    """The spool's run records once there are ``n``: the agent's worker answers the wrapper as soon as
    the verdict and the action are settled and writes the record just after."""
    deadline = time.monotonic() + timeout
    while True:
        got = [r for r in spool(tmp_path) if r["kind"] == "run"]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def fake_agent(sock: Path, *answers: dict):
    """A stand-in on ``sock`` that takes one request and sends ``answers``, then holds the connection open
    (an agent that never finishes). A context manager: the socket and the connection close on exit."""
    import contextlib
    import threading

    @contextlib.contextmanager
    def running():
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(sock))
        server.listen(4)
        held = []

        def take():
            conn, _ = server.accept()
            held.append(conn)
            agentclient.read_frame(conn)
            for answer in answers:
                agentclient.send_frame(conn, answer)

        threading.Thread(target=take, daemon=True).start()
        try:
            yield
        finally:
            server.close()
            for conn in held:
                conn.close()
    return running()


def imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def results(record: dict) -> list[tuple]:
    return [(r["check"], r["status"], r["message"], r["component"]) for r in record["results"]]


@pytest.fixture
def agent(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "faulty"))
    proc, sock = start_agent(tmp_path, config)
    yield config, sock, proc
    stop(proc)


def test_through_the_agent_the_hook_judges_acts_and_records_as_in_its_own_process(tmp_path, agent):
    config, sock, _ = agent
    via, _ = client("prolog", config, sock, env_for(tmp_path), extra=["-X", "importtime"])
    here, _ = client("prolog", config, None, env_for(tmp_path, job="4243"))
    assert via.returncode == here.returncode == 1, (via.stderr[-2000:], here.stderr[-2000:])  # the faulty GPU drains
    records = sorted(runs(tmp_path, 2), key=lambda r: r["job_id"])
    assert [r["job_id"] for r in records] == ["4242", "4243"]
    assert results(records[0]) == results(records[1]) and records[0]["status"] == "fail"
    # the hook's log lines, through the agent, in slurmd's log: the same as the hook's own
    logged = [[line for line in p.stderr.splitlines() if line.startswith("healthcheck:")] for p in (via, here)]
    assert logged[0] == logged[1] and any("prolog on node1: fail" in line for line in logged[0])
    # the work was the agent's: the wrapper imported its client and nothing of the hook
    ours = {m for m in imported(via.stderr) if m.split(".")[0] == "healthcheck"}
    assert ours == {"healthcheck", "healthcheck.hook", "healthcheck.hook.client"}
    served = stop(agent[2])  # the agent's journal: one line per hook, saying how it came
    assert [line for line in served.splitlines() if "for job 4242: exit 1 after" in line][0].endswith(", on the socket")


def test_the_client_imports_nothing_beyond_the_interpreter_but_its_module_and_the_socket(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    try:
        floor = imported(subprocess.run([sys.executable, "-IS", "-X", "importtime", "-c", "pass"], capture_output=True,
                                        text=True, env=env_for(tmp_path), cwd="/").stderr)
        via, _ = client("prolog", config, sock, env_for(tmp_path), extra=["-X", "importtime"])
    finally:
        stop(proc)
    assert via.returncode == 0, via.stderr[-2000:]
    assert imported(via.stderr) - floor == {"healthcheck", "healthcheck.hook", "healthcheck.hook.client",
                                            "_socket"}
    assert runs(tmp_path, 1)[-1]["status"] == "pass"


def test_every_context_and_concurrent_requests(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    try:
        argv = [sys.executable, "-IS", "-c", CLIENT]
        clients = [subprocess.Popen([*argv, "prolog", "--config", str(config), "--agent", str(sock)],
                                 env=env_for(tmp_path, job=str(100 + i)), stderr=subprocess.PIPE, text=True, cwd="/")
                for i in range(4)]
        codes = [p.wait(timeout=120) for p in clients]
        epilog, _ = client("epilog", config, sock, env_for(tmp_path, job="100"))
        check, _ = client("slurm-check", config, sock, {k: v for k, v in env_for(tmp_path).items()
                                                        if not k.startswith("SLURM_JOB")})
    finally:
        stop(proc)
    assert codes == [0, 0, 0, 0] and epilog.returncode == 0 and check.returncode == 0, epilog.stderr + check.stderr
    done = runs(tmp_path, 6)
    assert sorted(r["job_id"] for r in done if r["context"] == "prolog") == ["100", "101", "102", "103"]
    assert sorted(r["context"] for r in done if r["context"] != "prolog") == ["epilog", "slurm-check"]


def test_without_an_agent_the_hook_runs_in_the_wrappers_process(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, _ = client("prolog", config, tmp_path / "no-agent.sock", env_for(tmp_path), extra=["-X", "importtime"])
    assert proc.returncode == 0 and "agent" not in proc.stderr.replace("agentclient", "")
    assert "healthcheck.hook.run" in imported(proc.stderr)
    assert spool(tmp_path)[-1]["status"] == "pass"


def test_a_silent_agent_costs_the_accept_wait_then_the_hook_runs_here(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(4)  # accepts (the kernel does) and never answers
    try:
        proc, took = client("prolog", config, sock, env_for(tmp_path))
    finally:
        server.close()
    assert proc.returncode == 0 and "agent not used, the hook runs here: no answer from the agent" in proc.stderr
    assert agentclient.ACCEPT_S <= took < agentclient.ACCEPT_S + 30
    assert spool(tmp_path)[-1]["status"] == "pass"


def test_an_agent_that_takes_the_request_and_never_answers_costs_the_budget_and_never_drains(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "faulty"), prolog_budget_s=1.0)
    sock = tmp_path / "taker.sock"
    with fake_agent(sock, {"kind": "accepted", "wait_s": 5.0, "pid": 0}, {"kind": "budget", "budget_s": 1.0}):
        proc, took = client("prolog", config, sock, env_for(tmp_path))
    assert proc.returncode == 0 and "gave no verdict" in proc.stderr  # our failure: exit 0, logged
    assert took < 1.0 + agentclient.ANSWER_MARGIN_S + 30
    assert spool(tmp_path) == []  # nothing judged here either: the request was the agent's


def test_a_changed_package_makes_the_agent_exit_for_a_restart_and_the_hooks_run_here(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    copy = tmp_path / "pkg"
    shutil.copytree(ROOT / "healthcheck", copy / "healthcheck", ignore=shutil.ignore_patterns("__pycache__"))
    run_copy = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(copy)!r}); "
                "from healthcheck.agent.main import main; sys.exit(main(sys.argv[1:]))"]
    proc, sock = start_agent(tmp_path, config, argv_prefix=run_copy)
    try:
        first, _ = client("prolog", config, sock, env_for(tmp_path, job="1"))
        judge = copy / "healthcheck" / "pipeline" / "judge.py"
        judge.write_text(judge.read_text() + "\n")  # an upgrade under the running agent
        status = proc.wait(timeout=30)  # it notices within a second
        second, _ = client("prolog", config, sock, env_for(tmp_path, job="2"), extra=["-X", "importtime"])
    finally:
        err = stop(proc) if proc.poll() is None else proc.communicate()[1]
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-2000:]
    assert status == 75 and "judge.py changed since start" in err  # systemd restarts it with the new code
    assert not sock.exists() and "healthcheck.hook.run" in imported(second.stderr)  # ran in the wrapper
    assert sorted(r["job_id"] for r in runs(tmp_path, 2)) == ["1", "2"]


def test_a_malformed_request_is_refused_and_the_agent_serves_on(tmp_path, agent):
    config, sock, proc = agent
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(sock))
    agentclient.send_frame(raw, {"v": agentclient.PROTOCOL, "argv": ["rm", "-rf", "/"], "env": {}, "cwd": "/",
                                 "umask": 0o22, "t0": 1.0})
    answer = agentclient.read_frame(raw)
    raw.close()
    assert answer["kind"] == "refused" and "argv must start with one of" in answer["why"]
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(sock))
    raw.sendall((1 << 40).to_bytes(8, "big"))  # a frame larger than any request
    raw.settimeout(10)
    assert raw.recv(64) == b""  # closed without an answer
    raw.close()
    via, _ = client("prolog", config, sock, env_for(tmp_path))
    assert via.returncode == 1 and proc.poll() is None


def test_the_socket_is_private_and_a_second_agent_refuses_to_start(tmp_path, agent):
    config, sock, _ = agent
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    second = subprocess.run([sys.executable, "-I", "-m", "healthcheck.agent.main", "--socket", str(sock), "--config",
                             str(config)], capture_output=True, text=True, env=env_for(tmp_path), timeout=120, cwd="/")
    assert second.returncode == 1 and "another agent answers there" in second.stderr


def test_a_socket_left_by_a_dead_agent_is_replaced(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    sock = tmp_path / "run" / "agent.sock"
    sock.parent.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock))
    dead.close()  # the file stays, nobody listens
    proc, _ = start_agent(tmp_path, config, sock=sock)
    try:
        via, _ = client("prolog", config, sock, env_for(tmp_path))
    finally:
        stop(proc)
    assert via.returncode == 0 and "agent not used" not in via.stderr


def test_the_fingerprint_names_the_file_that_changed(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("x = 1\n")
    fp = Fingerprint()
    fp.files.append(str(module))
    fp.stamp[str(module)] = Fingerprint._stat(str(module))
    assert fp.changed() is None
    os.utime(module, ns=(1, 1))
    assert fp.changed() == str(module)


def test_split_agent_takes_the_socket_out_of_the_hooks_arguments():
    assert agentclient.split_agent(["prolog", "--config", "c", "--agent", "/s"]) == (["prolog", "--config", "c"], "/s")
    assert agentclient.split_agent(["prolog", "--agent", ""]) == (["prolog"], None)
    assert agentclient.split_agent(["prolog"]) == (["prolog"], None)


def test_a_config_changed_after_the_agent_started_is_the_one_judged(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    try:
        before, _ = client("prolog", config, sock, env_for(tmp_path, job="1"))
        time.sleep(0.01)  # a later mtime even on a coarse clock
        write_config(tmp_path, str(bundles / "faulty"))  # the warm copy no longer matches the file
        after, _ = client("prolog", config, sock, env_for(tmp_path, job="2"))
    finally:
        stop(proc)
    assert before.returncode == 0 and after.returncode == 1, after.stderr[-2000:]
    assert [r["status"] for r in sorted(runs(tmp_path, 2), key=lambda r: r["job_id"])] == ["pass", "fail"]


def _pids_in(sock: Path) -> set[int]:
    """Processes holding ``sock`` open (the agent's spares hold the listening socket)."""
    inode = None
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[-1] == str(sock):
            inode = fields[6]
    found = set()
    if inode is None:
        return found
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]" for fd in os.listdir(f"/proc/{pid}/fd")):
                found.add(int(pid))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie left to a PID 1 that never reaps, in some containers, is dead)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _spares_of(proc, sock: Path) -> set[int]:
    from healthcheck.agent.main import SPARES

    deadline = time.monotonic() + 30
    while len(_pids_in(sock) - {proc.pid}) < SPARES and time.monotonic() < deadline:
        time.sleep(0.02)
    return _pids_in(sock) - {proc.pid}


def test_stopping_the_agent_stops_its_spares_and_a_killed_agents_spares_leave_on_their_own(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, sock = start_agent(tmp_path, config)
    spares = _spares_of(proc, sock)
    assert len(spares) >= 2  # forked ahead, waiting for requests
    stop(proc)  # SIGTERM, as systemd stops it
    assert not sock.exists()
    deadline = time.monotonic() + 30
    while [pid for pid in spares if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in spares if _alive(pid)] == []
    proc, sock = start_agent(tmp_path, config)
    holders = _spares_of(proc, sock)
    proc.kill()  # SIGKILL: no cleanup of its own
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _pids_in(sock) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holders and not _pids_in(sock)  # the lifeline closed: nobody answers on the dead agent's socket
    again, _ = start_agent(tmp_path, config)  # the socket file left behind is replaced
    try:
        via, _ = client("prolog", config, sock, env_for(tmp_path))
    finally:
        stop(again)
    assert via.returncode == 0 and "agent not used" not in via.stderr


def test_a_prepared_child_runs_its_task_in_the_environment_directory_and_umask_of_the_run(tmp_path, monkeypatch):
    """The child is forked before the request: it must take the request's environment (the epilog's
    SLURM_JOB_UID, the cache folder, PATH for the tools), working directory and umask, not the agent's."""
    from healthcheck.agent import work as agentwork
    from healthcheck.hook import run as hooks
    from healthcheck.hook import watchdog

    seen = {}

    def work(*args):
        seen.update(uid=os.environ.get("SLURM_JOB_UID"), cwd=os.getcwd(), umask=os.umask(0o022), args=args)
        return {"findings": [], "counters": None, "facts": None, "events": [], "seen": dict(seen, args=None)}

    monkeypatch.setattr(hooks, "work", work)
    monkeypatch.setattr(hooks, "load_config", lambda path, node: (None, "exp"))
    prepared = watchdog.prepare(agentwork.run_task)
    task = {"context": "epilog", "node": "n1", "config": "/nonexistent.toml", "job_id": "7", "state_dir": "/s",
            "started": "2026-12-03T00:00:00+00:00", "budget": 5.0, "acknowledged": [],
            "env": {"SLURM_JOB_UID": "4321", "PATH": "/usr/bin"}, "cwd": str(tmp_path), "umask": 0o027}
    outcome = prepared.run(task, 30)
    assert outcome.ok, outcome.error
    assert outcome.value["seen"] == {"uid": "4321", "cwd": str(tmp_path), "umask": 0o027, "args": None}
    assert os.environ.get("SLURM_JOB_UID") != "4321"  # the parent's own environment is untouched
    assert os.path.exists(f"/proc/{prepared.pid}")  # it waits for its release, its exit out of the way
    prepared.release()
    assert watchdog.reap_abandoned(wait_s=30) == set()
    assert not os.path.exists(f"/proc/{prepared.pid}")


def test_a_prepared_child_left_unused_exits_and_one_that_died_is_not_used(tmp_path):
    from healthcheck.hook import watchdog

    unused = watchdog.prepare(lambda task: task)
    pid = unused.pid
    unused.discard()
    assert watchdog.reap_abandoned(wait_s=30) == set()
    assert not os.path.exists(f"/proc/{pid}") or "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    dead = watchdog.prepare(lambda task: task, warm=lambda: os._exit(3))
    assert not dead.alive(wait_s=30)  # the hook then forks its own child, as without the agent
    dead.discard()
    assert watchdog.reap_abandoned(wait_s=30) == set()


def test_a_prepared_child_still_warming_is_not_used_and_is_stopped(tmp_path):
    """A warm-up held up (a slow mount, a slow HCA) must not eat into a run's budget: the run forks its own."""
    from healthcheck.hook import watchdog

    slow = watchdog.prepare(lambda task: task, warm=lambda: time.sleep(60))
    start = time.monotonic()
    assert slow.alive() is False and time.monotonic() - start < 5
    slow.discard()  # what the hook does with it
    assert watchdog.reap_abandoned(wait_s=30) == set()  # killed, not left warming
    ready = watchdog.prepare(lambda task: {"got": task})
    assert ready.alive(wait_s=30)  # ready once its (empty) warm-up is done
    outcome = ready.run({"x": 1}, 30)
    assert outcome.ok and outcome.value == {"got": {"x": 1}}
    ready.discard()  # a used one is released
    assert watchdog.reap_abandoned(wait_s=30) == set()


def test_a_task_that_cannot_reach_a_child_still_warming_times_out_within_the_budget():
    """A task larger than the pipe holds waits for the child to read it: a child held up in its warm-up
    never holds the run past its budget; it ends as a child that does not answer in time does."""
    from healthcheck.hook import watchdog

    stuck = watchdog.prepare(lambda task: "never", warm=lambda: time.sleep(60))
    start = time.monotonic()
    outcome = stuck.run({"env": "x" * (1 << 20)}, 0.5)  # 1 MiB: more than the pipe takes at once
    assert outcome.status == "timeout" and time.monotonic() - start < 30, outcome
    stuck.discard()
    assert watchdog.reap_abandoned(wait_s=30) == set()
    plain = watchdog.prepare(lambda task: {"got": task})
    assert plain.alive(wait_s=30)
    outcome = plain.run({"x": 3}, 30)
    assert outcome.ok and outcome.value == {"got": {"x": 3}}, outcome.error
    plain.discard()
    assert watchdog.reap_abandoned(wait_s=30) == set()


def test_a_prepared_childs_task_runs_in_the_hooks_context_with_the_config_by_path(monkeypatch, tmp_path):
    """agent.work.run_task adopts the hook's environment, directory and umask, loads the config by path
    and probes for the run itself (no snapshot is carried in)."""
    from healthcheck.agent import work as agentwork
    from healthcheck.hook import run as hooks

    exp = object()
    used, adopted = [], []
    monkeypatch.setattr(agentwork, "adopt", lambda env, cwd, umask: adopted.append((env, cwd, umask)))
    monkeypatch.setattr(hooks, "load_config", lambda path, node: (None, exp))
    monkeypatch.setattr(hooks, "work", lambda *args: used.append(args) or {})
    env = {"SLURMD_NODENAME": "n1", "PATH": "/usr/bin"}
    task = {"context": "epilog", "node": "n1", "config": "/etc/hc.toml", "job_id": "7",
            "started": "2026-12-04T00:00:00+00:00", "state_dir": "/var/lib/healthcheck/n1", "budget": 5.0,
            "acknowledged": [], "env": env, "cwd": str(tmp_path), "umask": 0o022, "hook_pid": 4242}
    agentwork.run_task(task)
    assert adopted == [(env, str(tmp_path), 0o022)]
    assert used == [("epilog", "n1", exp, hooks.default_settings(), "7", "/var/lib/healthcheck/n1",
                     "2026-12-04T00:00:00+00:00", 5.0, [], 4242)]


def test_the_checks_child_gets_what_is_left_of_the_budget_less_the_slurm_calls_after_it():
    from healthcheck.hook import run as hooks

    assert hooks.child_budget(10.0, t0=100.0, now=100.0) == pytest.approx(10.0 - 1.5 - hooks.END_MARGIN_S)
    assert hooks.child_budget(10.0, t0=100.0, now=104.0) == pytest.approx(10.0 - 1.5 - hooks.END_MARGIN_S - 4.0)
    assert hooks.child_budget(1.0, t0=0.0, now=5.0) == 0.1  # past it: the least a child gets


def test_an_agent_socket_answered_by_another_user_is_not_used(tmp_path, bundles):  # noqa: F811
    """A socket someone else put at the agent's path could answer "exit 0" for every prolog: the wrapper
    checks that root answers (SO_PEERCRED) and otherwise runs the hook itself."""
    import pwd

    if os.geteuid() != 0:
        pytest.skip("needs root to run the impostor as another user")
    import tempfile

    nobody = pwd.getpwnam("nobody")
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the impostor (the venv's may not be readable by nobody)")
    config = write_config(tmp_path, str(bundles / "faulty"))
    place = Path(tempfile.mkdtemp(prefix="impostor-"))  # outside pytest's root-only tree: nobody must reach it
    place.chmod(0o777)
    sock = place / "agent.sock"
    fake = subprocess.Popen([python, "-I", "-c", (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); print('up', flush=True)\n"
        "c, _ = s.accept(); c.recv(1 << 16)\n"
        "import marshal\n"
        "for m in ({'kind': 'accepted', 'wait_s': 5.0}, {'kind': 'done', 'rc': 0, 'log': ''}):\n"
        "    d = marshal.dumps(m); c.sendall(len(d).to_bytes(8, 'big') + d)\n"), str(sock)],
        user=nobody.pw_uid, group=nobody.pw_gid, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert fake.stdout.readline().strip() == "up"
        proc, _ = client("prolog", config, sock, env_for(tmp_path))
    finally:
        fake.kill()
        fake.wait(timeout=30)
        shutil.rmtree(place, ignore_errors=True)
    assert f"answered by uid {nobody.pw_uid}, not root: not used" in proc.stderr
    assert proc.returncode == 1  # the hook ran here and drained for the faulty GPU, as it must
    assert spool(tmp_path)[-1]["status"] == "fail"


def test_a_spare_that_dies_idle_is_replaced_after_a_pause_and_the_agent_serves_on(tmp_path, bundles):  # noqa: F811
    """A spare that ends without a request (killed, or broken at start) is not re-forked in a loop: the
    agent logs it and forks the next a second later."""
    import signal as signals

    config = write_config(tmp_path, str(bundles / "healthy"))
    log = tmp_path / "agent.log"
    sock = tmp_path / "run" / "agent.sock"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-I", "-m", "healthcheck.agent.main", "--socket", str(sock),
                                 "--config", str(config)], env=env_for(tmp_path), stderr=err, cwd="/")
    try:
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        spares = _spares_of(proc, sock)
        victim = min(spares)
        os.kill(victim, signals.SIGKILL)
        deadline = time.monotonic() + 30
        while (victim in _pids_in(sock) or len(_pids_in(sock) - {proc.pid}) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert victim not in _pids_in(sock) and len(_pids_in(sock) - {proc.pid}) >= 2  # replaced
        via, _ = client("prolog", config, sock, env_for(tmp_path))
    finally:
        stop(proc)
    assert via.returncode == 0 and "agent not used" not in via.stderr
    assert "a spare worker ended before any request (signal 9); the next in a second" in log.read_text()


def test_a_garbled_answer_after_the_agent_took_the_request_never_drains(tmp_path, bundles):  # noqa: F811
    """Whatever the agent sends once it took a request (here a budget that is not a number), the wrapper
    never exits 1 on its own account: it logs and exits 0, as for any internal error."""
    config = write_config(tmp_path, str(bundles / "faulty"))
    sock = tmp_path / "garbled.sock"
    with fake_agent(sock, {"kind": "accepted", "wait_s": 5.0, "pid": 0}, {"kind": "budget", "budget_s": "soon"}):
        proc, _ = client("prolog", config, sock, env_for(tmp_path))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "the agent's answer could not be read (ValueError" in proc.stderr
