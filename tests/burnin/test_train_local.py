"""Issue 34 on this host without Slurm: the real training worker (torch's CPU build, gloo) on 2 and 4 ranks
started through the subprocess seam, judged against the committed CPU reference. A healthy run with its
kill-and-resume passes and leaves no checkpoint; a perturbed learning rate fails naming the step that left
the band; a corrupted gradient on one rank fails naming that rank. Skipped where torch is not installed
(CI installs the CPU build: HEALTHCHECK_TEST_TORCH=1). Cost here: about 20 s + 8 s + 12 s on 2 loaded cores."""
from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")

from healthcheck.burnin.train import data as tdata  # noqa: E402
from healthcheck.burnin.train import judge  # noqa: E402
from healthcheck.burnin.train.phase import Launch, run_phase  # noqa: E402
from healthcheck.burnin.train.spec import load  # noqa: E402
from healthcheck.core.model import Status  # noqa: E402

TIMEOUT_S = 300.0  # a loaded 2-core machine; a healthy run takes seconds


def _by_check(findings):
    out: dict[str, list] = {}
    for f in findings:
        out.setdefault(f.check, []).append(f)
    return out


def test_the_token_stream_is_deterministic_and_independent_of_the_world_size():
    table = tdata.chain(64, 1234)
    a = tdata.global_batch(7, table, 8, 32, 1234)
    assert torch.equal(a, tdata.global_batch(7, tdata.chain(64, 1234), 8, 32, 1234))
    assert not torch.equal(a[:-1], tdata.global_batch(8, table, 8, 32, 1234)[:-1])
    assert torch.equal(a[-1], tdata.global_batch(8, table, 8, 32, 1234)[-1])  # the probe never changes
    assert a.shape == (9, 33) and torch.equal(a[:, 17:33], a[:, :16])  # the second half repeats the first
    two = [tdata.shard(a, r, 2) for r in range(2)]
    four = [tdata.shard(a, r, 4) for r in range(4)]
    assert all(torch.equal(s[0], a[-1]) for s in two + four)
    assert torch.equal(torch.cat([s[1:] for s in two]), torch.cat([s[1:] for s in four]))


def test_a_healthy_run_passes_its_reference_and_resumes_within_the_limit(tmp_path):
    data = load()
    work = tmp_path / "work"
    out = run_phase(data.spec("tiny"), data, Launch(["local"], local_ranks=2, timeout_s=TIMEOUT_S), str(work))
    got = _by_check(out.findings)
    assert all(f.status in (Status.PASS, Status.SKIP) for f in out.findings), [f.to_dict() for f in out.findings]
    conv = got["burnin.train.convergence"][0]
    assert conv.status is Status.PASS
    run, ref = judge.curve_from_metrics(conv.metrics)  # the curve the history keeps: 32 of the 40 steps
    loss = out.record["full"]["loss"]
    assert len(run) == judge.CURVE_POINTS and {1, 40} <= set(run) and all(run[s] == loss[s - 1] for s in run)
    assert set(ref) == set(run) and ref[40] == data.curve(data.spec("tiny"), 2).loss[-1]
    for f in got["burnin.train.throughput"]:  # the CPU reference: 2000 tokens/s, floor 10 % of it
        assert f.metrics["tokens_per_s_ref"] == 2000.0 and f.metrics["tokens_per_s_floor"] == 200.0
        # from the unrounded median (tokens_per_s is kept to 0.1 tokens/s): equal within the roundings
        assert f.metrics["pct_of_reference"] == pytest.approx(100 * f.metrics["tokens_per_s"] / 2000.0, abs=0.011)
    resume = got["burnin.train.resume"][0]
    assert resume.status is Status.PASS and resume.metrics["deviation_rel"] < 0.001
    assert resume.metrics["restart_step"] == 30 and resume.metrics["recovery_s"] > 0
    assert got["burnin.train.activity"][0].status is Status.SKIP  # a CPU run samples no GPU
    assert out.record["resume"]["first_step"] == 31 and len(out.record["full"]["loss"]) == 40
    assert not (work / "checkpoints").exists()  # the phase removed every checkpoint
    killed = json.loads((work / "killed" / "killed-1.json").read_text())
    assert killed["step"] == 35


