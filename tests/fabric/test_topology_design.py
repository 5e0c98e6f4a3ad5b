"""topology.toml: generate from a fabric (tiers, rails, rates inferred), load and validate (every bad
key named FILE:KEY)."""
from __future__ import annotations

import pytest

from healthcheck.fabric.design import DEFAULT_HCA_REGEX, DesignError, generate_design, infer_levels, load_design
from healthcheck.parsers.ibnetdiscover import parse_ibnetdiscover
from tests.conftest import CORPUS, FIXTURES
from tests.fabric.topology_build import golden, render_plain, replace

GOLDEN = (FIXTURES / "fabric" / "topology" / "topology.toml").read_text()


def test_generated_design_declares_tiers_rails_uplinks_and_every_cable():
    design = load_design(generate_design(parse_ibnetdiscover(render_plain(golden()))))
    assert design.rail_optimized and design.hca_regex == DEFAULT_HCA_REGEX
    assert {n: (s.tier, s.rail, s.uplinks) for n, s in design.switches.items()} == {
        "leaf-a": ("leaf", "mlx5_0", 2), "leaf-b": ("leaf", "mlx5_1", 2), "spine-1": ("spine", None, None)}
    assert {(t.name, t.level, t.lanes, t.speed) for t in design.tiers.values()} == {("leaf", 1, 4, "NDR"), ("spine", 2, 4, "NDR")}
    assert len(design.hosts) == 8 and len(design.uplinks) == 4
    cable = next(c for c in design.hosts if (c.node, c.hca) == ("gpu03", "mlx5_1"))
    assert (cable.hca_port, cable.switch, cable.port) == (1, "leaf-b", 3)


def test_not_rail_optimized_when_a_leaf_carries_two_hca_names():
    links = replace(golden(), ("gpu01 mlx5_0", 1), ("leaf-b", 7))
    text = generate_design(parse_ibnetdiscover(render_plain(links)))
    assert "rail_optimized = false" in text and "rail =" not in text


def test_slower_links_at_generation_are_noted_and_the_common_rate_declared():
    text = generate_design(parse_ibnetdiscover(render_plain(replace(golden(), ("gpu01 mlx5_0", 1), rate="2xNDR"))))
    assert 'width = "4x"' in text and "1 of 8 links of this tier trained otherwise" in text and "2x NDR" in text


def test_unnamed_cas_are_declared_by_guid_and_a_custom_regex_names_them():
    text = render_plain(golden()).replace('"gpu01 mlx5_0"', '"MT4129 ConnectX-7"')
    design = load_design(generate_design(parse_ibnetdiscover(text), r"^(?P<node>gpu\d+) (?P<hca>mlx5_\d+)$"))
    unnamed = [c for c in design.hosts if c.guid]
    assert len(unnamed) == 1 and unnamed[0].guid == "2000000000000100" and unnamed[0].switch == "leaf-a"
    with pytest.raises(DesignError, match="named groups"):
        generate_design(parse_ibnetdiscover(text), r"^(\S+) (\S+)$")
    with pytest.raises(DesignError, match="not a regular expression"):
        generate_design(parse_ibnetdiscover(text), "(")


def test_tiers_of_the_corpus_fabrics():
    path = CORPUS / "ibnetdiscover" / "gary-minghuili-ibexp__ibdiagnet2.ibnetdiscover-ndr-quantum2.txt"
    if not path.is_file():
        pytest.skip("corpus absent")
    fabric = parse_ibnetdiscover(path.read_text())
    levels = infer_levels(fabric)
    assert sorted(levels.values()) == [1] * 8 + [2] and levels["b0cf0e0300d33fc0"] == 2
    design = load_design(generate_design(fabric))
    assert design.rail_optimized and len({s.rail for s in design.switches.values() if s.rail}) == 8


