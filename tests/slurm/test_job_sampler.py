"""A stalled job within minutes (issue 32.6): the agent's job sampler reads the GPUs every 30 s while a
Slurm job holds the node (NVML opened and closed each time, through the pynvml fake), records a WARN
naming the job within 3 minutes of a stall, never for a busy healthy job or an idle node, clears a job's
samples when it ends; across the job's nodes the one whose GPUs differ is named."""
from __future__ import annotations

import json

import pytest

from healthcheck.checks import registry
from healthcheck.checks.gpu_usage import job_node_summary, odd_nodes
from healthcheck.config import default_expectations
from healthcheck.config.slurm_settings import validate
from healthcheck.hook import job_sampler
from healthcheck.slurm import jobstalls
from healthcheck.safeio.subproc import Result
from tests.fakes.fake_pynvml import FakeNvml, h100_node

T0 = 1_796_000_000.0  # 2026-11-30, a whole minute
JOB = "81234"


def _thresholds() -> dict:
    spec = registry.load_all()["gpu.stalled"]
    return default_expectations().thresholds_for("gpu.stalled", spec.thresholds)


class Node:
    """One node: fake GPUs, a /proc with the job's processes, Slurm's cgroup v2 tree, a state dir, a spool."""

    def __init__(self, root, name: str, gpus: int = 2, job: str | None = JOB):
        self.name = name
        self.root = root / name
        self.nvml = FakeNvml(h100_node(gpus))
        self.state = self.root / "state"
        self.spool = self.root / "spool"
        self.proc = self.root / "proc"
        self.cgroup = self.root / "cgroup"
        (self.cgroup / "system.slice" / "slurmstepd.scope").mkdir(parents=True)
        self.logged: list[str] = []
        self.set_job(job)

    def set_job(self, job: str | None) -> None:
        scope = self.cgroup / "system.slice" / "slurmstepd.scope"
        for old in scope.iterdir():
            old.rmdir()
        for i, gpu in enumerate(self.nvml.gpus):
            pid = 4000 + i
            gpu.processes = [(pid, 1 << 30, "python")] if job else []
            if job:
                folder = self.proc / str(pid)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "cgroup").write_text(f"0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_{i}\n")
                (folder / "environ").write_bytes(f"SLURM_JOB_ID={job}\0SLURM_JOB_NODELIST=gpu[01-03]\0".encode())
        if job:
            (scope / f"job_{job}").mkdir()

    def load(self, util: int, watts: float) -> None:
        for gpu in self.nvml.gpus:
            gpu.utilization, gpu.power_mw = (util, 0), int(watts * 1000)

    def sample(self, now: float) -> dict:
        return job_sampler.sample(str(self.state), self.name, str(self.spool), _thresholds(), now=now, nvml=self.nvml,
                                  proc_root=str(self.proc), cgroup_root=str(self.cgroup), log=self.logged.append)

    def records(self) -> list[dict]:
        files = sorted(self.spool.glob("*")) if self.spool.exists() else []
        return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def _run(node: Node, timeline) -> float | None:
    """Samples every 30 s through ``timeline(t) -> (util, watts)``; the time of the first report."""
    for k in range(40):
        now = T0 + 30 * k
        node.load(*timeline(now - T0))
        if node.sample(now)["reported"]:
            return now - T0
    return None


@pytest.mark.parametrize("stall_at", [0.0, 1.0, 29.0, 301.0])
def test_a_stall_is_reported_within_three_minutes_naming_the_job(tmp_path, stall_at):
    node = Node(tmp_path, "gpu01")
    reported = _run(node, lambda t: (100, 690.0) if t < stall_at + 300 else (100, 75.0))
    start = stall_at + 300
    assert reported is not None and start < reported <= start + 180
    (record,) = node.records()
    assert record["context"] == "job-sample" and record["job_id"] == JOB and record["status"] == "warn"
    assert record["job_nodes"] == "gpu[01-03]"
    assert {r["check"] for r in record["results"]} == {"gpu.stalled"}
    assert all(r["status"] == "warn" and f"job {JOB}" in r["message"] for r in record["results"])
    assert any(f"job {JOB}" in line and "stalled" in line for line in node.logged)
    # NVML was opened and shut down at every sample: no session left between samples
    assert node.nvml.sessions == 0 and node.nvml.init_calls == node.nvml.shutdown_calls == reported // 30 + 1


def test_reported_once_then_cleared_when_the_job_runs_on_or_ends(tmp_path):
    node = Node(tmp_path, "gpu01")
    node.load(100, 70.0)
    reports = [node.sample(T0 + 30 * k)["reported"] for k in range(8)]
    assert reports.count([JOB]) == 1
    node.load(100, 650.0)
    assert node.sample(T0 + 300)["cleared"] == [JOB]
    node.load(100, 70.0)
    for k in range(11, 16):
        node.sample(T0 + 30 * k)
    node.set_job(None)
    node.load(0, 70.0)
    calls = node.nvml.init_calls
    done = node.sample(T0 + 600)
    assert done["cleared"] == [JOB] and not done["sampled"] and node.nvml.init_calls == calls  # no NVML: no job
    kept = json.loads((node.state / job_sampler.FILE_NAME).read_text())
    assert kept["gpus"] == {} and kept["jobs"] == {} and kept["summaries"] == {}
    assert [r["status"] for r in node.records()] == ["warn", "pass", "warn", "pass"]


