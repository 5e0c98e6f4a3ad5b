"""fabric check on the test fabric (2 leaves, 1 spine, 4 nodes x 2 HCAs, rail-optimized) with each
deviation planted and named; the corpus fabrics checked against designs generated from themselves."""
from __future__ import annotations

from pathlib import Path

import pytest

from healthcheck.fabric.compare import compare
from healthcheck.fabric.design import generate_design, load_design
from healthcheck.core.fabricgraph import End
from healthcheck.parsers.ibnetdiscover import parse_ibnetdiscover
from tests.conftest import FIXTURES, corpus_params
from tests.fabric.topology_build import golden, render_plain, render_ports, replace

DESIGN = load_design((FIXTURES / "fabric" / "topology" / "topology.toml").read_text())


def check(links, ports_format: bool = False):
    render = render_ports if ports_format else render_plain
    return compare(DESIGN, parse_ibnetdiscover(render(links)))


def kinds(result) -> list[str]:
    return [d.kind for d in result.deviations]


def tier(result, name: str):
    return next(t for t in result.tiers if t.tier == name)


@pytest.mark.parametrize("ports_format", [False, True])
def test_the_golden_fabric_matches(ports_format):
    result = check(golden(), ports_format)
    assert result.ok and result.deviations == []
    assert [(t.tier, t.expected, t.found, t.degraded) for t in result.tiers] == [("leaf", 8, 8, 0), ("spine", 4, 4, 0)]


def test_missing_hca_link_names_node_hca_switch_and_port():
    result = check(replace(golden(), ("gpu03 mlx5_1", 1)))  # its only cable out: the CA is not discovered
    (dev,) = result.deviations
    assert (dev.kind, dev.node, dev.hca, dev.hca_port, dev.switch, dev.port) == \
        ("missing_link", "gpu03", "mlx5_1", 1, "leaf-b", 3)
    assert "gpu03 mlx5_1 port 1 -> leaf-b port 3" in dev.message and "not in the fabric" in dev.message
    assert (tier(result, "leaf").expected, tier(result, "leaf").found, tier(result, "leaf").missing) == (8, 7, 1)


def test_missing_uplink_and_too_few_uplinks():
    result = check(replace(golden(), ("leaf-b", 10)))
    assert sorted(kinds(result)) == ["missing_link", "too_few_uplinks"]
    missing = next(d for d in result.deviations if d.kind == "missing_link")
    assert (missing.switch, missing.port, missing.peer, missing.peer_port, missing.tier) == ("leaf-b", 10, "spine-1", 4, "spine")
    few = next(d for d in result.deviations if d.kind == "too_few_uplinks")
    assert few.switch == "leaf-b" and "1 uplinks to higher tiers, declared 2" in few.message
    assert (tier(result, "spine").found, tier(result, "spine").missing) == (3, 1)


def test_swapped_cables_between_two_nodes_are_one_deviation():
    links = replace(golden(), ("gpu01 mlx5_0", 1), ("leaf-a", 2))
    links = replace(links, ("gpu02 mlx5_0", 1), ("leaf-a", 1))
    result = check(links)
    (dev,) = result.deviations
    assert dev.kind == "swapped" and "swapped" in dev.message
    assert {(dev.node, dev.hca), (dev.with_node, dev.with_hca)} == {("gpu01", "mlx5_0"), ("gpu02", "mlx5_0")}
    assert tier(result, "leaf").misplaced == 2


def test_swapped_rails_within_one_node():
    links = replace(golden(), ("gpu04 mlx5_0", 1), ("leaf-b", 4))
    links = replace(links, ("gpu04 mlx5_1", 1), ("leaf-a", 4))
    (dev,) = check(links).deviations
    assert dev.kind == "swapped" and {dev.hca, dev.with_hca} == {"mlx5_0", "mlx5_1"} and dev.node == dev.with_node == "gpu04"


