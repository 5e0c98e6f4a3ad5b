"""The SKU references as data: every shipped SKU has GEMM, memory, PCIe and nccl-tests references with
their sources; link types give every collective a line-rate efficiency and alpha-beta references;
GPU names as NVML / nvidia-smi print them (and every real name in the corpus) find the right section."""
from __future__ import annotations

import re

import pytest

from healthcheck.policies import references as R
from healthcheck.parsers import ParseError
from healthcheck.parsers import nccl_tests, nvidia_smi
from tests.conftest import CORPUS

REFS = R.load()
NEW_SKUS = ("b200", "gb200", "h100_pcie", "h100_nvl", "l40s", "a100_pcie", "h200_nvl")
ALL_SKUS = NEW_SKUS + ("h100_sxm", "h200", "a100_sxm")
PER_SKU_KEYS = ("gemm_bf16_tflops", "gemm_fp16_tflops", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps", "line_rate_gbps")


@pytest.mark.parametrize("name", ALL_SKUS)
def test_every_sku_has_compute_memory_pcie_and_line_rate_with_sources(name):
    sku = REFS.by_name(name)
    assert sku is not None and sku.match and sku.link in REFS.links, name
    for key in PER_SKU_KEYS:
        ref = sku.get(key)
        assert ref is not None and ref.source and ref.unit, (name, key)
        if key == "line_rate_gbps":
            continue
        assert ref.lower is not None and -0.6 < ref.lower < 0, (name, key)
        assert ref.peak is not None and ref.value < ref.peak, (name, key)  # achievable, below the datasheet
        if name in NEW_SKUS:  # a figure above the datasheet peak is no measurement: the upper bound stays below
            assert ref.high_bound is not None and ref.high_bound <= ref.peak * 1.01, (name, key)
        # the achievable figure is our own estimate from the peak: the source says which is which
        assert re.search(r"datasheet|product brief|PCIe Gen|NVLink-C2C|host link", ref.source), (name, key, ref.source)
    for key in ("gemm_bf16_tflops", "hbm_copy_gbps"):
        source = sku.get(key).source
        assert "estimate" in source or name in ("h100_sxm", "h200", "a100_sxm"), (name, key, source)


@pytest.mark.parametrize("name", ALL_SKUS)
def test_every_sku_judges_every_collective(name):
    """nccl-tests references for every SKU: a line-rate efficiency per collective (own or from its
    link type) and the alpha-beta references."""
    sku = REFS.by_name(name)
    for coll in R.COLLECTIVES:
        eff = sku.get(f"nccl_{coll}_efficiency_pct")
        assert eff is not None and eff.unit == "%" and eff.source and eff.low_bound and eff.low_bound > 0, (name, coll)
    alpha = sku.get("nccl_alpha_us")
    assert alpha is not None and alpha.high_bound and alpha.unit == "us" and alpha.source
    beta = sku.get("nccl_beta_efficiency_pct")
    assert beta is not None and beta.low_bound and beta.source


@pytest.mark.parametrize("fabric", ["ndr400x8", "hdr200x8"])
def test_fabrics_have_a_link_type_with_per_collective_efficiency_and_alpha(fabric):
    section = REFS.fabrics[fabric]
    assert section.link in ("ib_ndr", "ib_hdr") and section.get("line_rate_gbps") is not None
    assert section.get("nccl_all_reduce_busbw_gbps") is not None
    for coll in R.COLLECTIVES:
        assert section.get(f"nccl_{coll}_efficiency_pct") is not None, (fabric, coll)
    assert section.get("nccl_alpha_us").high_bound == pytest.approx(100.0)


def test_link_types_differ_where_the_links_differ():
    # cross-node alltoall / sendrecv go through one rail: their floors are far below all_reduce's
    ndr = REFS.links["ib_ndr"]
    assert ndr.get("nccl_alltoall_efficiency_pct").value < ndr.get("nccl_all_reduce_efficiency_pct").value / 4
    # PCIe cards: no upper bound (bridged pairs run faster than PCIe), a floor that still judges
    pcie = REFS.links["pcie4"]
    assert pcie.get("nccl_all_reduce_efficiency_pct").high_bound is None
    assert pcie.get("nccl_all_reduce_efficiency_pct").judge(20.0) == "low"
    assert REFS.links["nvlink3"].get("nccl_alltoall_alpha_us").value > REFS.links["nvlink3"].get("nccl_alpha_us").value


# What NVML / nvidia-smi print (product names; old nccl-tests print them without "NVIDIA ").
@pytest.mark.parametrize("gpu, sku", [
    ("NVIDIA B200", "b200"), ("NVIDIA GB200", "gb200"),
    ("NVIDIA H100 PCIe", "h100_pcie"), ("NVIDIA H100 NVL", "h100_nvl"),
    ("NVIDIA L40S", "l40s"), ("NVIDIA A100-PCIE-40GB", "a100_pcie"), ("NVIDIA A100 80GB PCIe", "a100_pcie"),
    ("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H200", "h200"), ("NVIDIA H200 NVL", "h200_nvl"),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm"), ("A100-SXM4-40GB", "a100_sxm"),
    ("NVIDIA GH200 120GB", None), ("NVIDIA GH200 480GB", None),  # GH200 is not an H200
    ("NVIDIA H800", None), ("NVIDIA L40", None), ("NVIDIA A10", None), ("NVIDIA A10G", None),
    ("NVIDIA GeForce RTX 4090", None), ("Tesla V100-SXM2-32GB", None),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None),
])
def test_nvml_names_find_their_sku(gpu, sku):
    found = REFS.sku_for(gpu)
    assert (found.name if found else None) == sku


