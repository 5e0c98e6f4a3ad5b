"""Issue 34: the training smoke test's pure parts (no torch): the judges, the data file's validation, the
settings (the phase is opt-in), the SM-activity sampler over the fake pynvml and dcgmi's output."""
from __future__ import annotations

import dataclasses
import time

import pytest

from healthcheck.burnin.settings import PRESETS, SettingsError, resolve
from healthcheck.burnin.train import judge
from healthcheck.burnin.train.activity import Sampler, parse_dmon
from healthcheck.burnin.train.phase import kill_step
from healthcheck.burnin.train.spec import (Curve, Figure, TrainDataError, TrainSpec, check, load, parse,
                                           world_class)
from healthcheck.core.model import Status
from tests.fakes.fake_pynvml import FakeNvml, h100_node

REF = Curve("tiny|gloo|fp32|2-8", (4.0, 3.8, 3.5, 3.2, 3.0), "test")


def test_a_curve_inside_the_band_passes_and_one_outside_names_its_first_step():
    ok = judge.judge_convergence([4.01, 3.79, 3.52, 3.21, 2.99], REF, 0.02, 0.02, "tiny")
    assert ok.status is Status.PASS and ok.metrics["final_loss"] == 2.99
    bad = judge.judge_convergence([4.0, 3.8, 3.3, 3.0, 2.8], REF, 0.02, 0.02, "tiny")
    assert bad.status is Status.FAIL and "step 3" in bad.message and bad.metrics["first_bad_step"] == 3.0
    nan = judge.judge_convergence([4.0, float("nan"), 3.5, 3.2, 3.0], REF, 0.02, 0.02, "tiny")
    assert nan.status is Status.FAIL and "step 2" in nan.message
    short = judge.judge_convergence([4.0, 3.8], REF, 0.02, 0.02, "tiny")
    assert short.status is Status.FAIL and "2 steps" in short.message
    none = judge.judge_convergence([4.0], None, 0.02, 0.02, "tiny|gloo|fp32|9-64")
    assert none.status is Status.SKIP and "--record-reference" in none.message


def test_the_curve_is_recorded_downsampled_with_the_reference_at_the_same_steps():
    long = [4.0 - 0.001 * i for i in range(1000)]
    ref = Curve("k", tuple(long), "t")
    ok = judge.judge_convergence(long, ref, 0.02, 0.02, "k")
    run, rec = judge.curve_from_metrics(ok.metrics)
    assert ok.status is Status.PASS and len(run) == judge.CURVE_POINTS and set(rec) == set(run)
    assert {1, 1000} <= set(run) and run[1] == 4.0 and run[1000] == long[-1]
    assert all(run[s] == long[s - 1] and rec[s] == long[s - 1] for s in run)
    gaps = [b - a for a, b in zip(sorted(run), sorted(run)[1:])]
    assert max(gaps) - min(gaps) <= 1  # evenly spread
    assert ok.metrics["band_rel"] == 0.02 and ok.metrics["band_abs"] == 0.02
    names = sorted(n for n in ok.metrics if n.startswith(judge.LOSS))
    assert names == [judge.curve_name(s) for s in sorted(run)]  # the names sort as the steps do
    assert len(ok.metrics) <= 2 * judge.CURVE_POINTS + 4  # the per-run cost in history rows is bounded
    short = judge.judge_convergence(list(REF.loss), REF, 0.02, 0.02, "tiny")
    assert judge.curve_from_metrics(short.metrics) == ({1: 4.0, 2: 3.8, 3: 3.5, 4: 3.2, 5: 3.0},) * 2  # every step


@pytest.mark.parametrize("n, keep", [(1, ()), (2, ()), (32, ()), (33, ()), (40, (15,)), (1000, (577,)),
                                     (1 << 20, (1, 1 << 20, 99_999))])
def test_downsampling_keeps_the_ends_and_the_first_bad_step_within_the_bound(n, keep):
    steps = judge.curve_steps(n, keep)
    assert len(steps) <= judge.CURVE_POINTS and steps == sorted(set(steps))
    assert steps[0] == 1 and steps[-1] == n and set(keep) <= set(steps)
    assert len(steps) == min(n, judge.CURVE_POINTS)


