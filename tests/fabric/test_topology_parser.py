"""ibnetdiscover parser: real corpus outputs (plain from ibdiagnet, -p), own fixtures (plain and -p of
one fabric, the classic tab-separated style with routers), errors with line numbers, bounds, fuzz."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from healthcheck.core.fabricgraph import End
from healthcheck.parsers import ParseError
from healthcheck.parsers.ibnetdiscover import MAX_LINE_CHARS, parse_ibnetdiscover
from tests.conftest import CORPUS, FIXTURES, corpus_params
from tests.fuzzing import mutated

FIX = FIXTURES / "fabric" / "topology"


def _corpus(name: str):
    path = CORPUS / "ibnetdiscover" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return parse_ibnetdiscover(path.read_text())


# ------------------------------------------------------------------------------------ real corpus
@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("ibnetdiscover"))
def test_every_corpus_output_parses_into_a_consistent_graph(path: Path):
    fabric = parse_ibnetdiscover(path.read_bytes())
    assert fabric.switches() and fabric.links
    for link in fabric.links:
        assert link.a < link.b and link.a.guid in fabric.devices and link.b.guid in fabric.devices
    ends = [e for link in fabric.links for e in (link.a, link.b)]
    if not fabric.warnings:  # every port in at most one link
        assert len(ends) == len(set(ends))


@pytest.mark.corpus
def test_corpus_ndr_quantum2_plain_rail_fabric():
    fabric = _corpus("gary-minghuili-ibexp__ibdiagnet2.ibnetdiscover-ndr-quantum2.txt")
    assert fabric.format == "plain"
    assert len(fabric.switches()) == 9 and len(fabric.hosts()) == 256
    sharp = [d for d in fabric.devices.values() if d.aggregation]
    assert len(sharp) == 7 and all(d.kind == "ca" for d in sharp)
    assert len(fabric.links) == 256 + 8 + 7  # host cables, leaf uplinks, SHARP nodes (each printed twice)
    assert {(k.lanes, k.speed) for k in fabric.links} == {(4, "NDR")}
    spine = fabric.devices["b0cf0e0300d33fc0"]
    assert spine.description == "MF0;ib-switch-sequoia:MQM9700/U1" and spine.ports == 65 and spine.lid == 180
    assert [end.port for end, _ in fabric.links_of(spine.guid)] == list(range(1, 9))
    leaf_port = End("fc6a1c030091cf00", 1)
    assert fabric.labels[leaf_port] == "1/1/1"
    (link,) = fabric.links_at(leaf_port)
    assert fabric.devices[link.other(leaf_port).guid].description == "is-north-7-compute-1 mlx5_8"
    assert fabric.unconnected == [] and fabric.warnings == []


@pytest.mark.corpus
def test_corpus_edr_ports_report_with_unconnected_ports():
    fabric = _corpus("infiniband_exporter__ibnetdiscover-p-edr-fixture.txt")
    assert fabric.format == "ports"
    assert len(fabric.links) == 4  # 7 linked lines: 3 links printed from both ends, 1 from one end
    unlinked = {(u.end.guid, u.end.port): (u.width, u.speed) for u in fabric.unconnected}
    assert unlinked == {("506b4b03005c2740", 37): ("4x", "???"), ("08c0eb0300add20e", 80): ("4x", "SDR")}
    assert fabric.devices["7cfe9003003b4bde"].description == "o0001 HCA-1"
    assert fabric.devices["7cfe9003009ce5b0"].lid == 1719


@pytest.mark.corpus
def test_corpus_hdr_sharp_node_and_contradiction_kept_as_warning():
    fabric = _corpus("infiniband_exporter__ibnetdiscover-p-hdr-sharp-aggnode-fixture.txt")
    agg = fabric.devices["946dae0300630bfe"]
    assert agg.aggregation and agg.description == "Mellanox Technologies Aggregation Node"
    assert fabric.devices["946dae0300618c83"].description == "5FB0406-spine-IB02"  # blanks stripped
    assert len(fabric.warnings) == 1 and "946dae0300630bfe/1 is in two links" in fabric.warnings[0]
    assert [d.description for d in fabric.hosts()] == ["worker20 mlx5_3"]


@pytest.mark.corpus
def test_corpus_iblinkinfo_is_not_ibnetdiscover_output():
    path = CORPUS / "infiniband" / "iblinkinfo-2ca-back-to-back-4x-5gbps-archwiki.txt"
    if not path.is_file():
        pytest.skip("corpus file absent")
    with pytest.raises(ParseError, match="no 'Switch'/'Ca' header"):
        parse_ibnetdiscover(path.read_text())


# ------------------------------------------------------------------------------------ own fixtures
def test_plain_and_ports_formats_of_one_fabric_agree():
    plain = parse_ibnetdiscover((FIX / "golden-plain.txt").read_text())
    ports = parse_ibnetdiscover((FIX / "golden-ports.txt").read_text())
    assert (plain.format, ports.format) == ("plain", "ports")
    assert len(plain.links) == len(ports.links) == 12

    def shape(fabric):  # CAs are node GUIDs in plain, port GUIDs in -p: compare by description
        name = {d.guid: d.description for d in fabric.devices.values()}
        return {frozenset({(name[k.a.guid], k.a.port), (name[k.b.guid], k.b.port)}) for k in fabric.links}

    assert shape(plain) == shape(ports)
    assert plain.devices["2000000000000100"].ports == 2 and ports.devices["2000000000000101"].ports is None


CLASSIC = """\
#
# Topology file: generated on Mon Mar  2 10:00:00 2026
#
# Initiated from node 0002c90300001000 port 0002c90300001001

