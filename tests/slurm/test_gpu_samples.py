"""A GPU hung in a collective (issue 21, item 5): HealthCheckProgram keeps each GPU's readings between
runs (healthcheck.hook.gpu_samples) and gpu.stalled judges them: busy at near-idle power for N runs in
a row, the same job throughout -> a finding naming the job."""
from __future__ import annotations

import json
import os
import stat

import pytest

from healthcheck.checks import registry
from healthcheck.config import default_expectations
from healthcheck.core.model import GpuInfo, GpuProcess, GpuSample, Snapshot, Status
from healthcheck.pipeline.judge import judge
from healthcheck.hook import gpu_samples

from tests.checks.gpu_builders import h100


def _proc_tree(root, pid: int, cgroup: str | None = None, environ: bytes | None = None) -> None:
    folder = root / str(pid)
    folder.mkdir(parents=True)
    if cgroup is not None:
        (folder / "cgroup").write_text(cgroup)
    if environ is not None:
        (folder / "environ").write_bytes(environ)


def _snap(when: str, util: float, power: float, pids=(4242,), idx: int = 0) -> Snapshot:
    gpu = h100(idx, utilization_gpu_pct=util, power_draw_w=power, power_limit_w=700.0,
               processes=[GpuProcess(pid=p, name="python") for p in pids])
    return Snapshot(node="gpu01", taken_at=when, gpus=[gpu])


def _stalled(snap: Snapshot, **thresholds):
    spec = registry.load_all()["gpu.stalled"]
    t = default_expectations().thresholds_for("gpu.stalled", spec.thresholds)
    t.update(thresholds)
    return spec.func(snap, default_expectations(), t)


TIMES = ["2026-12-03T10:00:00+00:00", "2026-12-03T10:05:00+00:00", "2026-12-03T10:10:00+00:00",
         "2026-12-03T10:15:00+00:00"]


@pytest.fixture
def proc(tmp_path):
    root = tmp_path / "proc"
    _proc_tree(root, 4242, cgroup="0::/system.slice/slurmstepd.scope/job_81234/step_0/user/task_0\n")
    _proc_tree(root, 5151, environ=b"HOME=/home/a\0SLURM_JOB_ID=99\0")
    return root


def test_three_runs_busy_at_idle_power_name_the_job(tmp_path, proc):
    state = tmp_path / "state" / "gpu01"
    idle = Snapshot(node="gpu01", taken_at=TIMES[0], gpus=[h100(0, utilization_gpu_pct=0.0, power_draw_w=68.0,
                                                                power_limit_w=700.0, processes=[])])
    assert gpu_samples.keep_samples(str(state), idle, proc_root=str(proc)) is None
    findings = []
    for when in TIMES[1:]:
        snap = _snap(when, 100.0, 110.0)
        assert gpu_samples.keep_samples(str(state), snap, proc_root=str(proc)) is None
        findings = _stalled(snap)
    gpu = snap.gpus[0]
    assert gpu.idle_power_w == 68.0 and [s.jobs for s in gpu.samples[-3:]] == [["81234"]] * 3
    (f,) = findings
    assert f.status is Status.WARN and f.component == "gpu0"
    assert "job 81234" in f.message and "4242" in f.message and "stalled" in f.message
    assert f.metrics["stalled_samples"] == 3
    (f,) = _stalled(snap, fail=True)
    assert f.status is Status.FAIL
    path = state / "gpu-samples.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    kept = json.loads(path.read_text())["gpus"][gpu.uuid]
    assert kept["idle_power_w"] == 68.0 and len(kept["samples"]) == 4


def test_a_working_gpu_or_too_few_samples_is_not_stalled(tmp_path, proc):
    state = str(tmp_path / "s")
    snap = _snap(TIMES[0], 100.0, 110.0)
    gpu_samples.keep_samples(state, snap, proc_root=str(proc))
    assert [f.status for f in _stalled(snap)] == [Status.SKIP]  # 1 of 3 samples so far
    for when, power in zip(TIMES[1:], (650.0, 120.0, 115.0)):  # one run at full power breaks the series
        snap = _snap(when, 100.0, power)
        gpu_samples.keep_samples(state, snap, proc_root=str(proc))
    (f,) = _stalled(snap)
    assert f.status is Status.PASS and "2 of the last 3" in f.message


def test_different_jobs_in_a_row_are_not_one_stall(tmp_path, proc):
    state = str(tmp_path / "s")
    for when, pid in zip(TIMES[:3], (4242, 5151, 4242)):
        snap = _snap(when, 100.0, 100.0, pids=(pid,))
        gpu_samples.keep_samples(state, snap, proc_root=str(proc))
    assert snap.gpus[0].samples[1].jobs == ["99"]  # from the environment
    assert _stalled(snap)[0].status is Status.PASS


