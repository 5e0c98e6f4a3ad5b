"""The fleet ranking's kept samples as the report reads them (``report/keptsamples.py``): ``metric_recent``
rows unnested, cut to the window and to what the ranking judges, in the ranking's order; the series that
cannot tell handed back; identical PCIe pairs left out without changing a ranking input."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.report import history as hist


def test_kept_samples_are_cut_to_the_window_and_doubtful_series_are_read_again():
    """``keptsamples.unnest_recent``: per series the newest n in [since, now] (n + the regression window for the
    "higher is better" names), oldest first; a full list whose samples after the window's end crowd out
    the window is handed back to be read from the rows, and so is a row marked redo."""
    from healthcheck.history.recent import KEEP
    from healthcheck.report.keptsamples import unnest_recent

    def row(name, comp, times, redo=0, n_kept=None):
        n_kept = len(times) if n_kept is None else n_kept
        return {"node": "n01", "check": "gpu", "component": comp, "name": name, "n_kept": n_kept,
                "newest_us": times[0], "oldest_us": times[-1], "redo": redo,
                "t": "{" + ",".join(map(str, times)) + "}", "v": "{" + ",".join(f"{x / 10}" for x in times) + "}"}

    since, now = 100, 200
    rows = pd.DataFrame([
        row("temperature_c", "GPU0", [190, 180, 170, 160, 150, 140, 90]),  # newest 5 in the window
        row("gemm_tflops", "GPU0", [250, 199, 150, 120, 99]),  # a long name: every one in the window
        row("temperature_c", "", list(range(300 + KEEP - 1, 300 - 1, -1))),  # KEEP after now, none kept in it
        row("temperature_c", "GPU1", [150], redo=1),
    ])
    out, again = unnest_recent(rows, ["gemm_tflops"], 5, 25, since, now)
    t0 = out[out["component"] == "GPU0"]
    assert list(t0.loc[t0["name"] == "temperature_c", "value"]) == [15.0, 16.0, 17.0, 18.0, 19.0]
    assert list(t0.loc[t0["name"] == "gemm_tflops", "value"]) == [12.0, 15.0, 19.9]
    assert t0.loc[t0["name"] == "temperature_c", "started_at"].iloc[0] == pd.Timestamp(150, unit="us", tz="UTC")
    assert out["run_id"].isna().all() and set(out["component"]) == {"GPU0"}
    assert again.to_dict("records") == [
        {"name": "temperature_c", "node": "n01", "check": "gpu", "component": ""},
        {"name": "temperature_c", "node": "n01", "check": "gpu", "component": "GPU1"}]


def test_kept_samples_come_in_the_order_the_ranking_sorts_them(monkeypatch):
    """``keptsamples.unnest_recent`` hands the series in (node, check, component, name) text order, no component last,
    each oldest first, whatever order the server sent the rows in: the ranking's reductions then find them
    sorted (``_frames.series_sorted`` keeps the frame as it is) instead of sorting 1.5 M samples again."""
    import random

    from healthcheck.analysis._frames import SERIES_KEYS, series_sorted
    from healthcheck.report.keptsamples import unnest_recent

    rows = []
    for node in ("n10", "n02", "n1"):
        for comp in ("GPU1", "", "GPU0"):
            for name in ("temperature_c", "gemm_tflops"):
                times = [190 - 10 * i - len(rows) % 3 for i in range(6)]  # newest first
                rows.append({"node": node, "check": "gpu", "component": comp, "name": name, "n_kept": 6,
                             "newest_us": times[0], "oldest_us": times[-1], "redo": 0,
                             "t": "{" + ",".join(map(str, times)) + "}",
                             "v": "{" + ",".join("1.5" for _ in times) + "}"})
    random.Random(3).shuffle(rows)
    out, again = unnest_recent(pd.DataFrame(rows), ["gemm_tflops"], 5, 25, 100, 200)
    assert again.empty and len(out) == 9 * 5 + 9 * 6

    def no_sort(*args):
        raise AssertionError("the kept samples were sorted again")

    monkeypatch.setattr("healthcheck.analysis._frames.time_order", no_sort)
    pd.testing.assert_frame_equal(series_sorted(out, SERIES_KEYS).drop(columns="_gid"), out)
    firsts = out.drop_duplicates(SERIES_KEYS)
    assert list(zip(firsts["node"], firsts["component"].astype(object).fillna("-"), firsts["name"]))[:4] == [
        ("n02", "GPU0", "gemm_tflops"), ("n02", "GPU0", "temperature_c"), ("n02", "GPU1", "gemm_tflops"),
        ("n02", "GPU1", "temperature_c")]
    assert firsts["node"].astype(str).tolist()[-1] == "n10" and pd.isna(firsts["component"].iloc[5])


def _pair_row(node, name, times, values, comp="GPU0", redo=0, n_kept=None):
    return {"node": node, "check": "gpu.pcie", "component": comp, "name": name,
            "n_kept": len(times) if n_kept is None else n_kept, "newest_us": times[0], "oldest_us": times[-1],
            "redo": redo, "t": "{" + ",".join(map(str, times)) + "}",
            "v": "{" + ",".join(str(x) for x in values) + "}"}


@pytest.mark.parametrize("arrow", [None, False])
def test_pcie_pairs_whose_kept_samples_are_identical_are_not_unnested(arrow):
    """``keptsamples.identical_pairs``: the width and max rows of one unit with the same times and values (the width at
    its max at every instant) are left out, both; a pair that crosses once, one whose width row must be read
    again (redo), a width without its max, a pair with a missing array, and another unit's rows stay. The
    same with pyarrow's kernels and with Python strings (no pyarrow)."""
    import numpy as np

    from healthcheck.report.keptsamples import identical_pairs

    t = [190, 180, 170]
    rows = pd.DataFrame([
        _pair_row("n1", "pcie_width", t, [16, 16, 16]), _pair_row("n1", "pcie_width_max", t, [16, 16, 16]),
        _pair_row("n2", "pcie_width", t, [16, 8, 16]), _pair_row("n2", "pcie_width_max", t, [16, 16, 16]),
        _pair_row("n3", "pcie_width", t, [16, 16, 16], redo=1), _pair_row("n3", "pcie_width_max", t, [16, 16, 16]),
        _pair_row("n4", "pcie_width", t, [16, 16, 16]),
        _pair_row("n5", "pcie_width_max", t, [16, 16, 16], comp="GPU1"),
        _pair_row("n5", "pcie_width", t, [16, 16, 16], comp="GPU1"),
        _pair_row("n5", "temperature_c", t, [16, 16, 16], comp="GPU1"),
        _pair_row("n6", "pcie_width", t, [16, 16, 16]), dict(_pair_row("n6", "pcie_width_max", t, [16]), v=None),
    ])
    sure = rows["redo"].to_numpy() == 0
    assert list(np.flatnonzero(identical_pairs(rows, sure, arrow))) == [0, 1, 7, 8]
    assert not identical_pairs(rows, np.zeros(len(rows), dtype=bool), arrow).any()


