"""The click objects of healthcheck.cli.fabric_node, run directly with CliRunner: parse commands
(text and JSON), `fabric node` exit codes, bad input as a clean usage error (exit 2)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from healthcheck.cli import fabric_node as cli
from tests.conftest import CORPUS, FIXTURES

NODE = FIXTURES / "fabric" / "node"


def run(command, *args):
    return CliRunner().invoke(command, [str(a) for a in args])


def test_parse_nvbandwidth_text_and_json():
    path = NODE / "nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt"
    text = run(cli.parse_nvbandwidth, path)
    assert text.exit_code == 0, text.output
    assert "device_to_device_memcpy_write_ce: passed, 8x8 matrix, 56 pairs" in text.output
    assert "all_to_host_memcpy_ce: waived" in text.output
    data = json.loads(run(cli.parse_nvbandwidth, path, "--format", "json").output)
    assert data["devices"]["0"].startswith("NVIDIA H100") and len(data["tests"]) == 5


def test_parse_topo_text_and_json():
    path = NODE / "topo-m-h100x8-nv16-numa-hca-planted.txt"
    result = run(cli.parse_topo, path)
    assert result.exit_code == 0, result.output
    assert "GPU6: NUMA 1, CPUs 56-111,168-223, nearest HCA mlx5_7 (PIX)" in result.output
    assert "GPU pairs: 1 x NV16, 27 x NV18" in result.output
    data = json.loads(run(cli.parse_topo, path, "--format", "json").output)
    assert data["topology"]["pairs"]["2-6"] == "NV16" and data["matrix"]["nic_legend"]["NIC6"] == "mlx5_6"


@pytest.mark.corpus
def test_parse_topo_p2p_corpus():
    path = CORPUS / "topo" / "ml-engineering__topo-p2p-r-2x-l4-cns.txt"
    if not path.is_file():
        pytest.skip("corpus absent")
    result = run(cli.parse_topo, path, "--format", "json")
    assert result.exit_code == 0 and json.loads(result.output)["topology"]["p2p"] == {"0-1": "CNS"}


def test_parse_nvlink_status_wraps_the_existing_parser(tmp_path):
    result = run(cli.parse_nvlink_status, NODE / "nvlink-s-h100x8-gpu5-two-inactive.txt")
    assert result.exit_code == 0, result.output
    assert "GPU5 NVIDIA H100 80GB HBM3: 18 link(s), 16 active, 26.562 GB/s" in result.output
    errors = tmp_path / "e.txt"
    errors.write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2fd736d2-a0b7-2ff1-0a75-93da08bb11b2)\n"
                      "\t Link 0: Replay Errors: 0\n\t Link 0: CRC Errors: 3\n")
    data = json.loads(run(cli.parse_nvlink_status, errors, "--format", "json").output)
    assert data["kind"] == "errors" and data["gpus"][0]["links"][0]["crc_flit_errors"] == 3


@pytest.mark.parametrize("command", [cli.parse_nvbandwidth, cli.parse_topo, cli.parse_nvlink_status])
def test_parse_bad_input_is_a_usage_error(command, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("nothing to see here\n")
    result = run(command, bad)
    assert result.exit_code == 2 and "bad.txt:" in result.output and "Traceback" not in result.output
    missing = run(command, tmp_path / "absent.txt")
    assert missing.exit_code == 2 and "absent.txt" in missing.output


def test_fabric_node_healthy_passes(tmp_path):
    links = tmp_path / "nvl.txt"
    links.write_text((NODE / "nvlink-s-h100x8-gpu5-two-inactive.txt").read_text().replace("<inactive>", "26.562 GB/s"))
    result = run(cli.node, "--topo", NODE / "topo-m-h100x8-nv18-8nic.txt", "--nvlink-status", links,
                 "--expect", NODE / "expect-h100x8.toml")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("PASS  fabric.node.topology [node] 8 GPUs match")


def test_fabric_node_planted_faults_exit_1_and_named():
    result = run(cli.node, "--topo", NODE / "topo-m-h100x8-nv18-8nic.txt",
                 "--nvlink-status", NODE / "nvlink-s-h100x8-gpu5-two-inactive.txt",
                 "--nvbandwidth", NODE / "nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt",
                 "--expect", NODE / "expect-h100x8.toml", "--format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    failed = {(r["check"], r["component"]) for r in data["results"] if r["status"] == "fail"}
    assert failed == {("fabric.node.topology", "GPU5"), ("fabric.node.p2p", "GPU3-GPU5")}


def test_fabric_node_generate_round_trips(tmp_path):
    generated = run(cli.node, "--topo", NODE / "topo-m-h100x8-nv18-8nic.txt", "--generate")
    assert generated.exit_code == 0 and 'nvlink = "NV18"' in generated.output
    expect = tmp_path / "node.toml"
    expect.write_text(generated.output)
    planted = run(cli.node, "--topo", NODE / "topo-m-h100x8-nv16-numa-hca-planted.txt", "--expect", expect)
    assert planted.exit_code == 1 and planted.output.count("FAIL") == 3


@pytest.mark.parametrize("args, words", [
    ([], "give at least one"),
    (["--topo", NODE / "topo-m-h100x8-nv18-8nic.txt"], "nothing to judge"),
    (["--nvbandwidth", NODE / "nvbandwidth-json-a100x4.json", "--sku", "h1000"], "unknown SKU"),
    (["--topo", NODE / "nvbandwidth-json-a100x4.json"], "no 'GPU0"),
])
def test_fabric_node_usage_errors(args, words):
    result = run(cli.node, *args)
    assert result.exit_code == 2 and words in result.output, result.output


def test_fabric_node_bad_expectations_file(tmp_path):
    bad = tmp_path / "e.toml"
    bad.write_text('nvlink = "fast"\n')
    result = run(cli.node, "--topo", NODE / "topo-m-h100x8-nv18-8nic.txt", "--expect", bad)
    assert result.exit_code == 2 and "not a link kind" in result.output