def test_a_failing_run_records_its_first_bad_step_and_a_skip_its_own_curve():
    ref = Curve("k", tuple(4.0 - 0.01 * i for i in range(100)), "t")
    loss = [x if i < 56 else x + 0.5 for i, x in enumerate(ref.loss)]  # leaves the band at step 57
    bad = judge.judge_convergence(loss, ref, 0.02, 0.02, "k")
    assert bad.status is Status.FAIL and "step 57" in bad.message and bad.metrics["first_bad_step"] == 57.0
    run, rec = judge.curve_from_metrics(bad.metrics)
    assert 57 in run and run[57] == loss[56] and rec[57] == ref.loss[56] and len(run) <= judge.CURVE_POINTS
    assert {1, 100} <= set(run)
    nan = judge.judge_convergence([4.0, float("nan"), 3.5, 3.2, 3.0], REF, 0.02, 0.02, "tiny")
    run, rec = judge.curve_from_metrics(nan.metrics)
    assert nan.metrics["first_bad_step"] == 2.0 and 2 not in run and rec[2] == 3.8  # not a finite loss: left out
    assert judge.curve_name(2) not in nan.metrics and judge.curve_name(2, ref=True) in nan.metrics
    skip = judge.judge_convergence([4.0, 3.9, 3.7], None, 0.02, 0.02, "k|9-64")
    assert skip.status is Status.SKIP and judge.curve_from_metrics(skip.metrics) == ({1: 4.0, 2: 3.9, 3: 3.7}, {})
    assert "band_rel" not in skip.metrics  # no reference, no band
    short = judge.judge_convergence([4.0, 3.8], REF, 0.02, 0.02, "tiny")
    assert judge.curve_from_metrics(short.metrics) == ({1: 4.0, 2: 3.8}, {1: 4.0, 2: 3.8})


def test_curve_names_are_written_and_read_back_strictly():
    assert judge.curve_name(10) == "loss@0000010" and judge.curve_name(10, ref=True) == "loss_ref@0000010"
    assert judge.parse_curve_name("loss@0000010") == (False, 10)
    assert judge.parse_curve_name("loss_ref@1048576") == (True, 1048576)
    arabic_indic = "loss@" + "\u0660" * 5 + "\u0661\u0660"  # str.isdigit() takes these, int() too
    for name in ("loss@10", "loss@00000010", "loss@0000000", "loss@00001a0", arabic_indic, "xloss@0000010",
                 "loss@0000010 ", "loss@+000010", "final_loss", "loss_ref@", "band_rel", None):
        assert judge.parse_curve_name(name) is None, name
    for step in (0, -1, 10 ** 7, 1.0, True):
        with pytest.raises(ValueError):
            judge.curve_name(step)
    assert judge.curve_from_metrics({"loss@0000003": 2.0, "loss@3": 9.0, "loss_ref@0000003": 2.1,
                                     "final_loss": 2.0, "loss@0000004": float("nan")}) == ({3: 2.0}, {3: 2.1})


def test_the_absolute_band_holds_at_low_loss():
    ref = Curve("k", (0.1, 0.1), "t")
    assert judge.judge_convergence([0.115, 0.09], ref, 0.02, 0.02, "k").status is Status.PASS
    assert judge.judge_convergence([0.125, 0.1], ref, 0.02, 0.02, "k").status is Status.FAIL


def test_a_rank_that_disagrees_with_the_majority_is_named_with_its_node():
    probes = [[3.0] * 4, [2.9] * 4, [2.8, 2.8, 2.8, 2.81], [2.7, 2.7, 2.7, 2.6]]
    (f,) = judge.judge_ranks(probes, 1e-5, {0: "node1", 1: "node1", 2: "node2", 3: "node2"})
    assert f.status is Status.FAIL and f.component == "rank 3"
    assert "rank 3 on node2" in f.message and "step 3" in f.message and f.metrics["first_bad_step"] == 3.0
    assert judge.judge_ranks([[3.0, 3.0 * (1 + 1e-7)]] * 3, 1e-5)[0].status is Status.PASS


