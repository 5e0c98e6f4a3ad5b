"""nvbandwidth and nvidia-smi topo parsers: the real corpus, own fixtures (a slow pair planted, JSON
output, tab and space layouts), damaged input refused with ParseError, bounds and fuzz."""
from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings

from healthcheck.parsers import ParseError
from healthcheck.parsers.nvbandwidth import MAX_INPUT_CHARS as NVB_MAX
from healthcheck.parsers.nvbandwidth import pairs, parse_nvbandwidth, to_dict
from healthcheck.parsers.nvidia_smi_topo import MAX_INPUT_CHARS as TOPO_MAX
from healthcheck.parsers.nvidia_smi_topo import nvlink_count, parse_topo, parse_topo_m, parse_topo_p2p
from tests.conftest import CORPUS, FIXTURES, corpus_params
from tests.fuzzing import mutated

NODE = FIXTURES / "fabric" / "node"


def read(name: str) -> str:
    return (NODE / name).read_text()


# ------------------------------------------------------------------------------------ nvbandwidth


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvbandwidth"))
def test_nvbandwidth_corpus_parses_into_full_matrices(path):
    result = parse_nvbandwidth(path.read_text())
    assert result.tests
    for test in result.tests:
        assert test.status == "passed"
        assert len(test.matrix) == len(test.rows) and all(len(r) == len(test.columns) for r in test.matrix)
        assert pairs(test), "every measured pair is returned"


@pytest.mark.corpus
def test_nvbandwidth_readme_matrix_values_and_diagonal():
    path = CORPUS / "nvbandwidth" / "nvbandwidth-readme__d2d-memcpy-write-ce-8gpu.txt"
    if not path.is_file():
        pytest.skip("corpus nvbandwidth/ absent")
    test = parse_nvbandwidth(path.read_text()).tests[0]
    assert test.name == "device_to_device_memcpy_write_ce"
    assert (test.row_kind, test.column_kind, test.unit) == ("GPU", "GPU", "GB/s")
    assert test.value(6, 0) == 274.89 and test.value(0, 1) == 276.07
    assert len(pairs(test)) == 56  # 8 x 8 less the diagonal of 0.00


def test_nvbandwidth_own_output_every_block():
    result = parse_nvbandwidth(read("nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt"))
    assert result.version == "v0.5" and result.driver == "550.54.15" and result.cuda_runtime == "12040"
    assert result.devices[3] == "NVIDIA H100 80GB HBM3 (00000000:5d:00)"
    names = [t.name for t in result.tests]
    assert names == ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_write_ce",
                     "device_to_device_memcpy_read_ce", "all_to_host_memcpy_ce"]
    h2d = result.test("host_to_device_memcpy_ce")
    assert (h2d.row_kind, h2d.column_kind, h2d.rows, len(h2d.columns)) == ("CPU", "GPU", [0], 8)
    assert h2d.sum == 441.60
    d2d = result.test("device_to_device_memcpy_write_ce")
    assert d2d.matrix[3][3] is None  # "N/A" on the diagonal
    assert d2d.value(3, 5) < 190 < d2d.value(3, 4)
    waived = result.test("all_to_host_memcpy_ce")
    assert waived.status == "waived" and waived.matrix == []
    assert json.loads(json.dumps(to_dict(result)))["tests"][2]["matrix"][3][5] == d2d.value(3, 5)


def test_nvbandwidth_json_output_same_shape():
    result = parse_nvbandwidth(read("nvbandwidth-json-a100x4.json"))
    assert result.version == "v0.5" and result.driver == "535.129.03"
    write = result.test("device_to_device_memcpy_write_ce")
    assert write.status == "passed" and write.value(1, 0) == 275.9 and write.value(2, 2) is None
    assert len(pairs(write)) == 12
    latency = result.test("host_device_latency_sm")
    assert latency.unit == "ns" and (latency.row_kind, latency.column_kind) == ("CPU", "GPU")
    assert result.test("all_to_one_write_ce").status == "waived"


