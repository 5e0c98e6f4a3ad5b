"""The Slurm backends' shared base: one environment helper for every Slurm client call, one set of
errors and rules that both backends (and the sweep's job calls) use."""
from __future__ import annotations

import time

import pytest

from healthcheck.safeio import subproc
from healthcheck.slurm import backend, backend_base, pyslurm_backend
from healthcheck.sweep.jobs import SlurmJobs


def a_conf(tmp_path):
    conf = tmp_path / "alt" / "slurm.conf"  # root's, in root's folders (test_door_hostile: others' are dropped)
    conf.parent.mkdir()
    conf.write_text("ClusterName=test\n")
    return str(conf)


def test_slurm_env_keeps_slurm_conf_and_nothing_else(tmp_path):
    conf = a_conf(tmp_path)
    env = backend_base.slurm_env({"SLURM_CONF": conf, "SLURM_TIME_FORMAT": "relative",
                                  "PATH": "/home/u/bin", "LD_PRELOAD": "x.so"})
    assert env == dict(subproc.SAFE_ENV, SLURM_CONF=conf)
    assert backend_base.slurm_env({"SLURM_CONF": ""}) == subproc.SAFE_ENV


def test_the_sweep_jobs_use_the_same_environment(monkeypatch, tmp_path):
    conf = a_conf(tmp_path)
    monkeypatch.setenv("SLURM_CONF", conf)
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    calls = []

    def run(argv, timeout, env):
        calls.append(env)
        return subproc.Result(argv=argv, returncode=0, stdout="JobState=RUNNING\n", stderr="",
                              duration_s=0.0, timed_out=False)

    SlurmJobs(run=run).job_state("123")
    assert calls == [backend_base.slurm_env()]
    assert calls[0]["SLURM_CONF"] == conf and "SLURM_TIME_FORMAT" not in calls[0]


def test_both_backends_raise_the_same_errors():
    assert backend.SlurmError is backend_base.SlurmError is pyslurm_backend.SlurmError
    assert backend.SlurmUnreachable is backend_base.SlurmUnreachable is pyslurm_backend.SlurmUnreachable
    assert backend.child_env is backend_base.slurm_env
    assert isinstance(backend.ScontrolBackend(scontrol="/usr/bin/scontrol"), backend_base.SlurmBackend)


def test_node_names_and_deadlines_are_checked_in_one_place():
    with pytest.raises(ValueError, match="one plain node name"):
        backend_base.check_node_name("gpu[01-04]")
    with pytest.raises(backend_base.SlurmUnreachable, match="no time left"):
        backend_base.time_left(time.monotonic(), 5.0)
    assert backend_base.time_left(None, 5.0) == 5.0
    assert backend_base.is_transient("slurm_load_node error: Unable to contact slurm controller")
    assert not backend_base.is_transient("Invalid node name specified")
