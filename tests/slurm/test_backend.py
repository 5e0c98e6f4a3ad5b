"""ScontrolBackend with an injected runner: argv, retries, errors (no Slurm needed)."""
from __future__ import annotations

import time

import pytest

from healthcheck.safeio import subproc
from healthcheck.slurm.backend import (ScontrolBackend, SlurmBackend, SlurmError, SlurmUnreachable,
                                       backend_from_name, child_env)
from tests.conftest import FIXTURES

REC = FIXTURES / "slurm-recorded"
SCONTROL = "/usr/bin/scontrol"


class Runner:
    """Replays scripted results; records every call."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls: list[dict] = []

    def __call__(self, argv, timeout, env=None, **kw):
        self.calls.append({"argv": list(argv), "timeout": timeout, "env": env})
        r = self.results.pop(0)
        if isinstance(r, BaseException):
            raise r
        return r


def ok(stdout=""):
    return subproc.Result([], 0, stdout, "", 0.01)


def fail(stderr, rc=1):
    return subproc.Result([], rc, "", stderr, 0.01)


def timeout():
    return subproc.Result([], None, "", "", 5.0, timed_out=True)


def backend(runner, **kw):
    sleeps = []
    b = ScontrolBackend(scontrol=SCONTROL, timeout_s=3.0, run=runner, sleep=sleeps.append, **kw)
    return b, sleeps


def test_is_a_backend():
    assert isinstance(backend(Runner())[0], SlurmBackend)


def test_drain_argv_exact():
    r = Runner(ok())
    b, _ = backend(r)
    b.drain("gpu04", "healthcheck: gpu.ecc gpu3: 2 errors\n[run x]")
    assert r.calls[0]["argv"] == [SCONTROL, "update", "NodeName=gpu04", "State=DRAIN",
                                  "Reason=healthcheck: gpu.ecc gpu3: 2 errors [run x]"]
    assert r.calls[0]["timeout"] == 3.0
    assert sum(a.startswith("Reason=") for a in r.calls[0]["argv"]) == 1


def test_resume_argv_exact():
    r = Runner(ok())
    backend(r)[0].resume("gpu04")
    assert r.calls[0]["argv"] == [SCONTROL, "update", "NodeName=gpu04", "State=RESUME"]


@pytest.mark.parametrize("ver", ["22.05", "24.11"])
def test_node_and_nodes_parse_recorded_output(ver):
    single = (REC / f"scontrol-show-node-o-{ver}-single.txt").read_text()
    full = (REC / f"scontrol-show-node-o-{ver}.txt").read_text()
    r = Runner(ok(single), ok(full))
    b, _ = backend(r)
    n = b.node("gpu04")
    assert n.state == "MIXED" and n.drained and n.reason.startswith("healthcheck: gpu.ecc.uncorrected")
    assert r.calls[0]["argv"] == [SCONTROL, "-o", "show", "node", "gpu04"]
    nodes = b.nodes()
    assert r.calls[1]["argv"] == [SCONTROL, "-o", "show", "node"]
    assert nodes["gpu03"].reason == "RMA ticket 4711" and len(nodes) >= 11


def test_retry_then_success():
    r = Runner(fail("slurm_update error: Unable to contact slurm controller (connect failure)"),
               timeout(), ok())
    b, sleeps = backend(r, retries=2, backoff_s=0.1)
    b.resume("gpu01")
    assert len(r.calls) == 3 and sleeps == [0.1, 0.2]


@pytest.mark.parametrize("message", [
    "slurm_load_node error: Unable to contact slurm controller (connect failure)",
    "slurm_update error: Socket timed out on send/recv operation",
    "slurm_update error: Zero Bytes were transmitted or received",
])
def test_unreachable_after_retries(message):
    r = Runner(fail(message), fail(message), fail(message))
    b, sleeps = backend(r, retries=2)
    with pytest.raises(SlurmUnreachable, match="after 3 attempts"):
        b.drain("gpu01", "healthcheck: x: y")
    assert len(r.calls) == 3 and len(sleeps) == 2


def test_timeouts_are_unreachable():
    r = Runner(timeout(), timeout())
    with pytest.raises(SlurmUnreachable, match="did not finish within 3s"):
        backend(r, retries=1)[0].nodes()


@pytest.mark.parametrize("stderr,match", [
    ("slurm_update error: Invalid node name specified", "Invalid node name"),
    ("Node gpu99 not found", "gpu99 not found"),
    ("slurm_update error: Access/permission denied", "permission denied"),
])
def test_other_errors_are_slurm_error_without_retry(stderr, match):
    r = Runner(fail(stderr))
    with pytest.raises(SlurmError, match=match):
        backend(r)[0].node("gpu99") if "not found" in stderr else backend(r)[0].resume("gpu99")
    assert len(r.calls) == 1


@pytest.mark.parametrize("ver,stale", [("24.11.5", {"node3": "RMA ticket 4711"}), ("22.05.8", {})])
def test_a_stale_reason_is_moved_aside(ver, stale):
    """Real captures: node3 drained, resumed, no job since (24.11 still prints its old reason)."""
    text = (REC / f"real-scontrol-show-node-o-{ver}-resumed.txt").read_text()
    b, _ = backend(Runner(ok(text), ok(text)))
    nodes = b.nodes()
    assert {n: s.fields["StaleReason"] for n, s in nodes.items() if "StaleReason" in s.fields} == stale
    assert (nodes["node3"].reason, nodes["node3"].reason_user, nodes["node3"].state) == (None, None, "IDLE")
    assert nodes["node2"].reason == "Prolog error" and nodes["node4"].reason == "cable pulled on switch port 7"
    assert nodes["node2"].reason_user == "root" and nodes["node4"].drained
    n3 = b.node("node3")
    assert n3.reason is None and n3.fields.get("StaleReason") == stale.get("node3")


@pytest.mark.parametrize("ver", ["22.05.8", "24.11.5"])
def test_real_capture_through_the_backend(ver):
    text = (REC / f"real-scontrol-show-node-o-{ver}.txt").read_text()
    nodes = backend(Runner(ok(text)))[0].nodes()
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    assert nodes["node2"].reason == "Prolog error" and nodes["node2"].drained
    assert all(n.fields["Version"] == ver for n in nodes.values())


def test_missing_scontrol_is_slurm_error():
    r = Runner(subproc.ToolNotFound("scontrol: not found"))
    with pytest.raises(SlurmError, match="not found"):
        backend(r)[0].nodes()


def test_unparseable_output_is_slurm_error():
    with pytest.raises(SlurmError, match="cannot parse"):
        backend(Runner(ok("this is not scontrol output\n")))[0].nodes()


def test_node_missing_from_output():
    single = (REC / "scontrol-show-node-o-24.11-single.txt").read_text()
    with pytest.raises(SlurmError, match="gpu01 not in"):
        backend(Runner(ok(single)))[0].node("gpu01")


@pytest.mark.parametrize("name", ["gpu[01-64]", "gpu01,gpu02", "gpu 01", "", "-o", "NodeName=x", "a\nb"])
def test_refuses_hostlists_and_odd_names(name):
    r = Runner()
    b, _ = backend(r)
    for call in (lambda: b.drain(name, "healthcheck: x: y"), lambda: b.resume(name), lambda: b.node(name)):
        with pytest.raises(ValueError):
            call()
    assert r.calls == []


def test_drain_needs_a_reason():
    with pytest.raises(ValueError):
        backend(Runner())[0].drain("gpu01", "\n\t  \x1b[0m")


def test_env_is_fixed_and_carries_slurm_conf(monkeypatch, tmp_path):
    conf = tmp_path / "slurm.conf"  # root's, in root's folders (a conf others could write is dropped)
    conf.write_text("ClusterName=test\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    env = child_env()
    assert env["SLURM_CONF"] == str(conf) and "SLURM_TIME_FORMAT" not in env
    assert env["PATH"] == subproc.SAFE_ENV["PATH"] and env["LC_ALL"] == "C"
    r = Runner(ok())
    ScontrolBackend(scontrol=SCONTROL, run=r).resume("gpu01")
    assert r.calls[0]["env"]["SLURM_CONF"] == str(conf)


def test_scontrol_resolved_to_absolute_path(monkeypatch):
    monkeypatch.setattr(subproc, "which", lambda tool: "/opt/slurm/bin/scontrol" if tool == "scontrol" else None)
    r = Runner(ok())
    b = ScontrolBackend(run=r)
    b.resume("gpu01")
    assert b.scontrol == "/opt/slurm/bin/scontrol" and r.calls[0]["argv"][0] == "/opt/slurm/bin/scontrol"


def test_backend_from_name(monkeypatch):
    assert isinstance(backend_from_name("scontrol", scontrol=SCONTROL), ScontrolBackend)
    import healthcheck.slurm.pyslurm_backend as pb
    monkeypatch.setattr(pb, "import_pyslurm", lambda: None)
    assert isinstance(backend_from_name("auto", scontrol=SCONTROL), ScontrolBackend)
    with pytest.raises(SlurmError, match="pyslurm is not importable"):
        backend_from_name("pyslurm")
    with pytest.raises(ValueError):
        backend_from_name("slurmrestd")


class _SlowBackend:
    def __init__(self, result=None, error=None, block=None):
        self.deadline, self.result, self.error, self.block, self.calls = None, result, error, block, []

    def node(self, name):
        self.calls.append(name)
        if self.block is not None:
            self.block.acquire(True, 30)
        if self.error is not None:
            raise self.error
        return self.result


def test_a_state_read_begun_early_gives_or_raises_what_the_call_did(monkeypatch):
    import _thread

    from healthcheck.slurm.actions import StateRead
    from healthcheck.slurm.backend import SlurmError, SlurmUnreachable

    gate = _thread.allocate_lock()
    gate.acquire()
    backend = _SlowBackend(result="state of n1", block=gate)
    read = StateRead(backend, "n1")  # begun: the call waits in its thread while the caller goes on
    gate.release()
    assert read.result() == "state of n1" and backend.calls == ["n1"]
    with pytest.raises(SlurmError, match="no such node"):
        StateRead(_SlowBackend(error=SlurmError("no such node")), "n1").result()
    hung = _SlowBackend(block=_thread.allocate_lock())
    hung.block.acquire()
    hung.deadline = time.monotonic()  # the budget is spent: past the slack, unreachable
    monkeypatch.setattr(StateRead, "JOIN_SLACK_S", 0.2)
    try:
        with pytest.raises(SlurmUnreachable, match="not read within the hook's budget"):
            StateRead(hung, "n1").result()
    finally:
        hung.block.release()
