"""Risk ranking: scores from the other analyses, with the evidence."""
from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, given, settings

from healthcheck.analysis.availability import flapping
from healthcheck.analysis.outliers import fleet_outliers
from healthcheck.analysis.regressions import regressions
from healthcheck.analysis.risk import DEFAULT_WEIGHTS, RISK_COLUMNS, rank_nodes
from healthcheck.analysis.trends import counter_rates
from tests.analysis.frames import (action_frames, actions, hours, metric_frames, metrics,
                                   result_frames)


def _results(rows):
    """rows: (node, hour, check, component, status, message)."""
    return pd.DataFrame([{"run_id": "r", "node": n, "started_at": hours(h), "check": c,
                          "component": comp, "status": s, "message": m}
                         for n, h, c, comp, s, m in rows])


def test_rank_hand_computed_with_all_kinds_of_evidence():
    res = _results([("n1", 1, "gpu.ecc.sbe", "GPU3", "FAIL", "12 corrected"),
                    ("n1", 0, "gpu.temp", "GPU1", "fail", "hot"),      # superseded below
                    ("n1", 2, "gpu.temp", "GPU1", "pass", "ok"),
                    ("n1", 2, "ib.port.errors", None, "warn", "symbol_error=12"),
                    ("n2", 2, "gpu.ecc.sbe", "GPU0", "pass", "ok"),
                    ("n3", 2, "gpu.ecc.sbe", "GPU0", "error", "nvml timeout")])
    sbe = metrics([("n2", 0, "gpu.ecc.corrected", "GPU0", "ecc_corrected_volatile", 0),
                   ("n2", 4, "gpu.ecc.corrected", "GPU0", "ecc_corrected_volatile", 10),
                   ("n3", 0, "gpu.ecc.corrected", "GPU0", "ecc_corrected_volatile", 3),
                   ("n3", 4, "gpu.ecc.corrected", "GPU0", "ecc_corrected_volatile", 3)])
    bw = metrics([(f"n{i}", 0, "burnin.nccl", None, "busbw_gbps", v)
                  for i, v in enumerate([100, 100, 101, 99, 100, 40], start=1)])
    hist = metrics([("n2", 24 * d, "burnin.nccl", None, "busbw_gbps", v)
                    for d, v in enumerate([100, 100, 100, 80])])
    flap = actions([a for k in range(3) for a in (("n4", 2 * k, "drain"),
                                                     ("n4", 2 * k + 1, "resume"))])
    out = rank_nodes(results=res, rates=counter_rates(sbe),
                     outliers=fleet_outliers(bw, per="node"),
                     regressions=regressions(hist, window=3, min_periods=3),
                     flapping=flapping(flap, now=hours(8), min_cycles=3))
    assert list(out.columns) == list(RISK_COLUMNS)
    # n1: fail 10 + warn 2 = 12; n2: growth 4 + regression 5 = 9; n4: flapping 6;
    # n6: outlier 3; n3: error 3 (its counter did not grow); n5: nothing.
    assert out[["node", "score"]].values.tolist() == [
        ["n1", 12.0], ["n2", 9.0], ["n4", 6.0], ["n3", 3.0], ["n6", 3.0], ["n5", 0.0]]
    n1 = out.iloc[0]
    assert n1["failing_checks"] == ["gpu.ecc.sbe"] and n1["n_fail"] == 1 and n1["n_warn"] == 1
    assert n1["evidence"] == ["FAIL gpu.ecc.sbe [GPU3]: 12 corrected",
                              "WARN ib.port.errors: symbol_error=12"]
    n2 = out.set_index("node").loc["n2"]
    assert n2["evidence"] == ["regression busbw_gbps: 80 vs baseline 100 (-20.0%)",
                              "growth ecc_corrected_volatile [GPU0]: +2.5/h"]
    assert n2["n_growing"] == 1 and n2["n_regressions"] == 1 and n2["failing_checks"] == []
    n4 = out.set_index("node").loc["n4"]
    assert n4["flapping"] and n4["evidence"] == ["flapping: 3 drain/resume cycles"]
    n6 = out.set_index("node").loc["n6"]
    # median 100; |dev| 0,0,1,1,0,60 -> MAD 0.5; z = 0.6745 * -60 / 0.5 = -80.94
    assert n6["n_outliers"] == 1 and n6["evidence"] == [
        "outlier busbw_gbps: 40 vs peer median 100 (z=-80.94)"]


