"""Trends and counter growth rates: hand-computed numbers, resets, edge cases, fuzz."""
from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from healthcheck.analysis.trends import (INCREMENT_COLUMNS, RATE_COLUMNS, SERIES_COLUMNS, changed_series,
                                         counter_increments, counter_rates, latest_samples, metric_series)
from tests.analysis.frames import T0, hours, metric_frames, metrics

SBE = ("gpu.ecc.corrected", "ecc_corrected_volatile")


def _sbe(node, h, gpu, v):
    return (node, h, SBE[0], gpu, SBE[1], v)


def test_rates_hand_computed_with_reset_and_unsorted_input():
    # GPU0 samples (sorted): 0h:0, 1h:4, 2h:10, 3h:2 (reset -> +2), 4h:8 -> +4+6+2+6 = 18 in 4 h.
    m = metrics([_sbe("n1", 2, "GPU0", 10), _sbe("n1", 0, "GPU0", 0), _sbe("n1", 4, "GPU0", 8),
                 _sbe("n1", 1, "GPU0", 4), _sbe("n1", 3, "GPU0", 2),
                 _sbe("n1", 0, "GPU1", 5), _sbe("n1", 4, "GPU1", 5)])
    r = counter_rates(m).set_index("component")
    assert list(r.columns) == [c for c in RATE_COLUMNS if c != "component"]
    g0 = r.loc["GPU0"]
    assert g0["increase"] == 18.0 and g0["resets"] == 1 and g0["samples"] == 5
    assert g0["hours"] == 4.0 and g0["rate_per_hour"] == 4.5
    assert g0["last_rate_per_hour"] == 6.0 and g0["last_value"] == 8.0
    assert g0["first_at"] == T0 and g0["last_at"] == hours(4)
    assert r.loc["GPU1", "rate_per_hour"] == 0.0 and r.loc["GPU1", "resets"] == 0
    # Sorted by rate, highest first.
    assert list(counter_rates(m)["component"]) == ["GPU0", "GPU1"]


def test_increments_per_interval():
    m = metrics([_sbe("n1", 0, "GPU0", 100), _sbe("n1", 2, "GPU0", 110),
                 _sbe("n1", 3, "GPU0", 7)])
    inc = counter_increments(m)
    assert list(inc.columns) == list(INCREMENT_COLUMNS)
    assert inc["increase"].tolist() == [10.0, 7.0]
    assert inc["hours"].tolist() == [2.0, 1.0]
    assert inc["rate_per_hour"].tolist() == [5.0, 7.0]
    assert inc["reset"].tolist() == [False, True]
    assert inc["prev_value"].tolist() == [100.0, 110.0]


def test_series_keyed_by_check_component_and_node_level_none():
    m = metrics([("n1", 0, "ib.port.errors", "mlx5_0/1", "symbol_error", 0),
                 ("n1", 10, "ib.port.errors", "mlx5_0/1", "symbol_error", 50),
                 ("n1", 0, "ib.port.errors", "mlx5_1/1", "symbol_error", 3),
                 ("n1", 10, "ib.port.errors", "mlx5_1/1", "symbol_error", 3),
                 ("n2", 0, "gpu.nvlink.errors", None, "nvlink_crc_errors", 1),
                 ("n2", 2, "gpu.nvlink.errors", None, "nvlink_crc_errors", 5)])
    r = counter_rates(m)
    assert r.iloc[0][["node", "component", "rate_per_hour"]].tolist() == ["n1", "mlx5_0/1", 5.0]
    crc = r[r["name"] == "nvlink_crc_errors"].iloc[0]
    assert pd.isna(crc["component"]) and crc["rate_per_hour"] == 2.0


def test_same_timestamp_and_single_sample_give_nan_rates():
    m = metrics([_sbe("n1", 1, "GPU0", 3), _sbe("n1", 1, "GPU0", 5), _sbe("n2", 1, "GPU0", 9)])
    inc = counter_increments(m)
    assert inc["hours"].tolist() == [0.0] and math.isnan(inc["rate_per_hour"][0])
    r = counter_rates(m).set_index("node")
    assert math.isnan(r.loc["n1", "rate_per_hour"]) and r.loc["n1", "increase"] == 2.0
    assert r.loc["n2", "samples"] == 1 and math.isnan(r.loc["n2", "last_rate_per_hour"])


def test_nan_values_are_skipped_and_names_filter():
    m = metrics([_sbe("n1", 0, "GPU0", 1), _sbe("n1", 1, "GPU0", float("nan")),
                 _sbe("n1", 2, "GPU0", 5), ("n1", 0, "gpu.temp", "GPU0", "temperature_c", 50)])
    r = counter_rates(m)
    assert len(r) == 1 and r["rate_per_hour"][0] == 2.0
    assert len(counter_rates(m, names="temperature_c")) == 1
    assert len(counter_rates(m, names=None)) == 2


