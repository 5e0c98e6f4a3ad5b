"""Absolute floors and ceilings (analysis/floors.py): a hot GPU is hot whatever its peers do."""
from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.analysis.floors import floor_crossings, limits_for_sku, temperature_thresholds, uncrossed_pairs
from healthcheck.policies import references as refs
from tests.analysis.frames import metrics

H100 = "NVIDIA H100 80GB HBM3"
# A small references file of the built-in shape (the floors read the SKU's own low bounds).
REFS = refs.merge(None, """
[sku.h100_sxm]
match = ["H100"]
gemm_bf16_tflops = { value = 700.0, lower = -0.15, upper = 0.45, unit = "TFLOP/s", source = "test" }
hbm_copy_gbps = { value = 2900.0, lower = -0.15, upper = 0.20, unit = "GB/s", source = "test" }
""", "test references")


def _temps(values: dict[str, list[float]]):
    return metrics([(node, i, "gpu.temperature", "gpu0", "temperature_c", v)
                    for node, vals in values.items() for i, v in enumerate(vals)])


def test_a_hot_gpu_is_hot_whatever_its_peers_do():
    # the whole fleet at 91 C: no peer outlier, but every GPU is over the H100's slowdown limit (89 C)
    df = _temps({f"n{i}": [91.0] * 5 for i in range(6)})
    out = floor_crossings(df, {f"n{i}": H100 for i in range(6)}, references=REFS)
    assert len(out) == 6 and set(out["severity"]) == {"fail"} and out["persistent"].all()
    row = out.iloc[0]
    assert (row["kind"], row["limit"], row["hits"], row["runs"]) == ("ceiling", 89.0, 5, 5)
    assert "slowdown 89" in row["rule"]


def test_the_temperature_lines_are_the_checks_own():
    m = temperature_thresholds()
    assert (m["fail_margin_c"], m["warn_margin_c"]) == (2.0, 5.0)  # gpu.temperature's defaults (check index)
    lines = {(name, sev): limit for name, kind, limit, sev, _ in limits_for_sku(REFS.sku_for(H100))}
    assert lines[("temperature_c", "fail")] == 89.0                   # min(slowdown 89, shutdown 92 - 2)
    assert lines[("temperature_c", "warn")] == 84.0                   # min(slowdown 89 - 5, max operating 87)
    assert lines[("gemm_tflops", "fail")] == pytest.approx(595.0)     # 700 * (1 - 0.15)
    assert limits_for_sku(REFS.sku_for(H100), thermal={"h100_sxm": (80.0, 90.0, 78.0)})[1][2] == 75.0


def test_warn_fail_once_persistent_and_reported_once_per_unit():
    df = _temps({"warm": [80, 80, 80, 85, 86],     # warn line (84) in the last 2 runs, the latest too
                 "spike": [70, 95, 70, 70, 70],    # over the fail line once, 3 runs ago
                 "cool": [70] * 5,
                 "both": [90, 86, 90, 86, 90]})   # over both lines: reported at its worst, once
    out = floor_crossings(df, lambda n: H100, references=REFS).set_index("node")
    assert "cool" not in out.index
    assert (out.loc["warm", "severity"], out.loc["warm", "hits"], bool(out.loc["warm", "persistent"])) == \
        ("warn", 2, True)                           # the latest sample crossed: persistent at once
    assert (out.loc["spike", "severity"], out.loc["spike", "hits"], bool(out.loc["spike", "persistent"]),
            out.loc["spike", "worst"], out.loc["spike", "value"]) == ("fail", 1, False, 95.0, 70.0)
    assert (out.loc["both", "severity"], out.loc["both", "hits"]) == ("fail", 3)
    assert list(out.index).count("both") == 1