def test_nvbandwidth_error_and_cut_blocks_are_not_passes():
    text = ("Running device_to_device_memcpy_write_ce.\nError: peer access is not supported\n\n"
            "Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n")
    result = parse_nvbandwidth(text)
    assert [(t.status, t.message) for t in result.tests] == [("error", "peer access is not supported"),
                                                             ("incomplete", None)]


def test_nvbandwidth_matrix_whose_running_line_was_cut_is_named_by_its_sum_line():
    text = ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           0         1\n"
            " 0       N/A    357.73\n"
            " 1    357.80       N/A\n"
            "\nSUM device_to_device_memcpy_read_ce 715.53\n\n"
            "Running device_to_device_memcpy_write_ce.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n"
            "  0 1\n0 N/A 300.0\n1 301.0 N/A\nSUM device_to_device_memcpy_write_ce 601.00\n")
    result = parse_nvbandwidth(text)
    assert [(t.name, t.status, t.sum) for t in result.tests] == [
        ("device_to_device_memcpy_read_ce", "passed", 715.53), ("device_to_device_memcpy_write_ce", "passed", 601.0)]
    assert result.tests[0].value(0, 1) == 357.73 and result.tests[0].unit == "GB/s"


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n  0 1\n0 N/A 1.0\n1 1.0 N/A\n", "without its testcase name"),
    ("hello\nworld\n", "no 'Running"),
    ("Running x.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n  0 1\n0 N/A 1.0 2.0\n", "2 columns"),
    ("Running x.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n  0 1\n0 N/A fast\n", "not a bandwidth"),
    ('{"nvbandwidth": {"testcases": []}}', "no test cases"),
    ('{"other": 1}', "nvbandwidth' object"),
    ('{"nvbandwidth": {"testcases": [{"name": "t", "bandwidth_matrix": [["1"], ["1", "2"]]}]}}', "same width"),
])
def test_nvbandwidth_bad_input_named(text, words):
    with pytest.raises(ParseError, match=words):
        parse_nvbandwidth(text)


# ------------------------------------------------------------------------------------------- topo


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("topo") + corpus_params("nvlink-topo", "topo-*"))
def test_topo_corpus_parses(path):
    matrix = parse_topo(path.read_text())
    gpus = matrix.gpus()
    assert gpus and [g.index for g in gpus] == sorted(g.index for g in gpus)
    for a in gpus:
        for b in gpus:
            assert matrix.link(a.name, b.name) == ("X" if a is b else matrix.link(b.name, a.name))


def _corpus(sub: str, name: str) -> str:
    path = CORPUS / sub / name
    if not path.is_file():
        pytest.skip(f"corpus {sub}/{name} absent")
    return path.read_text()


@pytest.mark.corpus
def test_topo_corpus_h800_messy_paste():
    """Space-aligned paste, NIC rows without NIC columns, a clipped CPU affinity, a cut legend."""
    matrix = parse_topo_m(_corpus("nvlink-topo", "topo-matrix-h800x8-nv8-4nic-legend-cut.txt"))
    assert len(matrix.gpus()) == 8 and {d.hca for d in matrix.nics()} == {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}
    assert nvlink_count(matrix.link("GPU0", "GPU7")) == 8
    assert matrix.devices[0].cpu_affinity == "-31,64-95" and matrix.devices[7].numa_affinity == "1"
    assert matrix.link("NIC0", "GPU1") == "PIX" and matrix.link("NIC3", "GPU7") == "PIX"


@pytest.mark.corpus
def test_topo_corpus_nic_legend_and_gpu_numa_column():
    matrix = parse_topo_m(_corpus("nvlink-topo", "topo-m-h100-1gpu-6nic-pix-della.txt"))
    gpu = matrix.gpus()[0]
    assert (gpu.cpu_affinity, gpu.numa_affinity, gpu.gpu_numa_id) == ("0", "0", None)
    assert [n.hca for n in matrix.nics()] == [f"mlx5_{i}" for i in range(6)]
    assert matrix.link("GPU0", "NIC1") == "PIX" and matrix.link("GPU0", "NIC5") == "SYS"


