"""`fabric check` on admin inputs (issue 30, item 8b): the graph's queries are indexed (a check passes
over the links a fixed number of times, whatever the number of switches) and find what the old
scans found; the design's ``hca_regex`` is vetted at load (nested quantifiers, repeated alternations,
too many choice points: refused, named); only node descriptions up to MAX_DESCRIPTION characters are
matched. No wall-clock assertion: operations and results are counted."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from healthcheck.cli.fabric import fabric as fabric_cli
from healthcheck.fabric.compare import compare
from healthcheck.fabric.design import DEFAULT_HCA_REGEX, DesignError, generate_design, hca_identity, load_design
from healthcheck.core.fabricgraph import Device, End, Fabric, Link
from healthcheck.fabric.hcaregex import MAX_CHOICES, MAX_DESCRIPTION, hca_regex_problem, match_description
from healthcheck.parsers.ibnetdiscover import parse_ibnetdiscover
from tests.conftest import FIXTURES
from tests.fabric.topology_build import HCAS, NODES, SWITCHES, golden, render_plain, render_ports, replace

FIX = FIXTURES / "fabric" / "topology"
GOLDEN_TOML = (FIX / "topology.toml").read_text()
DESIGN = load_design(GOLDEN_TOML)


class ScanFabric(Fabric):
    """The queries as they were before the index (issue 30): ``links_of`` scans every link per call."""

    def links_at(self, end):
        return [link for link in self.links if end in (link.a, link.b)]

    def links_of(self, guid):
        found = [(link.a, link) for link in self.links if link.a.guid == guid]
        found += [(link.b, link) for link in self.links if link.b.guid == guid and link.a.guid != guid]
        return sorted(found, key=lambda pair: pair[0].port)


def scanned(fab: Fabric) -> ScanFabric:
    return ScanFabric(fab.format, fab.devices, fab.links, fab.unconnected, fab.labels, fab.warnings)


class CountingLinks(list):
    """A fabric's link list that counts the passes made over it."""

    passes = 0

    def __iter__(self):
        CountingLinks.passes += 1
        return super().__iter__()


# ------------------------------------------------------------------ the index finds what the scans found
FAULTS = {
    "golden": golden(),
    "swapped": replace(replace(golden(), ("gpu01 mlx5_0", 1), ("leaf-a", 2)), ("gpu02 mlx5_0", 1), ("leaf-a", 1)),
    "missing hca link": replace(golden(), ("gpu03 mlx5_1", 1)),
    "missing uplink": replace(golden(), ("leaf-b", 10)),
    "degraded": replace(golden(), ("gpu03 mlx5_1", 1), rate="2xHDR"),
    "wrong rail": replace(golden(), ("gpu04 mlx5_0", 1), ("leaf-b", 7)),
    "uplink on the wrong port": replace(golden(), ("leaf-a", 9), ("spine-1", 7)),
    "unexpected link": golden() + [[("leaf-a", 20), ("leaf-b", 20), "4xNDR"]],
}


@pytest.mark.parametrize("render", [render_plain, render_ports], ids=["plain", "ports"])
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_indexed_check_equals_the_scanning_check(name, render):
    fab = parse_ibnetdiscover(render(FAULTS[name]))
    indexed, old = compare(DESIGN, fab), compare(DESIGN, scanned(fab))
    assert indexed.deviations == old.deviations
    assert indexed.tiers == old.tiers
    assert (name == "golden") == indexed.ok


_ENDS = [(f"{node} {hca}", 1) for node in NODES for hca in HCAS] + \
    [(switch, port) for switch in SWITCHES for port in range(1, 12)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_ENDS), st.one_of(st.none(), st.sampled_from(_ENDS)),
                          st.sampled_from([None, "2xNDR", "4xHDR"])), max_size=5))
def test_indexed_check_equals_the_scanning_check_on_random_recabling(edits):
    links = golden()
    for end, new_end, rate in edits:
        if new_end == end or (new_end is not None and rate is not None):
            continue
        if new_end is not None and any(new_end in (one, two) for one, two, _ in links):
            continue  # one cable a port
        links = replace(links, end, new_end, rate)
    if not links:
        return
    fab = parse_ibnetdiscover(render_plain(links))
    scan = scanned(fab)
    for guid in fab.devices:
        assert fab.links_of(guid) == scan.links_of(guid)
    for link in fab.links:
        for end in (link.a, link.b, End(link.a.guid, link.a.port + 1)):
            assert fab.links_at(end) == scan.links_at(end)
    indexed, old = compare(DESIGN, fab), compare(DESIGN, scan)
    assert indexed.deviations == old.deviations and indexed.tiers == old.tiers


