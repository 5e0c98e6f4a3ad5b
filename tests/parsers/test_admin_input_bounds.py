"""Numbers of any length in admin inputs (issue 30): a digit run longer than any real tool prints is a
clean ParseError naming its line (perfquery, ibqueryerrors, mlxlink), an unreadable line the parser's
own way (nccl-tests: a warning or an error entry), or a capped count (host events) -- never the plain
ValueError Python's int() raises over 4,300 digits. And a perfquery of many blocks of one port keeps
each counter name once in ``saturated()``."""
from __future__ import annotations

import pytest

from healthcheck.parsers import ParseError, nccl_tests
from healthcheck.parsers.mlxlink import parse_mlxlink
from healthcheck.parsers.perfquery import parse_ibqueryerrors, parse_perfquery
from tests.conftest import FIXTURES

PERF = FIXTURES / "fabric" / "perf"
BIG = "7" * 5000  # over int()'s 4,300-digit limit

PERFQUERY = "# Port counters: Lid {lid} port {port} (CapMask: 0x1600)\nSymbolErrorCounter:..............{value}\n"
IBQUERYERRORS = (
    'Errors for 0x7cfe9003009ce5b0 "leaf03"\n'
    "   GUID 0x7cfe9003009ce5b0 port {port}: [SymbolErrorCounter == {value}] [PortXmitWait == 41864608 (41.865M)]\n"
    '       Link info:   1719   17[  ] ==( 4X       53.125 Gbps Active/  LinkUp)==>  0x506b4b03005c2742    {rlid}    '
    '{rport}[  ] "gpu03 mlx5_1" ( )\n'
    "\n"
    "## Summary: {nodes} nodes checked, {bad} bad nodes found\n"
    "##          {ports} ports checked, {badp} ports have errors beyond threshold\n")
IBQ_NORMAL = {"port": "17", "value": "1843", "rlid": "134", "rport": "1", "nodes": "14", "bad": "2", "ports": "36",
              "badp": "2"}
IBQ_LINES = {"port": 2, "value": 2, "rlid": 3, "rport": 3, "nodes": 5, "bad": 5, "ports": 6, "badp": 6}


def test_a_5000_digit_number_anywhere_in_perfquery_is_a_parse_error_naming_its_line():
    pq = parse_perfquery(PERFQUERY.format(lid="134", port="1", value="12"))  # the template, as it is
    assert [(b.lid, b.port, b.counters) for b in pq.blocks] == [(134, 1, {"SymbolErrorCounter": 12})]
    wrong = []
    for field, line in (("lid", 1), ("port", 1), ("value", 2)):
        values = {"lid": "134", "port": "1", "value": "12", field: BIG}
        try:
            parse_perfquery(PERFQUERY.format(**values))
            wrong.append(f"{field}: parsed")
        except ParseError as exc:
            if f"perfquery line {line}:" not in str(exc) or len(str(exc)) > 300:
                wrong.append(f"{field}: {str(exc)[:120]}")
        except Exception as exc:  # noqa: BLE001 - what the test is about
            wrong.append(f"{field}: {type(exc).__name__}: {str(exc)[:80]}")
    assert not wrong


def test_a_5000_digit_number_anywhere_in_ibqueryerrors_is_a_parse_error_naming_its_line():
    qe = parse_ibqueryerrors(IBQUERYERRORS.format(**IBQ_NORMAL))  # the template, as it is
    (port,) = qe.ports
    assert (port.port, port.counters["SymbolErrorCounter"], port.link.remote_lid, port.link.remote_port) == (
        17, 1843, 134, 1)
    assert (qe.nodes_checked, qe.bad_nodes, qe.ports_checked, qe.bad_ports) == (14, 2, 36, 2)
    wrong = []
    for field, line in IBQ_LINES.items():
        try:
            parse_ibqueryerrors(IBQUERYERRORS.format(**{**IBQ_NORMAL, field: BIG}))
            wrong.append(f"{field}: parsed")
        except ParseError as exc:
            if f"ibqueryerrors line {line}:" not in str(exc) or len(str(exc)) > 300:
                wrong.append(f"{field}: {str(exc)[:120]}")
        except Exception as exc:  # noqa: BLE001
            wrong.append(f"{field}: {type(exc).__name__}: {str(exc)[:80]}")
    assert not wrong