@pytest.mark.corpus
def test_topo_corpus_old_style_hca_columns_and_numa_ids():
    matrix = parse_topo_m(_corpus("nvlink-topo", "topo-m-v100-power9-4gpu-nv3-4hca-traverse.txt"))
    assert [n.hca for n in matrix.nics()] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [g.numa_affinity for g in matrix.gpus()] == ["0", "0", "8", "8"]
    assert matrix.link("GPU0", "GPU1") == "NV3" and matrix.link("GPU1", "GPU2") == "SYS"


@pytest.mark.corpus
def test_topo_corpus_p2p():
    ok = parse_topo_p2p(_corpus("topo", "ml-engineering__topo-p2p-r-8x-h100-all-ok.txt"))
    assert ok.kind == "p2p" and ok.link("GPU2", "GPU6") == "OK"
    cns = parse_topo(_corpus("topo", "ml-engineering__topo-p2p-r-2x-l4-cns.txt"))
    assert cns.kind == "p2p" and cns.link("GPU0", "GPU1") == "CNS"
    with pytest.raises(ParseError, match="topo -p2p"):
        parse_topo_m(_corpus("topo", "ml-engineering__topo-p2p-r-8x-h100-all-ok.txt"))


def test_topo_own_fixture_tabs_and_empty_cells():
    matrix = parse_topo_m(read("topo-m-h100x8-nv18-8nic.txt"))
    assert len(matrix.gpus()) == 8 and len(matrix.nics()) == 8
    assert matrix.devices[5].numa_affinity == "1" and matrix.devices[5].cpu_affinity == "56-111,168-223"
    assert matrix.devices[5].gpu_numa_id is None  # N/A
    assert matrix.nic_legend["NIC7"] == "mlx5_7"


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("$ nvidia-smi topo -m\nsomething went wrong\n", "no 'GPU0"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\n", "1 cells for 2"),
    ("\tGPU0\tGPU1\nGPU0\t X \tFAST\n", "not one of"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU0\tNV4\t X \n", "printed twice"),
    ("\tGPU0\tGPU1\n\tGPU0\tGPU1\n", "second header"),
])
def test_topo_bad_input_named(text, words):
    with pytest.raises(ParseError, match=words):
        parse_topo(text)


# ---------------------------------------------------------------------------------- bounds, fuzz


@pytest.mark.parametrize("parse, limit", [(parse_nvbandwidth, NVB_MAX), (parse_topo, TOPO_MAX)])
def test_oversized_input_refused_before_parsing(parse, limit):
    with pytest.raises(ParseError, match="over the limit"):
        parse("0" * (limit + 1))


@pytest.mark.parametrize("text", [
    "Running x.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n" + "0 " * 30_000 + "\n",
    "Running " + "a" * 60_000 + "\n" * 10,
    ("\tGPU0\tGPU1\n" + "GPU0\t X \tNV4" + "\tNV4" * 15_000 + "\n") * 20,
    "SUM " + "9" * 60_000 + "\n",
    "(row)(column)" * 4000 + "\n",
])
@pytest.mark.parametrize("parse", [parse_nvbandwidth, parse_topo])
def test_adversarial_lines_end_quickly(parse, text):
    start = time.perf_counter()
    try:
        parse(text)
    except ParseError:
        pass
    assert time.perf_counter() - start < 10.0  # a safety bound for a 2-core machine, not a benchmark


_SEEDS_NVB = [read("nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt")[:3000], read("nvbandwidth-json-a100x4.json")]
_SEEDS_TOPO = [read("topo-m-h100x8-nv18-8nic.txt")[:3000],
               "\tGPU0\tGPU1\nGPU0\t X \tOK\nGPU1\tOK\t X \n"]


@settings(max_examples=150, deadline=None)
@given(mutated(_SEEDS_NVB))
def test_nvbandwidth_fuzz_only_parse_errors(text):
    try:
        parse_nvbandwidth(text)
    except ParseError:
        pass


@settings(max_examples=150, deadline=None)
@given(mutated(_SEEDS_TOPO))
def test_topo_fuzz_only_parse_errors(text):
    try:
        parse_topo(text)
    except ParseError:
        pass
