"""Version drift: majority vote per class and item, expectations (exact and prefix), per-GPU rows."""
from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.analysis.drift import DRIFT_COLUMNS, drift_summary, matches_expected, version_drift
from healthcheck.parsers import ParseError
from tests.conftest import corpus_params

COLS = ["node", "node_class", "item", "value"]


def frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLS)


def fleet(cls: str, item: str, values: list[str], prefix: str = "gpu") -> list[tuple]:
    return [(f"{prefix}{i:03d}", cls, item, v) for i, v in enumerate(values, start=1)]


def records(out: pd.DataFrame, *cols: str) -> list[tuple]:
    return [tuple(r) for r in out[list(cols)].itertuples(index=False)]


def test_majority_drift_hand_computed():
    values = ["550.54.15"] * 10
    values[2], values[6] = "535.129.03", "535.129.03"
    out = version_drift(frame(fleet("h100", "driver", values)))
    assert list(out.columns) == list(DRIFT_COLUMNS)
    assert records(out, "node", "value", "majority", "kind", "severity", "n_nodes", "expected") == [
        ("gpu003", "535.129.03", "550.54.15", "majority", "warn", 10, None),
        ("gpu007", "535.129.03", "550.54.15", "majority", "warn", 10, None)]
    assert out["majority_share"].tolist() == [0.8, 0.8]
    assert drift_summary(out) == [
        "h100: driver 550.54.15 on 8 of 10 nodes; gpu003, gpu007 run 535.129.03"]


def test_identical_fleet_has_no_drift():
    out = version_drift(frame(fleet("h100", "driver", ["550.54.15"] * 6)))
    assert out.empty and list(out.columns) == list(DRIFT_COLUMNS)
    assert drift_summary(out) == []


def test_no_majority_tie_reports_every_node_as_warn():
    out = version_drift(frame(fleet("a100", "nccl", ["2.18.1", "2.19.3", "2.18.1", "2.19.3"])))
    assert records(out, "node", "value", "kind", "severity") == [
        ("gpu001", "2.18.1", "majority", "warn"), ("gpu002", "2.19.3", "majority", "warn"),
        ("gpu003", "2.18.1", "majority", "warn"), ("gpu004", "2.19.3", "majority", "warn")]
    assert out["majority"].tolist() == [None] * 4 and out["majority_share"].tolist() == [0.5] * 4
    assert drift_summary(out) == ["a100: nccl has no majority among 4 nodes; gpu001, gpu003 run "
                                  "2.18.1; gpu002, gpu004 run 2.19.3"]


def test_no_majority_with_an_expectation_the_expectation_decides():
    rows = frame(fleet("a100", "nccl", ["2.18.1", "2.19.3", "2.18.1", "2.19.3"]))
    out = version_drift(rows, {"a100": {"nccl": "2.19.3"}})
    assert records(out, "node", "kind", "severity", "expected") == [
        ("gpu001", "both", "fail", "2.19.3"), ("gpu003", "both", "fail", "2.19.3")]
    assert drift_summary(out) == ["a100: nccl has no majority among 4 nodes; gpu001, gpu003 run "
                                  "2.18.1 (expected 2.19.3)"]


def test_majority_share_is_strictly_exceeded_and_plurality_ties_have_no_majority():
    rows = frame(fleet("h100", "kernel", ["6.5.0-1", "6.5.0-1", "6.5.0-1", "6.8.0-2", "6.8.0-3"]))
    assert version_drift(rows)["node"].tolist() == ["gpu004", "gpu005"]  # 3/5 = 0.6 > 0.5
    no_major = version_drift(rows, majority_share=0.6)                     # 0.6 is not > 0.6
    assert no_major["node"].tolist() == [f"gpu{i:03d}" for i in range(1, 6)]
    assert no_major["majority"].isna().all()
    # 2/2/1 with a 0.3 bar: the two leaders tie, so there is no majority either.
    tie = frame(fleet("h100", "kernel", ["a", "a", "b", "b", "c"]))
    assert len(version_drift(tie, majority_share=0.3)) == 5
    assert version_drift(tie, majority_share=0.3)["majority"].isna().all()


@pytest.mark.parametrize("value, spec, ok", [
    ("550.54.15", "550.", True), ("5501.2", "550.", False), ("550", "550.", False),
    ("5501.2", "550*", True), ("550.54.15", "550*", True), ("535.129.03", "550*", False),
    ("550.54.15", "550.54.15", True), ("550.54.150", "550.54.15", False),
    ("550.54.15", "550.54", False), ("12.4", "12.*", True), ("anything", "*", True),
])
def test_expectation_prefix_semantics(value, spec, ok):
    assert matches_expected(value, spec) is ok