def test_burnin_floors_from_the_references_and_pcie_width():
    rows = [("slow", i, "burnin.gemm.tflops", "gpu2", "gemm_tflops", 590.0) for i in range(3)]
    rows += [("ok", i, "burnin.gemm.tflops", "gpu2", "gemm_tflops", 600.0) for i in range(3)]
    rows += [("ok", i, "burnin.bandwidth.hbm", "gpu2", "hbm_copy_gbps", 2000.0) for i in range(3)]
    for node, width in (("x8", 8.0), ("x16", 16.0)):
        for i in range(3):
            rows += [(node, i, "gpu.pcie.link", "gpu5", "pcie_width", width),
                     (node, i, "gpu.pcie.link", "gpu5", "pcie_width_max", 16.0)]
    out = floor_crossings(metrics(rows), {"slow": H100, "ok": H100, "x8": "some other GPU"}, references=REFS)
    got = {(r.node, r.name): (r.severity, r.limit, r.hits) for r in out.itertuples()}
    assert got == {("slow", "gemm_tflops"): ("fail", pytest.approx(595.0), 3),
                   ("ok", "hbm_copy_gbps"): ("fail", pytest.approx(2465.0), 3),
                   ("x8", "pcie_width"): ("fail", 16.0, 3)}   # a GPU of no known SKU: PCIe judged all the same


def test_no_model_no_metrics_no_crossing_bad_input():
    assert floor_crossings(_temps({"n1": [99.0]})).empty           # no model: no thermal limit known
    assert floor_crossings(None).empty
    with pytest.raises(ValueError, match="k"):
        floor_crossings(_temps({"n1": [99.0]}), k=4, n=3)


def test_pcie_pairs_that_never_cross_are_the_ones_left_out():
    """``uncrossed_pairs``: both names of a unit whose width is below its max at no instant where both were
    recorded (a lower width at another instant, a width without its max, a unit that stays at x16); never a
    crossing unit's samples, another GPU's of the same node, or another figure's."""
    rows = []
    for i in range(5):
        rows += [("n1", i, "gpu.pcie.link", "gpu0", "pcie_width", 8.0 if i == 3 else 16.0),  # crosses once
                 ("n1", i, "gpu.pcie.link", "gpu0", "pcie_width_max", 16.0),
                 ("n1", i, "gpu.pcie.link", "gpu1", "pcie_width", 16.0),  # never
                 ("n1", i, "gpu.pcie.link", "gpu1", "pcie_width_max", 16.0),
                 ("n1", i, "gpu.temperature", "gpu1", "temperature_c", 60.0)]
    rows += [("n2", 1, "gpu.pcie.link", None, "pcie_width", 4.0),  # lower, but its max at another instant
             ("n2", 2, "gpu.pcie.link", None, "pcie_width_max", 16.0),
             ("n3", 1, "gpu.pcie.link", "gpu0", "pcie_width", 4.0)]  # no max recorded at all
    df = metrics(rows)
    drop = uncrossed_pairs(df)
    kept = df[~drop]
    assert set(zip(kept["node"], kept["component"], kept["name"])) == {
        ("n1", "gpu0", "pcie_width"), ("n1", "gpu0", "pcie_width_max"), ("n1", "gpu1", "temperature_c")}
    assert len(kept) == 15 and not uncrossed_pairs(df.iloc[0:0]).any()
    pd.testing.assert_frame_equal(floor_crossings(df), floor_crossings(kept))
    assert list(floor_crossings(kept)["node"]) == ["n1"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 6), st.sampled_from(["gpu0", "gpu1", None]),
                          st.sampled_from(["pcie_width", "pcie_width_max"]), st.sampled_from([4.0, 8.0, 16.0])),
                max_size=40))
def test_what_uncrossed_pairs_leaves_out_never_changes_the_floors(samples):
    df = metrics([(node, hour, "gpu.pcie.link", comp, name, v) for node, hour, comp, name, v in samples])
    pd.testing.assert_frame_equal(floor_crossings(df), floor_crossings(df[~uncrossed_pairs(df)]))


def test_two_runs_at_one_instant_judge_each_width_sample_once():
    """Two runs of a node at the same instant (a tie the history keeps) each record the width and its max:
    the PCIe rule judges each width sample once against the max of that instant (it once paired every width
    with every max of the instant and failed on the doubled latest sample)."""
    rows = [("n1", h, "gpu.pcie.link", "gpu0", name, v) for h in (0, 1, 1)
            for name, v in (("pcie_width", 8.0), ("pcie_width_max", 16.0))]
    out = floor_crossings(metrics(rows))
    assert (out["node"].tolist(), out["hits"].tolist(), out["runs"].tolist()) == (["n1"], [3], [3])