def _stray_fabric(strays: int) -> Fabric:
    """The golden fabric and ``strays`` switches the design does not declare, each cabled to a spare
    spine port and to a host-less neighbour: every one is an unexpected_device, found by links_of."""
    fab = parse_ibnetdiscover(render_plain(golden()))
    spine = SWITCHES["spine-1"][0]
    for n in range(strays):
        guid = f"30{n:014x}"
        fab.devices[guid] = Device(guid, "switch", f"stray-{n}", 65, 1000 + n)
        fab.links.append(Link(End(spine, 20 + n), End(guid, 1), 4, "NDR"))
        fab.links.append(Link(End(guid, 2), End(f"31{n:014x}", 1), 4, "NDR"))
    return fab


@pytest.mark.parametrize("strays", [1, 10, 40])
def test_check_passes_over_the_links_a_fixed_number_of_times(strays):
    fab = _stray_fabric(strays)
    fab.links = CountingLinks(fab.links)
    CountingLinks.passes = 0
    result = compare(DESIGN, fab)
    assert sum(d.kind == "unexpected_device" for d in result.deviations) == strays
    assert CountingLinks.passes <= 3  # the index, the unexplained links; not one pass per switch
    assert [d.message for d in result.deviations] == [d.message for d in compare(DESIGN, scanned(_stray_fabric(strays))).deviations]


def test_index_sees_links_added_after_a_query():
    fab = parse_ibnetdiscover(render_plain(golden()))
    leaf = SWITCHES["leaf-a"][0]
    before = fab.links_of(leaf)
    assert fab.links_at(End(leaf, 30)) == []
    link = Link(End(leaf, 30), End("4000000000000001", 1), 4, "NDR")
    fab.links.append(link)
    assert fab.links_at(End(leaf, 30)) == [link]
    assert fab.links_of(leaf) == sorted(before + [(End(leaf, 30), link)], key=lambda pair: pair[0].port)
    assert fab.links_of(leaf) == scanned(fab).links_of(leaf)


# ------------------------------------------------------------------ hca_regex vetted at load
CATASTROPHIC = [
    (r"^(?P<node>(a+)+)\s(?P<hca>\S+)$", "nested quantifier '(a+)+'"),
    (r"^(?P<node>(?:\w+\s?)+)(?P<hca>!)", "nested quantifier"),
    (r"^(?P<node>(a|aa)+)\s(?P<hca>\S+)$", "repeated group with an alternation '(a|aa)+'"),
    (r"^(?P<node>(a|a)*)!(?P<hca>x)", "repeated group with an alternation"),
    (r"^(?P<node>(\w|\d)+)(?P<hca>!)", "a character class such as"),
    (r"^(?P<node>((a|b)c){2,})(?P<hca>x)", "repeated group with an alternation"),
    (r"^(?P<node>\S*\S*\S*\S*\S*\S*)!(?P<hca>x)", "6 choice points (quantifiers"),
    ("^(?P<node>" + "a?" * 8 + ")(?P<hca>x)", "8 choice points"),
    ("^(?P<node>" + "x" * 300 + ")(?P<hca>x)", "at most 256 characters"),
]
ACCEPTED = [
    DEFAULT_HCA_REGEX,
    r"^(?P<node>[^ ]+) (?P<hca>mlx5_\d+)$",
    r"^(?P<node>gpu\d+)[ -](?P<hca>mlx5_\d+)(?: .*)?$",
    r"^(?P<node>\S+) (?P<hca>mlx5_\d+|ib\d+)$",
    r"^(?P<node>[^ ]+)(?:-|_)?(?P<hca>mlx5_\d{1,2})$",
    r"^(?P<node>(?:ab){3}\d+)\s(?P<hca>[|*+(]+)$",
    r"^(?P<node>\S+?)\s+(?P<hca>\S+)$",
]


