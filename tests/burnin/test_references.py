"""References as data: the built-in file, site overrides key by key, SKU matching, clear errors."""
from __future__ import annotations

import pytest

from healthcheck.policies import references as R


def test_builtin_references_cover_the_three_skus_with_sources():
    refs = R.load()
    for gpu, sku in (("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H200", "h200"),
                     ("NVIDIA A100-SXM4-80GB", "a100_sxm"), ("NVIDIA A100-SXM4-40GB", "a100_sxm")):
        found = refs.sku_for(gpu)
        assert found is not None and found.name == sku
        for key in ("gemm_bf16_tflops", "hbm_copy_gbps", "h2d_gbps", "nccl_all_reduce_busbw_gbps"):
            ref = found.get(key)
            assert ref is not None and ref.source and ref.unit and ref.lower < 0, (sku, key)
    assert refs.sku_for("Tesla V100-SXM2-32GB") is None and refs.sku_for(None) is None


def test_judge_low_high_ok_unknown():
    ref = R.Reference(100.0, "GB/s", lower=-0.1, upper=0.2)
    assert (ref.low_bound, ref.high_bound) == (90.0, 120.0)
    assert [ref.judge(v) for v in (89.9, 90.0, 120.0, 120.1, None, float("nan"))] == \
        ["low", "ok", "ok", "high", "unknown", "unknown"]
    assert R.Reference(5.0, "x").judge(0.0) == "ok"  # no bounds: never judges
    assert ref.describe() == "100 GB/s >= 90 <= 120"


def test_site_file_overrides_one_key_and_adds_a_sku_matched_first(tmp_path):
    site = tmp_path / "refs.toml"
    site.write_text('[sku.h100_sxm]\nnccl_all_reduce_busbw_gbps = { value = 400.0, lower = -0.1, unit = "GB/s" }\n'
                    '[sku.h100_pcie]\nmatch = ["H100 PCIe"]\ngemm_bf16_tflops = { value = 500.0, unit = "TFLOP/s" }\n')
    refs = R.load(str(site))
    h100 = refs.sku_for("NVIDIA H100 80GB HBM3")
    assert h100.get("nccl_all_reduce_busbw_gbps").value == 400.0
    assert h100.get("gemm_bf16_tflops").value == 700.0  # untouched keys keep the built-in value
    assert refs.sku_for("NVIDIA H100 PCIe").name == "h100_pcie"
    assert refs.sources == ["built-in references", str(site)]
    assert R.load().sku_for("NVIDIA H100 80GB HBM3").get("nccl_all_reduce_busbw_gbps").value == 460.0


@pytest.mark.parametrize("text, message", [
    ("[sku.x]\nmatch = ['X']\nfoo = { value = 1 }\n", "missing or empty 'unit'"),
    ("[sku.x]\nmatch = ['X']\nfoo = { value = 1, unit = 'u', lower = 0.5 }\n", "lower: a relative bound"),
    ("[sku.x]\nmatch = ['X']\nfoo = { value = 1, unit = 'u', upper = -1 }\n", "upper: a relative bound"),
    ("[sku.x]\nmatch = ['X']\nfoo = { value = 'a', unit = 'u' }\n", "finite number"),
    ("[fabric.f]\nline_rate_gbps = { value = 0, unit = 'GB/s' }\n", "line_rate_gbps.value: must be > 0, got 0"),
    ("[sku.x]\nmatch = ['X']\nfoo = { value = 1, unit = 'u', bogus = 2 }\n", "unknown key(s) bogus"),
    ("[sku.new]\nfoo = { value = 1, unit = 'u' }\n", "needs 'match'"),
    ("[gpu.x]\n", "unknown top-level table(s) gpu"),
    ("[sku.x\n", "not valid TOML"),
])
def test_bad_site_file_is_refused_naming_the_key(tmp_path, text, message):
    site = tmp_path / "refs.toml"
    site.write_text(text)
    with pytest.raises(R.ReferencesError) as err:
        R.load(str(site))
    assert message in str(err.value) and str(site) in str(err.value)


def test_missing_site_file_is_a_clear_error(tmp_path):
    with pytest.raises(R.ReferencesError, match="cannot read"):
        R.load(str(tmp_path / "absent.toml"))


def test_storage_sections_match_paths_then_default():
    refs = R.merge(R.load(), '[storage.default]\nread_gbps = { value = 1.0, unit = "GB/s" }\n'
                             '[storage.scratch]\nmatch = ["/scratch"]\nread_gbps = { value = 9.0, unit = "GB/s" }\n', "site")
    assert refs.storage_for("/scratch").get("read_gbps").value == 9.0
    assert refs.storage_for("/home").get("read_gbps").value == 1.0
    assert R.load().storage_for("/scratch") is None