def test_weights_and_rate_threshold():
    res = _results([("n1", 0, "a", None, "warn", "w"), ("n2", 0, "b", None, "error", "e")])
    out = rank_nodes(results=res, weights={"warn": 5.0})
    assert out[["node", "score"]].values.tolist() == [["n1", 5.0], ["n2", 3.0]]
    assert DEFAULT_WEIGHTS["fail"] == 10.0
    sbe = metrics([("n1", 0, "c", "GPU0", "ecc_corrected_volatile", 0),
                   ("n1", 10, "c", "GPU0", "ecc_corrected_volatile", 5)])
    assert rank_nodes(rates=counter_rates(sbe))["score"].tolist() == [4.0]
    assert rank_nodes(rates=counter_rates(sbe), min_rate_per_hour=1.0)["score"].tolist() == [0.0]


def test_empty_inputs():
    assert rank_nodes().empty
    out = rank_nodes(results=_results([]).reindex(columns=["run_id", "node", "started_at",
                                                            "check", "component", "status",
                                                            "message"]),
                     rates=counter_rates(pd.DataFrame()), outliers=fleet_outliers(None))
    assert out.empty and list(out.columns) == list(RISK_COLUMNS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(result_frames(), metric_frames(), action_frames())
def test_fuzz_rank_never_raises(res, mets, acts):
    out = rank_nodes(results=res, rates=counter_rates(mets, names=None),
                     outliers=fleet_outliers(mets, min_peers=1),
                     regressions=regressions(mets, min_periods=1),
                     flapping=flapping(acts, now=pd.Timestamp("2031-01-01"), min_cycles=1,
                                       window="4000D"))
    assert out["node"].is_unique
    assert (out["score"] >= 0).all()
    assert list(out["score"]) == sorted(out["score"], reverse=True)


def test_drains_and_failures_from_availability():
    from healthcheck.analysis.availability import drain_summary, reliability

    acts = actions([("n1", 0, "drain"), ("n1", 2, "resume"), ("n1", 4, "drain"),   # open at 10h
                    ("n2", 1, "drain"), ("n2", 1.5, "resume")])
    runs = pd.DataFrame([{"node": n, "started_at": hours(h), "status": s} for n, h, s in [
        ("n2", 0, "fail"), ("n2", 1, "fail"), ("n2", 2, "pass"), ("n2", 3, "FAIL"),
        ("n3", 0, "pass"), ("n3", 1, "pass")]])
    out = rank_nodes(drains=drain_summary(acts, now=hours(10)),
                     reliability=reliability(runs, now=hours(10)))
    assert list(out.columns) == list(RISK_COLUMNS)
    # n2: 2 failure onsets x 2 + 1 drain x 1 = 5; n1: 2 drains x 1 = 2; n3: nothing.
    assert out[["node", "score"]].values.tolist() == [["n2", 5.0], ["n1", 2.0], ["n3", 0.0]]
    by = out.set_index("node")
    assert by.loc["n2", "evidence"] == ["failed 2x (failing streaks of runs)", "drained 1x, 0.5 h"]
    assert by.loc["n1", "evidence"] == ["drained 2x, 8 h (still drained)"]
    assert by.loc["n3", "evidence"] == [] and not by.loc["n1", "flapping"]
    assert DEFAULT_WEIGHTS["failure"] == 2.0 and DEFAULT_WEIGHTS["drain"] == 1.0
    heavy = rank_nodes(drains=drain_summary(acts, now=hours(10)), weights={"drain": 10.0})
    assert heavy[["node", "score"]].values.tolist() == [["n1", 20.0], ["n2", 10.0]]


def test_empty_component_is_node_level():
    bw = metrics([(f"n{i}", 0, "burnin.nccl", None, "busbw_gbps", v)
                  for i, v in enumerate([100, 100, 101, 99, 100, 40], start=1)])
    outl = fleet_outliers(bw, per="node")
    outl = outl.assign(component="")
    out = rank_nodes(outliers=outl).set_index("node")
    assert out.loc["n6", "evidence"] == ["outlier busbw_gbps: 40 vs peer median 100 (z=-80.94)"]