def test_a_perturbed_learning_rate_fails_naming_the_first_step_out_of_the_band(tmp_path):
    data = load()
    out = run_phase(data.spec("tiny", lr_scale=1.5), data, Launch(["local"], local_ranks=2, timeout_s=TIMEOUT_S),
                    str(tmp_path / "work"), resume=False)
    conv = _by_check(out.findings)["burnin.train.convergence"][0]
    assert conv.status is Status.FAIL and "left the reference band at step" in conv.message
    assert 2 <= conv.metrics["first_bad_step"] <= 40
    run, ref = judge.curve_from_metrics(conv.metrics)
    first = int(conv.metrics["first_bad_step"])
    assert first in run and first in ref and len(run) <= judge.CURVE_POINTS and {1, 40} <= set(run)
    assert _by_check(out.findings)["burnin.train.ranks"][0].status is Status.PASS  # every rank was equally wrong
    assert not (tmp_path / "work" / "checkpoints").exists()


def test_a_corrupted_gradient_on_one_rank_is_named(tmp_path):
    data = load()
    out = run_phase(data.spec("tiny", corrupt_rank=2, corrupt_step=12), data,
                    Launch(["local"], local_ranks=4, timeout_s=TIMEOUT_S), str(tmp_path / "work"), resume=False)
    (ranks,) = _by_check(out.findings)["burnin.train.ranks"]
    assert ranks.status is Status.FAIL and ranks.component == "rank 2", ranks.to_dict()
    assert ranks.metrics["first_bad_step"] == 12 and "reduced gradient" in ranks.message  # the step it happened
    node = os.uname().nodename.split(".")[0]
    assert list(out.node_findings) == [node] and out.node_findings[node][0].component == "rank 2"


def test_a_launch_that_cannot_start_is_an_error_not_a_fail(tmp_path):
    data = load()
    out = run_phase(data.spec("tiny"), data, Launch(["local"], local_ranks=2, timeout_s=TIMEOUT_S,
                                                   python="/nonexistent/python"), str(tmp_path / "w"))
    assert [f.status for f in out.findings] == [Status.ERROR] and "did not complete" in out.findings[0].message


def test_the_command_records_a_reference_that_the_data_file_accepts(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from healthcheck.burnin.train.spec import parse
    from healthcheck.cli.main import cli

    monkeypatch.chdir(tmp_path)
    for key in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(key, raising=False)
    ref = tmp_path / "ref.toml"
    result = CliRunner().invoke(cli, ["burnin", "train", "--local-ranks", "2", "--no-resume", "--no-drain",
                                      "--format", "json", "--record-reference", str(ref)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert '"burnin.train.convergence"' in result.output
    import tomllib

    entry = parse(tomllib.loads(ref.read_text()), str(ref), load())
    (curve,) = [c for c in entry.curves.values() if "2 ranks" in c.recorded]
    committed = load().curves["tiny|gloo|fp32|2-8"]
    assert curve.key == committed.key and len(curve.loss) == 40
    assert all(abs(a - b) <= 0.02 * b for a, b in zip(curve.loss, committed.loss))
    assert not (tmp_path / "burnin-local" / "train-nojob" / "checkpoints").exists()


def test_the_command_without_a_job_or_local_ranks_is_a_usage_error(monkeypatch):
    from click.testing import CliRunner

    from healthcheck.cli.main import cli

    for key in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(cli, ["burnin", "train"])
    assert result.exit_code == 2 and "--local-ranks" in result.output


def test_kill_mode_step_kills_every_rank_after_its_step(tmp_path):
    import dataclasses

    from healthcheck.burnin.train.phase import launch

    spec = dataclasses.replace(load().spec("tiny"), kill_at=6, kill_mode="step", checkpoint_every=5,
                               checkpoint_dir=str(tmp_path / "ck"))
    got = launch(spec, str(tmp_path / "out"), Launch(["local"], local_ranks=2, timeout_s=TIMEOUT_S))
    assert sorted(k["rank"] for k in got.killed) == [0, 1] and {k["step"] for k in got.killed} == {6}
    assert got.done is None and [s["step"] for s in got.steps] == list(range(1, 7))
    assert got.returncodes == [-9, -9]  # SIGKILL, as a killed job step's ranks end
    assert os.listdir(tmp_path / "ck") == ["step-000005.pt"]  # the latest checkpoint only


def test_a_world_size_the_model_cannot_split_is_recorded_and_exits_unavailable(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from healthcheck.cli.main import cli

    monkeypatch.chdir(tmp_path)
    for key in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(key, raising=False)
    result = CliRunner().invoke(cli, ["burnin", "train", "--local-ranks", "3", "--no-drain"])
    assert result.exit_code == 6, result.output
    assert "3 ranks do not divide the global batch of 8" in result.output
    assert (tmp_path / "burnin-local" / "summary-nojob.json").exists()  # recorded all the same