def test_a_gap_between_runs_restarts_the_series(tmp_path, proc):
    state = str(tmp_path / "s")
    for when in ("2026-12-03T08:00:00+00:00", "2026-12-03T08:05:00+00:00", TIMES[0]):
        snap = _snap(when, 100.0, 100.0)
        gpu_samples.keep_samples(state, snap, proc_root=str(proc))
    assert [s.taken_at for s in snap.gpus[0].samples] == [TIMES[0]]
    assert _stalled(snap)[0].status is Status.SKIP


def test_unusable_file_is_said_and_replaced_never_trusted(tmp_path, proc):
    state = tmp_path / "s"
    state.mkdir(mode=0o700)
    (state / "gpu-samples.json").write_text('{"version": 1, "gpus": {"x": ')
    snap = _snap(TIMES[0], 100.0, 100.0)
    note = gpu_samples.keep_samples(str(state), snap, proc_root=str(proc))
    assert note and "started afresh" in note
    assert json.loads((state / "gpu-samples.json").read_text())["version"] == 1
    (state / "gpu-samples.json").write_text(json.dumps({"version": 1, "gpus": {snap.gpus[0].uuid: {
        "idle_power_w": "hot", "samples": [{"taken_at": TIMES[0], "utilization_gpu_pct": "x", "pids": [-1, True]},
                                           "junk"]}}}))
    snap = _snap(TIMES[1], 100.0, 100.0)
    assert gpu_samples.keep_samples(str(state), snap, proc_root=str(proc)) is None
    first = snap.gpus[0].samples[0]
    assert first.utilization_gpu_pct is None and first.pids == [] and snap.gpus[0].idle_power_w is None


def test_write_failure_is_a_note_not_an_exception(tmp_path, proc):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    snap = _snap(TIMES[0], 100.0, 100.0)
    note = gpu_samples.keep_samples(str(blocker / "s"), snap, proc_root=str(proc))
    assert note and "not written" in note
    assert snap.gpus[0].samples and snap.gpus[0].samples[-1].taken_at == TIMES[0]  # still judged this run


def test_power_near_idle_without_an_idle_reading_uses_the_limit_fraction():
    samples = [GpuSample(taken_at=t, utilization_gpu_pct=99.0, power_draw_w=130.0, pids=[7], jobs=["5"])
               for t in TIMES[:3]]
    gpu = GpuInfo(0, power_limit_w=700.0, samples=samples)  # 130 W <= 0.2 x 700
    (f,) = _stalled(Snapshot("n", TIMES[2], gpus=[gpu]))
    assert f.status is Status.WARN and "no idle reading yet" in f.message
    gpu.idle_power_w = 40.0  # idle + 0.1 x 700 = 110 W: 130 W is not near idle
    assert _stalled(Snapshot("n", TIMES[2], gpus=[gpu]))[0].status is Status.PASS


def test_only_healthcheckprogram_runs_it_and_elsewhere_it_has_nothing_to_judge():
    spec = registry.load_all()["gpu.stalled"]
    assert spec.contexts == frozenset({"slurm-check"})
    snap = Snapshot("n", TIMES[0], gpus=[h100(0, utilization_gpu_pct=100.0, power_draw_w=90.0)])
    verdict = judge(snap, default_expectations(), "slurm-check", only=["gpu.stalled"])
    assert [f.status for f in verdict.findings] == [Status.SKIP]


def test_samples_round_trip_through_the_snapshot_json():
    gpu = h100(0)
    gpu.samples = [GpuSample(taken_at=TIMES[0], utilization_gpu_pct=100.0, power_draw_w=90.0, pids=[1], jobs=["2"])]
    gpu.idle_power_w = 65.0
    back = Snapshot.from_dict(json.loads(json.dumps(Snapshot("n", "t", gpus=[gpu]).to_dict())))
    assert back.gpus[0].samples == gpu.samples and back.gpus[0].idle_power_w == 65.0


def test_the_keeper_is_lean_enough_for_the_hooks():
    import subprocess
    import sys

    code = ("import sys, healthcheck.hook.gpu_samples; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'click','pandas','sqlalchemy','numpy','rich','dataclasses','pathlib','datetime','typing'}))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_planted_link_is_neither_read_nor_written_through_and_a_huge_file_is_refused(tmp_path, proc):
    state = tmp_path / "s"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim.json"
    snap = _snap(TIMES[0], 100.0, 100.0)
    planted = {"version": 1, "gpus": {snap.gpus[0].uuid: {"idle_power_w": 1.0, "samples": []}}}
    victim.write_text(json.dumps(planted))
    (state / "gpu-samples.json").symlink_to(victim)
    assert gpu_samples.keep_samples(str(state), snap, proc_root=str(proc)) is None
    assert snap.gpus[0].idle_power_w is None  # the link's content was not read
    assert json.loads(victim.read_text()) == planted  # nor written through
    assert not (state / "gpu-samples.json").is_symlink()
    (state / "gpu-samples.json").write_text(" " * (gpu_samples.MAX_FILE_BYTES + 10))
    note = gpu_samples.keep_samples(str(state), _snap(TIMES[1], 100.0, 100.0), proc_root=str(proc))
    assert note and "over" in note and "started afresh" in note
