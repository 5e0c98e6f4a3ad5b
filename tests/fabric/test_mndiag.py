"""dcgmi mndiag (DCGM 4.3+, the multi-node diagnostic of an NVL rack; issue 33, point 5): its JSON and text
outputs parsed, each failed GPU named with its host and DCGM's message, a run that did not complete an
ERROR, and dcgmi's exit 0 never taken for a pass. Fixtures are our own, in the layout of DCGM's dcgmi
source (MnDiag.cpp) and JSON keys (NvvsJsonStrings.h): no public recorded output exists."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from healthcheck.cli.main import cli
from healthcheck.core.model import Status
from healthcheck.fabric.mndiag import judge
from healthcheck.parsers.dcgmi import DcgmiParseError, parse_diag
from healthcheck.parsers.dcgmi_mndiag import MndiagParseError, parse_mndiag
from tests.conftest import FIXTURES

MN = FIXTURES / "dcgmi" / "mndiag"


def _read(name: str) -> str:
    return (MN / name).read_text()


@pytest.mark.parametrize("name", ["mndiag-gb200-2trays-gpu-fail.json", "mndiag-gb200-2trays-gpu-fail.txt"])
def test_the_failed_gpu_is_named_by_host_and_index_in_both_formats(name):
    diag = parse_mndiag(_read(name))
    assert (diag.test, diag.status, diag.overall) == ("MNUBERGEMM", "fail", "fail")
    assert diag.hosts == {0: "gb-r01-t01", 1: "gb-r01-t02"}
    assert len([r for r in diag.results if r.gpu is not None]) == 8
    found = judge(diag)
    assert [(f.status, f.component) for f in found] == [(Status.FAIL, "gb-r01-t02:GPU1")]
    assert "GEMM result mismatch" in found[0].message


def test_a_passing_run_passes_with_its_counts():
    found = judge(parse_mndiag(_read("mndiag-gb200-2trays-pass.json")))
    assert [f.status for f in found] == [Status.PASS]
    assert found[0].metrics == {"hosts": 2, "gpus": 8}


def test_a_run_that_did_not_complete_is_an_error_not_a_pass():
    diag = parse_mndiag(_read("mndiag-runtime-error.txt"))
    assert diag.overall == "fail" and diag.results == []
    found = judge(diag)
    assert [f.status for f in found] == [Status.ERROR] and "Host engine connection" in found[0].message


def test_json_runtime_and_mpi_errors_are_errors():
    doc = {"DCGM Diagnostic": "DCGM Multi-Node Diagnostic", "runtime_error": "mpirun not found"}
    assert [f.status for f in judge(parse_mndiag(json.dumps(doc)))] == [Status.ERROR]
    doc = json.loads(_read("mndiag-gb200-2trays-pass.json"))
    test = doc["test_categories"][0]["tests"][0]
    test["status"] = "Fail"
    test["mpi_error"] = {"warning": "mpirun exited with 1: ssh: connect to host gb-r01-t02 port 22",
                         "error_category": "MPI"}
    found = judge(parse_mndiag(json.dumps(doc)))
    assert Status.ERROR in {f.status for f in found} and any("ssh" in f.message for f in found)


def test_a_host_row_failing_without_gpu_rows_is_named():
    text = _read("mndiag-gb200-2trays-gpu-fail.txt")
    lines = [ln for ln in text.splitlines() if not ln.startswith(("|   GPU", "|                           | Error",
                                                                  "| Host 1 (GPU"))]
    diag = parse_mndiag("\n".join(lines))
    assert [(r.host, r.gpu, r.status) for r in diag.results if r.status == "fail"] == [("gb-r01-t02", None, "fail")]
    found = judge(diag)
    assert [(f.status, f.component) for f in found] == [(Status.FAIL, "gb-r01-t02")]


def test_not_mndiag_output_is_refused_with_a_clear_message():
    with pytest.raises(MndiagParseError, match="not dcgmi mndiag output"):
        parse_mndiag("hello\nworld\n")
    with pytest.raises(MndiagParseError, match="empty"):
        parse_mndiag("  \n")
    single = (FIXTURES / "dcgmi").glob("*.json")
    first = next(iter(sorted(single)), None)
    if first is not None:
        with pytest.raises(MndiagParseError, match="healthcheck parse dcgmi"):
            parse_mndiag(first.read_text())
    with pytest.raises(DcgmiParseError, match="healthcheck fabric mndiag"):
        parse_diag(_read("mndiag-gb200-2trays-pass.json"))
    with pytest.raises(MndiagParseError, match="whole number"):
        parse_mndiag(json.dumps({"DCGM Diagnostic": "DCGM Multi-Node Diagnostic",
                                 "hosts": [{"host_id": "²", "hostname": "x"}]}))


def test_cli_exit_follows_the_output_not_dcgmis_exit():
    runner = CliRunner()
    failed = runner.invoke(cli, ["fabric", "mndiag", str(MN / "mndiag-gb200-2trays-gpu-fail.json")])
    assert failed.exit_code == 1 and "gb-r01-t02:GPU1" in failed.output
    passed = runner.invoke(cli, ["fabric", "mndiag", str(MN / "mndiag-gb200-2trays-pass.json"), "--format", "json"])
    assert passed.exit_code == 0 and json.loads(passed.output)["status"] == "pass"
    bad = runner.invoke(cli, ["fabric", "mndiag", str(MN / "missing.json")])
    assert bad.exit_code == 2