def test_a_pending_pcie_series_is_read_again_with_its_partner():
    """A series of runs not merged into the rollups yet is read from the rows; for a PCIe width or max its
    partner is read from the rows too (``keptsamples.with_partners``), never judged against kept samples that may have
    been left out as an identical pair."""
    from healthcheck.report.keptsamples import with_partners

    keys = pd.DataFrame([{"name": "pcie_width", "node": "n1", "check": "gpu.pcie", "component": "GPU0"},
                         {"name": "temperature_c", "node": "n1", "check": "gpu", "component": "GPU0"}])
    out = with_partners(keys)
    assert sorted(zip(out["name"], out["node"], out["check"], out["component"])) == [
        ("pcie_width", "n1", "gpu.pcie", "GPU0"), ("pcie_width_max", "n1", "gpu.pcie", "GPU0"),
        ("temperature_c", "n1", "gpu", "GPU0")]
    assert with_partners(keys.iloc[1:]).equals(keys.iloc[1:])


@pytest.mark.parametrize("seed", range(40))
def test_leaving_identical_pcie_pairs_out_changes_no_ranking_input(seed, monkeypatch):
    """The fleet ranking's inputs (``summary.recent_fields``) are the same whether ``keptsamples.unnest_recent`` leaves
    identical PCIe pairs out or unnests them for ``floors.uncrossed_pairs`` to drop: random pairs, some at
    their max throughout, some crossing at one instant, some with times of their own, some read again."""
    import random

    from healthcheck.report import keptsamples
    from healthcheck.report.summary import recent_fields

    rnd = random.Random(seed)
    rows = []
    for u in range(rnd.randint(1, 12)):
        node, comp = f"n{u % 4}", f"GPU{u // 4}"
        times = sorted(rnd.sample(range(50, 260), rnd.randint(1, 9)), reverse=True)
        width = [rnd.choice([16, 16, 16, 8]) for _ in times]
        top = list(width) if rnd.random() < 0.6 else [16] * len(times)
        other = times if rnd.random() < 0.8 else sorted(rnd.sample(range(50, 260), len(times)), reverse=True)
        rows += [_pair_row(node, "pcie_width", times, width, comp, redo=int(rnd.random() < 0.1)),
                 _pair_row(node, "pcie_width_max", other, top, comp)]
        if rnd.random() < 0.3:
            rows.append(_pair_row(node, "temperature_c", times, [50 + x for x in width], comp))
    rnd.shuffle(rows)
    frame = pd.DataFrame(rows)

    def ranked(left_out: bool):
        with monkeypatch.context() as mp:
            if not left_out:
                mp.setattr(keptsamples, "identical_pairs", lambda r, sure: pd.Series(False, index=r.index).to_numpy())
            kept, again = keptsamples.unnest_recent(frame, [], 5, 25, 100, 240)
        perf = recent_fields(kept, pd.DataFrame(columns=["run_id", "node", "started_at"]), 5)["perf_recent"]
        return hist.plain(perf), sorted(map(tuple, again.to_numpy().tolist()))

    (with_, again_with), (without, again_without) = ranked(True), ranked(False)
    pd.testing.assert_frame_equal(with_, without)
    assert again_with == again_without