def test_three_levels_make_a_core_tier():
    links = golden() + [[("spine-1", 20), ("leaf-x", 1), "4xNDR"]]
    import tests.fabric.topology_build as build
    build.SWITCHES["leaf-x"] = ("1000000000000e00", 9)  # a switch above the spine only
    try:
        levels = infer_levels(parse_ibnetdiscover(render_plain(links)))
    finally:
        del build.SWITCHES["leaf-x"]
    assert levels["1000000000000e00"] == 3 and levels["1000000000000c00"] == 2


@pytest.mark.parametrize("edit, message", [
    (("[fabric]", "[fabric]\ncolour = 1"), r"topology.toml:fabric.colour: unknown key"),
    (("[fabric]", "[fabrik]\nx = 1\n[fabric]"), r"topology.toml:fabrik: unknown key"),
    (('tier = "spine"', 'tier = "spline"'), r"switches.spine-1.tier: 'spline' is not a declared tier"),
    (('width = "4x"', 'width = "3x"'), r"tiers.leaf.width: must be one of"),
    (('speed = "NDR"', 'speed = "NDR400"'), r"tiers.leaf.speed: must be one of SDR"),
    (("level = 1", "level = 0"), r"tiers.leaf.level: must be an integer from 1 to 16"),
    (("hca_regex = '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$'", "hca_regex = '('"), r"fabric.hca_regex: not a regular"),
    (("hca_regex = '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$'", "hca_regex = '(\\S+)'"), r"fabric.hca_regex: must have"),
    (("rail_optimized = true", "rail_optimized = 'yes'"), r"fabric.rail_optimized: must be true or false"),
    (('guid = "0x1000000000000a00"', 'guid = "0xZZ"'), r"switches.leaf-a.guid: must be a GUID"),
    (('guid = "0x1000000000000b00"', 'guid = "0x1000000000000a00"'), r"switches.leaf-b.guid: 0x1000000000000a00 is already"),
    (('switch = "leaf-a", port = 2 }', 'switch = "leaf-z", port = 2 }'), r"cables.hosts\[2\].switch: 'leaf-z' is not a declared switch"),
    (('switch = "leaf-a", port = 2 }', 'switch = "leaf-a", port = 1 }'), r"cables.hosts\[2\]: switch 'leaf-a' port 1 is already used by cables.hosts\[0\]"),
    (('hca = "mlx5_0", hca_port = 1, switch = "leaf-a", port = 2', 'hca = "mlx5_0", hca_port = 1, switch = "leaf-a", port = 5000'), r"cables.hosts\[2\].port: must be an integer from 0 to 4096"),
    (('{ node = "gpu02", hca = "mlx5_0"', '{ guid = "0x1", node = "gpu02", hca = "mlx5_0"'), r"cables.hosts\[2\]: name the HCA by node and hca, or by guid"),
    (('peer = "spine-1", peer_port = 1 }', 'peer = "spine-1", peer_port = 3 }'), r"cables.uplinks\[2\]: switch 'spine-1' port 3 is already used"),
    (("[cables]", "[cables]\ncolour = 1"), r"cables.colour: unknown key"),
    (("uplinks = 2", "uplinks = -1"), r"switches.leaf-a.uplinks: must be an integer"),
    (("[tiers.leaf]", "[tiers.leaf]\nlevel = 1"), r"topology.toml: not valid TOML: .*line"),
])
def test_invalid_design_is_named_file_and_key(edit, message):
    old, new = edit
    assert old in GOLDEN
    with pytest.raises(DesignError, match=message):
        load_design(GOLDEN.replace(old, new, 1), source="topology.toml")


def test_no_tiers_bad_bytes_and_oversize_are_refused():
    with pytest.raises(DesignError, match="topology.toml:tiers: at least one tier"):
        load_design("")
    with pytest.raises(DesignError, match="not UTF-8"):
        load_design(b"\xff\xfe[fabric]")
    with pytest.raises(DesignError, match="over the limit"):
        load_design(b"#" * (64 * 1024 * 1024 + 1))
