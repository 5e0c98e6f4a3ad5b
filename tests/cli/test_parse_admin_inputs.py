"""`healthcheck parse` on admin inputs, linear in their size (issue 30): perfquery's text prints each
port and kind of block once whatever number of blocks (samples) of it the input holds (it printed a
port's saturated list again after each of its blocks: 10 MB in, 9.8 GB out); a 5,000-digit number in
perfquery / ibqueryerrors exits 2 naming its line (it was an internal error, exit 3); nccl-tests' text
summary never builds the JSON document (and says what the JSON says). Sizes and behaviour only: the
speed is shown by benchmarks/bench_admin_inputs.py (figures in docs/performance.md)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from healthcheck.core import exitcodes
from healthcheck.cli import cli
from healthcheck.parsers import nccl_tests
from tests.conftest import FIXTURES, corpus_files

PERF = FIXTURES / "fabric" / "perf"
SATURATED = (PERF / "perfquery-basic-symbol-saturated.txt").read_text()
SATURATED_LINES = [
    "lid 134 port 1 (basic, 18 counters): LinkDownedCounter 3, LinkErrorRecoveryCounter 255, PortRcvErrors 12, "
    "SymbolErrorCounter 65535",
    "  at their maximum (growth unknown): SymbolErrorCounter, LinkErrorRecoveryCounter, PortXmitData"]
EXTENDED = ("# Port extended counters: Lid 134 port 1 (CapMask: 0x1600)\nPortSelect:......................1\n"
            "SymbolErrorCounter:..............70001\nLinkErrorRecoveryCounter:........255\n"
            "LinkDownedCounter:...............3\nPortRcvData:.....................2211\n")
BIG = "7" * 5000


def _run(tmp_path: Path, kind: str, text: str, *args: str):
    path = tmp_path / f"{kind}.txt"
    path.write_text(text)
    return CliRunner().invoke(cli, ["parse", kind, str(path), *args]), path


def test_perfquery_text_prints_each_port_once_whatever_its_blocks(tmp_path):
    # Normal inputs print as they always did: one line per block, the saturated list once.
    result, _ = _run(tmp_path, "perfquery", SATURATED)
    assert result.exit_code == 0 and result.output.splitlines() == SATURATED_LINES
    result, _ = _run(tmp_path, "perfquery", SATURATED + EXTENDED)
    assert result.output.splitlines() == [
        SATURATED_LINES[0], "  at their maximum (growth unknown): PortXmitData",
        "lid 134 port 1 (extended, 4 counters): LinkDownedCounter 3, LinkErrorRecoveryCounter 255, "
        "SymbolErrorCounter 70001"]
    # 400 samples of that port: still one line for it, and its saturated list once.
    text = SATURATED * 400
    result, _ = _run(tmp_path, "perfquery", text)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        SATURATED_LINES[0].replace("(basic, 18 counters)", "(basic, 18 counters, last values of 400 blocks)"),
        SATURATED_LINES[1]]
    assert len(result.output) < 1000 < len(text)


def _blocks(ports: int, rounds: int, extended: bool = False) -> str:
    one = SATURATED + (EXTENDED if extended else "")
    return "".join(one.replace("Lid 134 port 1", f"Lid 134 port {p}") for _ in range(rounds) for p in range(ports))


@pytest.mark.parametrize("shape, text", [
    ("one port, 300 basic blocks", _blocks(1, 300)),
    ("one port, 150 basic and 150 extended blocks interleaved", _blocks(1, 150, extended=True)),
    ("20 ports, 30 rounds of samples", _blocks(20, 30)),
], ids=["one-port", "one-port-two-kinds", "20-ports-30-rounds"])
def test_perfquery_text_and_json_are_linear_in_the_input(tmp_path, shape, text):
    text_out, _ = _run(tmp_path, "perfquery", text)
    json_out, _ = _run(tmp_path, "perfquery", text, "--format", "json")
    assert text_out.exit_code == json_out.exit_code == 0
    assert len(text_out.output) <= 0.1 * len(text), shape  # one line per port and kind, not per block
    data = json.loads(json_out.output)
    assert all(len(s["counters"]) == len(set(s["counters"])) for s in data["saturated"])
    assert len(json_out.output) <= 3 * len(text), shape


PERFQUERY = "# Port counters: Lid {lid} port {port}\nSymbolErrorCounter:..............{value}\n"
IBQUERYERRORS = ('Errors for "gpu05 mlx5_0"\n   GUID 0x506b4b03005c2750 port {port}: [LinkDownedCounter == {value}]\n'
                 "\n## Summary: {nodes} nodes checked, 1 bad nodes found\n")


@pytest.mark.parametrize("kind, template, values, line", [
    ("perfquery", PERFQUERY, {"lid": BIG, "port": "1", "value": "3"}, 1),
    ("perfquery", PERFQUERY, {"lid": "1", "port": BIG, "value": "3"}, 1),
    ("ibqueryerrors", IBQUERYERRORS, {"port": "1", "value": BIG, "nodes": "4"}, 2),
    ("ibqueryerrors", IBQUERYERRORS, {"port": BIG, "value": "2", "nodes": "4"}, 2),
    ("ibqueryerrors", IBQUERYERRORS, {"port": "1", "value": "2", "nodes": BIG}, 4),
], ids=["perfquery-lid", "perfquery-port", "ibqueryerrors-counter", "ibqueryerrors-port", "ibqueryerrors-summary"])
def test_a_5000_digit_number_exits_2_naming_its_line(tmp_path, kind, template, values, line):
    for fmt in ("text", "json"):
        result, path = _run(tmp_path, kind, template.format(**values), "--format", fmt)
        assert result.exit_code == exitcodes.USAGE, result.output[:300]
        assert str(path) in result.output and f"{kind} line {line}:" in result.output
        assert "digit" in result.output and "Traceback" not in result.output and len(result.output) < 400


NCCL_FILES = sorted((FIXTURES / "nccl-tests").glob("*.txt")) + corpus_files("nccl-tests")


def _summary_from_json(data: dict) -> str:
    """The text summary, from the JSON document: the two formats must say the same."""
    wrong = sum(s["wrong"] for r in data["rows"] for s in (r["oop"], r["ip"]) if s["wrong"] is not None)
    ab = data["alpha_beta"]
    return (f"{len(data['rows'])} sizes, {len(data['ranks'])} ranks, avg busbw {data['avg_busbw_gbps']}, "
            f"wrong {wrong}, out of bounds {data['out_of_bounds']}, errors {len(data['errors'])}"
            + (f", α {ab['alpha_us']:.2f} µs β {ab['beta_gbps']:.2f} GB/s" if ab else ""))


@pytest.mark.parametrize("path", NCCL_FILES, ids=lambda p: p.name[:60])
def test_nccl_tests_text_summary_never_builds_the_json_document(monkeypatch, path):
    as_json = CliRunner().invoke(cli, ["parse", "nccl-tests", str(path), "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    expected = _summary_from_json(json.loads(as_json.output))

    def refuse(self):
        raise AssertionError("the text summary built the JSON document")

    monkeypatch.setattr(nccl_tests.NcclResult, "to_dict", refuse)
    text = CliRunner().invoke(cli, ["parse", "nccl-tests", str(path)])
    assert text.exit_code == 0, text.output
    assert text.output == expected + "\n"
