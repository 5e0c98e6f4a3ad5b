"""Severity-weighted fleet ranking (analysis/fleetrank.py): what ranks, why, and what stays out."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from healthcheck.analysis.fleetrank import DEFAULT_WEIGHTS, NOISE_FACTOR, WHY_KEYS, rank_fleet
from tests.analysis.frames import T0, actions, metrics
from tests.analysis.test_fleet_floors import REFS

H100 = "NVIDIA H100 80GB HBM3"


def _fleet(nodes: int = 30, runs: int = 5):
    rows = []
    for i in range(nodes):
        for r in range(runs):
            for g in range(2):
                rows.append((f"n{i:02d}", 24 * r + i * 0.01, "gpu.temperature", f"gpu{g}", "temperature_c",
                             60.0 + (i % 5) * 0.4 + g * 0.3 + (r % 2) * 0.2))
                rows.append((f"n{i:02d}", 24 * r + i * 0.01 + 1, "burnin.gemm.tflops", f"gpu{g}", "gemm_tflops",
                             700.0 + (i % 7) - 3 + (r % 3)))
    return rows


def test_the_91c_gpu_outranks_single_run_outliers():
    """The issue's complaint: 8 of the top 10 were noise and a GPU at 91 C ranked 85th."""
    rows = _fleet()
    hot = [r for r in rows if r[0] == "n05" and r[3] == "gpu1" and r[4] == "temperature_c"]
    rows = [r for r in rows if r not in hot] + [(n, h, c, comp, name, 91.0) for n, h, c, comp, name, _ in hot]
    # eight nodes each with one very slow GEMM run (a noisy neighbour), not in the latest run
    slow = {f"n{i:02d}" for i in range(10, 18)}
    rows = [(n, h, c, comp, name, 400.0 if n in slow and name == "gemm_tflops" and comp == "gpu0"
             and 48 <= h < 72 else v) for n, h, c, comp, name, v in rows]
    out = rank_fleet(metrics=metrics(rows), gpu_model=lambda n: H100, references=REFS)
    assert out.iloc[0]["node"] == "n05" and out.iloc[0]["severity"] == "fail"
    why = out.iloc[0]["why"]
    assert set(why[0]) == set(WHY_KEYS)
    assert json.loads(json.dumps(why)) == why  # plain values: None for what does not apply, never NaN
    floor = next(w for w in why if w["kind"] == "floor")
    assert (floor["metric"], floor["component"], floor["value"], floor["limit"], floor["hits"], floor["runs"]) == \
        ("temperature_c", "gpu1", 91.0, 89.0, 5, 5)
    outlier = next(w for w in why if w["kind"] == "outlier")
    assert outlier["peer_median"] == pytest.approx(60.8, abs=1) and outlier["hits"] == 5
    noise = out[out["node"].isin(slow)]
    assert len(noise) == 8 and (noise["severity"] == "info").all()
    assert noise["score"].max() < out.iloc[0]["score"] / 5
    # one slow run: an outlier (weight 3 x 1 of 5 runs x noise factor x |z| factor capped at 3) and a
    # regression against its own baseline (5 x 1 of 5 x noise factor), nothing more
    cap = (DEFAULT_WEIGHTS["outlier"] * 3.0 + DEFAULT_WEIGHTS["regression"]) * 0.2 * NOISE_FACTOR
    assert noise["score"].max() <= cap + 1e-9


def _warning_and_flaps(warns: str = "n1", flaps: str = "n1") -> dict:
    """A port warning of node ``warns`` in 3 of its 5 runs, and node ``flaps`` drained and resumed 3 times:
    rank_fleet's results, runs, actions and now."""
    res = pd.DataFrame([{"run_id": f"r{d}", "node": warns, "started_at": T0 + pd.Timedelta(days=d),
                         "check": "ib.port.state", "component": "mlx5_0/1", "status": "warn", "message": "port Down"}
                        for d in (1, 3, 4)])
    runs = pd.DataFrame([{"run_id": f"r{d}", "node": warns, "context": "slurm-check", "job_id": None,
                          "started_at": T0 + pd.Timedelta(days=d), "duration_s": 0.1,
                          "status": "warn" if d in (1, 3, 4) else "pass"} for d in range(5)])
    flap = actions([a for k in range(3) for a in ((flaps, 2 * k, "drain"), (flaps, 2 * k + 1, "resume"))])
    return {"results": res, "runs": runs, "actions": flap, "now": T0 + pd.Timedelta(days=5)}


def test_hand_computed_score_of_a_persistent_check_and_flapping():
    out = rank_fleet(**_warning_and_flaps())
    row = out.set_index("node").loc["n1"]
    kinds = {w["kind"]: w["points"] for w in row["why"]}
    assert kinds == {"check": pytest.approx(2.0 * 3 / 5), "flapping": 6.0, "drain": 3.0}  # warn 2 x 3 of 5 runs
    assert row["score"] == pytest.approx(2.0 * 3 / 5 + 6.0 + 3.0)
    assert row["severity"] == "warn" and row["n_persistent"] == 2
    assert "WARN ib.port.state [mlx5_0/1] in 3 of the last 5 runs, now too" in row["evidence"][-1]


