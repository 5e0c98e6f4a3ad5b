"""The runner: probe failures become findings, checker bugs become ERROR, absent sources SKIP."""
from __future__ import annotations

import json

from healthcheck.checks.registry import CheckSpec, load_all
from healthcheck.config import default_expectations
from healthcheck.core.model import Finding, GpuInfo, ProbeError, Snapshot, Status
from healthcheck.output.render import exit_code, prometheus, render
from healthcheck.pipeline.judge import judge, run_check


def _spec(func, needs=("gpus",), handles_missing=False):
    return CheckSpec("t.check", func, needs, frozenset({"check"}), {"limit": 1}, "test", handles_missing)


def _snap(**kw):
    return Snapshot(node="n1", taken_at="2026-12-01T00:00:00+00:00", **kw)


def test_absent_source_skips_without_calling_the_check():
    called = []
    findings = run_check(_spec(lambda s, e, t: called.append(1) or []), _snap(), default_expectations())
    assert not called
    assert [f.status for f in findings] == [Status.SKIP]
    assert "no NVIDIA GPU data" in findings[0].message


def test_probe_error_becomes_error_and_hang_says_wedged():
    snap = _snap(probe_errors={"gpus": ProbeError("hang", "no answer within 10 s")})
    findings = run_check(_spec(lambda s, e, t: []), snap, default_expectations())
    assert findings[0].status is Status.ERROR
    assert "wedged" in findings[0].message and "10 s" in findings[0].message


def test_checker_crash_is_error_not_exception():
    def broken(s, e, t):
        raise KeyError("oops")
    findings = run_check(_spec(broken), _snap(gpus=[GpuInfo(0)]), default_expectations())
    assert findings[0].status is Status.ERROR and "KeyError" in findings[0].message


def test_thresholds_are_passed_merged():
    seen = {}

    def spy(s, e, t):
        seen.update(t)
        return [Finding("t.check", Status.PASS, "ok")]
    run_check(_spec(spy), _snap(gpus=[]), default_expectations())
    assert seen == {"limit": 1, "_context": "check"}  # the context under the reserved key
    run_check(_spec(spy), _snap(gpus=[]), default_expectations(), "prolog")
    assert seen == {"limit": 1, "_context": "prolog"}


def test_gpu_hang_fails_gpu_responsive_and_errors_other_gpu_checks():
    snap = _snap(gpu_pci_devices=["0000:07:00.0"], probe_errors={"gpus": ProbeError("hang", "no answer")})
    verdict = judge(snap, default_expectations(), only=["gpu.*"])
    by = {f.check: f for f in verdict.findings}
    assert by["gpu.responsive"].status is Status.FAIL
    assert by["gpu.ecc.uncorrected"].status is Status.ERROR
    assert verdict.status is Status.FAIL and exit_code(verdict) == 1


def test_node_without_gpus_skips_every_gpu_check():
    snap = _snap(gpu_pci_devices=[])
    verdict = judge(snap, default_expectations(), only=["gpu.*"])
    assert verdict.findings
    assert {f.status for f in verdict.findings} == {Status.SKIP}
    assert exit_code(verdict) == 0


def test_only_globs_and_every_registered_check_runs_once():
    specs = load_all()
    verdict = judge(_snap(), default_expectations())
    assert {f.check for f in verdict.findings} == set(specs)
    verdict = judge(_snap(), default_expectations(), only=["host.*"])
    assert {f.check for f in verdict.findings} == {n for n in specs if n.startswith("host.")}


def test_renderers_agree_on_content():
    findings = [Finding("gpu.ecc.uncorrected", Status.FAIL, "uncorrected ECC 2", "gpu3", {"volatile": 2}),
                Finding("gpu.temperature", Status.PASS, "ok", "gpu0", {"temperature_c": 41})]
    from healthcheck.core.model import Verdict
    verdict = Verdict.of("gpu017", findings, "2026-12-01T00:00:00+00:00", 0.02)
    data = json.loads(render(verdict, "json"))
    assert data["node"] == "gpu017" and data["status"] == "fail"
    assert set(data) >= {"node", "status", "started_at", "duration_s", "results"}
    assert data["results"][0] == {"check": "gpu.ecc.uncorrected", "status": "fail", "component": "gpu3",
                                  "message": "uncorrected ECC 2", "metrics": {"volatile": 2.0}}
    text = render(verdict, "text")
    assert "FAIL" in text and "gpu3" in text and "uncorrected ECC 2" in text
    prom = prometheus(verdict)
    assert 'healthcheck_check_status{node="gpu017",check="gpu.ecc.uncorrected",component="gpu3",gpu="3"} 2' in prom
    assert 'healthcheck_gpu_temperature_celsius{node="gpu017",component="gpu0",gpu="0"} 41' in prom
    assert 'healthcheck_node_status{node="gpu017",context="check"} 2' in prom


def test_prometheus_escapes_label_values():
    from healthcheck.core.model import Verdict
    verdict = Verdict.of('n"1\n', [Finding("x", Status.PASS, "ok", 'a"b')], "2026-12-01T00:00:00", 0.0)
    prom = prometheus(verdict)
    assert 'node="n\\"1\\n"' in prom and 'component="a\\"b"' in prom
