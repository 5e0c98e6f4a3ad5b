"""The readiness report's Training readiness section (issue 34 point 5, report/training.py): the acceptance
figures of the latest training smoke test (findings made by the train phase's own judges, recorded as the
burn-in job's run record), the latest burn-in's collectives and the cluster's MTTF, with the ready/blocked
line, read both ways (dbsummary.load_summary and load_frames + summarize_frames) and rendered in HTML,
Markdown and JSON. Three histories: a passing train run, a failing one (throughput below its floor), none;
and the loss curve the convergence judge records as metrics, through the real ingest into SQLite and back
into the section (a plot, a sentence, data), or its absence for a row recorded before it was."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from healthcheck.burnin.train import judge
from healthcheck.burnin.train.spec import Curve, Figure
from healthcheck.core.model import Finding, Status
from tests.report.history import write_spool

pytest.importorskip("sqlalchemy")

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
SINCE = NOW - timedelta(days=7)
NODES = ("gpu01", "gpu02", "gpu03", "gpu04")
REF = Curve("small|nccl|bf16|2-8", (4.0, 3.0, 2.5, 2.2, 2.0), "test")


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _record(run_id: str, node: str, at: datetime, context: str, findings: list[Finding], job_id: str | None) -> dict:
    worst = "fail" if any(f.status is Status.FAIL for f in findings) else "pass"
    return {"kind": "run", "schema_version": 1, "run_id": run_id, "record_id": f"rec-{run_id}", "node": node,
            "context": context, "job_id": job_id, "started_at": _iso(at), "duration_s": 60.0, "status": worst,
            "results": [f.to_dict() for f in findings], "config_hash": None, "tool_version": "test"}


def train_findings(tokens_per_s: float, gpus: bool = True) -> list[Finding]:
    """What the train phase's judges record for a 4-GPU run (burnin/train/judge.py)."""
    loss = [4.01, 3.02, 2.49, 2.21, 2.0]
    out = [judge.judge_convergence(loss, REF, 0.02, 0.02, "small|nccl|bf16|2-8"),
           judge.judge_resume({4: 2.21, 5: 2.0}, {4: 2.21, 5: 2.0}, 0.001, 7.7, 3)]
    ref = Figure(20000.0, "test reference", lower=-0.1)
    out += judge.judge_throughput({f"rank {r}": [tokens_per_s + r] * 6 for r in range(4)}, ref, "small|nccl|bf16|H100",
                                  warmup=2)
    out += judge.judge_activity({f"GPU{g}": [80.0, 81.0, 82.0] for g in range(4)} if gpus else {}, "dcgm_sm_active",
                                70.0, 5.0)
    out.append(judge.judge_checkpoints([{"bytes": 100e6, "seconds": 0.5}]))
    return out


def nccl_findings() -> list[Finding]:
    return [Finding("burnin.nccl", Status.PASS, "all_reduce across gpu[01-04]: busbw 180.0 GB/s within reference "
                    "170-220 GB/s", "all_reduce@gpu[01-04]", {"busbw_gbps": 180.0, "efficiency_pct": 90.0}),
            Finding("burnin.nccl", Status.PASS, "all_to_all across gpu[01-04]: busbw 150.0 GB/s within reference "
                    "140-200 GB/s", "all_to_all@gpu[01-04]", {"busbw_gbps": 150.0, "efficiency_pct": 75.0}),
            Finding("burnin.nccl", Status.PASS, "all_reduce on the node: busbw 400.0 GB/s", "all_reduce@node",
                    {"busbw_gbps": 400.0})]