def test_hca_on_the_other_rail_is_wrong_rail():
    result = check(replace(golden(), ("gpu03 mlx5_0", 1), ("leaf-b", 5)))
    (dev,) = result.deviations
    assert (dev.kind, dev.node, dev.hca, dev.switch, dev.port, dev.found_switch, dev.found_port) == \
        ("wrong_rail", "gpu03", "mlx5_0", "leaf-a", 3, "leaf-b", 5)
    assert "rail mlx5_1, expected rail mlx5_0" in dev.message


def test_hca_on_the_right_switch_but_another_port_is_wrong_port():
    (dev,) = check(replace(golden(), ("gpu02 mlx5_1", 1), ("leaf-b", 6))).deviations
    assert (dev.kind, dev.found_switch, dev.found_port, dev.switch, dev.port) == ("wrong_port", "leaf-b", 6, "leaf-b", 2)


def test_hca_cabled_to_the_spine_is_wrong_switch():
    (dev,) = check(replace(golden(), ("gpu01 mlx5_1", 1), ("spine-1", 7))).deviations
    assert (dev.kind, dev.found_switch, dev.found_port) == ("wrong_switch", "spine-1", 7)
    assert "goes to spine-1 port 7, declared leaf-b port 1" in dev.message


def test_link_trained_at_2x_is_degraded_width():
    result = check(replace(golden(), ("gpu03 mlx5_1", 1), rate="2xNDR"))
    (dev,) = result.deviations
    assert (dev.kind, dev.node, dev.hca, dev.switch, dev.port, dev.tier) == \
        ("degraded_width", "gpu03", "mlx5_1", "leaf-b", 3, "leaf")
    assert "trained 2x instead of 4x" in dev.message
    assert (tier(result, "leaf").found, tier(result, "leaf").degraded) == (8, 1)


def test_uplink_at_a_lower_speed_is_degraded_speed():
    result = check(replace(golden(), ("leaf-a", 9), rate="4xHDR"))
    (dev,) = result.deviations
    assert (dev.kind, dev.switch, dev.port, dev.peer, dev.peer_port) == ("degraded_speed", "leaf-a", 9, "spine-1", 1)
    assert "trained at HDR instead of NDR" in dev.message and tier(result, "spine").degraded == 1


def test_unknown_speed_is_degraded():
    (dev,) = check(replace(golden(), ("gpu01 mlx5_0", 1), rate="4x???"), ports_format=True).deviations
    assert dev.kind == "degraded_speed" and "unknown speed" in dev.message


def test_extra_hca_and_extra_switch_are_unexpected_devices():
    links = golden() + [[("gpu05 mlx5_0", 1), ("leaf-a", 7), "4xNDR"]]
    result = check(links)
    (dev,) = result.deviations
    assert (dev.kind, dev.node, dev.hca) == ("unexpected_device", "gpu05", "mlx5_0")
    assert "port 1 -> leaf-a port 7" in dev.message
    text = render_plain(golden()).replace('# "spine-1" enhanced', '# "spine-1" enhanced')
    extra = text + ('switchguid=0x1000000000000d00(1000000000000d00)\n'
                    'Switch\t65 "S-1000000000000d00"\t\t# "stray-switch" enhanced port 0 lid 4 lmc 0\n')
    (dev,) = compare(DESIGN, parse_ibnetdiscover(extra)).deviations
    assert dev.kind == "unexpected_device" and "stray-switch" in dev.message


def test_extra_cable_between_declared_switches_is_unexpected_link():
    (dev,) = check(golden() + [[("leaf-a", 11), ("leaf-b", 11), "4xNDR"]]).deviations
    assert dev.kind == "unexpected_link" and "leaf-a port 11 <-> leaf-b port 11" in dev.message


def test_missing_switch_is_named_with_everything_that_depended_on_it():
    links = [k for k in golden() if "spine-1" not in (k[0][0], k[1][0])]
    result = check(links)
    assert kinds(result).count("missing_switch") == 1 and kinds(result).count("missing_link") == 4
    assert next(d for d in result.deviations if d.kind == "missing_switch").switch == "spine-1"


