"""fio JSON parser: own fixtures (seq read, rand write json+normal, EIO job), older/other layouts, fuzz."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.parsers import ParseError
from healthcheck.parsers.fio import FioJob, FioParseError, FioResult, parse
from tests.conftest import FIXTURES
from tests.fuzzing import mutated as fuzz_mutated

FIX = FIXTURES / "fio"


def _fixture(name: str) -> FioResult:
    return parse((FIX / name).read_text())


def _serialisable(result: FioResult) -> dict:
    data = result.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    return data


def _doc(*jobs: dict, version: str = "fio-3.35") -> str:
    return json.dumps({"fio version": version, "jobs": list(jobs)}, indent=2)


def _dir(io_bytes: int, **fields) -> dict:
    return {"io_bytes": io_bytes, **fields}


# ---------------------------------------------------------------------------------- own fixtures


def test_fixture_sequential_read():
    result = _fixture("fio-3.36-seqread-1m-qd32-nvme.json")
    assert (result.version, result.errors) == ("fio-3.36", [])
    (job,) = result.jobs
    assert (job.name, job.error, job.runtime_ms) == ("seqread", 0, 30000.0)
    assert job.read_bw_bytes == 6811742068.0
    assert job.read_iops == pytest.approx(6496.18346)
    assert job.read_clat_p99_us == pytest.approx(6586.368)  # 6586368 ns
    assert (job.write_bw_bytes, job.write_iops, job.write_clat_p99_us) == (None, None, None)


def test_fixture_random_write_with_banner_and_normal_report():
    result = _fixture("fio-3.28-randwrite-4k-qd16-json-normal.txt")
    assert (result.version, result.errors) == ("fio-3.28", [])
    (job,) = result.jobs
    assert (job.name, job.error) == ("randwrite-4k", 0)
    assert job.write_bw_bytes == 776500691.0
    assert job.write_iops == pytest.approx(189575.364155)
    assert job.write_clat_p99_us == pytest.approx(197.632)
    assert (job.read_bw_bytes, job.read_iops, job.read_clat_p99_us) == (None, None, None)
    assert job.runtime_ms == 60000.0


def test_fixture_job_with_eio_error():
    result = _fixture("fio-3.33-randread-4k-eio-error.txt")
    (job,) = result.jobs
    assert (job.name, job.error, job.runtime_ms) == ("randread-eio", 5, 2212.0)
    assert job.read_iops == pytest.approx(23707.37223)
    assert job.read_clat_p99_us == pytest.approx(248.832)
    assert len(result.errors) == 4
    assert result.errors[0].startswith("fio: io_u error on file /dev/nvme3n1: Input/output error")
    assert result.errors[-1] == "job 'randread-eio': error 5 (EIO)"


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("fio-*")))
def test_every_fixture_round_trips_to_json(name):
    data = _serialisable(_fixture(name))
    assert set(data) == {"version", "jobs", "errors"}
    assert all(set(job) == set(FioJob.__dataclass_fields__) for job in data["jobs"])


# ------------------------------------------------------------------------------------- variants


def test_fio2_fields_bw_in_kib_and_clat_in_usec():
    job = {"jobname": "old", "error": 0,
           "read": _dir(4096000, bw=40000, iops=10000.0, runtime=100,
                        clat={"percentile": {"50.000000": 80, "99.000000": 250}}),
           "write": _dir(0, bw=0, iops=0.0, runtime=0)}
    (parsed,) = parse(_doc(job, version="fio-2.2.10")).jobs
    assert (parsed.read_bw_bytes, parsed.read_iops, parsed.read_clat_p99_us) == (40000 * 1024.0, 10000.0, 250.0)
    assert parsed.runtime_ms == 100.0  # no job_runtime: the longest direction
    assert parsed.write_bw_bytes is None


def test_percentiles_off_and_no_io_at_all():
    job = {"jobname": "nop", "error": 0, "job_runtime": 0,
           "read": _dir(1048576, bw_bytes=1048576, iops=256.0, runtime=1000,
                        clat_ns={"min": 1, "max": 2, "mean": 1.5, "N": 256}),
           "write": {}}
    (parsed,) = parse(_doc(job)).jobs
    assert (parsed.read_bw_bytes, parsed.read_clat_p99_us, parsed.runtime_ms) == (1048576.0, None, 0.0)
    assert (parsed.write_bw_bytes, parsed.write_iops, parsed.write_clat_p99_us) == (None, None, None)


def test_client_stats_and_several_documents():
    one = {"jobname": "c1", "error": 0, "read": _dir(8192, bw_bytes=4096, iops=1.0, runtime=2000)}
    two = {"jobname": "All clients", "error": 28, "read": _dir(8192, bw_bytes=4096, iops=1.0, runtime=2000)}
    text = ("fio: this platform does not support process shared mutexes, forcing use of threads.\n"
            + json.dumps({"fio version": "fio-3.37", "client_stats": [one, two]}) + "\n<node-b> error: x\n"
            + _doc({"jobname": "local", "error": 0}, version="fio-3.36"))
    result = parse(text)
    assert result.version == "fio-3.37"
    assert [(j.name, j.error) for j in result.jobs] == [("c1", 0), ("All clients", 28), ("local", 0)]
    assert result.errors == ["<node-b> error: x", "job 'All clients': error 28 (ENOSPC)"]


def test_non_finite_numbers_become_none():
    text = ('{"fio version": "fio-3.36", "jobs": [{"jobname": "n", "error": 0, "job_runtime": NaN,'
            ' "read": {"io_bytes": 4096, "bw_bytes": Infinity, "iops": NaN, "runtime": 5}}]}')
    (job,) = parse(text).jobs
    assert (job.read_bw_bytes, job.read_iops, job.runtime_ms) == (None, None, 5.0)
    _serialisable(parse(text))


@pytest.mark.parametrize("jobs, where", [
    ("{}", "jobs"), ('[{"jobname": "a", "error": "5"}]', "jobs[0].error"),
    ('[{"jobname": "a", "read": []}]', "jobs[0].read"),
    ('[{"jobname": "a", "read": {"io_bytes": 1, "iops": "fast"}}]', "jobs[0].read.iops"),
    ('[{"jobname": "a", "read": {"io_bytes": 1, "clat_ns": {"percentile": {"99.000000": true}}}}]',
     "percentile.99.000000"),
    ('[7]', "jobs[0]"), ('[{"jobname": {"x": 1}}]', "jobname")])
def test_wrong_types_raise_naming_the_field(jobs, where):
    with pytest.raises(FioParseError, match="fio JSON") as info:
        parse('{"fio version": "fio-3.36", "jobs": %s}' % jobs)
    assert where in str(info.value)


def test_truncated_document_raises():
    text = (FIX / "fio-3.36-seqread-1m-qd32-nvme.json").read_text()
    with pytest.raises(FioParseError, match="cut short"):
        parse(text[: len(text) // 2])


@pytest.mark.parametrize("bad", ["", "  \n", "fio: file hash not empty on exit\n", "{}", "[1]",
                                 '{"name": "x"}', "Run status group 0 (all jobs):\n"])
def test_non_fio_text_raises(bad):
    with pytest.raises(FioParseError):
        parse(bad)


@pytest.mark.parametrize("bad", [None, 3.5, {"jobs": []}])
def test_non_text_raises(bad):
    with pytest.raises(FioParseError, match="must be text"):
        parse(bad)


def test_error_type_and_bytes_input():
    assert issubclass(FioParseError, ParseError) and issubclass(FioParseError, ValueError)
    assert parse(b"\xff\n" + _doc({"jobname": "b"}).encode()).jobs[0].name == "b"


# ------------------------------------------------------------------------------------------- fuzz

SEEDS = [p.read_text() for p in sorted(FIX.glob("fio-*"))]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(text) -> None:
    try:
        result = parse(text)
    except FioParseError:
        return
    assert isinstance(result, FioResult) and all(isinstance(j, FioJob) for j in result.jobs)
    assert all(isinstance(j.error, int) and isinstance(j.name, str) for j in result.jobs)
    _serialisable(result)


@FUZZ
@given(st.text())
def test_fuzz_any_text(text):
    _check(text)


@FUZZ
@given(fuzz_mutated(SEEDS))
def test_fuzz_mutated_fixtures(text):
    _check(text)


@FUZZ
@given(st.lists(st.sampled_from(['{', '}', '[', ']', ',', ':', '"jobs"', '"read"', '"io_bytes"', '"clat_ns"',
                                 '"percentile"', '"99.000000"', '"fio version"', "0", "1e999", "NaN", "null",
                                 '"x"', "\n", "fio: error"]), max_size=60))
def test_fuzz_json_pieces(pieces):
    _check("".join(pieces))