vendid=0x2c9
devid=0xbd36
sysimgguid=0x2c90200002000
switchguid=0x2c90200002000(2c90200002000)
Switch\t24 "S-0002c90200002000"\t\t# "ISR edge 1" base port 0 lid 5 lmc 0
[1]\t"H-0002c90300001000"[1](2c90300001001) \t\t# "node7 HCA-1" lid 9 4xQDR
[2]\t"R-0002c90300003000"[1]\t\t# "router one" lid 11 1xDDR

vendid=0x2c9
devid=0x673c
caguid=0x2c90300001000
Ca\t2 "H-0002c90300001000"\t\t# "node7 HCA-1"
[1](2c90300001001) \t"S-0002c90200002000"[1]\t\t# lid 9 lmc 0 "ISR edge 1" lid 5 4xQDR

rtguid=0x2c90300003000
Rt\t1 "R-0002c90300003000"\t\t# "router one"
[1]\t"S-0002c90200002000"[2]\t\t# lid 11 lmc 0 "ISR edge 1" lid 5 1xDDR
"""


def test_classic_tab_separated_output_with_a_router():
    fabric = parse_ibnetdiscover(CLASSIC)
    assert {d.kind for d in fabric.devices.values()} == {"switch", "ca", "router"}
    assert len(fabric.links) == 2
    router_link = fabric.links_at(End("0002c90300003000", 1))[0]
    assert (router_link.lanes, router_link.speed, router_link.width) == (1, "DDR", "1x")
    assert fabric.devices["0002c90200002000"].lid == 5
    assert fabric.to_dict()["devices"][0]["description"] == "ISR edge 1"


def test_a_peer_never_given_its_own_header_is_kept():
    text = CLASSIC.split("vendid=0x2c9\ndevid=0x673c")[0]
    fabric = parse_ibnetdiscover(text)
    assert fabric.devices["0002c90300001000"].description == "node7 HCA-1"
    assert fabric.devices["0002c90300001000"].ports is None  # known only from the switch's line


def test_preamble_before_the_first_header_is_skipped():
    fabric = parse_ibnetdiscover("$ sudo ibnetdiscover\n" + CLASSIC)
    assert len(fabric.devices) == 3


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("text, message", [
    ("", "no 'Switch'/'Ca' header"),
    ("hello world\n", "no 'Switch'/'Ca' header"),
    ('[1]\t"S-0002c90200002000"[2]\t# "x" lid 5 4xQDR\n', "line 1: a port line before any"),
    (CLASSIC.replace('[2]\t"R-0002', '[2]\t"R0002'), "line 12: cannot read this port line"),
    (CLASSIC.replace('Switch\t24 "S-', 'Switch\t24 "H-'), "line 10: cannot read this node header"),
    (CLASSIC + "garbage after the output\n", "line 23: not a line of ibnetdiscover's topology format"),
    ("CA 1 1 0x1 4x EDR - SW 2 3 0x2 ( 'a' - 'b' )\nnot a ports line\n", "-p output line 2"),
    ("CA 1 1 0x1 4x EDR - SW 2 3 0x2 ( 'a' 'b' )\n", "line 1: cannot read the descriptions"),
    ("CA 1 1 0x1 4x EDR something\n", "line 1: expected"),
])
def test_unreadable_input_is_a_parse_error_naming_the_line(text, message):
    with pytest.raises(ParseError, match=message):
        parse_ibnetdiscover(text)


def test_bounds_refuse_a_long_line_and_non_text():
    with pytest.raises(ParseError, match="over the limit"):
        parse_ibnetdiscover(CLASSIC + "#" + "x" * MAX_LINE_CHARS + "\n")
    with pytest.raises(ParseError, match="must be text"):
        parse_ibnetdiscover(12)  # type: ignore[arg-type]


SEEDS = [CLASSIC, (FIX / "golden-ports.txt").read_text(), (FIX / "golden-plain.txt").read_text()[:3000]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(SEEDS))
def test_fuzz_damaged_outputs_give_a_fabric_or_a_parse_error(text):
    try:
        fabric = parse_ibnetdiscover(text)
    except ParseError:
        return
    assert fabric.devices and all(isinstance(k.a, End) for k in fabric.links)


@pytest.mark.parametrize("line", [
    "[1]" + "(" * 4000,
    '[1](1/1/1)"S-' + "0" * 3990,
    '[1]\t"S-0002c90200002000"[2]\t#' + ' "' * 1990,
    '[1]\t"S-0002c90200002000"[2]\t# lid 5 ' + "4x" * 1990,
    "CA 1 1 0x1 4x EDR - SW 2 3 0x2 ( '" + "' - '" * 660 + ")",
])
def test_adversarial_lines_end_quickly(line):
    """2,500 near-miss lines of 4,000 characters (10 MB): linear regular expressions end in well under
    a second; the bound is generous for a loaded 2-core machine, a super-linear one would take hours."""
    import time

    text = CLASSIC + "\n".join([line[:MAX_LINE_CHARS]] * 2500)
    start = time.perf_counter()
    try:
        parse_ibnetdiscover(text)
    except ParseError:
        pass
    assert time.perf_counter() - start < 30
