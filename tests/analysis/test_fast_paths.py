"""The large-frame paths of the analyses: categorical key columns (what the store returns for 10 M
rows), unsorted times, name predicates, node filters, min_hours, a callable side. Each must give the
same numbers as the plain object-column input."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from healthcheck.analysis.outliers import fleet_outliers
from healthcheck.analysis.trends import counter_increments, counter_rates
from tests.analysis.frames import metrics


def _frame():
    rng = np.random.default_rng(3)
    rows = []
    for node in ("n1", "n2", "n3", "n4", "n5", "n6"):
        for h in range(12):
            for gpu in ("GPU0", "GPU1"):
                v = 5.0 * h if (node, gpu) == ("n2", "GPU1") else float(h // 4)
                if (node, gpu, h) == ("n2", "GPU1", 7):
                    v = 1.0  # a reset
                rows.append((node, h, "gpu.ecc.corrected", gpu, "ecc_corrected_volatile", v))
                temp = 95.0 if (node, gpu) == ("n4", "GPU0") and h == 11 else 60 + rng.normal()
                rows.append((node, h, "gpu.temperature", gpu, "temperature_c", temp))
            rows.append((node, h, "burnin.nccl", None, "busbw_gbps", 300.0 if node == "n5" else 390 + h % 2))
    return metrics(rows).sample(frac=1.0, random_state=7).reset_index(drop=True)


def _categorical(df):
    return df.assign(**{c: df[c].astype("category") for c in ("node", "check", "component", "name", "run_id")})


def _same(a, b):
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False)


def test_counter_rates_categorical_equals_object_and_predicate_equals_list():
    m = _frame()
    plain = counter_rates(m)
    _same(counter_rates(_categorical(m)), plain)
    _same(counter_rates(m, lambda n: n.startswith("ecc_")), plain)
    top = plain.iloc[0]
    # 0,5,...,30 (+30), reset to 1 (+1), 40..55 (+39, +5 x 3) over 11 h
    assert (top["node"], top["component"], top["increase"], top["resets"]) == ("n2", "GPU1", 85.0, 1)
    assert top["rate_per_hour"] == pytest.approx(85 / 11)


def test_counter_increments_node_filter_and_categorical():
    m = _frame()
    inc = counter_increments(_categorical(m), nodes=["n2"])
    assert set(inc["node"]) == {"n2"} and len(inc) == 2 * 11
    _same(inc, counter_increments(m, nodes=["n2"]))
    assert inc["reset"].sum() == 1


def test_counter_rates_min_hours():
    m = metrics([("n1", 0, "c", "GPU0", "ecc_corrected_volatile", 1),
                 ("n1", 0.25, "c", "GPU0", "ecc_corrected_volatile", 4),
                 ("n2", 0, "c", "GPU0", "ecc_corrected_volatile", 9)])
    r = counter_rates(m, min_hours=1.0).set_index("node")
    assert r.loc["n1", "rate_per_hour"] == 3.0 and r.loc["n2", "rate_per_hour"] == 0.0
    assert counter_rates(m).set_index("node").loc["n1", "rate_per_hour"] == 12.0


def test_fleet_outliers_last_categorical_and_callable_side():
    m = _frame()
    kwargs = dict(stat="last", min_peers=3, min_rel_deviation=0.05,
                  side=lambda n: "low" if n == "busbw_gbps" else "high")
    plain = fleet_outliers(m, ["busbw_gbps", "temperature_c"], **kwargs)
    _same(fleet_outliers(_categorical(m), lambda n: n != "ecc_corrected_volatile", **kwargs), plain)
    bad = plain[plain["outlier"]]
    assert sorted(zip(bad["node"], bad["name"])) == [("n4", "temperature_c"), ("n5", "busbw_gbps")]
    assert plain.set_index(["node", "name"]).loc[("n4", "temperature_c")].iloc[0]["value"] == 95.0


def test_categorical_with_missing_codes_and_unused_categories():
    m = _categorical(_frame())
    m["name"] = m["name"].cat.add_categories(["never_used"])
    m.loc[0, "name"] = np.nan
    r = counter_rates(m, names=None)
    assert set(r["name"].dropna()) == {"ecc_corrected_volatile", "temperature_c", "busbw_gbps"}
    assert counter_rates(m, names="never_used").empty