def history(train: str | None) -> list[dict]:
    """Every node passes a prolog every day; ``train``: "pass", "fail" (throughput below the floor) or None."""
    recs = [_record(f"p-{n}-{d}", n, SINCE + timedelta(days=d, minutes=5), "prolog",
                    [Finding("gpu.count", Status.PASS, "4 GPUs")], None) for n in NODES for d in range(7)]
    at = NOW - timedelta(hours=6)
    if train is None:
        recs.append(_record("job-1", "gpu01", at, "burnin-job", nccl_findings(), "4711"))
    else:
        # an older passing run: never the one shown
        recs.append(_record("job-0", "gpu01", at - timedelta(days=2), "burnin-job", train_findings(19000.0), "4700"))
        recs.append(_record("job-1", "gpu01", at, "burnin-job",
                            nccl_findings() + train_findings(19000.0 if train == "pass" else 12000.0), "4711"))
    return recs


def reports(tmp_path, recs):
    from healthcheck.history import migrations
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.ingest import ingest
    from healthcheck.history.queries import load_frames
    from healthcheck.report.build import build_report
    from healthcheck.report.dbsummary import load_summary
    from healthcheck.report.summary import summarize_frames

    tmp_path.mkdir(parents=True, exist_ok=True)
    eng = make_engine(resolve_url(f"sqlite:///{tmp_path / 'h.sqlite'}", env={}))
    try:
        migrations.require_current(eng, create=True)
        assert ingest([write_spool(tmp_path / "spool", recs)], eng).skipped == []
        db = build_report(load_summary(eng, SINCE, NOW), SINCE, NOW)
        mem = build_report(summarize_frames(load_frames(eng, since=SINCE), SINCE, NOW), SINCE, NOW)
    finally:
        eng.dispose()
    assert db.training == mem.training
    return db


def figures(report) -> dict[str, object]:
    return {f.label: f for f in report.training.figures}


def test_a_passing_train_run_is_ready_with_every_figure_and_its_source(tmp_path):
    r = reports(tmp_path, history("pass"))
    t = r.training
    assert t.verdict == "ready" and t.line.startswith("ready:") and "job 4711" in t.line
    f = figures(r)
    assert f["convergence"].verdict == "pass" and "within the band" in f["convergence"].measured
    assert f["checkpoint integrity"].verdict == "pass" and f["checkpoint integrity"].value == 0.0
    assert f["checkpoint integrity"].threshold == "resume deviation < 0.1 %"
    assert f["recovery time"].value == 7.7 and f["recovery time"].verdict == "recorded"
    thr = f["throughput"]
    assert thr.verdict == "pass" and thr.value == 19000.0 and "rank 0" in thr.measured and "floor 18,000 tokens/s" in \
        thr.threshold
    assert thr.measured.startswith("19,000 tokens/s per GPU, 95 % of the reference (≥ 90 %)")
    assert thr.threshold.startswith("≥ 90 % of the reference 20,000 tokens/s")
    sm = f["SM activity"]
    assert sm.verdict == "pass" and sm.value == 82.0 and "DCGM" in sm.measured and "spread 0.0" in sm.measured
    assert f["checkpoint write throughput"].value == 200.0 and f["checkpoint write throughput"].threshold == ""
    coll = {k: v for k, v in f.items() if k.startswith("collective")}
    assert set(coll) == {"collective efficiency: all_reduce", "collective efficiency: all_to_all"}  # not @node
    assert coll["collective efficiency: all_to_all"].value == 75.0
    mttf = f["mean time to first failure (cluster)"]
    assert mttf.verdict == "pass" and mttf.threshold == "> 24 h" and mttf.value > 24
    for label in ("convergence", "throughput", "SM activity"):
        assert f[label].job_id == "4711" and f[label].at == _iso(NOW - timedelta(hours=6))  # the latest run


def test_a_run_below_its_throughput_floor_blocks(tmp_path):
    r = reports(tmp_path, history("fail"))
    t = r.training
    assert t.verdict == "blocked" and t.line.startswith("blocked: throughput failed") and "job 4711" in t.line
    assert figures(r)["throughput"].verdict == "fail" and figures(r)["throughput"].value == 12000.0
    assert figures(r)["throughput"].measured.startswith("12,000 tokens/s per GPU, 60 % of the reference (≥ 90 %)")
    assert figures(r)["convergence"].verdict == "pass"


