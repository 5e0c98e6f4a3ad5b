"""The node topology against its expectations, and nvbandwidth pairs against the SKU references and
the node's median: planted faults (a slow pair, a wrong NV count, a GPU on the wrong NUMA node, a GPU
nearest the wrong HCA, inactive NVLinks) are each named; the healthy fixtures pass."""
from __future__ import annotations

import tomllib

import pytest

from healthcheck.fabric import nodetopo, p2p
from healthcheck.core.model import Status
from healthcheck.parsers.nvbandwidth import parse_nvbandwidth
from healthcheck.parsers.nvidia_smi_topo import parse_topo_m, parse_topo_p2p
from healthcheck.parsers.nvlink import parse_nvlink_status
from tests.conftest import CORPUS, FIXTURES

NODE = FIXTURES / "fabric" / "node"


def read(name: str) -> str:
    return (NODE / name).read_text()


def expect() -> nodetopo.TopoExpect:
    return nodetopo.validate(tomllib.loads(read("expect-h100x8.toml")))


def healthy_links() -> dict:
    text = read("nvlink-s-h100x8-gpu5-two-inactive.txt").replace("<inactive>", "26.562 GB/s")
    return parse_nvlink_status(text)


def failing(findings):
    return [f for f in findings if f.status is Status.FAIL]


# ------------------------------------------------------------------------------------ topology


def test_healthy_node_matches_expectations():
    node = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")), None, healthy_links())
    findings = nodetopo.check_topology(node, expect())
    assert [f.status for f in findings] == [Status.PASS]
    assert "8 GPUs match" in findings[0].message and "NUMA nodes" in findings[0].message


def test_planted_wrong_nv_count_numa_and_hca_each_named():
    node = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv16-numa-hca-planted.txt")), None,
                                   healthy_links())
    bad = {f.component: f.message for f in failing(nodetopo.check_topology(node, expect()))}
    assert set(bad) == {"GPU2-GPU6", "GPU4", "GPU6"}
    assert bad["GPU2-GPU6"] == "GPU2-GPU6: NV16, expected NV18 (2 NVLink(s) missing)"
    assert bad["GPU4"].startswith("GPU4: on NUMA node 0, expected 1")
    assert bad["GPU6"] == "GPU6: nearest HCA mlx5_7 (PIX), expected mlx5_6"


def test_inactive_nvlinks_named():
    links = parse_nvlink_status(read("nvlink-s-h100x8-gpu5-two-inactive.txt"))
    node = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")), None, links)
    bad = failing(nodetopo.check_topology(node, expect()))
    assert [(f.component, f.message) for f in bad] == [
        ("GPU5", "GPU5: 16 active NVLinks, expected 18 (inactive: link 4, 11)")]


def test_nvlink_expectation_without_nvlink_output_is_an_error_not_a_pass():
    node = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")))
    findings = nodetopo.check_topology(node, expect())
    assert [f.status for f in findings] == [Status.ERROR]


def test_hca_relation_and_gpu_count():
    node = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")))
    exp = nodetopo.validate({"gpus": 4, "hca_relation": "PIX"})
    assert [(f.component, f.message) for f in failing(nodetopo.check_topology(node, exp))] == [
        ("node", "8 GPUs in the topology, expected 4")]


@pytest.mark.corpus
def test_corpus_pcie_node_hca_too_far():
    path = CORPUS / "nvlink-topo" / "topo-m-a100-pcie-4gpu-no-nvlink-adroit.txt"
    if not path.is_file():
        pytest.skip("corpus absent")
    node = nodetopo.build_topology(parse_topo_m(path.read_text()))
    assert node.gpus[2].nearest_hcas == ["mlx5_0"] and node.gpus[2].hca_relation == "SYS"
    bad = failing(nodetopo.check_topology(node, nodetopo.validate({"hca_relation": "NODE", "nvlink": "NV4"})))
    assert {f.component for f in bad} >= {"GPU2", "GPU3", "GPU0-GPU1"}
    assert any("SYS away, expected at most NODE" in f.message for f in bad)