def test_a_reduced_gradient_that_differs_is_named_at_its_own_step_before_the_probe_shows_it():
    probes = [[3.0] * 4, [2.9] * 4, [2.8, 2.8, 2.9, 2.8]]
    grads = [[1.0] * 4, [0.5, 0.5, 4.0, 0.5], [0.2] * 4]
    (f,) = judge.judge_ranks(probes, 1e-5, None, grads)
    assert f.component == "rank 2" and "reduced gradient from step 2" in f.message
    (p,) = judge.judge_ranks(probes, 1e-5)
    assert p.component == "rank 2" and "probe loss from step 3" in p.message
    assert "and the reduced gradient" in judge.judge_ranks([[1.0, 1.0]], 1e-5, None, [[2.0, 2.0]])[0].message


def test_two_ranks_without_a_majority_name_both():
    got = judge.judge_ranks([[3.0, 3.0], [2.9, 2.95]], 1e-5)
    assert {f.component for f in got} == {"rank 0", "rank 1"} and all(f.status is Status.FAIL for f in got)
    assert "no majority" in got[0].message


def test_resume_within_the_limit_passes_and_a_deviation_names_its_step():
    full = {s: 4.0 - 0.1 * s for s in range(1, 11)}
    same = {s: full[s] for s in range(7, 11)}
    ok = judge.judge_resume(same, full, 0.001, 3.5, 6)
    assert ok.status is Status.PASS and ok.metrics["recovery_s"] == 3.5 and "step 6" in ok.message
    off = {**same, 9: full[9] * 1.002}
    bad = judge.judge_resume(off, full, 0.001, 3.5, 6)
    assert bad.status is Status.FAIL and "step 9" in bad.message
    gap = judge.judge_resume({7: full[7]}, full, 0.001, None, 6)
    assert gap.status is Status.FAIL and "lacks step(s) 8..10" in gap.message
    assert judge.judge_resume({}, full, 0.001, None, None).status is Status.FAIL


def test_throughput_is_judged_per_rank_after_the_warm_up():
    ref = Figure(2000.0, "estimate: test", -0.5)
    got = judge.judge_throughput({"rank 0": [10.0, 3000, 3100, 2900], "rank 1": [5000, 900, 800, 950]}, ref, "k", 1)
    assert [(f.component, f.status) for f in got] == [("rank 0", Status.PASS), ("rank 1", Status.FAIL)]
    assert got[0].metrics["tokens_per_s"] == 3000.0  # the slow first step is not judged
    (unjudged,) = judge.judge_throughput({"rank 0": [100.0]}, None, "k|GH200", 3)
    assert unjudged.status is Status.WARN and "no reference" in unjudged.message
    assert set(unjudged.metrics) == {"tokens_per_s"}  # no reference: no percentage


def test_throughput_records_its_reference_floor_and_percentage_on_pass_and_fail():
    ref = Figure(20000.0, "test reference", -0.1)
    ok, low = judge.judge_throughput({"rank 0": [19000.0] * 4, "rank 1": [12345.0] * 4}, ref, "k|H100", 1)
    assert ok.status is Status.PASS and low.status is Status.FAIL
    assert ok.metrics == {"tokens_per_s": 19000.0, "tokens_per_s_ref": 20000.0, "tokens_per_s_floor": 18000.0,
                          "pct_of_reference": 95.0}
    assert low.metrics["pct_of_reference"] == 61.73 and low.metrics["tokens_per_s_floor"] == 18000.0
    assert "95 % of the reference" in ok.message and "61.7 % of the reference" in low.message
    assert "floor 1.8e+04" in ok.message and "below the floor 1.8e+04" in low.message  # as before (old readers)
    (zero,) = judge.judge_throughput({"rank 0": [5.0]}, Figure(0.0, "x", -0.1), "k", 0)
    assert zero.status is Status.PASS and "pct_of_reference" not in zero.metrics  # no division by a zero reference


