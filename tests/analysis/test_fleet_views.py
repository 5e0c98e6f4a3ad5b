"""The fleet tables the report renders (analysis/fleetviews.py): regressions since a date, time to first
failure of new nodes, MTBF per check and per component kind, versions across the fleet."""
from __future__ import annotations

import pandas as pd
import pytest

from healthcheck.analysis.fleetviews import (component_kind, fleet_tables, mtbf, new_node_ttff, regressions_since,
                                             version_table)
from tests.analysis.frames import T0, metrics

DAY = pd.Timedelta(days=1)


def _runs(rows):
    """rows: (run_id, node, day, status[, context])."""
    return pd.DataFrame([{"run_id": r[0], "node": r[1], "context": r[4] if len(r) > 4 else "slurm-check",
                          "job_id": None, "started_at": T0 + r[2] * DAY, "duration_s": 0.1, "status": r[3]}
                         for r in rows])


def _results(rows):
    """rows: (run_id, node, day, check, component, status)."""
    return pd.DataFrame([{"run_id": r, "node": n, "started_at": T0 + d * DAY, "check": c, "component": comp,
                          "status": s, "message": ""} for r, n, d, c, comp, s in rows])


def test_regressions_since_a_date():
    rows = [("n1", 24 * 7 * w, "burnin.gemm.tflops", "gpu3", "gemm_tflops", 700.0 if w < 9 else 651.0)
            for w in range(12)]
    rows += [("n2", 24 * 7 * w, "burnin.gemm.tflops", "gpu3", "gemm_tflops", 700.0 if w != 11 else 600.0)
             for w in range(12)]  # the latest run only: not persistent
    out = regressions_since(metrics(rows))
    assert out["node"].tolist() == ["n1"]
    row = out.iloc[0]
    assert row["change_pct"] == pytest.approx(-7.0) and row["since"] == T0 + 63 * DAY
    assert row["text"] == "gemm_tflops [gpu3] down 7.0 % since 2024-05-03"
    assert (row["hits"], row["runs"]) == (3, 5)


def test_regressions_from_the_rankings_hits_are_the_same_table():
    """rank_fleet(keep=) hands its regression hits to regressions_since (the report computes them once)."""
    from healthcheck.analysis.fleetrank import rank_fleet

    rows = [(node, 24 * 7 * w, "burnin.gemm.tflops", f"gpu{g}", "gemm_tflops",
             (651.0 if node == "n1" and w >= 9 else 700.0) + g) for node in ("n1", "n2", "n3") for g in range(2)
            for w in range(12)]
    kept: dict = {}
    rank_fleet(metrics=metrics(rows), keep=kept)
    assert "regressions" in kept and len(kept["regressions"])
    pd.testing.assert_frame_equal(regressions_since(metrics(rows), hits=kept["regressions"]),
                                  regressions_since(metrics(rows)))
    assert regressions_since(metrics(rows))["node"].tolist() == ["n1", "n1"]


def test_time_to_first_failure_of_new_nodes():
    runs = _runs([("a0", "old", 0, "pass"), ("a1", "old", 20, "fail"),
                  ("b0", "new1", 15, "pass"), ("b1", "new1", 15.5, "fail"), ("b2", "new1", 16, "fail"),
                  ("c0", "new2", 18, "pass"), ("c1", "new2", 19, "pass")])
    out = new_node_ttff(runs, now=T0 + 21 * DAY, new_since=T0 + 10 * DAY)
    assert out["node"].tolist() == ["new1", "new2"]      # the old node is not new; failed first
    assert out.iloc[0]["ttff_h"] == pytest.approx(12.0) and bool(out.iloc[0]["failed"])
    assert out.iloc[1]["failed"] == False and pd.isna(out.iloc[1]["ttff_h"])  # noqa: E712
    assert out.iloc[1]["observed_h"] == pytest.approx(72.0)


def test_mtbf_per_check_and_per_component_kind():
    runs = _runs([(f"h{d}", "n1", d, "pass") for d in range(10)]
                 + [(f"b{d}", "n1", d + 0.5, "pass", "burnin") for d in range(10)]
                 + [(f"g{d}", "n2", d, "pass") for d in range(10)])
    res = _results([("h2", "n1", 2, "gpu.pcie.link", "gpu0", "fail"), ("h2", "n1", 2, "gpu.pcie.link", "gpu1", "fail"),
                    ("h3", "n1", 3, "gpu.pcie.link", "gpu0", "fail"),   # the same streak (burn-in b2 between)
                    ("h7", "n1", 7, "gpu.pcie.link", "gpu0", "fail"),   # a second onset
                    ("g4", "n2", 4, "ib.port.state", "mlx5_0/1", "fail"), ("g5", "n2", 5, "host.disk", None, "warn")])
    now = T0 + 10 * DAY
    by_check = mtbf(res, runs, now=now).set_index("key")
    node_hours = 2 * 240.0
    assert by_check["failures"].to_dict() == {"gpu.pcie.link": 2, "ib.port.state": 1}
    assert by_check.loc["gpu.pcie.link", "mtbf_h"] == pytest.approx(node_hours / 2)
    assert by_check.loc["ib.port.state", "nodes"] == 1
    by_comp = mtbf(res, runs, now=now, by="component").set_index("key")
    assert by_comp["failures"].to_dict() == {"gpu": 2, "mlx": 1}
    assert [component_kind(c) for c in ("gpu3", "mlx5_0/1", None, "", "/scratch")] == \
        ["gpu", "mlx", "node", "node", "other"]
    with pytest.raises(ValueError, match="by must be"):
        mtbf(res, runs, now=now, by="rack")


def test_versions_across_the_fleet_and_the_tables():
    versions = pd.DataFrame([{"node": f"n{i}", "node_class": "h100", "item": "driver",
                              "value": "535.129.03" if i == 3 else "550.54.15"} for i in range(6)]
                            + [{"node": "n0", "node_class": "h100", "item": "hca_firmware",
                                "value": "28.39.1002,28.36.1010"},
                               {"node": "n1", "node_class": "h100", "item": "kernel", "value": "6.1"}])
    table = version_table(versions)
    assert table[["item", "value", "nodes"]].values.tolist() == [
        ["driver", "550.54.15", 5, ], ["driver", "535.129.03", 1], ["hca_firmware", "28.36.1010", 1],
        ["hca_firmware", "28.39.1002", 1]]
    assert table["majority"].tolist() == [True, False, False, False]  # a tie has no majority
    tabs = fleet_tables(versions=versions, now=T0)
    assert set(tabs) == {"regressions", "new_nodes", "mtbf_check", "mtbf_component", "versions", "drift"}
    assert tabs["drift"]["node"].tolist() == ["n3"] and tabs["regressions"].empty
    with pytest.raises(ValueError, match="versions frame lacks column"):
        version_table(pd.DataFrame({"node": ["n1"]}))
