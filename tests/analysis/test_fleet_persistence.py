"""Persistence over runs (analysis/persistence.py): an outlier once is noise, in k of the last n runs a finding."""
from __future__ import annotations

import pandas as pd
import pytest

from healthcheck.analysis.persistence import (counter_hits, last_samples, peer_key, persistent_outliers,
                                              persistent_results)
from tests.analysis.frames import metrics


def _fleet(values: dict[str, list[float]], name: str = "gemm_tflops") -> pd.DataFrame:
    """One GPU per node, one sample per day (hour 24 * i + node index)."""
    rows = []
    for j, (node, vals) in enumerate(sorted(values.items())):
        for i, v in enumerate(vals):
            rows.append((node, 24 * i + j * 0.01, "burnin.gemm.tflops", "gpu0", name, v))
    return metrics(rows)


def _healthy(i: int, runs: int = 5) -> list[float]:
    return [700.0 + ((i * 7 + r * 3) % 5) for r in range(runs)]


def test_an_outlier_once_is_noise_in_k_of_n_a_finding():
    vals = {f"n{i:02d}": _healthy(i) for i in range(12)}
    vals["n00"] = [700, 701, 702, 600, 703]           # once, not in the latest run
    vals["n01"] = [600, 702, 601, 703, 602]           # 3 of the last 5, the latest too
    out = persistent_outliers(_fleet(vals), side="low").set_index("node")
    assert (out.loc["n00", "hits"], bool(out.loc["n00", "persistent"])) == (1, False)
    assert (out.loc["n01", "hits"], bool(out.loc["n01", "persistent"])) == (3, True)
    assert out.loc["n01", "value"] == 602 and out.loc["n01", "runs"] == 5
    assert out.loc["n01", "peer_median"] == pytest.approx(702.0, abs=2)
    assert out.index[0] == "n01"  # persistent first
    assert not out.drop(index=["n00", "n01"])["persistent"].any()
    # k and n are parameters: one hit is enough with k=1; only the last 2 runs with n=2
    assert bool(persistent_outliers(_fleet(vals), side="low", k=1).set_index("node").loc["n00", "persistent"])
    last2 = persistent_outliers(_fleet(vals), side="low", k=2, n=2).set_index("node")
    assert (last2.loc["n01", "hits"], last2.loc["n01", "runs"]) == (1, 2)


def test_the_good_side_is_not_an_outlier():
    vals = {f"n{i:02d}": _healthy(i) for i in range(10)}
    vals["n03"] = [800.0] * 5  # faster than its peers: not a fault for a "higher is better" figure
    out = persistent_outliers(_fleet(vals), side={"gemm_tflops": "low"}).set_index("node")
    assert out.loc["n03", "hits"] == 0 and out.loc["n03", "side"] == "high"
    both = persistent_outliers(_fleet(vals)).set_index("node")
    assert both.loc["n03", "hits"] == 5


def test_peers_per_rack_when_the_topology_says_so():
    vals = {f"a{i:02d}": [60.0 + (i % 3) * 0.5] * 5 for i in range(20)}       # a cool rack
    vals.update({f"b{i:02d}": [72.0 + (i % 3) * 0.5] * 5 for i in range(6)})  # a warm rack: inlet
    vals["b05"] = [80.0] * 5                                                  # hot within the warm rack
    df = _fleet(vals, "temperature_c")
    fleet = persistent_outliers(df, side="high", peer_of=peer_key({n: "H100" for n in vals}))
    assert set(fleet.loc[fleet["persistent"], "node"]) >= {"b00", "b01", "b05"}  # the whole rack stands out
    racks = {n: n[0] for n in vals}
    per_rack = persistent_outliers(df, side="high", peer_of=peer_key({n: "H100" for n in vals}, racks))
    assert set(per_rack.loc[per_rack["persistent"], "node"]) == {"b05"}
    assert set(per_rack["peer_group"]) == {"H100/a", "H100/b"}


def test_last_samples_positions_and_bad_arguments():
    df = _fleet({"n1": [1, 2, 3, 4, 5, 6], "n2": [7, 8]})
    last = last_samples(df, None, 3)
    assert last.groupby("node")["value"].apply(list).to_dict() == {"n1": [4.0, 5.0, 6.0], "n2": [7.0, 8.0]}
    assert last.loc[last["value"].eq(6.0), "pos"].item() == 0
    for k, n in ((0, 5), (6, 5), (True, 5), (2.0, 5)):
        with pytest.raises(ValueError, match="k"):
            persistent_outliers(df, k=k, n=n)
    with pytest.raises(ValueError, match="side"):
        persistent_outliers(_fleet({f"n{i}": _healthy(i) for i in range(6)}), side="up")
    with pytest.raises(ValueError, match="metrics frame lacks column"):
        persistent_outliers(pd.DataFrame({"node": ["n1"]}))