def test_no_report_for_a_busy_healthy_job_nor_an_idle_node(tmp_path):
    busy = Node(tmp_path, "gpu01")
    assert _run(busy, lambda t: (100, 640.0)) is None
    assert busy.records() == [] and busy.logged == []
    assert job_sampler.load(str(busy.state))["summaries"][JOB]["not_pinned"] == [0, 1]
    waiting = Node(tmp_path, "gpu02")  # the job on the node, its GPUs idle (a CPU phase): not pinned
    assert _run(waiting, lambda t: (0, 70.0)) is None and waiting.records() == []
    idle = Node(tmp_path, "gpu03", job=None)
    assert _run(idle, lambda t: (0, 70.0)) is None
    assert idle.records() == [] and idle.nvml.init_calls == 0  # no job: NVML is not even opened


def test_a_stall_that_blinks_is_not_reported(tmp_path):
    node = Node(tmp_path, "gpu01")
    assert _run(node, lambda t: (100, 70.0) if int(t) // 30 % 4 else (100, 600.0)) is None


def test_without_slurm_cgroups_the_gpus_processes_say_which_job(tmp_path):
    node = Node(tmp_path, "gpu01")
    (node.cgroup / "system.slice" / "slurmstepd.scope" / f"job_{JOB}").rmdir()
    (node.cgroup / "system.slice" / "slurmstepd.scope").rmdir()
    assert job_sampler.slurm_jobs(str(node.cgroup)) is None
    assert _run(node, lambda t: (100, 72.0)) is not None


def test_cgroup_v1_and_v2_job_lists(tmp_path):
    (tmp_path / "v2" / "system.slice" / "gpu01_slurmstepd.scope" / "job_7").mkdir(parents=True)
    (tmp_path / "v1" / "freezer" / "slurm" / "uid_1000" / "job_8").mkdir(parents=True)
    (tmp_path / "v1" / "freezer" / "slurm" / "uid_1000" / "not_a_job").mkdir()
    assert job_sampler.slurm_jobs(str(tmp_path / "v2")) == {"7"}
    assert job_sampler.slurm_jobs(str(tmp_path / "v1")) == {"8"}
    assert job_sampler.slurm_jobs(str(tmp_path / "none")) is None


def _cluster(tmp_path, culprit_watts: float | None, nodes=("gpu01", "gpu02", "gpu03")) -> list[dict]:
    """Every node of one job sampled for 5 minutes: all pinned at idle power, except the culprit."""
    out = []
    for name in nodes:
        node = Node(tmp_path, name)
        culprit = name == "gpu02" and culprit_watts is not None
        for k in range(10):
            node.load(*((100, culprit_watts) if culprit else (100, 71.0)))
            node.sample(T0 + 30 * k)
        out += job_sampler.show(str(node.state), JOB)
    return out


def test_across_the_nodes_the_one_that_differs_is_named(tmp_path):
    summaries = _cluster(tmp_path, culprit_watts=650.0)
    result = odd_nodes(summaries, ["gpu01", "gpu02", "gpu03", "gpu04"])
    assert result["stalled"] and result["pinned"] == ["gpu01", "gpu03"] and result["odd"] == ["gpu02"]
    assert result["unknown"] == ["gpu04"] and "gpu02" in result["why"] and "650 W" in result["why"]


def test_every_node_pinned_names_no_node(tmp_path):
    result = odd_nodes(_cluster(tmp_path / "a", culprit_watts=None))
    assert result["stalled"] and result["odd"] == [] and "whole job waits" in result["why"]
    healthy = odd_nodes(_cluster(tmp_path / "b", culprit_watts=None, nodes=("gpu01",))[:0] + [
        {"node": "gpu01", "job": JOB, "gpus": 8, "pinned": [], "not_pinned": list(range(8)), "judged": True}])
    assert not healthy["stalled"] and healthy["odd"] == []


def test_odd_nodes_rules():
    def s(node, gpus, pinned, judged=True):
        return {"node": node, "job": JOB, "gpus": gpus, "pinned": list(range(pinned)),
                "not_pinned": list(range(pinned, gpus)), "judged": judged, "power_draw_w": 80.0,
                "utilization_gpu_pct": 100.0}

    one_gpu_odd = odd_nodes([s("a", 8, 8), s("b", 8, 7), s("c", 8, 8)])
    assert one_gpu_odd["odd"] == ["b"] and "GPUs 7 not pinned" in one_gpu_odd["why"]
    gone = odd_nodes([s("a", 8, 8), s("b", 0, 0)])
    assert gone["odd"] == ["b"] and "no GPU process" in gone["why"]
    early = odd_nodes([s("a", 8, 8), s("b", 8, 0, judged=False)])
    assert early["odd"] == [] and early["unknown"] == ["b"]


def test_job_node_summary_needs_job_samples_in_a_row():
    from tests.checks.gpu_builders import h100
    from healthcheck.core.model import GpuSample

    def gpu(powers):
        return h100(0, power_limit_w=700.0, idle_power_w=68.0, samples=[
            GpuSample(taken_at=f"2026-12-03T10:0{i}:00+00:00", utilization_gpu_pct=100.0, power_draw_w=p,
                      pids=[1], jobs=[JOB]) for i, p in enumerate(powers)])

    t = _thresholds()
    assert job_node_summary("n", JOB, [gpu([70, 70, 70, 70])], t)["pinned"] == [0]
    assert job_node_summary("n", JOB, [gpu([600, 70, 70, 70])], dict(t, job_samples=3))["pinned"] == [0]
    assert job_node_summary("n", JOB, [gpu([600, 70, 70, 70])], t)["pinned"] == []
    assert job_node_summary("n", JOB, [gpu([70, 70, 600, 70])], t)["pinned"] == []
    short = job_node_summary("n", JOB, [gpu([70, 70, 70])], t)
    assert short["pinned"] == [] and not short["judged"]


def test_the_interval_setting():
    assert validate({"job_sample_interval_s": 0})[0] == {"job_sample_interval_s": 0.0}
    assert validate({"job_sample_interval_s": 45})[0] == {"job_sample_interval_s": 45.0}
    assert validate({"job_sample_interval_s": -1})[1][0] == "job_sample_interval_s"


def test_gather_runs_one_srun_step_over_the_jobs_nodes():
    calls = []
    lines = "\n".join(json.dumps({"node": n, "job": JOB, "gpus": 8, "pinned": [] if n == "gpu02" else list(range(8)),
                                  "not_pinned": list(range(8)) if n == "gpu02" else [], "judged": True})
                      for n in ("gpu01", "gpu02", "gpu03"))

    def run(argv, timeout):
        calls.append(argv)
        if argv[0] == "squeue":
            return Result(argv, 0, "3|gpu[01-03]|RUNNING\n", "", 0.01)
        if argv[0] == "scontrol":
            return Result(argv, 0, "gpu01\ngpu02\ngpu03\n", "", 0.01)
        return Result(argv, 0, "srun: warning\n" + lines + "\n", "", 0.5)

    summaries, hostlist = jobstalls.gather(JOB, python="/opt/hc/bin/python", run=run)
    srun = calls[1]
    assert srun[:7] == ["srun", f"--jobid={JOB}", "--overlap", "--nodes=3", "--ntasks-per-node=1",
                        "--cpus-per-task=1", "--mem=0"]
    assert srun[-6:] == ["/opt/hc/bin/python", "-I", "-m", "healthcheck.hook.job_sampler", "--show", JOB]
    result = jobstalls.verdict(JOB, summaries, jobstalls.hostnames(hostlist, run=run))
    assert result["odd"] == ["gpu02"] and result["pinned"] == ["gpu01", "gpu03"]
    with pytest.raises(jobstalls.GatherError):
        jobstalls.gather("12; rm", run=run)


def test_cli_names_the_culprit_from_files(tmp_path):
    from click.testing import CliRunner

    from healthcheck.cli import cli

    summaries = _cluster(tmp_path, culprit_watts=640.0)
    files = []
    for s in summaries:
        path = tmp_path / f"{s['node']}.jsonl"
        path.write_text(json.dumps(s) + "\n")
        files += ["--from", str(path)]
    done = CliRunner().invoke(cli, ["job", "stalls", JOB, *files])
    assert done.exit_code == 1, done.output
    assert f"job {JOB}: STALLED" in done.output and "likely culprit: gpu02" in done.output
    done = CliRunner().invoke(cli, ["job", "stalls", JOB, "--format", "json", *files[:2], *files[4:]])
    assert done.exit_code == 1 and json.loads(done.output)["odd"] == []


def test_the_agent_forks_one_sampler_per_interval_and_kills_a_stuck_one(tmp_path):
    import os
    import time

    from healthcheck.agent.main import Sampling

    marks = tmp_path / "marks"
    logged = []

    def run():
        with marks.open("a") as fh:
            fh.write("x")
        time.sleep(30)  # stuck (a GPU that does not answer)

    def wait_for(count):
        deadline = time.monotonic() + 10
        while not marks.exists() or len(marks.read_text()) < count:  # the child ran the sampler's work
            assert time.monotonic() < deadline
            time.sleep(0.01)

    sampling = Sampling(5.0, run)
    sampling.tick(100.0, logged.append)
    first = sampling.pid
    wait_for(1)
    assert first and first != os.getpid()
    sampling.tick(101.0, logged.append)
    assert sampling.pid == first  # never two at once
    sampling.tick(105.0, logged.append)  # past its interval: killed
    _, status = os.waitpid(first, 0)
    assert os.WIFSIGNALED(status) and "killed" in logged[0]
    assert sampling.reaped(first) and sampling.pid is None
    sampling.tick(106.0, logged.append)
    assert sampling.pid and sampling.pid != first
    wait_for(2)
    os.kill(sampling.pid, 9)
    os.waitpid(sampling.pid, 0)
