"""healthcheck.config.topology: the [topology] table, validation errors, node -> group lookups."""
from __future__ import annotations

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.config.topology import (MAX_GROUP_NODES, TopologyError, group_sizes, groups_of, members,
                                  node_groups, validate)
from tests.conftest import FIXTURES

TABLE = {"rack": {"r01": "gpu[001-032]", "r02": "gpu[033-064]"},
         "power": {"pdu-a": "gpu[001-016]", "pdu-b": "gpu[017-048]"}}


def _fixture() -> dict:
    with open(FIXTURES / "topology" / "topology.toml", "rb") as fh:
        return tomllib.load(fh)["topology"]


def test_validate_returns_a_normalised_copy():
    table = {"rack": {"r01": " gpu[001-004] ", "r02": ["gpu[005-006]", "gpu009"]}}
    out = validate(table)
    assert out == {"rack": {"r01": "gpu[001-004]", "r02": "gpu[005-006],gpu009"}}
    assert table["rack"]["r01"] == " gpu[001-004] "  # input untouched
    assert validate({}) == {}


def test_the_fixture_config_table():
    table = _fixture()
    assert set(validate(table)) == {"rack", "chassis", "power"}
    assert members(table, "power", "pdu-a") == [f"gpu{i:03d}" for i in (1, 2, 3, 4, 9, 10, 11, 12)]
    assert group_sizes(table) == {"rack": {"r01": 8, "r02": 8}, "chassis": {"c01a": 4, "c01b": 4},
                                  "power": {"pdu-a": 8, "pdu-b": 8}}
    groups = node_groups(table)
    assert len(groups) == 16
    assert groups["gpu006"] == {"rack": "r01", "chassis": "c01b", "power": "pdu-b"}
    assert groups["gpu010"] == {"rack": "r02", "power": "pdu-a"}  # no chassis level for r02


def test_overlap_across_levels_is_allowed():
    # gpu001-016 are in rack r01 and in pdu-a; gpu017-032 in r01 and pdu-b.
    assert validate(TABLE) == TABLE
    assert groups_of(TABLE, ["gpu020"]) == {"gpu020": {"rack": "r01", "power": "pdu-b"}}


def test_groups_of_unknown_and_partly_known_nodes():
    out = groups_of(TABLE, ["gpu001", "gpu060", "login01", "gpu1"])
    assert out == {"gpu001": {"rack": "r01", "power": "pdu-a"},
                   "gpu060": {"rack": "r02"},     # in no power group
                   "login01": {}, "gpu1": {}}     # "gpu1" is not "gpu001"
    assert groups_of(TABLE, "gpu033") == {"gpu033": {"rack": "r02", "power": "pdu-b"}}
    assert groups_of({}, ["gpu001"]) == {"gpu001": {}}


def test_members_in_natural_order_and_unknown_names():
    assert members(TABLE, "rack", "r02")[:3] == ["gpu033", "gpu034", "gpu035"]
    assert len(members(TABLE, "rack", "r02")) == 32
    with pytest.raises(TopologyError, match=r"no level 'row' \(levels: rack, power\)"):
        members(TABLE, "row", "r01")
    with pytest.raises(TopologyError, match=r"topology\.rack: no group 'r09'"):
        members(TABLE, "rack", "r09")


@pytest.mark.parametrize("table, message", [
    ([("rack", {})], r"\[topology\] must be a table of levels .* not list"),
    ("rack=r01", r"\[topology\] must be a table of levels .* not str"),
    ({"rack": "gpu[001-004]"}, r"topology\.rack: must be a table \{group: nodeset\}, not str"),
    ({"": {"r01": "gpu1"}}, r"level names must be non-empty strings, not ''"),
    ({"rack": {"": "gpu1"}}, r"topology\.rack: group names must be non-empty strings"),
    ({"rack": {"r01": 17}}, r"topology\.rack\.r01: expected a nodeset string .* not int"),
    ({"rack": {"r01": ["gpu1", 2]}}, r"topology\.rack\.r01: expected a nodeset string .* not list"),
    ({"rack": {"r01": "  "}}, r"topology\.rack\.r01: empty nodeset"),
    ({"rack": {"r01": "gpu[001-004"}}, r"topology\.rack\.r01: bad nodeset 'gpu\[001-004'"),
    ({"rack": {"r01": "gpu[9-1]"}}, r"topology\.rack\.r01: bad nodeset 'gpu\[9-1\]'"),
    ({"rack": {"r01": "gpu1,,gpu2"}}, r"topology\.rack\.r01: bad nodeset"),
    ({"rack": {"r01": "@rack1"}}, r"topology\.rack\.r01: node groups \(@name\) are not supported"),
    ({"rack": {"r01": "gpu1 gpu2"}}, r"topology\.rack\.r01: whitespace inside nodeset"),
    ({"rack": {"r01": "gpu[1-999999999]"}}, rf"names more than {MAX_GROUP_NODES} nodes \(about 999999999\)"),
    ({"rack": {"r01": "r[1-1000]n[1-1000]"}}, r"names more than .* nodes \(about 1000000\)"),
    ({"rack": {"r01": "gpu[1-60000],gpu[60001-120000]"}}, r"\(about 120000\)"),
    ({"rack": {"r01": "gpu[1-12345678901234567890]"}}, r"names more than"),
    ({"rack": {"r01": "gpu[001-016]", "r02": "gpu[016-032]"}},
     r"topology\.rack: node gpu016 is in both group r01 and group r02"),
])
def test_validation_errors_name_level_and_group(table, message):
    with pytest.raises(TopologyError, match=message):
        validate(table)
    assert issubclass(TopologyError, ValueError)


def test_every_entry_point_validates():
    bad = {"rack": {"r01": "gpu[1-4]", "r02": "gpu4"}}
    for call in (lambda: groups_of(bad, ["gpu1"]), lambda: node_groups(bad),
                 lambda: members(bad, "rack", "r01"), lambda: group_sizes(bad)):
        with pytest.raises(TopologyError, match="node gpu4 is in both group r01 and group r02"):
            call()


_text = st.text(alphabet="gpu0123456789[]-,@ .*_", max_size=24)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), st.one_of(
    st.dictionaries(st.text(max_size=4), st.one_of(_text, st.integers(), st.lists(_text, max_size=3)),
                    max_size=3),
    _text, st.none()), max_size=3))
def test_fuzzed_tables_give_a_table_or_a_topology_error(table):
    try:
        clean = validate(table)
    except TopologyError as exc:
        assert str(exc)
        return
    groups = node_groups(clean)
    for node, levels in groups.items():
        for level, group in levels.items():
            assert node in members(clean, level, group)


_ranges = st.lists(st.tuples(st.integers(0, 10**15), st.integers(0, 10**15)), min_size=1, max_size=3)


@settings(max_examples=100, deadline=None)
@given(_ranges, st.booleans())
def test_huge_ranges_are_refused_before_they_are_built(ranges, nested):
    parts = [f"{lo}-{hi}" for lo, hi in ranges]
    spec = f"r[{parts[0]}]n[{','.join(parts[1:]) or '1'}]" if nested else f"n[{','.join(parts)}]"
    try:
        nodes = members({"rack": {"r": spec}}, "rack", "r")
    except TopologyError as exc:
        assert "topology.rack.r" in str(exc)
        return
    assert 0 < len(nodes) <= MAX_GROUP_NODES
