"""DCGM diag and fio results, parsed from real-format outputs, judged into findings."""
from __future__ import annotations

import pytest

from healthcheck.burnin.judge_tools import judge_dcgm, judge_storage
from healthcheck.policies.references import Reference
from healthcheck.burnin.tools_run import ToolRun, dcgm_diag, fio_job
from healthcheck.core.model import Status
from healthcheck.parsers import dcgmi, fio
from tests.conftest import CORPUS, FIXTURES, corpus_params

RAN = ToolRun("dcgmi", ["dcgmi"], returncode=0)


def judged(text: str):
    return judge_dcgm(RAN, dcgmi.parse_diag(text), None)


@pytest.mark.parametrize("path", corpus_params("dcgmi", "diag-*"))
def test_corpus_diag_outputs_are_judged_as_dcgm_said(path):
    diag = dcgmi.parse_diag(path.read_text())
    findings = judge_dcgm(RAN, diag, None)
    statuses = {f.status for f in findings}
    expect = {"pass": {Status.PASS}, "fail": {Status.FAIL}, "skip": {Status.WARN}, "warn": {Status.WARN}}
    if diag.overall == "fail":
        assert Status.FAIL in statuses or Status.ERROR in statuses
    else:
        assert statuses <= expect[diag.overall] | {Status.WARN}, (path.name, findings)


def test_gpu_memory_failure_names_the_gpu():
    path = CORPUS / "dcgmi" / "diag-r2-fragment-gpu-memory-fail-gpu0-thermal-violation-warning.txt"
    if not path.is_file():
        pytest.skip("corpus absent")
    fails = [f for f in judged(path.read_text()) if f.status is Status.FAIL]
    assert any(f.component == "gpu0" and "failed on gpu0" in f.message for f in fails), fails


def test_all_skipped_diag_warns_that_it_tested_nothing():
    diag = dcgmi.DcgmDiag(tests=[dcgmi.DcgmTest("Deployment", "NVML Library", "pass", {}, []),
                                 dcgmi.DcgmTest("Hardware", "GPU Memory", "skip", {}, []),
                                 dcgmi.DcgmTest("Stress", "Targeted Stress", "skip", {}, [])],
                          metadata={}, errors=[], runs=1)
    assert diag.overall == "skip"
    (f,) = judge_dcgm(RAN, diag, None)
    assert f.status is Status.WARN and "tested nothing" in f.message


def test_dcgmi_absent_skips_and_a_broken_run_is_an_error():
    missing = ToolRun("dcgmi", ["dcgmi"], missing=True, error="dcgmi: not found")
    assert [f.status for f in judge_dcgm(missing, None, None)] == [Status.SKIP]
    broken = ToolRun("dcgmi", ["dcgmi"], returncode=255, stderr="Error: unable to establish a connection to the "
                     "specified host: localhost\n")
    (f,) = judge_dcgm(broken, None, None)
    assert f.status is Status.ERROR and "unable to establish a connection" in f.message


def test_real_tool_runs_report_absence(tmp_path):
    assert dcgm_diag("/nonexistent/dcgmi", 1, 5).missing
    assert fio_job("/nonexistent/fio", str(tmp_path), "read", 1 << 20, 1, 5).missing
    assert fio_job("fio", str(tmp_path / "nope"), "read", 1 << 20, 1, 5).error.endswith("is not a directory")


def _fio(name: str):
    return fio.parse((FIXTURES / "fio" / name).read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "fio").glob("*.json")))
def test_fio_fixtures_judged_against_a_reference(name):
    result = _fio(name)
    run = ToolRun("fio", ["fio"], returncode=0)
    rw = "read" if any(j.read_bw_bytes for j in result.jobs) else "write"
    f = judge_storage("/scratch", rw, run, result, None, Reference(1.0, "GB/s", -0.5, 100.0))
    if result.errors or any(j.error for j in result.jobs):
        assert f.status is Status.FAIL and "failed" in f.message
    else:
        gbps = f.metrics["bandwidth_gbps"]
        assert gbps > 0 and f.status is (Status.FAIL if gbps < 0.5 else Status.PASS)
        none = judge_storage("/scratch", rw, run, result, None, None)
        assert none.status is Status.PASS and "no storage reference" in none.message
        low = judge_storage("/scratch", rw, run, result, None, Reference(gbps * 4, "GB/s", -0.5))
        assert low.status is Status.FAIL and "below reference" in low.message


def test_tool_output_is_parsed_once_with_the_parsers_own_error():
    from healthcheck.burnin.tools_run import parsed

    assert parsed(ToolRun("fio", ["fio"], missing=True), fio.parse, fio.FioParseError) == (None, None)
    assert parsed(ToolRun("fio", ["fio"], stdout="  \n"), fio.parse, fio.FioParseError) == (None, None)
    result, problem = parsed(ToolRun("fio", ["fio"], stdout="hello\n"), fio.parse, fio.FioParseError)
    assert result is None and problem
    text = next((FIXTURES / "fio").glob("*.json")).read_text()
    result, problem = parsed(ToolRun("fio", ["fio"], stdout=text), fio.parse, fio.FioParseError)
    assert problem is None and result.jobs