def test_no_train_run_is_not_measured_never_ready(tmp_path):
    r = reports(tmp_path, history(None))
    t = r.training
    assert t.verdict == "not measured" and not t.line.startswith("ready") and "not measured" in t.line
    assert figures(r)["collective efficiency: all_reduce"].verdict == "pass"  # the burn-in's nccl still shown
    assert "throughput" not in figures(r)


def test_a_cluster_failing_within_a_day_fails_the_mttf(tmp_path):
    recs = history("pass")
    for rec in recs:  # every node fails its first prolog of the second day
        if rec["run_id"].startswith("p-") and rec["run_id"].endswith("-1"):
            rec["status"] = "fail"
            rec["results"][0]["status"] = "fail"
    r = reports(tmp_path, recs)
    mttf = figures(r)["mean time to first failure (cluster)"]
    assert mttf.verdict == "fail" and mttf.value == pytest.approx(24 / 4, abs=0.01)
    assert r.training.verdict == "blocked" and "mean time to first failure" in r.training.line


def test_the_section_in_html_markdown_and_json(tmp_path):
    from healthcheck.report.html import render_html
    from healthcheck.report.markdown import render_markdown
    from healthcheck.report.training import SCHEMA_VERSION

    r = reports(tmp_path, history("fail"))
    page = render_html(r)
    assert 'href="#training"' in page and "<script" not in page
    section = page[page.index('<h2 id="training">'):page.index('<footer')]
    assert "blocked: throughput failed" in section and "12,000 tokens/s per GPU, 60 % of the reference (≥ 90 %)" \
        in section
    assert "all_to_all" in section and "&gt; 24 h" in section and "no loss-curve plot" not in section
    assert section.count("<svg") == 1 and section.count("<circle") == 5  # the 5-step curve, every point
    md = render_markdown(r)
    part = md[md.index("## Training readiness"):]
    assert "**blocked: throughput failed" in part and "| throughput |" in part and "| fail |" in part
    assert "| 12,000 tokens/s per GPU, 60 % of the reference (≥ 90 %)" in part
    assert "| checkpoint write throughput | 200 MB/s" in part and "recorded (no threshold)" in part
    assert "1: 4.01/4, 2: 3.02/3, 3: 2.49/2.5, 4: 2.21/2.2, 5: 2/2" in part and "no per-step loss" not in part
    from healthcheck.report.jsonout import render_json

    whole = json.loads(render_json(r))
    data = whole["training"]
    assert whole["schema_version"] == 1  # a new key: the report's contract version stays
    assert data["schema_version"] == SCHEMA_VERSION == 1 and data["verdict"] == "blocked"
    assert data["curve"]["steps"] == [1, 2, 3, 4, 5] and data["curve"]["loss"] == [4.01, 3.02, 2.49, 2.21, 2.0]
    assert data["curve"]["reference"] == list(REF.loss) and data["curve"]["status"] == "pass"
    assert data["curve"]["band"] == [0.08, 0.06, 0.05, 0.044, 0.04] and data["curve"]["first_bad_step"] is None
    assert data["curve_note"].startswith("loss curve (job 4711; 5 of 5 steps recorded")
    thr = next(f for f in data["figures"] if f["key"] == "throughput")
    assert thr["verdict"] == "fail" and thr["job_id"] == "4711" and thr["value"] == 12000.0
    assert thr["measured"].startswith("12,000 tokens/s per GPU, 60 % of the reference (≥ 90 %)")


def test_no_run_renders_not_measured(tmp_path):
    from healthcheck.report.html import render_html
    from healthcheck.report.markdown import render_markdown

    r = reports(tmp_path, history(None))
    page = render_html(r, plots=False)
    section = page[page.index('<h2 id="training">'):page.index('<footer')]
    assert "not measured: no training smoke test" in section and "ready:" not in section
    md = render_markdown(r)
    assert "**not measured: no training smoke test" in md[md.index("## Training readiness"):]
    assert r.to_dict()["training"]["verdict"] == "not measured"