def test_tz_aware_other_zone_and_naive_times_are_utc():
    m = metrics([_sbe("n1", 0, "GPU0", 0), _sbe("n1", 2, "GPU0", 4)])
    m["started_at"] = m["started_at"].dt.tz_convert("America/Denver")
    assert counter_rates(m)["rate_per_hour"][0] == 2.0
    m["started_at"] = m["started_at"].dt.tz_convert("UTC").dt.tz_localize(None)
    r = counter_rates(m)
    assert r["rate_per_hour"][0] == 2.0 and str(r["first_at"].dt.tz) == "UTC"


def test_metric_series_per_component_and_per_node_buckets():
    m = metrics([("n1", 0.0, "gpu.temp", "GPU0", "temperature_c", 40),
                 ("n1", 0.0, "gpu.temp", "GPU1", "temperature_c", 50),
                 ("n1", 0.5, "gpu.temp", "GPU0", "temperature_c", 60),
                 ("n1", 0.5, "gpu.temp", "GPU1", "temperature_c", 70),
                 ("n1", 1.0, "gpu.temp", "GPU0", "temperature_c", 44)])
    per_gpu = metric_series(m, "temperature_c")
    assert list(per_gpu.columns) == list(SERIES_COLUMNS)
    assert per_gpu[per_gpu["component"] == "GPU0"]["value"].tolist() == [40.0, 60.0, 44.0]
    node = metric_series(m, "temperature_c", per="node", freq="1h", agg="max")
    assert node["value"].tolist() == [70.0, 44.0] and node["n"].tolist() == [4, 1]
    assert node["component"].isna().all() and node["started_at"].tolist() == [T0, hours(1)]


def test_changed_series_keeps_exactly_the_series_that_can_grow():
    m = metrics([_sbe("n1", 0, "GPU0", 3), _sbe("n1", 1, "GPU0", 3),  # constant: grows by 0
                 _sbe("n1", 0, "GPU1", 3), _sbe("n1", 1, "GPU1", 0),  # a reset
                 _sbe("n2", 0, "GPU0", 1), _sbe("n2", 2, "GPU0", 4), _sbe("n2", 1, "GPU0", 2),
                 _sbe("n3", 0, None, 9), _sbe("n3", 1, "", 8)])  # None and "" are two series here
    got = changed_series(m)
    assert list(got.columns) == ["node", "started_at", "check", "component", "name", "value"]
    assert sorted(set(zip(got["node"], got["component"]))) == [("n1", "GPU1"), ("n2", "GPU0")]
    assert got[got["node"] == "n2"]["value"].tolist() == [1.0, 4.0, 2.0]  # input order kept
    full = counter_rates(m)
    moved = full[(full["increase"] > 0) | (full["resets"] > 0)].reset_index(drop=True)
    pd.testing.assert_frame_equal(counter_rates(got), moved)


def test_latest_samples_one_per_series_ties_to_the_later_row():
    m = metrics([("n1", 2, "burnin.nccl", None, "busbw_gbps", 390), ("n1", 5, "burnin.nccl", None, "busbw_gbps", 380),
                 ("n1", 1, "burnin.nccl", "", "busbw_gbps", 100),  # "" joins the node-level series
                 ("n2", 3, "gpu.temp", "GPU0", "temperature_c", 60), ("n2", 3, "gpu.temp", "GPU0", "temperature_c", 61),
                 ("n2", 3, "gpu.temp", "GPU1", "temperature_c", float("nan"))])
    got = latest_samples(m)
    assert got[["node", "component", "value"]].values.tolist() == [["n1", "", 380.0], ["n2", "GPU0", 61.0]]
    assert got["started_at"].tolist() == [hours(5), hours(3)]
    assert latest_samples(m, "temperature_c")["node"].tolist() == ["n2"]


@pytest.mark.parametrize("fn", [counter_rates, counter_increments, metric_series, changed_series, latest_samples])
def test_empty_frames(fn):
    assert fn(pd.DataFrame()).empty
    out = fn(metrics([]))
    assert out.empty and len(out.columns) > 5


def test_missing_column_is_a_clear_error():
    with pytest.raises(ValueError, match="metrics frame lacks column"):
        counter_rates(metrics([_sbe("n1", 0, "GPU0", 1)]).drop(columns=["check"]))
    with pytest.raises(ValueError, match="per must be"):
        metric_series(metrics([]), per="rack")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metric_frames())
def test_fuzz_trends_never_raise(frame):
    r = counter_rates(frame, names=None)
    assert (r["increase"].dropna() >= 0).all() or r.empty
    assert (r["resets"] >= 0).all()
    counter_increments(frame, names=None)
    metric_series(frame, per="node", freq="1D")
    metric_series(frame)
    last = latest_samples(frame)
    assert not last.duplicated(["node", "check", "component", "name"]).any()
    assert len(changed_series(frame, names=None)) <= len(frame)