def test_expectation_prefix_and_exact():
    rows = frame(fleet("h100", "driver", ["550.54.15", "550.90.07", "5501.1", "550.54.15"])
                 + fleet("h100", "cuda", ["12.4", "12.4", "12.4", "12.2"]))
    out = version_drift(rows, {"h100": {"driver": "550.", "cuda": "12.4"}})
    assert records(out, "item", "node", "value", "kind", "severity", "majority") == [
        ("cuda", "gpu004", "12.2", "both", "fail", "12.4"),
        ("driver", "gpu003", "5501.1", "both", "fail", None)]
    # driver: 550.54.15 on 2 of 4 = 0.5 is no majority, so every node would be majority drift,
    # but the "550." expectation vouches for gpu001, gpu002 (550.90.07) and gpu004.
    assert drift_summary(out) == [
        "h100: cuda 12.4 on 3 of 4 nodes; gpu004 runs 12.2 (expected 12.4)",
        "h100: driver has no majority among 4 nodes; gpu003 runs 5501.1 (expected 550.)"]
    # With a majority, a node the prefix accepts still differs from its peers (warn).
    rows = frame(fleet("h100", "driver", ["550.54.15"] * 3 + ["550.90.07"]))
    out = version_drift(rows, {"h100": {"driver": "550."}})
    assert records(out, "node", "kind", "severity", "expected") == [
        ("gpu004", "majority", "warn", "550.")]


def test_whole_class_off_the_expectation():
    rows = frame(fleet("h100", "driver", ["535.129.03"] * 4))
    out = version_drift(rows, {"h100": {"driver": "550."}})
    assert out["kind"].tolist() == ["expected"] * 4 and out["severity"].tolist() == ["fail"] * 4
    assert out["majority"].tolist() == ["535.129.03"] * 4
    assert drift_summary(out) == ["h100: driver 535.129.03 on 4 of 4 nodes; gpu001, gpu002, gpu003, "
                                  "gpu004 run 535.129.03 (expected 550.)"]


def test_per_gpu_vbios_rows_any_differing_gpu_makes_the_node_drift():
    good = "96.00.89.00.01"
    rows = [(f"gpu{n:03d}", "h100", "vbios", good) for n in range(1, 6) for _ in range(8)]
    rows[3 * 8 + 5] = ("gpu004", "h100", "vbios", "96.00.74.00.01")  # one GPU of gpu004
    out = version_drift(frame(rows))
    assert records(out, "node", "value", "majority", "n_nodes") == [
        ("gpu004", "96.00.74.00.01,96.00.89.00.01", good, 5)]
    # The probe's own spelling (one comma-joined value, first-seen order) reads the same.
    joined = [r for r in rows if r[0] != "gpu004"] + [
        ("gpu004", "h100", "vbios", "96.00.89.00.01,96.00.74.00.01")]
    pd.testing.assert_frame_equal(version_drift(frame(joined)), out)


def test_mixed_vbios_on_every_node_is_no_drift():
    rows = [(f"k{n}", "k80", "vbios", v) for n in range(4)
            for v in ("80.21.1F.00.05", "80.21.1F.00.05", "80.21.1F.00.06", "80.21.1F.00.06")]
    assert version_drift(frame(rows)).empty


def test_small_class_judges_only_the_expectation():
    rows = frame(fleet("gh200", "driver", ["550.54.15", "535.129.03"], prefix="gh"))
    assert version_drift(rows).empty  # 2 nodes < min_nodes 3: no vote
    out = version_drift(rows, {"gh200": {"driver": "550."}})
    assert records(out, "node", "kind", "severity", "majority", "n_nodes") == [
        ("gh002", "expected", "fail", None, 2)]
    assert drift_summary(out) == ["gh200: driver on 2 nodes; gh002 runs 535.129.03 (expected 550.)"]
    assert version_drift(rows, min_nodes=2)["node"].tolist() == ["gh001", "gh002"]


def test_classes_are_voted_separately_and_missing_class_sorts_last():
    rows = frame(fleet("a100", "driver", ["535.129.03"] * 3, prefix="a")
                 + fleet("h100", "driver", ["550.54.15"] * 3, prefix="h")
                 + [("x1", None, "driver", "550.54.15"), ("x2", None, "driver", "550.54.15"),
                    ("x3", None, "driver", "470.1")])
    out = version_drift(rows)
    assert records(out, "node_class", "node", "majority") == [(None, "x3", "550.54.15")]
    assert drift_summary(out) == ["(no class): driver 550.54.15 on 2 of 3 nodes; x3 runs 470.1"]


def test_rows_without_value_or_node_are_ignored_and_values_stripped():
    rows = frame(fleet("h100", "driver", [" 550.54.15 ", "550.54.15", "550.54.15"])
                 + [("gpu004", "h100", "driver", None), (None, "h100", "driver", "1.0"),
                    ("gpu005", "h100", "driver", "")])
    assert version_drift(rows).empty


def test_long_node_lists_are_cut_in_the_summary():
    values = ["2.21.5"] * 30 + ["2.18.1"] * 10
    out = version_drift(frame(fleet("h100", "nccl", values)))
    assert drift_summary(out) == [
        "h100: nccl 2.21.5 on 30 of 40 nodes; gpu031, gpu032, gpu033, gpu034, gpu035, gpu036, "
        "gpu037, gpu038 and 2 more run 2.18.1"]