def test_regression_since_a_date_and_growth_rank():
    rows = [("n1", 24 * 7 * w, "burnin.gemm.tflops", "gpu0", "gemm_tflops", 700.0 if w < 8 else 665.0)
            for w in range(12)]
    rows += [(f"p{i}", 24 * 7 * w, "burnin.gemm.tflops", "gpu0", "gemm_tflops", 700.0) for i in range(4)
             for w in range(12)]
    rows += [("n2", d, "ib.port.errors", "mlx5_1/1", "link_downed", float(d if d > 6 else 0))
             for d in range(10)]  # up in the last 3 samples only
    out = rank_fleet(metrics=metrics(rows)).set_index("node")
    reg = next(w for w in out.loc["n1", "why"] if w["kind"] == "regression")
    assert (reg["hits"], reg["runs"], reg["value"], reg["peer_median"]) == (4, 5, 665.0, 700.0)
    assert "down 5.0 % since 2024-04-26" in reg["text"]    # week 8 after T0 (2024-03-01)
    growth = next(w for w in out.loc["n2", "why"] if w["kind"] == "growth")
    assert (growth["hits"], growth["runs"], growth["persistent"]) == (3, 5, True)
    assert not any(n.startswith("p") for n in out.index)


def test_samples_given_as_a_call_are_read_after_the_other_evidence(monkeypatch):
    """``metrics`` as a call (a report's summary still reading its samples): the checks, drains and failures
    are judged first, then the call is made, once; the ranking is the one of the same frames passed as
    they are."""
    from healthcheck.analysis import fleetrank

    rows = _fleet(nodes=8)
    inputs = _warning_and_flaps("n01", "n02")
    order = []
    real = fleetrank.pers.persistent_results
    monkeypatch.setattr(fleetrank.pers, "persistent_results", lambda *a, **kw: order.append("checks") or real(*a, **kw))

    def samples():
        order.append("samples")
        return metrics(rows)

    late = rank_fleet(metrics=samples, **inputs)
    assert order == ["checks", "samples"]
    pd.testing.assert_frame_equal(late, rank_fleet(metrics=metrics(rows), **inputs))
    assert {"n01", "n02"} <= set(late["node"]) and late["why"].map(len).sum() > 2


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match="unknown weight"):
        rank_fleet(weights={"outliers": 1.0})
    with pytest.raises(ValueError, match="'now' is needed"):
        rank_fleet(actions=actions([("n1", 0, "drain")]))
    with pytest.raises(ValueError, match="k <= n"):
        rank_fleet(k=6, n=5)
    assert rank_fleet().empty and list(rank_fleet().columns)[:3] == ["node", "score", "severity"]


def test_regression_hits_follow_baseline_deviation():
    """The matrix form agrees with regressions.baseline_deviation (int window) sample for sample."""
    import numpy as np

    from healthcheck.analysis.fleetrank import regression_hits
    from healthcheck.analysis.regressions import baseline_deviation

    rng = np.random.default_rng(3)
    rows = [(f"n{i}", 24 * d, "burnin.gemm.tflops", f"gpu{g}", "gemm_tflops",
             float(np.round(700 * (1 + rng.normal(0, 0.03)), 1)))
            for i in range(6) for g in range(3) for d in range(int(rng.integers(2, 30)))]
    df = metrics(rows)
    dev = baseline_deviation(df, ["gemm_tflops"], window=8, min_periods=3, threshold=0.03)
    keys = ["node", "check", "component", "name"]
    dev["pos"] = dev.groupby(keys).cumcount(ascending=False)
    want = dev[dev["pos"] < 5].groupby(keys)["regressed"].sum()
    want = want[want > 0]
    got = regression_hits(df, ["gemm_tflops"], k=2, n=5, window=8).set_index(keys)
    assert len(want) > 3 and got["hits"].sort_index().to_dict() == want.sort_index().to_dict()
    latest = dev[dev["pos"].eq(0)].set_index(keys)
    assert np.allclose(got["baseline"], latest.loc[got.index, "baseline"])
    with pytest.raises(ValueError, match="window"):
        regression_hits(df, ["gemm_tflops"], k=2, n=5, window="30D")


def test_a_fail_in_the_latest_run_ranks_with_full_weight():
    """A check that FAILs in the node's latest run is a verdict (the hooks drain the node), not noise: it
    counts in full even when it is the first of the last n runs; an old one-off FAIL stays noise."""
    import pandas as pd

    from healthcheck.analysis import fleetrank

    ch = pd.DataFrame({"node": ["new", "old"], "check": ["gpu.row_remap"] * 2, "component": ["gpu0"] * 2,
                       "hits": [1, 1], "runs": [5, 5], "status": ["fail", "fail"], "persistent": [False, False],
                       "latest": [True, False], "message": ["pending remap", "pending remap"]})
    weights = dict(fleetrank.DEFAULT_WEIGHTS)
    new, old = fleetrank.evidence_checks(ch, weights)
    assert new["persistent"] and new["severity"] == "fail" and new["points"] == weights["check_fail"]
    assert not old["persistent"] and old["severity"] == "info" and old["points"] < new["points"] / 5