def test_sm_activity_mean_and_spread_name_the_source():
    got = judge.judge_activity({"n1/gpu0": [0, 0, 90, 92], "n1/gpu1": [0, 0, 60, 62]}, "dcgm_sm_active", 70, 5)
    by = {(f.component, f.status) for f in got}
    assert ("n1/gpu0", Status.PASS) in by and ("n1/gpu1", Status.FAIL) in by
    spread = next(f for f in got if f.component is None)
    assert spread.status is Status.FAIL and "DCGM field 1002" in spread.message and "lowest n1/gpu1" in spread.message
    nvml = judge.judge_activity({"n1/gpu0": [80, 80, 80]}, "nvml_utilization", 70, 5)
    assert nvml[0].status is Status.PASS and "NVML" in nvml[0].message
    assert judge.judge_activity({}, "none", 70, 5)[0].status is Status.SKIP


def test_checkpoint_throughput_is_recorded():
    f = judge.judge_checkpoints([{"bytes": 2e6, "seconds": 0.5}, {"bytes": 2e6, "seconds": 0.5}])
    assert f.status is Status.PASS and f.metrics["checkpoint_mb_s"] == 4.0
    assert judge.judge_checkpoints([]).status is Status.WARN


def test_dcgmi_dmon_rows_become_percent_and_na_is_left_out():
    text = "#Entity   SMACT\nID\nGPU 0     0.812\nGPU 1     N/A\nGPU 7     1.000\n"
    assert parse_dmon(text) == {0: 81.2, 7: 100.0}
    assert parse_dmon("Error: profiling module not loaded\n") == {}


def test_the_sampler_falls_back_to_nvml_utilisation_and_says_so():
    gpus = h100_node(2)
    gpus[0] = dataclasses.replace(gpus[0], utilization=(93, 40))
    gpus[1] = dataclasses.replace(gpus[1], utilization=(41, 10))
    s = Sampler([0, 1], period_s=0.01, nvml=FakeNvml(gpus), dcgmi="/nonexistent/dcgmi")
    s.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(s.samples[1]) < 3:
        time.sleep(0.01)
    s.stop()
    got = s.result()
    assert got["source"] == "nvml_utilization" and set(got["samples"]["0"]) == {93.0}
    assert set(got["samples"]["1"]) == {41.0}


def test_the_packaged_data_loads_and_every_figure_has_a_source():
    data = load()
    assert {"tiny", "small"} <= set(data.models)
    assert all(f.source for f in data.tolerance.values()) and all(f.source for f in data.throughput.values())
    assert data.tol("resume_deviation_rel") == 0.001 and data.tol("sm_activity_min_pct") == 70.0
    assert data.throughput_for(data.spec("small", backend="nccl", dtype="bf16"), "NVIDIA H100 80GB HBM3") \
        is data.throughput["small|nccl|bf16|H100"]
    assert data.throughput_for(data.spec("tiny"), None) is data.throughput["tiny|gloo|fp32"]


@pytest.mark.parametrize("text, match", [
    ("[model.x]\nvocab = 8\n", "lacks"),
    ("[model.x]\nwidth = 8\n", "keys are"),
    ("[tolerance]\nband_rel = 0.1\n", "source"),
    ("[tolerance]\nband_rel = { value = 0.1, source = \"\" }\n", "source"),
    ("[tolerance]\nbogus = { value = 0.1, source = \"x\" }\n", "unknown"),
    ("[curve.\"a|b\"]\nrecorded = \"x\"\nloss = [1.0]\n", "MODEL|BACKEND"),
    ("[curve.\"a|b|c|d\"]\nloss = [1.0]\n", "recorded"),
    ("[curve.\"a|b|c|d\"]\nrecorded = \"x\"\nloss = [1.0, \"nan\"]\n", "finite"),
    ("[throughput.\"a|b|c\"]\ntokens_per_s = { value = 1.0, source = \"x\" }\n", "lower"),
    ("[model.tiny]\nheads = 5\n", "multiple of heads"),
    ("[bogus]\n", "unknown table"),
])
def test_bad_train_data_is_refused_naming_the_entry(tmp_path, text, match):
    path = tmp_path / "site.toml"
    path.write_text(text)
    with pytest.raises(TrainDataError, match=match):
        load(str(path))


