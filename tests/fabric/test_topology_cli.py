"""`fabric generate|check` and `parse ibnetdiscover` through click's runner: exit codes (0 match,
1 deviations, 2 bad input), JSON output, text output."""
from __future__ import annotations

import json

from click.testing import CliRunner

from healthcheck.cli.fabric import fabric, parse_ibnetdiscover
from tests.conftest import FIXTURES
from tests.fabric.topology_build import golden, render_plain, replace

FIX = FIXTURES / "fabric" / "topology"
TOPOLOGY = str(FIX / "topology.toml")


def run(command, *args):
    return CliRunner().invoke(command, list(args))


def test_check_golden_fabric_exits_0_in_both_formats():
    for name in ("golden-plain.txt", "golden-ports.txt"):
        result = run(fabric, "check", "--topology", TOPOLOGY, "--ibnetdiscover", str(FIX / name))
        assert result.exit_code == 0, result.output
        assert result.output.startswith("fabric matches the design")


def test_check_with_deviations_exits_1_and_names_them_in_json(tmp_path):
    links = replace(golden(), ("gpu01 mlx5_0", 1), ("leaf-a", 2))
    links = replace(links, ("gpu02 mlx5_0", 1), ("leaf-a", 1))
    links = replace(links, ("gpu03 mlx5_1", 1), rate="2xNDR")
    out = tmp_path / "now.txt"
    out.write_text(render_plain(links))
    result = run(fabric, "check", "--topology", TOPOLOGY, "--ibnetdiscover", str(out), "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    assert sorted(d["kind"] for d in data["deviations"]) == ["degraded_width", "swapped"]
    swap = next(d for d in data["deviations"] if d["kind"] == "swapped")
    assert {swap["node"], swap["with_node"]} == {"gpu01", "gpu02"} and swap["switch"] == "leaf-a"
    leaf = next(t for t in data["tiers"] if t["tier"] == "leaf")
    assert (leaf["expected"], leaf["found"], leaf["misplaced"], leaf["degraded"]) == (8, 6, 2, 1)
    text = run(fabric, "check", "--topology", TOPOLOGY, "--ibnetdiscover", str(out))
    assert text.exit_code == 1 and "swapped: gpu01 mlx5_0 port 1 and gpu02 mlx5_0 port 1" in text.output


def test_bad_topology_file_exits_2_with_file_and_key(tmp_path):
    bad = tmp_path / "topology.toml"
    bad.write_text((FIX / "topology.toml").read_text().replace('tier = "spine"', 'tier = "spline"'))
    result = run(fabric, "check", "--topology", str(bad), "--ibnetdiscover", str(FIX / "golden-plain.txt"))
    assert result.exit_code == 2
    assert f"{bad}:switches.spine-1.tier: 'spline' is not a declared tier" in result.output


def test_unparseable_ibnetdiscover_exits_2_with_the_line(tmp_path):
    out = tmp_path / "now.txt"
    out.write_text(render_plain(golden()).replace('[2]\t"S-1000000000000a00"[10]', "[2] garbled"))
    result = run(fabric, "check", "--topology", TOPOLOGY, "--ibnetdiscover", str(out))
    assert result.exit_code == 2 and "line 11: cannot read this port line" in result.output
    missing = run(fabric, "check", "--topology", TOPOLOGY, "--ibnetdiscover", str(tmp_path / "absent.txt"))
    assert missing.exit_code == 2 and "cannot read the ibnetdiscover or iblinkinfo output" in missing.output


def test_generate_writes_a_design_that_checks_clean(tmp_path):
    result = run(fabric, "generate", "--ibnetdiscover", str(FIX / "golden-ports.txt"))
    assert result.exit_code == 0 and "[switches.\"leaf-a\"]" in result.output
    design = tmp_path / "topology.toml"
    design.write_text(result.output)
    check = run(fabric, "check", "--topology", str(design), "--ibnetdiscover", str(FIX / "golden-plain.txt"))
    assert check.exit_code == 0, check.output
    bad = run(fabric, "generate", "--ibnetdiscover", str(FIX / "golden-ports.txt"), "--hca-regex", "(x)")
    assert bad.exit_code == 2 and "named groups" in bad.output


def test_parse_ibnetdiscover_json_and_text():
    result = run(parse_ibnetdiscover, str(FIX / "golden-plain.txt"), "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["format"] == "plain" and len(data["links"]) == 12 and len(data["devices"]) == 11
    assert {"guid": "1000000000000a00", "port": 9, "label": None} in [k["a"] for k in data["links"]] + \
        [k["b"] for k in data["links"]]
    assert all(k["width"] == "4x" and k["speed"] == "NDR" for k in data["links"])
    text = run(parse_ibnetdiscover, str(FIX / "golden-ports.txt"))
    assert text.exit_code == 0 and "3 switches, 8 host CAs" in text.output
    assert "leaf-a [1] <-> gpu01 mlx5_0 [1] 4x NDR" in text.output or "gpu01 mlx5_0 [1] <-> leaf-a [1] 4x NDR" in text.output
    bad = run(parse_ibnetdiscover, str(FIX / "topology.toml"))
    assert bad.exit_code == 2 and "line" in bad.output


def test_every_command_has_help():
    for args in (["--help"], ["generate", "--help"], ["check", "--help"]):
        result = run(fabric, *args)
        assert result.exit_code == 0 and "Usage" in result.output and "--help" in result.output
    assert run(parse_ibnetdiscover, "--help").exit_code == 0