def test_a_figure_not_judged_is_not_ready_and_an_error_blocks(tmp_path):
    recs = history(None)
    at = NOW - timedelta(hours=3)
    recs.append(_record("job-2", "gpu01", at, "burnin-job", train_findings(19000.0, gpus=False), "4712"))
    r = reports(tmp_path / "cpu", recs)
    assert figures(r)["SM activity"].verdict == "skip" and "not sampled" in figures(r)["SM activity"].measured
    assert r.training.verdict == "incomplete" and r.training.line.startswith("not ready yet") and \
        "SM activity" in r.training.line
    recs.append(_record("job-3", "gpu01", at + timedelta(hours=1), "burnin-job",
                        [Finding("burnin.train", Status.ERROR, "the uninterrupted run did not complete (exit [1])")],
                        "4713"))
    r = reports(tmp_path / "err", recs)
    assert r.training.verdict == "blocked" and "training smoke test" in r.training.line and "job 4713" in \
        r.training.line


def test_a_long_failing_curve_round_trips_through_the_history_into_every_output(tmp_path):
    """100 steps leaving the band at step 57: the judge's downsampled metrics go through the real ingest
    into SQLite, and come back as the plotted points, the Markdown sentence and the JSON curve."""
    from healthcheck.report.html import render_html
    from healthcheck.report.jsonout import render_json
    from healthcheck.report.markdown import render_markdown

    ref = Curve("small|nccl|bf16|2-8", tuple(round(4.0 - 0.02 * i, 4) for i in range(100)), "test")
    loss = [x if i < 56 else x + 0.4 for i, x in enumerate(ref.loss)]
    conv = judge.judge_convergence(loss, ref, 0.02, 0.05, "small|nccl|bf16|2-8")
    assert conv.status is Status.FAIL and conv.metrics["first_bad_step"] == 57.0
    findings = [conv] + train_findings(19000.0)[1:]
    recs = history(None) + [_record("job-9", "gpu01", NOW - timedelta(hours=1), "burnin-job", findings, "4799")]
    r = reports(tmp_path, recs)
    t = r.training
    assert t.verdict == "blocked" and "convergence" in t.line and figures(r)["convergence"].value == 57.0
    assert figures(r)["convergence"].threshold == "every step within max(0.05, 2 % of the reference) of the " \
        "reference curve"  # the tolerances the run was judged with
    c = t.curve
    steps = c["steps"]
    assert len(steps) <= judge.CURVE_POINTS and steps[0] == 1 and steps[-1] == 100 and 57 in steps
    assert c["loss"] == [loss[s - 1] for s in steps] and c["reference"] == [ref.loss[s - 1] for s in steps]
    assert c["band"] == [round(max(0.05, 0.02 * ref.loss[s - 1]), 6) for s in steps]
    assert c["first_bad_step"] == 57 and c["status"] == "fail"

    page = render_html(r)
    section = page[page.index('<h2 id="training">'):page.index('<footer')]
    svg = section[section.index("<svg"):section.index("</svg>")]
    dots = re.findall(r'<circle cx="([0-9.]+)" cy="([0-9.]+)" r="2.6" fill="(#[0-9a-f]+)"><title>step (\d+): loss '
                      r'([0-9.]+)', svg)
    assert [int(d[3]) for d in dots] == steps  # every recorded point drawn, in order
    assert [float(d[4]) for d in dots] == pytest.approx([loss[s - 1] for s in steps], abs=1e-4)
    xs = [float(d[0]) for d in dots]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    red = {int(d[3]) for d in dots if d[2] == "#c0392b"}
    assert min(red) == 57 and red == {s for s in steps if s >= 57}  # outside the band from step 57 on
    assert "left the band at step 57" in svg and "stroke-dasharray" in svg and 'fill-opacity="0.25"' in svg
    assert "<script" not in svg and "href" not in svg
    bare = render_html(r, plots=False)  # a page without plots has no curve either, only its sentence's data
    bare_section = bare[bare.index('<h2 id="training">'):bare.index('<footer')]
    assert "<svg" not in bare_section and "left the band at step 57" in bare_section

    md = render_markdown(r)
    part = md[md.index("## Training readiness"):]
    sentence = next(line for line in part.splitlines() if line.startswith("loss curve"))
    assert f"{len(steps)} of 100 steps recorded" in sentence and "left the band at step 57" in sentence
    assert f"57: {loss[56]:g}/{ref.loss[56]:g}" in sentence and "1: 4/4" in sentence
    assert "band ±max\\(0.05, 2 % of the reference\\)" in sentence

    data = json.loads(render_json(r))["training"]
    assert data["curve"]["steps"] == steps and data["curve"]["first_bad_step"] == 57
    assert data["curve"]["loss"] == pytest.approx([loss[s - 1] for s in steps])