@pytest.mark.parametrize("regex, message", CATASTROPHIC)
def test_catastrophic_hca_regex_is_refused_at_load_naming_file_and_key(regex, message):
    text = GOLDEN_TOML.replace("hca_regex = '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$'", f"hca_regex = '{regex}'", 1)
    assert text != GOLDEN_TOML
    with pytest.raises(DesignError, match=r"^topology\.toml:fabric\.hca_regex: .*" + re.escape(message)):
        load_design(text, source="topology.toml")
    with pytest.raises(DesignError, match="^--hca-regex: .*" + re.escape(message)):
        generate_design(parse_ibnetdiscover(render_plain(golden())), regex)


@pytest.mark.parametrize("regex", ACCEPTED)
def test_ordinary_hca_regexes_are_accepted(regex):
    assert hca_regex_problem(regex) is None
    text = GOLDEN_TOML.replace("hca_regex = '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$'", f"hca_regex = '{regex}'", 1)
    assert load_design(text).hca_regex == regex


def test_fabric_check_with_a_catastrophic_regex_exits_2_with_the_reason(tmp_path):
    design = tmp_path / "topology.toml"
    design.write_text(GOLDEN_TOML.replace("hca_regex = '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$'",
                                          "hca_regex = '^(?P<node>(a+)+)\\s(?P<hca>\\S+)$'", 1))
    out = CliRunner().invoke(fabric_cli, ["check", "--topology", str(design), "--ibnetdiscover",
                                          str(FIX / "golden-plain.txt")])
    assert out.exit_code == 2
    assert "fabric.hca_regex: nested quantifier '(a+)+'" in out.output


def test_every_accepted_pattern_holds_at_most_max_choices():
    # what the vetting counts: quantifiers that vary (* + ? {m,n}) and alternation bars, not fixed {n}
    assert hca_regex_problem("^(?P<node>" + "a?" * MAX_CHOICES + ")(?P<hca>x)") is None
    assert hca_regex_problem("^(?P<node>" + "a?" * (MAX_CHOICES + 1) + ")(?P<hca>x)") is not None
    assert hca_regex_problem("^(?P<node>" + r"\d{2}" * 20 + ")(?P<hca>x)") is None
    assert hca_regex_problem("^(?P<node>" + "a|" * (MAX_CHOICES + 1) + "b)(?P<hca>x)") is not None
    assert hca_regex_problem(r"^(?P<node>[a|b|c|d|e|f]+)(?P<hca>x)") is None  # bars in a class are literals
    assert hca_regex_problem(r"^(?P<node>\|\|\|\|\|\|)(?P<hca>x)") is None    # escaped bars too


# ------------------------------------------------------------------ node descriptions bounded
class RecordingPattern:
    """Stands in for a compiled pattern: records the texts it is asked to match."""

    def __init__(self):
        self.texts: list[str] = []

    def match(self, text):
        self.texts.append(text)
        return re.compile(DEFAULT_HCA_REGEX).match(text)


def test_long_node_descriptions_are_never_matched():
    pattern = RecordingPattern()
    longest = "gpu01 " + "m" * (MAX_DESCRIPTION - 6)
    assert hca_identity(Device("1", "ca", longest), pattern) == ("gpu01", "m" * (MAX_DESCRIPTION - 6))
    assert hca_identity(Device("2", "ca", longest + "x"), pattern) is None
    assert hca_identity(Device("3", "ca", "a" * 100_000 + "!"), pattern) is None
    assert match_description(pattern, "") is None
    assert pattern.texts == [longest]  # neither over-long description reached the pattern


def test_a_host_with_an_over_long_description_is_an_unexpected_ca_not_a_hang():
    fab = parse_ibnetdiscover(render_plain(golden()))
    guid = next(g for g, d in fab.devices.items() if d.description == "gpu02 mlx5_1")
    fab.devices[guid] = Device(guid, "ca", "gpu02 mlx5_1" + " " * 10 + "a" * MAX_DESCRIPTION, 2)
    result = compare(DESIGN, fab)
    kinds = sorted(d.kind for d in result.deviations)
    assert kinds == ["missing_link", "unexpected_device"]
    assert any(d.kind == "missing_link" and (d.node, d.hca) == ("gpu02", "mlx5_1") for d in result.deviations)