def test_match_is_case_insensitive_and_at_word_starts():
    b200 = REFS.by_name("b200")
    assert b200.matches("nvidia b200") and b200.matches("B200") and not b200.matches("NVIDIA GB200")
    assert not REFS.by_name("h200").matches("NVIDIA GH200 120GB")
    assert REFS.by_name("a100_pcie").matches("NVIDIA A100-PCIE-80GB")


# Every GPU name the corpus holds and the section it must find (None: no references, judged as such).
CORPUS_NAMES = {
    "A100-SXM4-40GB": "a100_sxm", "NVIDIA A100-SXM4-80GB": "a100_sxm", "NVIDIA H100 80GB HBM3": "h100_sxm",
    "NVIDIA H100 NVL": "h100_nvl", "NVIDIA GH200 120GB": None, "NVIDIA H800": None, "NVIDIA A10": None,
    "NVIDIA A10G": None, "Tesla V100-SXM3-32GB": None, "Tesla V100-SXM2-32GB-LS": None, "Tesla P100-PCIE-16GB": None,
    "Tesla K80": None, "Tesla P4": None, "GRID P4-1Q": None, "Graphics Device": None, "NVIDIA TITAN V": None,
    "GeForce GTX 1070": None, "GeForce GTX 1070 Ti": None, "GeForce RTX 2080 Ti": None, "Quadro P2000": None,
    "Quadro P400": None, "NVIDIA GeForce GT 1030": None, "NVIDIA GeForce RTX 2080": None,
    "NVIDIA GeForce RTX 3060": None, "NVIDIA GeForce RTX 3080": None, "NVIDIA GeForce RTX 3090": None,
    "NVIDIA GeForce RTX 4090": None, "NVIDIA GeForce RTX 5090": None, "NVIDIA RTX A5000": None,
    "NVIDIA RTX A5000 Laptop GPU": None, "NVIDIA RTX 4000 SFF Ada Generation": None,
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": None,
}


def _corpus_gpu_names() -> set[str]:
    names: set[str] = set()
    for folder in ("nvidia-smi", "peer/nvidia-smi-text", "peer/nvidia-smi-xml"):
        for path in sorted((CORPUS / folder).glob("*")) if (CORPUS / folder).is_dir() else []:
            try:
                result = nvidia_smi.parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace"))
            except ParseError:
                continue
            names |= {g.name for g in result.gpus if g.name}
    for folder in ("nccl-tests", "peer/nccl-tests"):
        for path in sorted((CORPUS / folder).glob("*")) if (CORPUS / folder).is_dir() else []:
            try:
                result = nccl_tests.parse(path.read_text(encoding="utf-8", errors="replace"))
            except ParseError:
                continue
            names |= {r.name for r in result.ranks if r.name}
    return names