def test_categorical_and_string_columns():
    values = ["550.54.15"] * 4 + ["535.129.03"]
    plain = version_drift(frame(fleet("h100", "driver", values)))
    cat = version_drift(frame(fleet("h100", "driver", values)).astype("category"))
    pd.testing.assert_frame_equal(plain, cat)
    assert plain["node"].tolist() == ["gpu005"]


def test_empty_and_bad_input():
    for empty_input in (frame([]), None, pd.DataFrame()):
        out = version_drift(empty_input)
        assert out.empty and dict(out.dtypes.astype(str)) == DRIFT_COLUMNS
    with pytest.raises(ValueError, match="versions frame lacks column"):
        version_drift(pd.DataFrame({"node": ["a"], "value": ["1"]}))
    rows = frame(fleet("h100", "driver", ["1"] * 3))
    with pytest.raises(ValueError, match=r"expected\['h100'\]\['driver'\] must be a non-empty"):
        version_drift(rows, {"h100": {"driver": 550}})
    with pytest.raises(ValueError, match=r"expected\['h100'\] must be a mapping"):
        version_drift(rows, {"h100": "550."})
    with pytest.raises(ValueError, match="majority_share"):
        version_drift(rows, majority_share=1.0)
    with pytest.raises(ValueError, match="min_nodes"):
        version_drift(rows, min_nodes=0)
    with pytest.raises(ValueError, match="drift frame lacks column"):
        drift_summary(pd.DataFrame({"node": []}))


_version_rows = st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3", "n4", "n5"]),
                                   st.sampled_from(["h100", "a100", None]),
                                   st.sampled_from(["driver", "vbios"]),
                                   st.one_of(st.none(), st.sampled_from(
                                       ["550.54.15", "535.129.03", "550.90.07", "", "a,b", " 1 "]))),
                         max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_version_rows, st.booleans(), st.randoms(use_true_random=False))
def test_properties(rows, with_expectation, rnd):
    expected = {"h100": {"driver": "550."}, "a100": {"vbios": "535.129.03"}} if with_expectation else None
    out = version_drift(frame(rows), expected)
    assert list(out.columns) == list(DRIFT_COLUMNS)
    assert set(out["node"]) <= {r[0] for r in rows}
    assert (out["severity"].eq("fail") == out["kind"].isin(["expected", "both"])).all()
    if not with_expectation:
        assert out["kind"].eq("majority").all()
    assert not out.duplicated(["node_class", "item", "node"]).any()
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    pd.testing.assert_frame_equal(version_drift(frame(shuffled), expected), out)
    assert len(drift_summary(out)) == len(out.drop_duplicates(["node_class", "item"]))


# ------------------------------------------------------------------------ real recorded versions

@pytest.mark.parametrize("path", corpus_params("nvidia-smi", "q-*"))
def test_drift_over_real_nvidia_smi_versions(path):
    """Five clones of a recorded node agree; a sixth with another driver and reflashed VBIOS drifts."""
    from healthcheck.parsers.nvidia_smi import parse_nvidia_smi

    try:
        smi = parse_nvidia_smi(path.read_text(encoding="utf-8", errors="replace"))
    except ParseError:
        pytest.skip("not a parseable -q recording")
    if not smi.driver_version:
        pytest.skip("recording shows no driver version")
    real = [("driver", smi.driver_version)] + ([("cuda", smi.cuda_version)] if smi.cuda_version else [])
    real += [("vbios", g.vbios) for g in smi.gpus if g.vbios]
    rows = [(f"n{i}", "fleet", item, value) for i in range(1, 6) for item, value in real]
    rows += [("n6", "fleet", "driver", "999.99.99")]
    rows += [("n6", "fleet", item, value) for item, value in real if item == "cuda"]
    rows += [("n6", "fleet", "vbios", "00.00.00.00.00") for item, _ in real if item == "vbios"]
    major = smi.driver_version.split(".")[0] + "."
    out = version_drift(frame(rows), {"fleet": {"driver": major}})
    assert out["node"].unique().tolist() == ["n6"]
    driver = out[out["item"] == "driver"].iloc[0]
    assert (driver["value"], driver["majority"], driver["kind"], driver["severity"]) == (
        "999.99.99", smi.driver_version, "both", "fail")
    vbios = sorted({g.vbios for g in smi.gpus if g.vbios})
    if vbios:  # multi-GPU recordings may mix VBIOS builds (the K80 board): the set is the vote
        v = out[out["item"] == "vbios"].iloc[0]
        assert (v["majority"], v["value"], v["kind"]) == (",".join(vbios), "00.00.00.00.00", "majority")
    else:
        assert "vbios" not in set(out["item"])
    assert "cuda" not in set(out["item"])
