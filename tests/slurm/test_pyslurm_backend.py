"""PyslurmBackend against tests/fakes/fake_pyslurm.py (pyslurm's module boundary)."""
from __future__ import annotations

import sys

import pytest

from healthcheck.slurm import pyslurm_backend as pb
from healthcheck.slurm.backend import SlurmBackend, SlurmError, SlurmUnreachable, backend_from_name
from healthcheck.slurm.reasons import is_ours, make_reason
from tests.fakes import fake_pyslurm as fp


@pytest.fixture
def backend():
    fp.reset({"gpu01": "IDLE", "gpu02": "MIXED", "gpu03": "IDLE", "gpu05": "DOWN+NOT_RESPONDING"})
    fp.CLUSTER["gpu03"].update(state="IDLE+DRAIN", reason="RMA ticket 4711", reason_user="root",
                               reason_time=1709633472)
    sleeps: list[float] = []
    b = pb.PyslurmBackend(module=fp, retries=2, backoff_s=0.1, sleep=sleeps.append)
    b.sleeps = sleeps
    return b


def test_is_a_backend(backend):
    assert isinstance(backend, SlurmBackend)


def test_read_node_and_nodes(backend):
    n = backend.node("gpu03")
    assert (n.name, n.state, n.flags, n.reason, n.reason_user) == ("gpu03", "IDLE", {"DRAIN"},
                                                                   "RMA ticket 4711", "root")
    assert n.drained and not is_ours(n.reason)
    assert len(n.reason_time) == 19 and n.reason_time[10] == "T"  # same form scontrol prints
    nodes = backend.nodes()
    assert set(nodes) == {"gpu01", "gpu02", "gpu03", "gpu05"}
    assert nodes["gpu05"].down and nodes["gpu05"].not_responding and nodes["gpu01"].reason is None


def test_nodes_accepts_a_list_collection(backend, monkeypatch):
    monkeypatch.setattr(fp.Nodes, "load", staticmethod(lambda: [fp.Node.load("gpu01")]))
    assert list(backend.nodes()) == ["gpu01"]


def test_drain_and_resume_round_trip(backend):
    reason = make_reason("gpu.ecc.uncorrected", "gpu3", "volatile 2", run_id="1a2b3c4d")
    backend.drain("gpu02", reason + "\n")
    assert fp.CALLS[-1] == ("modify", "gpu02", {"state": "DRAIN", "reason": reason})
    n = backend.node("gpu02")
    assert n.drained and n.draining and n.reason == reason and is_ours(n.reason)
    backend.resume("gpu02")
    assert fp.CALLS[-1] == ("modify", "gpu02", {"state": "RESUME"})
    n = backend.node("gpu02")
    assert not n.drained and n.reason is None and n.state == "MIXED"


def test_unknown_node_is_slurm_error(backend):
    with pytest.raises(SlurmError, match="does not exist"):
        backend.node("gpu99")
    with pytest.raises(SlurmError, match="Invalid node name"):
        backend.resume("gpu99")


def test_retry_then_success(backend):
    fp.fail_next(fp.RPCError(1800, "Unable to contact slurm controller (connect failure)"))
    assert backend.node("gpu01").state == "IDLE"
    assert backend.sleeps == [0.1]


def test_unreachable(backend):
    fp.fail_next(*[fp.RPCError(5004, "Socket timed out on send/recv operation")] * 3)
    with pytest.raises(SlurmUnreachable, match="after 3 attempts"):
        backend.drain("gpu01", "healthcheck: x: y")
    assert fp.CLUSTER["gpu01"]["state"] == "IDLE"


def test_permission_error_not_retried(backend):
    fp.fail_next(fp.RPCError(fp.ESLURM_ACCESS_DENIED, "Access/permission denied"))
    with pytest.raises(SlurmError, match="permission denied"):
        backend.resume("gpu03")
    assert backend.sleeps == []


def test_refuses_hostlist(backend):
    with pytest.raises(ValueError):
        backend.drain("gpu[01-04]", "healthcheck: x: y")
    assert not any(c[0] == "modify" for c in fp.CALLS)


def test_auto_picks_pyslurm_when_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", fp)
    assert pb.pyslurm_available()
    assert isinstance(backend_from_name("auto"), pb.PyslurmBackend)
    assert isinstance(backend_from_name("pyslurm"), pb.PyslurmBackend)


def test_broken_pyslurm_is_not_available(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import raises ImportError
    assert not pb.pyslurm_available()
    with pytest.raises(SlurmError):
        pb.PyslurmBackend()
