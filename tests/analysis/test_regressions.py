"""Regressions against the node's own rolling median."""
from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.analysis.regressions import DEVIATION_COLUMNS, baseline_deviation, regressions
from tests.analysis.frames import hours, metric_frames, metrics

BUSBW = ("burnin.nccl.all_reduce", "busbw_gbps")


def _bw(node, h, v, comp=None):
    return (node, h, BUSBW[0], comp, BUSBW[1], v)


def _series(values, node="n1"):
    return metrics([_bw(node, 24 * i, v) for i, v in enumerate(values)])


def test_baseline_is_median_of_previous_samples_hand_computed():
    d = baseline_deviation(_series([100, 110, 90, 100, 80, 84]), window=3, min_periods=2)
    assert list(d.columns) == list(DEVIATION_COLUMNS)
    # baselines: -, -, med(100,110)=105, med(100,110,90)=100, med(110,90,100)=100, med(90,100,80)=90
    assert d["baseline"].tolist()[2:] == [105.0, 100.0, 100.0, 90.0]
    assert d["n_baseline"].tolist() == [0, 1, 2, 3, 3, 3]
    assert math.isnan(d["baseline"][1])  # one earlier sample < min_periods
    assert d["change"][4] == pytest.approx(-0.20)
    assert d["change"][2] == pytest.approx(-15 / 105)
    assert d["regressed"].tolist() == [False, False, False, False, True, False]


def test_time_window_excludes_the_sample_itself():
    d = baseline_deviation(_series([100, 110, 90, 100, 80, 84]), window="3D", min_periods=2)
    assert d["baseline"].tolist()[2:] == [105.0, 100.0, 100.0, 90.0]


def test_latest_only_and_all_samples():
    m = _series([100, 100, 100, 80, 100])
    assert regressions(m, window=3, min_periods=2).empty  # recovered at the latest sample
    every = regressions(m, window=3, min_periods=2, latest_only=False)
    assert every["value"].tolist() == [80.0] and every["started_at"][0] == hours(72)
    m2 = _series([100, 100, 100, 100, 84])
    latest = regressions(m2, window=3, min_periods=2)
    assert latest["change"].tolist() == [pytest.approx(-0.16)]


def test_lower_is_better_and_per_name_settings():
    m = metrics([("n1", i, "gpu.temp", "GPU0", "temperature_c", v)
                 for i, v in enumerate([60, 60, 60, 70])]
                + [_bw("n1", i, v) for i, v in enumerate([100, 100, 100, 120])])
    d = baseline_deviation(m, window=3, min_periods=3,
                           direction={"temperature_c": "lower"},
                           threshold={"temperature_c": 0.10, "busbw_gbps": 0.15})
    last = d.groupby("name").tail(1).set_index("name")
    assert last.loc["temperature_c", "regressed"]           # +16.7 % > 10 %, lower is better
    assert not last.loc["busbw_gbps", "regressed"]          # +20 % is an improvement
    assert last.loc["temperature_c", "direction"] == "lower"
    d2 = baseline_deviation(m, "temperature_c", window=3, threshold=0.2, direction="lower")
    assert not d2["regressed"].any()


def test_each_node_and_series_has_its_own_baseline_unsorted():
    rows = [_bw("n1", 24 * i, v) for i, v in enumerate([100, 100, 100, 50])]
    rows += [_bw("n2", 24 * i, v) for i, v in enumerate([50, 50, 50, 50])]
    m = metrics(rows).sample(frac=1.0, random_state=3)
    r = regressions(m, window=3, min_periods=3)
    assert r["node"].tolist() == ["n1"] and r["baseline"].tolist() == [100.0]


def test_zero_baseline_nan_change_and_nan_values_skipped():
    d = baseline_deviation(_series([0, 0, 0, 5]), window=3, min_periods=1)
    assert d["change"].isna().all() and not d["regressed"].any()
    d = baseline_deviation(_series([100, float("nan"), 100, 50]), window=3, min_periods=2)
    assert len(d) == 3 and d["regressed"].tolist() == [False, False, True]


def test_single_sample_empty_and_bad_arguments():
    assert len(baseline_deviation(_series([1]))) == 1
    assert regressions(pd.DataFrame()).empty
    assert list(regressions(metrics([])).columns) == list(DEVIATION_COLUMNS)
    with pytest.raises(ValueError):
        baseline_deviation(_series([1]), direction="up")
    with pytest.raises(ValueError):
        baseline_deviation(_series([1]), direction={"busbw_gbps": "up"})
    with pytest.raises(ValueError):
        baseline_deviation(_series([1]), window=0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metric_frames(), st.sampled_from([1, 3, "2D"]), st.sampled_from(["higher", "lower"]))
def test_fuzz_regressions_never_raise(frame, window, direction):
    d = baseline_deviation(frame, window=window, min_periods=1, direction=direction)
    assert d["regressed"].dtype == bool
    assert len(d) == frame["value"].apply(lambda v: math.isfinite(v)).sum()
    regressions(frame, window=window, min_periods=1, latest_only=False)