def test_a_kept_sort_is_taken_again_without_sorting_and_gives_what_a_fresh_sort_gives():
    """``keep_order``: the fleet ranking sorts once; each judge's last_samples of that frame (by name, a
    smaller n) equals the same call on the unsorted rows, and asks for no sort."""
    vals = {"n1": [1, 2, 3, 4, 5, 6, 7], "n2": [7, 8], "n3": [9, 8, 7, 6, 5]}
    df = pd.concat([_fleet(vals), _fleet(vals, "temperature_c")], ignore_index=True).sample(frac=1, random_state=3)
    kept = last_samples(df, None, 6, keep_order=True)
    assert "_gid" in kept.columns and kept.attrs["last_samples_n"] == 6
    for names, n in ((None, 6), (None, 2), ("temperature_c", 3), (["gemm_tflops"], 1),
                     (lambda m: m.startswith("gemm"), 4)):
        fresh = last_samples(df, names, n)
        again = last_samples(kept, names, n)
        assert list(again.columns) == list(fresh.columns) and not again.attrs
        pd.testing.assert_frame_equal(again, fresh, check_dtype=False)
    import healthcheck.analysis.persistence as pers
    real = pers.series_sorted
    try:
        pers.series_sorted = lambda *a, **k: (_ for _ in ()).throw(AssertionError("sorted again"))
        last_samples(kept, "temperature_c", 3)  # no sort
    finally:
        pers.series_sorted = real
    more = last_samples(kept, None, 7)  # more than it kept: a fresh sort of what it holds (6 at most)
    assert more.groupby(["node", "name"]).size().max() == 6
    plain = kept.drop(columns="_gid")
    plain.attrs = {}
    pd.testing.assert_frame_equal(last_samples(plain, None, 2), last_samples(df, None, 2), check_dtype=False)


def _results(rows):
    """rows: (run, node, day, check, component, status)."""
    return pd.DataFrame([{"run_id": r, "node": n, "started_at": pd.Timestamp("2026-01-01", tz="UTC")
                          + pd.Timedelta(days=d), "check": c, "component": comp, "status": s, "message": f"{s} {c}"}
                         for r, n, d, c, comp, s in rows])


def test_results_in_k_of_the_last_n_runs_of_the_node():
    runs = pd.DataFrame([{"run_id": f"n1-{d}", "node": "n1", "started_at": pd.Timestamp("2026-01-01", tz="UTC")
                          + pd.Timedelta(days=d)} for d in range(8)])
    res = _results([("n1-0", "n1", 0, "gpu.xid", "gpu1", "fail"),             # older than the last 5 runs
                    ("n1-3", "n1", 3, "ib.port.state", "mlx5_0/1", "warn"),
                    ("n1-5", "n1", 5, "ib.port.state", "mlx5_0/1", "WARN"),
                    ("n1-7", "n1", 7, "ib.port.state", "mlx5_0/1", "fail"),
                    ("n1-6", "n1", 6, "host.disk", None, "warn"),
                    ("n1-6", "n1", 6, "host.mounts", None, "pass")])
    out = persistent_results(res, runs).set_index("check")
    assert "gpu.xid" not in out.index and "host.mounts" not in out.index
    port = out.loc["ib.port.state"]
    assert (port["hits"], port["runs"], port["status"], bool(port["latest"]), bool(port["persistent"])) == \
        (3, 5, "fail", True, True)
    assert (out.loc["host.disk", "hits"], bool(out.loc["host.disk", "persistent"])) == (1, False)
    # without runs, the results' own run ids order the node's runs (here: 5 runs seen)
    assert persistent_results(res).set_index("check").loc["ib.port.state", "runs"] == 5


def test_counter_hits_count_increases_not_resets():
    vals = [0, 0, 1, 1, 3, 0, 2]  # +1, +2, a reset to 0 (not counted), +2
    df = metrics([("n1", i, "ib.port.errors", "mlx5_0/1", "link_downed", v) for i, v in enumerate(vals)]
                 + [("n2", i, "ib.port.errors", "mlx5_0/1", "link_downed", 4) for i in range(7)])
    out = counter_hits(df, ["link_downed"], k=3, n=5)
    assert out["node"].tolist() == ["n1"]  # a constant counter has no hit
    row = out.iloc[0]
    assert (row["hits"], row["increase"], row["value"], bool(row["persistent"])) == (3, 5.0, 2.0, True)
    assert counter_hits(df, ["link_downed"], k=1, n=2).iloc[0]["hits"] == 1  # 3 -> 0 (reset), 0 -> 2


def test_a_node_level_figure_without_a_component_keeps_its_value():
    """A figure of the whole node (nccl busbw: no component) is an outlier with its value, its peers' median
    and z, not NaN (a join on a missing key matched nothing: the report said "nan vs peer median nan")."""
    vals = {f"n{i:02d}": _healthy(i) for i in range(12)}
    vals["n01"] = [600, 601, 602, 600, 602]
    m = _fleet(vals, "busbw_gbps").assign(component=None)
    out = persistent_outliers(m, side="low").set_index("node")
    assert out.loc["n01", "value"] == 602 and out.loc["n01", "peer_median"] == pytest.approx(702.0, abs=2)
    assert out.loc["n01", "z"] < -3.5 and bool(out.loc["n01", "persistent"]) and not out.loc["n01", "component"]
