"""Fleet outliers: modified z-score (Iglewicz & Hoaglin), MAD == 0, tiny groups, classes."""
from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.analysis.outliers import (IGLEWICZ_HOAGLIN_THRESHOLD, OUTLIER_COLUMNS,
                                           fleet_outliers, robust_z)
from tests.analysis.frames import metric_frames, metrics


def _fleet(values, name="busbw_gbps", check="burnin.nccl", comp=None, prefix="n"):
    return [(f"{prefix}{i}", 0, check, comp, name, v) for i, v in enumerate(values)]


def test_threshold_is_the_documented_one():
    assert IGLEWICZ_HOAGLIN_THRESHOLD == 3.5


def test_modified_z_hand_computed():
    # median(60,99,100,100,101,102) = 100; |dev| = 0,0,1,1,2,40 -> MAD = 1; z = 0.6745 * dev.
    out = fleet_outliers(metrics(_fleet([100, 101, 99, 100, 102, 60])), per="node")
    assert list(out.columns) == list(OUTLIER_COLUMNS)
    top = out.iloc[0]
    assert top["node"] == "n5" and top["outlier"] and top["side"] == "low"
    assert top["z"] == pytest.approx(-26.98) and top["peer_median"] == 100.0 and top["mad"] == 1.0
    assert top["n_peers"] == 6
    z = out.set_index("node")["z"]
    assert z["n4"] == pytest.approx(1.349) and z["n0"] == 0.0
    assert out["outlier"].sum() == 1


def test_mad_zero_falls_back_to_mean_absolute_deviation():
    # 9 x 100 and one 50: MAD = 0; MeanAD = 50/10 = 5; z = -50 / (1.253314 * 5) = -7.979
    out = fleet_outliers(metrics(_fleet([100] * 9 + [50])), per="node").set_index("node")
    assert out.loc["n9", "mad"] == 0.0
    assert out.loc["n9", "z"] == pytest.approx(-50 / (1.253314 * 5))
    assert out.loc["n9", "outlier"] and out.loc["n0", "z"] == 0.0
    same = fleet_outliers(metrics(_fleet([7.0] * 6)), per="node")
    assert (same["z"] == 0.0).all() and not same["outlier"].any()


def test_tiny_groups_are_never_flagged():
    # 4 peers < default min_peers 5: no score, even for an obvious deviant.
    out = fleet_outliers(metrics(_fleet([100, 101, 99, 1])), per="node")
    assert out["z"].isna().all() and not out["outlier"].any() and (out["n_peers"] == 4).all()
    # median 99.5, |dev| 0.5,1.5,0.5,98.5 -> MAD 1.0; z = 0.6745 * -98.5
    out = fleet_outliers(metrics(_fleet([100, 101, 99, 1])), per="node", min_peers=4)
    assert out.set_index("node").loc["n3", "outlier"]
    assert out.set_index("node").loc["n3", "z"] == pytest.approx(-0.6745 * 98.5)


def test_peers_are_per_class_check_and_name():
    rows = _fleet([100, 100, 100, 100, 100], prefix="a") + _fleet([50, 50, 50, 50, 50], prefix="b")
    classes = {f"a{i}": "h100" for i in range(5)} | {f"b{i}": "a100" for i in range(5)}
    out = fleet_outliers(metrics(rows), per="node", node_class=classes)
    assert not out["outlier"].any() and set(out["node_class"]) == {"h100", "a100"}
    # One fleet: the two populations are 5 v 5, nobody is an outlier of a bimodal set by MAD.
    mixed = fleet_outliers(metrics(rows), per="node")
    assert mixed["node_class"].isna().all()

    class Cls:
        def __init__(self, name):
            self.name = name
    out = fleet_outliers(metrics(rows), per="node",
                         node_class=lambda n: Cls("h100") if n.startswith("a") else None)
    assert set(out["node_class"].dropna()) == {"h100"}


def test_per_component_stat_side_and_min_rel_deviation():
    rows = [(f"n{i}", h, "gpu.temp", f"GPU{g}", "temperature_c", 60 + g % 2 + (30 if
             (i, g, h) == (2, 3, 1) else 0)) for i in range(3) for g in range(4) for h in (0, 1, 2)]
    m = metrics(rows)
    med = fleet_outliers(m, per="component")           # median of 3 runs: the spike is ignored
    assert not med["outlier"].any() and len(med) == 12
    last = fleet_outliers(m, per="component", stat="max")
    hot = last[last["outlier"]]
    assert hot[["node", "component", "value", "side"]].values.tolist() == [["n2", "GPU3", 91.0,
                                                                            "high"]]
    assert fleet_outliers(m, per="component", stat="max", side="low")["outlier"].sum() == 0
    assert fleet_outliers(m, per="component", stat="max",
                          side={"temperature_c": "high"})["outlier"].sum() == 1
    # 1 % spread on a uniform fleet: statistically an outlier, not operationally.
    tight = metrics(_fleet([100.0, 100.1, 99.9, 100.0, 100.05, 99.0]))
    assert fleet_outliers(tight, per="node")["outlier"].any()
    assert not fleet_outliers(tight, per="node", min_rel_deviation=0.05)["outlier"].any()


def test_robust_z_series_api_and_nan():
    s = pd.Series([1.0, 2.0, 3.0, float("nan"), 100.0], index=list("abcde"))
    r = robust_z(s, min_peers=3)
    assert list(r.index) == list("abcde") and r.loc["d", "z"] != r.loc["d", "z"]
    assert r.loc["a", "n_peers"] == 4 and r.loc["e", "z"] > 3.5


def test_empty_nan_and_bad_arguments():
    assert fleet_outliers(pd.DataFrame()).empty
    assert list(fleet_outliers(metrics([])).columns) == list(OUTLIER_COLUMNS)
    out = fleet_outliers(metrics(_fleet([1.0, float("nan")])), per="node")
    assert len(out) == 1
    single = fleet_outliers(metrics(_fleet([5.0])), per="node")
    assert len(single) == 1 and single["z"].isna().all()
    for kwargs in ({"per": "rack"}, {"stat": "mode"}, {"side": "up"}):
        with pytest.raises(ValueError):
            fleet_outliers(metrics(_fleet([1.0])), **kwargs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metric_frames(), st.sampled_from(["component", "node"]),
       st.sampled_from(["median", "last", "max"]), st.integers(1, 6))
def test_fuzz_outliers_never_raise(frame, per, stat, min_peers):
    out = fleet_outliers(frame, per=per, stat=stat, min_peers=min_peers,
                         node_class={"n1": "x"})
    assert out["outlier"].dtype == bool
    assert not out.loc[out["n_peers"] < min_peers, "outlier"].any()