def test_bounded_int_takes_twenty_digits_and_refuses_more():
    from healthcheck.parsers import bounded_int

    assert bounded_int("18446744073709551615", "x") == (1 << 64) - 1
    with pytest.raises(ParseError, match=r"^where: a 21-digit number"):
        bounded_int("1" * 21, "where")
    with pytest.raises(ParseError, match="not a whole number"):
        bounded_int("²", "where")  # str.isdigit() says yes, int() says no


def test_saturated_names_each_counter_once_per_port_whatever_its_blocks():
    text = (PERF / "perfquery-basic-symbol-saturated.txt").read_text()
    result = parse_perfquery(text * 50)
    assert len(result.blocks) == 50
    assert result.saturated() == {(134, 1): ["SymbolErrorCounter", "LinkErrorRecoveryCounter", "PortXmitData"]}
    assert result.to_dict()["saturated"] == [
        {"lid": 134, "port": 1, "counters": ["SymbolErrorCounter", "LinkErrorRecoveryCounter", "PortXmitData"]}]


NCCL = (FIXTURES / "nccl-tests" / "all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt").read_text()


@pytest.mark.parametrize("where", ["row size", "row count", "rank", "out of bounds"])
def test_nccl_tests_5000_digit_numbers_are_unreadable_lines_not_crashes(where):
    lines = NCCL.split("\n")
    if where.startswith("row"):
        index = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8"] and "float" in line)
        tokens = lines[index].split()
        tokens[0 if where == "row size" else 1] = BIG
        lines[index] = " ".join(tokens)
    elif where == "rank":
        index = next(i for i, line in enumerate(lines) if line.startswith("#  Rank  0 "))
        lines[index] = lines[index].replace("Rank  0", "Rank  " + BIG, 1)
    else:
        index = next(i for i, line in enumerate(lines) if "Out of bounds values" in line)
        lines[index] = "# Out of bounds values : " + BIG + " OK"
    before = nccl_tests.parse(NCCL)
    result = nccl_tests.parse("\n".join(lines))
    if where.startswith("row"):
        assert len(result.rows) == len(before.rows) - 1
        assert any("unreadable result row" in w and "digits" in w for w in result.warnings)
    elif where == "rank":
        assert len(result.ranks) == len(before.ranks) - 1
        assert any(w.startswith("rank line skipped") for w in result.warnings)
    else:
        assert result.out_of_bounds_ok is False and any("unreadable summary" in e for e in result.errors)
    assert all(len(m) < 400 for m in result.warnings + result.errors)


def test_nccl_tests_5000_digit_root_is_an_unreadable_row():
    text = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n"
            f"           8             2     float     sum      {BIG}    40.12    0.00    0.00      0    38.85    0.00"
            "    0.00      0\n")
    result = nccl_tests.parse(text)
    assert not result.rows and any("root has 5000 digits" in w for w in result.warnings)


MLXLINK = (FIXTURES / "mlxlink" / "ndr-healthy.txt").read_text()


@pytest.mark.parametrize("key", ["Link Down Counter", "Raw Physical Errors Per Lane", "Effective Physical Errors"])
def test_mlxlink_5000_digit_counts_are_parse_errors(key):
    lines = [line.split(":")[0] + ": " + BIG if line.startswith(key) else line for line in MLXLINK.splitlines()]
    assert lines != MLXLINK.splitlines()
    with pytest.raises(ParseError, match="mlxlink .*(5000-digit|not a count)"):
        parse_mlxlink("\n".join(lines), "mlx5_0")


def test_mlxlink_twenty_digit_count_is_exact():
    lines = [line.split(":")[0] + ": 12345678901234567891" if line.startswith("Link Down Counter") else line
             for line in MLXLINK.splitlines()]
    assert parse_mlxlink("\n".join(lines), "mlx5_0").link_down == 12345678901234567891


def test_host_event_count_of_a_site_pattern_is_capped_not_a_crash():
    from healthcheck.policies.host_events import default_policy_text, load_host_event_policy
    from healthcheck.parsers.host_events import parse_host_events

    text = default_policy_text()
    assert r"(?P<n>\d{1,9}) CE " in text
    policy = load_host_event_policy(text.replace(r"(?P<n>\d{1,9}) CE ", r"(?P<n>\d+) CE "))
    (event,) = parse_host_events(f"EDAC MC0: {BIG} CE memory read error on CPU_SrcID#0_Ha#0\n", policy)
    assert event.count == 10**9
    (event,) = parse_host_events("EDAC MC0: 0000000000003 CE memory read error on CPU_SrcID#0_Ha#0\n", policy)
    assert event.count == 3
