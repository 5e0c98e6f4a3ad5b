"""perfquery / ibqueryerrors parsers: real corpus outputs (skip when absent), own fixtures for the
saturated plain counters, failed queries and ibqueryerrors' documented format, bounds and fuzz."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.parsers import ParseError
from healthcheck.parsers.perfquery import parse_counters, parse_ibqueryerrors, parse_perfquery
from tests.conftest import CORPUS, FIXTURES, corpus_params

PERF = FIXTURES / "fabric" / "perf"


def _corpus(rel: str) -> str:
    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus file {rel} absent")
    return path.read_text()


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("perfquery") + corpus_params("infiniband", "perfquery-*"))
def test_every_corpus_perfquery_parses_with_counters(path: Path):
    result = parse_perfquery(path.read_text())
    assert result.blocks and not result.errors
    assert all(block.counters and block.port is not None for block in result.blocks)


@pytest.mark.corpus
def test_corpus_extended_switch_port_with_discards():
    result = parse_perfquery(_corpus("perfquery/infiniband_exporter__perfquery-x-edr-switch-port-xmitdiscards.txt"))
    (block,) = result.blocks
    assert (block.kind, block.lid, block.port, block.capmask) == ("extended", 2052, 1, "0x5300")
    assert block.counters["PortXmitDiscards"] == 20046
    assert block.counters["LinkDownedCounter"] == 1
    assert block.counters["PortRcvSwitchRelayErrors"] == 7
    assert block.counters["PortXmitData"] == 178791657177235  # 64-bit value kept whole
    assert "PortSelect" not in block.counters and "CounterSelect2" not in block.counters


@pytest.mark.corpus
def test_corpus_two_port_blocks_are_two_ports():
    result = parse_perfquery(_corpus("perfquery/infiniband_exporter__perfquery-x-edr-switch-2ports-clean.txt"))
    assert [(b.lid, b.port) for b in result.blocks] == [(1719, 1), (1719, 2)]
    assert result.merged()[(1719, 2)]["PortXmitWait"] == 36510964


@pytest.mark.corpus
def test_corpus_rcv_error_details_and_plain_counters():
    details = parse_perfquery(_corpus("perfquery/infiniband_exporter__perfquery-E-rcverrordetails-edr-switch.txt"))
    assert details.blocks[0].kind == "rcv_error_details"
    assert set(details.blocks[0].counters) >= {"PortLocalPhysicalErrors", "PortMalformedPktErrors"}
    plain = parse_perfquery(_corpus("infiniband/perfquery-homelab-port-counters-clean.txt"))
    assert plain.blocks[0].kind == "basic" and plain.blocks[0].counters["PortXmitWait"] == 441
    assert plain.saturated() == {}


def test_saturated_plain_counters_are_reported():
    result = parse_perfquery((PERF / "perfquery-basic-symbol-saturated.txt").read_text())
    assert sorted(result.saturated()[(134, 1)]) == ["LinkErrorRecoveryCounter", "PortXmitData", "SymbolErrorCounter"]
    assert result.to_dict()["saturated"][0]["lid"] == 134


def test_failed_query_is_a_result_with_its_error_lines():
    result = parse_perfquery((PERF / "perfquery-ibwarn-failed.txt").read_text())
    assert not result.blocks
    assert any("_do_madrpc failed" in e for e in result.errors)


@pytest.mark.parametrize("text, match", [
    ("hello\nworld\n", "not a perfquery output"),
    ("# Port counters: no lid here\n", "without 'Lid N port M'"),
    ("# Port counters: Lid 1 port 1\nSymbolErrorCounter:....12x\n", "not a counter value"),
    ("# Port counters: Lid 1 port 1\nSymbolErrorCounter:....%d\n" % (1 << 64), "outside"),
])
def test_perfquery_bad_input_is_a_parse_error(text, match):
    with pytest.raises(ParseError, match=match):
        parse_perfquery(text)


def test_ibqueryerrors_ports_counters_and_far_ends():
    result = parse_ibqueryerrors((PERF / "ibqueryerrors-details-two-bad-ports.txt").read_text())
    leaf, host = result.ports
    assert (leaf.node_desc, leaf.node_guid, leaf.port) == ("leaf03", "7cfe9003009ce5b0", 17)
    assert leaf.counters == {"SymbolErrorCounter": 1843, "LinkErrorRecoveryCounter": 3, "PortXmitWait": 41864608}
    assert (leaf.link.width, leaf.link.speed, leaf.link.state) == ("4X", "53.125 Gbps", "Active/LinkUp")
    assert (leaf.link.remote_desc, leaf.link.remote_port, leaf.link.remote_lid) == ("gpu03 mlx5_1", 1, 134)
    assert (host.node_desc, host.node_guid, host.counters["LinkDownedCounter"]) == ("gpu05 mlx5_0", None, 2)
    assert host.link.state == "Down/Polling" and host.link.remote_port is None
    assert (result.nodes_checked, result.bad_nodes, result.ports_checked, result.bad_ports) == (14, 2, 36, 2)


def test_ibqueryerrors_clean_fabric_and_detection():
    clean = parse_counters((PERF / "ibqueryerrors-clean.txt").read_text())
    assert clean.ports == [] and clean.ports_checked == 36 and clean.bad_ports == 0
    assert parse_counters((PERF / "perfquery-basic-symbol-saturated.txt").read_text()).blocks
    with pytest.raises(ParseError, match="not an ibqueryerrors output"):
        parse_ibqueryerrors("nothing to see\n")
    with pytest.raises(ParseError, match="before any 'Errors for'"):
        parse_ibqueryerrors("   GUID 0x1 port 1: [SymbolErrorCounter == 1]\n")


@pytest.mark.parametrize("parse", [parse_perfquery, parse_ibqueryerrors, parse_counters])
def test_oversized_and_non_text_inputs_are_refused(parse):
    with pytest.raises(ParseError):
        parse(None)  # type: ignore[arg-type]
    with pytest.raises(ParseError, match="over the limit"):
        parse("a" * (33 * 1024 * 1024))


@pytest.mark.parametrize("parse", [parse_perfquery, parse_ibqueryerrors])
@pytest.mark.parametrize("line", ["# Port counters: Lid 1 port 1 " + "Lid " * 20000,
                                  "Errors for \"" + "x" * 60000, "   GUID 0x1 port 1:" + " [A == 1" * 8000,
                                  "       Link info: 1 1[" + " " * 60000])
def test_adversarial_lines_end_quickly(parse, line):
    start = time.perf_counter()
    try:
        parse((line + "\n") * 100)
    except ParseError:
        pass
    assert time.perf_counter() - start < 10.0  # linear parsers take well under a second


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=2000), st.sampled_from(sorted(PERF.glob("*.txt"))))
def test_fuzz_only_results_or_parse_errors(junk, seed_path):
    text = seed_path.read_text()
    cut = len(junk) % (len(text) + 1)
    for parse in (parse_perfquery, parse_ibqueryerrors, parse_counters):
        try:
            parse(text[:cut] + junk + text[cut:])
        except ParseError:
            pass