def test_every_planted_deviation_is_reported_at_once():
    links = replace(golden(), ("gpu01 mlx5_0", 1), ("leaf-a", 2))
    links = replace(links, ("gpu02 mlx5_0", 1), ("leaf-a", 1))            # swapped
    links = replace(links, ("gpu03 mlx5_0", 1), ("leaf-b", 5))            # wrong rail
    links = replace(links, ("gpu04 mlx5_1", 1))                           # missing
    links = replace(links, ("gpu02 mlx5_1", 1), rate="2xNDR")             # degraded width
    links = replace(links, ("leaf-a", 10))                                # missing uplink + too few
    links += [[("gpu09 mlx5_0", 1), ("leaf-a", 8), "4xNDR"]]              # unexpected device
    result = check(links)
    assert sorted(kinds(result)) == sorted(["swapped", "wrong_rail", "missing_link", "degraded_width",
                                            "missing_link", "too_few_uplinks", "unexpected_device"])
    assert not result.ok
    data = result.to_dict()
    assert data["ok"] is False and {t["tier"] for t in data["tiers"]} == {"leaf", "spine"}
    assert all("kind" in d and "message" in d for d in data["deviations"])


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("ibnetdiscover"))
def test_corpus_fabric_matches_the_design_generated_from_it(path: Path):
    fabric = parse_ibnetdiscover(path.read_text())
    result = compare(load_design(generate_design(fabric)), fabric)
    assert result.ok, result.to_text()
    assert sum(t.found for t in result.tiers) == sum(t.expected for t in result.tiers) > 0


@pytest.mark.corpus
def test_corpus_ndr_fabric_with_two_cables_swapped_between_rails():
    """The real NDR fabric with the cables of compute-1 mlx5_8 and compute-30 mlx5_9 swapped, as
    ibnetdiscover would print it (both the switch's and the CA's line of each link change)."""
    params = corpus_params("ibnetdiscover", "gary-*")
    if params[0].values[0] is None:
        pytest.skip("corpus absent")
    text = params[0].values[0].read_text()
    fabric = parse_ibnetdiscover(text)
    design = load_design(generate_design(fabric))
    a, b = (next(d.guid for d in fabric.hosts() if d.description == name)
            for name in ("is-north-7-compute-1 mlx5_8", "is-north-7-compute-30 mlx5_9"))
    sa, sb = (fabric.links_at(End(g, 1))[0].other(End(g, 1)) for g in (a, b))
    at_a, at_b = f'"S-{sa.guid}"[{sa.port}]', f'"S-{sb.guid}"[{sb.port}]'
    desc = {a: fabric.devices[a].description, b: fabric.devices[b].description}
    lines = []
    for line in text.splitlines():
        if f'"H-{a}"[1]' in line or f'"H-{b}"[1]' in line:  # a leaf's port line: the other HCA now
            x, y = (a, b) if a in line else (b, a)
            line = line.replace(x, y).replace(f'"{desc[x]}"', f'"{desc[y]}"')
        elif f"({a})" in line and at_a in line:  # a CA's port line: the other leaf port now
            line = line.replace(at_a, at_b).replace(f'lid {fabric.devices[sa.guid].lid} ', f'lid {fabric.devices[sb.guid].lid} ')
        elif f"({b})" in line and at_b in line:
            line = line.replace(at_b, at_a).replace(f'lid {fabric.devices[sb.guid].lid} ', f'lid {fabric.devices[sa.guid].lid} ')
        lines.append(line)
    moved = parse_ibnetdiscover("\n".join(lines))
    assert moved.warnings == []
    result = compare(design, moved)
    (dev,) = result.deviations
    assert dev.kind == "swapped"
    assert {(dev.node, dev.hca), (dev.with_node, dev.with_hca)} == \
        {("is-north-7-compute-1", "mlx5_8"), ("is-north-7-compute-30", "mlx5_9")}
    assert next(t for t in result.tiers if t.tier == "leaf").misplaced == 2