@pytest.mark.corpus
def test_corpus_p2p_cns_fails_ok_passes():
    for name, status in (("ml-engineering__topo-p2p-r-2x-l4-cns.txt", Status.FAIL),
                         ("ml-engineering__topo-p2p-r-8x-h100-all-ok.txt", Status.PASS)):
        path = CORPUS / "topo" / name
        if not path.is_file():
            pytest.skip("corpus absent")
        node = nodetopo.build_topology(None, parse_topo_p2p(path.read_text()))
        findings = nodetopo.check_topology(node, nodetopo.validate({"p2p": "OK"}))
        assert {f.status for f in findings} == {status}


@pytest.mark.corpus
def test_switched_or_direct():
    direct = CORPUS / "nvlink-topo" / "topo-m-a100-sxm-4gpu-nv4-della.txt"
    node = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")))
    assert "through the NVSwitches" in node.path(3, 5)
    if direct.is_file():
        mesh = nodetopo.build_topology(parse_topo_m(direct.read_text()))
        assert "direct" in mesh.path(0, 1)


def test_generated_expectations_round_trip_and_catch_the_planted_node():
    good = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")), None, healthy_links())
    generated = nodetopo.expectations_from(good)
    assert generated["nvlink"] == "NV18" and generated["numa"] == [0, 0, 0, 0, 1, 1, 1, 1]
    exp = nodetopo.validate(generated)
    assert [f.status for f in nodetopo.check_topology(good, exp)] == [Status.PASS]
    planted = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv16-numa-hca-planted.txt")), None,
                                      healthy_links())
    assert len(failing(nodetopo.check_topology(planted, exp))) == 3


@pytest.mark.parametrize("section, words", [
    ({"gpus": 0}, "positive integer"),
    ({"gpus": True}, "positive integer"),
    ({"nvlink": "fast"}, "not a link kind"),
    ({"pairs": {"0-0": "NV4"}}, "not a GPU pair"),
    ({"pairs": {"a-b": "NV4"}}, "not a GPU pair"),
    ({"numa": "0"}, "expected a list"),
    ({"hca": {"x": "mlx5_0"}}, "not a GPU index"),
    ({"hca_relation": "NV4"}, "PCIe path kind"),
    ({"p2p": "yes"}, "p2p"),
    ({"colour": "red"}, "unknown key"),
])
def test_bad_expectations_named(section, words):
    with pytest.raises(nodetopo.TopologyExpectError, match=words):
        nodetopo.validate(section)


# ------------------------------------------------------------------------------------ nvbandwidth


def test_slow_pair_named_with_its_path_and_inactive_links():
    result = parse_nvbandwidth(read("nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt"))
    links = parse_nvlink_status(read("nvlink-s-h100x8-gpu5-two-inactive.txt"))
    topology = nodetopo.build_topology(parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt")), None, links)
    findings = p2p.judge(result, p2p.load_references(), topology=topology)
    bad = failing(findings)
    assert {f.component for f in bad} == {"GPU3-GPU5"}
    assert len(bad) == 4  # both directions of the write and the read test
    message = bad[0].message
    assert "below the h100_sxm reference 390 GB/s-15% (own estimate)" in message
    assert "of the node's median" in message
    assert "NV18 (18 NVLinks, through the NVSwitches)" in message and "GPU5 has 2 inactive link(s)" in message
    assert bad[0].metrics["reference_gbps"] == 390.0 and bad[0].metrics["gbps"] < 190
    by_test = {f.component: f.status for f in findings if f.status is not Status.FAIL}
    assert by_test == {"host_to_device_memcpy_ce": Status.PASS, "device_to_host_memcpy_ce": Status.PASS,
                       "all_to_host_memcpy_ce": Status.SKIP}


def test_median_catches_a_slow_pair_without_any_reference():
    text = read("nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt").replace("H100 80GB HBM3", "Mystery GPU")
    bad = failing(p2p.judge(parse_nvbandwidth(text), p2p.load_references()))
    assert {f.component for f in bad} == {"GPU3-GPU5"}
    assert all("reference" not in f.message and "48% of the node's median" in f.message for f in bad)


def test_one_gpu_in_every_slow_pair_is_suspected():
    lines = ["Running device_to_device_memcpy_write_ce.", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)",
             "  0 1 2 3"]
    for r in range(4):
        lines.append(f"{r} " + " ".join("N/A" if r == c else ("120.0" if 2 in (r, c) else "276.0")
                                         for c in range(4)))
    findings = p2p.judge(parse_nvbandwidth("\n".join(lines)), p2p.load_references(), sku="a100_sxm")
    suspects = [f for f in findings if f.component == "GPU2"]
    assert len(suspects) == 1 and "GPU2 is in all 6 slow pairs" in suspects[0].message


