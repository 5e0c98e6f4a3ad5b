"""perftest parser and the parse commands: real corpus outputs (skip when absent), own fixtures for
failed runs (a clean result with a reason, never an exception), units, bounds, fuzz, the CLI."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.cli.fabric_counters import parse_ibqueryerrors, parse_perfquery, parse_perftest
from healthcheck.parsers import ParseError
from healthcheck.parsers.perftest import MB_PER_SEC_TO_GBPS, parse_perftest as parse
from tests.conftest import CORPUS, FIXTURES, corpus_params

PERF = FIXTURES / "fabric" / "perf"


def _corpus(rel: str):
    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus file {rel} absent")
    return parse(path.read_text())


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("perftest") + corpus_params("burn-bandwidth", "ib_*"))
def test_every_corpus_perftest_output_parses_ok(path: Path):
    result = parse(path.read_text())
    assert result.ok and result.rows and result.error is None
    assert result.kind in ("bw", "lat") and result.device


@pytest.mark.corpus
def test_corpus_bidirectional_report_gbits_client_and_server():
    client = _corpus("perftest/amd-alibaba__ib_write_bw-bidir-client-ionic-roce-report_gbits.txt")
    server = _corpus("perftest/amd-alibaba__ib_write_bw-bidir-server-ionic-roce-report_gbits.txt")
    assert client.bidirectional and client.unit == "Gb/sec" and client.verb == "write"
    assert len(client.rows) == 23 and client.bw_avg_gbps() == pytest.approx(779.21)
    assert client.settings["number_of_qps"] == "4" and client.device == "ionic_1"
    assert server.server and not client.server and server.device == "ionic_7"
    assert server.bw_avg_gbps() == pytest.approx(779.21)


@pytest.mark.corpus
def test_corpus_mb_per_sec_is_converted_with_perftests_binary_megabyte():
    result = _corpus("burn-bandwidth/ib_write_bw-roce-rdmacm-cpufreq-warning.txt")
    assert result.unit == "MB/sec" and result.rows[0]["bw_avg"] == pytest.approx(11024.71)
    assert result.bw_avg_gbps() == pytest.approx(11024.71 * MB_PER_SEC_TO_GBPS)
    assert any("Conflicting CPU frequency" in w for w in result.warnings)  # interleaved in the table


@pytest.mark.corpus
def test_corpus_latency_table_with_interleaved_warnings():
    result = _corpus("burn-bandwidth/ib_write_lat-roce-rdmacm-cpufreq-warning.txt")
    assert result.kind == "lat" and len(result.rows) == 1 and len(result.warnings) == 2
    assert result.latency_us() == pytest.approx(1.58) and result.rows[0]["p99_9_us"] == pytest.approx(2.13)
    assert result.bw_avg_gbps() is None


@pytest.mark.corpus
def test_corpus_send_bw_ud_with_tab_columns():
    result = _corpus("burn-bandwidth/ib_send_bw-ud-cx5-client.txt")
    assert result.verb == "send" and result.settings["connection_type"] == "UD" and len(result.rows) == 12
    assert result.rows[-1]["bytes"] == 4096


@pytest.mark.parametrize("name, reason", [
    ("ib_write_bw-client-failed-rtr.txt", "Failed to modify QP 420 to RTR"),
    ("ib_write_bw-client-couldnt-connect.txt", "Couldn't connect to gpu02:18515"),
    ("ib_read_bw-server-socket-init.txt", "Unable to init the socket connection"),
    ("ib_write_bw-client-killed-mid-table.txt", "did not finish"),
    ("ib_read_bw-client-mbs-completion-error.txt", "Completion with error at client"),
])
def test_failed_runs_are_results_with_a_reason(name, reason):
    result = parse((PERF / name).read_text())
    assert not result.ok and reason in result.error


def test_completion_error_keeps_the_rows_read_before_it():
    result = parse((PERF / "ib_read_bw-client-mbs-completion-error.txt").read_text())
    assert [r["bytes"] for r in result.rows] == [65536, 131072] and result.verb == "read"
    assert result.bw_avg_gbps() == pytest.approx(23090.55 * MB_PER_SEC_TO_GBPS)


def test_unrelated_text_is_a_result_saying_so_and_non_text_a_parse_error():
    assert parse("hello world\n").error.startswith("no perftest output")
    with pytest.raises(ParseError):
        parse(12)  # type: ignore[arg-type]
    with pytest.raises(ParseError, match="over the limit"):
        parse("x" * (9 * 1024 * 1024))


@pytest.mark.parametrize("line", [" #bytes " + "1 " * 30000, "a : " * 15000, "RDMA_Write " + "x " * 30000,
                                  "Couldn't " * 8000, "-" * 60000])
def test_adversarial_lines_end_quickly(line):
    start = time.perf_counter()
    parse(("                    RDMA_Write BW Test\n" + line + "\n") * 60)
    assert time.perf_counter() - start < 10.0


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=2000), st.sampled_from(sorted(PERF.glob("ib_*.txt"))))
def test_fuzz_never_raises_and_is_json_serialisable(junk, seed_path):
    text = seed_path.read_text()
    cut = len(junk) % (len(text) + 1)
    result = parse(text[:cut] + junk + text[cut:])
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.ok or result.error


# ------------------------------------------------------------------------------------------ the commands

def test_cli_perftest_json_and_exit_status():
    runner = CliRunner()
    ok = PERF / "ib_read_bw-client-mbs-completion-error.txt"
    res = runner.invoke(parse_perftest, [str(ok), "--format", "json"])
    assert res.exit_code == 1 and json.loads(res.output)["error"] == "Completion with error at client"
    res = runner.invoke(parse_perftest, [str(PERF / "ib_write_bw-client-failed-rtr.txt")])
    assert res.exit_code == 1 and "error: Failed to modify QP 420 to RTR" in res.output
    res = runner.invoke(parse_perftest, [str(PERF / "missing.txt")])
    assert res.exit_code == 2 and "No such file" in res.output


@pytest.mark.corpus
def test_cli_perftest_on_the_corpus():
    path = CORPUS / "burn-bandwidth" / "ib_write_lat-roce-rdmacm-cpufreq-warning.txt"
    if not path.is_file():
        pytest.skip("corpus absent")
    res = CliRunner().invoke(parse_perftest, [str(path)])
    assert res.exit_code == 0 and "1.58 us typical at 2 B" in res.output


def test_cli_perfquery_and_ibqueryerrors(tmp_path):
    runner = CliRunner()
    res = runner.invoke(parse_perfquery, [str(PERF / "perfquery-basic-symbol-saturated.txt")])
    assert res.exit_code == 0 and "SymbolErrorCounter 65535" in res.output and "at their maximum" in res.output
    assert "PortXmitData" not in res.output.split("\n")[0]  # traffic is not shown as an error
    res = runner.invoke(parse_perfquery, [str(PERF / "perfquery-basic-symbol-saturated.txt"), "--format", "json"])
    assert json.loads(res.output)["blocks"][0]["counters"]["LinkDownedCounter"] == 3
    res = runner.invoke(parse_ibqueryerrors, [str(PERF / "ibqueryerrors-details-two-bad-ports.txt")])
    assert res.exit_code == 0 and "leaf03 port 17 -> gpu03 mlx5_1 port 1" in res.output
    garbage = tmp_path / "g.txt"
    garbage.write_text("not a tool output\n")
    res = runner.invoke(parse_perfquery, [str(garbage)])
    assert res.exit_code == 2 and "not a perfquery output" in res.output
    res = runner.invoke(parse_perfquery, ["--help"])
    assert res.exit_code == 0 and "Example" in res.output