def test_a_run_recorded_before_the_curve_and_the_reference_metrics_still_renders(tmp_path):
    """The rows of the train phase as first released: no loss@ metrics, throughput with tokens_per_s only
    (the floor in its message): no curve (said so), the floor read back from the message."""
    from healthcheck.report.html import render_html
    from healthcheck.report.markdown import render_markdown
    from healthcheck.report.training import CURVE_NOTE

    old = [Finding(judge.CONVERGENCE, Status.PASS, "5 steps within the reference band (small|nccl|bf16|2-8; at most "
                   "33 % of the band used)", None, {"final_loss": 2.0, "band_used": 0.3333}),
           Finding(judge.RESUME, Status.PASS, "resumed from the checkpoint of step 3 and matched the uninterrupted "
                   "run within 0 % (limit 0.1 %), recovered in 7.7 s", None,
                   {"recovery_s": 7.7, "restart_step": 3.0, "deviation_rel": 0.0})]
    old += [Finding(judge.THROUGHPUT, Status.PASS, f"{19000 + r:.4g} tokens/s (floor 1.8e+04, small|nccl|bf16|H100)",
                    f"rank {r}", {"tokens_per_s": 19000.0 + r}) for r in range(4)]
    recs = history(None) + [_record("job-5", "gpu01", NOW - timedelta(hours=1), "burnin-job", old, "4750")]
    r = reports(tmp_path, recs)
    t = r.training
    assert t.curve is None and t.curve_note == CURVE_NOTE
    thr = figures(r)["throughput"]
    assert thr.verdict == "pass" and thr.value == 19000.0 and "% of the reference (" not in thr.measured
    assert thr.measured.startswith("19,000 tokens/s per GPU") and "floor 18,000 tokens/s" in thr.threshold
    assert figures(r)["convergence"].threshold == "every step within max(0.02, 2 % of the reference) of the " \
        "reference curve"
    page = render_html(r)
    section = page[page.index('<h2 id="training">'):page.index('<footer')]
    assert "<svg" not in section and "no loss-curve plot" in section
    md = render_markdown(r)
    assert "no per-step loss for this run" in md[md.index("## Training readiness"):]
    assert r.to_dict()["training"]["curve"] is None


def test_a_run_without_a_reference_curve_plots_its_own_curve(tmp_path):
    from healthcheck.report.html import render_html

    conv = judge.judge_convergence([4.0, 3.5, 3.1], None, 0.02, 0.02, "tiny|gloo|fp32|9-64")
    recs = history(None) + [_record("job-6", "gpu01", NOW - timedelta(hours=1), "burnin-job",
                                    [conv] + train_findings(19000.0)[1:], "4760")]
    r = reports(tmp_path, recs)
    c = r.training.curve
    assert c["steps"] == [1, 2, 3] and c["loss"] == [4.0, 3.5, 3.1] and c["reference"] == [None] * 3
    assert c["band"] == [None] * 3 and c["status"] == "skip"
    assert r.training.curve_note.endswith("no reference curve for this configuration")
    section = render_html(r)
    section = section[section.index('<h2 id="training">'):]
    svg = section[section.index("<svg"):section.index("</svg>")]
    assert svg.count("<circle") == 3 and "stroke-dasharray" not in svg  # no reference line, no band