@pytest.mark.corpus
def test_whole_node_below_reference_fails_every_pair():
    path = CORPUS / "nvbandwidth" / "nvbandwidth-readme__d2d-memcpy-write-ce-8gpu.txt"
    if not path.is_file():
        pytest.skip("corpus absent")
    result = parse_nvbandwidth(path.read_text())
    assert {f.status for f in p2p.judge(result, p2p.load_references(), sku="a100_sxm")} == {Status.PASS}
    findings = p2p.judge(result, p2p.load_references(), sku="h100_sxm")
    assert sum(f.status is Status.FAIL for f in findings) == p2p.MAX_LISTED + 1  # 16 listed + "40 more"
    assert "40 more slow pair(s)" in findings[-1].message


def test_suspiciously_fast_pair_warns():
    text = ("Running device_to_device_memcpy_write_ce.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n"
            "  0 1\n0 N/A 276.0\n1 900.0 N/A\n")
    findings = p2p.judge(parse_nvbandwidth(text), p2p.load_references(), sku="a100_sxm")
    assert [(f.status, f.component) for f in findings if f.status is Status.WARN] == [(Status.WARN, "GPU0-GPU1")]


def test_error_block_is_error_and_latency_is_not_judged():
    result = parse_nvbandwidth(read("nvbandwidth-json-a100x4.json"))
    statuses = {f.component: f.status for f in p2p.judge(result, p2p.load_references(), sku="a100_sxm")}
    assert statuses == {"device_to_device_memcpy_write_ce": Status.PASS, "host_device_latency_sm": Status.SKIP,
                        "all_to_one_write_ce": Status.SKIP}
    error = parse_nvbandwidth("Running device_to_device_memcpy_read_ce.\nError: CUDA_ERROR_PEER_ACCESS\n")
    assert [f.status for f in p2p.judge(error, p2p.load_references())] == [Status.ERROR]


def test_packaged_references_every_entry_has_a_source_and_estimates_marked():
    refs = p2p.load_references()
    assert {"h100_sxm", "h200", "a100_sxm", "b200"} <= {s.name for s in refs.skus}
    for sku in refs.skus:
        for name, ref in sku.tests.items():
            assert ref.source and ref.unit == "GB/s"
            assert ref.peak is None or ref.value * (1 + ref.upper) <= ref.peak * 1.1, (sku.name, name)
    assert refs.sku_for("NVIDIA H100 80GB HBM3").name == "h100_sxm"
    assert refs.sku_for("NVIDIA H800").name == "h800"
    assert not refs.by_name("a100_sxm").tests["device_to_device_memcpy_write_ce"].estimate


def test_site_override_replaces_key_by_key():
    override = ('[sku.h100_sxm]\nmatch = ["H100"]\n'
                '"device_to_device_memcpy_write_ce" = { value = 370.0, lower = -0.1, source = "our golden nodes",'
                ' estimate = false }\n')
    refs = p2p.load_references(override=override)
    sku = refs.by_name("h100_sxm")
    assert sku.tests["device_to_device_memcpy_write_ce"].value == 370.0
    assert sku.tests["host_to_device_memcpy_ce"].value == 54.0  # kept from the packaged file


@pytest.mark.parametrize("text, words", [
    ("[sku.x]\nmatch = ['X']\nt = { value = 1.0 }\n", "missing 'source'"),
    ("[sku.x]\nmatch = ['X']\nt = { value = -1.0, source = 's' }\n", "value > 0"),
    ("[sku.x]\nmatch = ['X']\nt = { value = 1.0, source = 's', colour = 1 }\n", "unknown key"),
    ("[sku.x]\nmatch = 'X'\n", "match must be a list"),
    ("[other]\n", "unknown table"),
    ("not toml [", "not valid TOML"),
])
def test_bad_references_named(text, words):
    with pytest.raises(p2p.P2pReferencesError, match=words):
        p2p.load_references(text)


def test_unknown_sku_name_is_an_error():
    result = parse_nvbandwidth(read("nvbandwidth-json-a100x4.json"))
    with pytest.raises(p2p.P2pReferencesError, match="unknown SKU"):
        p2p.judge(result, p2p.load_references(), sku="h1000")
