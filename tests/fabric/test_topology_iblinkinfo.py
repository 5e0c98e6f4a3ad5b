"""iblinkinfo output into the same fabric graph as ibnetdiscover's: `fabric check` and `generate` take
either; the corpus' real (back-to-back) output, and a switched fabric written in iblinkinfo's format."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from healthcheck.cli import cli
from healthcheck.parsers import ParseError
from healthcheck.parsers.iblinkinfo import parse_iblinkinfo
from tests.conftest import CORPUS

LEAF = "Switch: 0x0002c9020040a000 MF0;leaf-1:IS5030/U1:"
FABRIC = f"""{LEAF}
           1    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       3    1[  ] "gpu01 mlx5_0" ( )
           1    2[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       4    1[  ] "gpu02 mlx5_0" ( )
           1    3[  ] ==(                Down/ Polling)==>             [  ] "" ( )
CA: gpu01 mlx5_0:
      0x0002c90300001111      3    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       1    1[  ] "MF0;leaf-1:IS5030/U1" ( )
CA: gpu02 mlx5_0:
      0x0002c90300002222      4    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       1    2[  ] "MF0;leaf-1:IS5030/U1" ( )
"""


def test_a_switched_fabric_each_link_once_with_its_rate():
    fabric = parse_iblinkinfo(FABRIC)
    assert {d.description for d in fabric.switches()} == {"MF0;leaf-1:IS5030/U1"}
    assert {d.description for d in fabric.hosts()} == {"gpu01 mlx5_0", "gpu02 mlx5_0"}
    assert sorted(link.rate for link in fabric.links) == ["4x EDR", "4x EDR"]
    assert [(u.end.guid, u.end.port) for u in fabric.unconnected] == [("0002c9020040a000", 3)]


@pytest.mark.skipif(not (CORPUS / "infiniband").exists(), reason="corpus not beside the checkout")
def test_the_corpus_back_to_back_link():
    text = (CORPUS / "infiniband" / "iblinkinfo-2ca-back-to-back-4x-5gbps-archwiki.txt").read_text()
    fabric = parse_iblinkinfo(text)
    assert len(fabric.hosts()) == 2 and [link.rate for link in fabric.links] == ["4x DDR"]


@pytest.mark.parametrize("text, words", [
    ("      0x01  3    1[  ] ==( 4X 25.78125 Gbps Active/  LinkUp)==>  1  1[  ] \"x\" ( )\n", "before any device"),
    (f"{LEAF}\nwhat is this\n", "neither a device heading nor a port line"),
    ("", "no device heading"),
])
def test_bad_input_is_a_parse_error_naming_the_line(text, words):
    with pytest.raises(ParseError, match=words):
        parse_iblinkinfo(text)


def test_generate_and_check_take_iblinkinfo(tmp_path):
    now = tmp_path / "links.txt"
    now.write_text(FABRIC)
    design = CliRunner().invoke(cli, ["fabric", "generate", "--iblinkinfo", str(now)])
    assert design.exit_code == 0, design.output
    topology = tmp_path / "topology.toml"
    topology.write_text(design.output)
    same = CliRunner().invoke(cli, ["fabric", "check", "--topology", str(topology), "--iblinkinfo", str(now)])
    assert same.exit_code == 0, same.output
    degraded = tmp_path / "degraded.txt"
    degraded.write_text(FABRIC.replace("4    1[  ] \"gpu02", "4    1[  ] \"gpu02").replace(
        "1    2[  ] ==( 4X      25.78125", "1    2[  ] ==( 2X      25.78125"))
    found = CliRunner().invoke(cli, ["fabric", "check", "--topology", str(topology), "--iblinkinfo", str(degraded)])
    assert found.exit_code == 1 and "gpu02" in found.output, found.output
    parsed = CliRunner().invoke(cli, ["parse", "iblinkinfo", str(now), "--format", "json"])
    assert parsed.exit_code == 0 and '"links"' in parsed.output