@pytest.mark.corpus
def test_every_real_gpu_name_in_the_corpus_maps_to_the_right_section_or_none():
    names = _corpus_gpu_names()
    if not names:
        pytest.skip("corpus absent")
    unknown = names - set(CORPUS_NAMES)
    assert not unknown, f"decide the section of these corpus GPU names: {sorted(unknown)}"
    for name in sorted(names):
        found = REFS.sku_for(name)
        assert (found.name if found else None) == CORPUS_NAMES[name], name
    # the corpus holds the SKUs this suite knows best: they must be among the names read
    assert {"A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL", "NVIDIA GH200 120GB"} <= names


def test_site_file_overrides_a_link_type_for_every_section_that_uses_it(tmp_path):
    site = tmp_path / "refs.toml"
    site.write_text('[link.nvlink4]\nnccl_alpha_us = { value = 25.0, upper = 1.0, unit = "us", source = "ours" }\n'
                    '[sku.h100_sxm]\nnccl_broadcast_efficiency_pct = { value = 80.0, lower = -0.1, unit = "%" }\n')
    refs = R.load(str(site))
    for name in ("h100_sxm", "h200"):
        assert refs.by_name(name).get("nccl_alpha_us").high_bound == 50.0
    assert refs.by_name("h100_sxm").get("nccl_broadcast_efficiency_pct").value == 80.0  # own entry first
    assert refs.by_name("h200").get("nccl_broadcast_efficiency_pct").value == 78.0      # still the link's
    assert R.load().by_name("h200").get("nccl_alpha_us").value == 40.0                   # defaults untouched


def test_site_file_can_point_a_sku_at_another_link_type(tmp_path):
    site = tmp_path / "refs.toml"
    site.write_text('[sku.h100_nvl]\nlink = "nvlink4"\n')
    sku = R.load(str(site)).by_name("h100_nvl")
    assert sku.link == "nvlink4" and sku.get("nccl_all_reduce_efficiency_pct").value == 100.0


@pytest.mark.parametrize("text, message", [
    ('[sku.h100_sxm]\nlink = "nvlink9"\n', "sku.h100_sxm.link: no [link.nvlink9]"),
    ('[fabric.f]\nlink = "ib_xdr"\n', "fabric.f.link: no [link.ib_xdr]"),
    ('[sku.h100_sxm]\nlink = 4\n', "the name of a [link.NAME] section"),
    ('[link.x]\nlink = "nvlink4"\n', "a link type cannot name another"),
    ('[link.x]\nnccl_alpha_us = { value = -3, unit = "us" }\n', "must be > 0"),
])
def test_bad_link_entries_are_refused_naming_the_key(tmp_path, text, message):
    site = tmp_path / "refs.toml"
    site.write_text(text)
    with pytest.raises(R.ReferencesError) as err:
        R.load(str(site))
    assert message in str(err.value) and str(site) in str(err.value)


def test_efficiency_bounds_never_override_a_busbw_reference():
    """Where a section has both, the line-rate efficiency band contains the busbw band: the busbw
    references keep every verdict they gave, the efficiency judges what they do not cover."""
    for section in REFS.skus + list(REFS.fabrics.values()):
        line = section.get("line_rate_gbps")
        for coll in R.COLLECTIVES:
            busbw, eff = section.get(f"nccl_{coll}_busbw_gbps"), section.get(f"nccl_{coll}_efficiency_pct")
            if busbw is None or eff is None:
                continue
            assert eff.low_bound * line.value / 100 <= busbw.low_bound, (section.name, coll)
            if eff.high_bound is not None and busbw.high_bound is not None:
                assert eff.high_bound * line.value / 100 >= busbw.high_bound, (section.name, coll)