def test_a_site_file_overrides_a_model_key_by_key(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text("[model.tiny]\nsteps = 60\n")
    assert load(str(path)).spec("tiny").steps == 60


def test_spec_checks_the_world_size_and_the_faults():
    spec = load().spec("tiny")
    assert check(spec, 4) is spec
    with pytest.raises(TrainDataError, match="3 ranks do not divide the global batch of 8"):
        check(spec, 3)
    with pytest.raises(TrainDataError, match="kill_at"):
        check(dataclasses.replace(spec, kill_at=spec.steps))
    with pytest.raises(TrainDataError, match="unknown keys"):
        TrainSpec.from_json('{"model": "tiny", "evil": 1}')
    assert TrainSpec.from_json(spec.to_json()) == spec
    assert [world_class(w) for w in (1, 2, 8, 9, 64, 65)] == ["1", "2-8", "2-8", "9-64", "9-64", "65+"]


def test_the_kill_falls_between_the_last_two_checkpoints():
    spec = load().spec("tiny")  # 40 steps, a checkpoint every 10
    assert kill_step(spec) == 35
    with pytest.raises(Exception, match="no checkpoint before the end"):
        kill_step(dataclasses.replace(spec, checkpoint_every=40))


def test_train_is_opt_in_and_its_settings_are_validated():
    for suite in PRESETS:
        assert "train" not in resolve({"suite": suite}, environ={}).phases
    s = resolve({"phases": ["checks", "train"]}, environ={"HEALTHCHECK_BURNIN_TRAIN_RESUME": "false"})
    assert s.phase_on("train") and s.train_resume is False
    with pytest.raises(SettingsError, match="train_kill_mode"):
        resolve({"train_kill_mode": "node"}, environ={})
    with pytest.raises(SettingsError, match="train_timeout_s"):
        resolve({"train_timeout_s": 1.0}, environ={})


def test_the_allocation_step_runs_train_only_when_asked_and_a_bad_rank_fails_its_node(monkeypatch):
    from healthcheck.burnin import allocation
    from healthcheck.burnin.train import setup
    from healthcheck.burnin.train.phase import TrainOutcome
    from healthcheck.core.model import Finding

    calls = []
    bad = Finding(judge.RANKS, Status.FAIL, "rank 1 on n2 disagrees", "rank 1", {"rank": 1.0})

    def fake(nodes, settings, job_id, log, **kw):
        calls.append((nodes, job_id))
        return TrainOutcome([Finding(judge.CONVERGENCE, Status.PASS, "ok"), bad], {"n2": [bad]}, {"world": 2})

    monkeypatch.setattr(setup, "run_for_allocation", fake)
    without = allocation.run_allocation(["n1", "n2"], resolve({"phases": ["checks"]}, environ={}), None, "7")
    assert calls == [] and without.train is None
    out = allocation.run_allocation(["n1", "n2"], resolve({"phases": ["checks", "train"], "max_drain_fraction": 0.5},
                                                          environ={}), None, "7")
    assert calls == [(["n1", "n2"], "7")] and out.train == {"world": 2}
    assert [f.check for f in out.collective] == [judge.CONVERGENCE, judge.RANKS]
    assert out.per_node["n2"].status is Status.FAIL and out.per_node["n1"].status is Status.PASS
    assert out.drain == ["n2"] and out.to_dict()["train"] == {"world": 2}


def test_without_torch_the_phase_is_an_error_saying_so(monkeypatch):
    from healthcheck.burnin.train import setup

    monkeypatch.setattr(setup.importlib.util, "find_spec", lambda name: None)
    out = setup.run_for_allocation(["n1"], resolve({}, environ={}), None)
    assert [(f.check, f.status) for f in out.findings] == [("burnin.train", Status.ERROR)]
    assert "torch is not installed" in out.findings[0].message


def test_only_the_worker_imports_torch():
    import subprocess
    import sys

    code = ("import sys, healthcheck.cli.main, healthcheck.burnin.allocation, healthcheck.burnin.train.phase, "
            "healthcheck.burnin.train.setup, healthcheck.burnin.train.judge, healthcheck.drill.drills; "
            "from healthcheck.cli.main import cli; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
