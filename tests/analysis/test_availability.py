"""Availability: drain intervals, summaries, flapping, time to first failure, MTBF."""
from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from healthcheck.analysis.availability import (FLAPPING_COLUMNS, INTERVAL_COLUMNS,
                                               RELIABILITY_COLUMNS, SUMMARY_COLUMNS,
                                               drain_intervals, drain_summary, flapping,
                                               reliability)
from tests.analysis.frames import (T0, action_frames, actions, hours, run_frames)

NOW = hours(8)


def _log():
    # n1: stray resume at 0h (ignored), drain 1h, resume 2h (1 h), drain 5h, drain 6h (extends),
    #     open at now=8h -> 3 h. n2: drain 3h, open -> 5 h. n3: only a resume.
    return actions([("n1", 1, "drain"), ("n1", 0, "resume"), ("n1", 2, "resume"),
                    ("n1", 5, "drain"), ("n1", 6, "drain"), ("n2", 3, "drain"),
                    ("n3", 0.5, "resume")])


def test_intervals_hand_computed_unsorted_input():
    iv = drain_intervals(_log(), now=NOW)
    assert list(iv.columns) == list(INTERVAL_COLUMNS)
    assert iv[["node", "duration_s", "open", "drain_actions"]].values.tolist() == [
        ["n1", 3600.0, False, 1], ["n1", 10800.0, True, 2], ["n2", 18000.0, True, 1]]
    assert iv["drained_at"].tolist() == [hours(1), hours(5), hours(3)]
    assert iv["resumed_at"][0] == hours(2) and pd.isna(iv["resumed_at"][1])
    assert iv["reason"][0] == "healthcheck: drain 0" and iv["run_id"][1] == "r3"


def test_summary_and_since_clipping():
    s = drain_summary(_log(), now=NOW)
    assert list(s.columns) == list(SUMMARY_COLUMNS)
    assert s[["node", "drains", "drained_s", "mean_drain_s", "max_drain_s", "open"]].values.tolist() \
        == [["n2", 1, 18000.0, 18000.0, 18000.0, True], ["n1", 2, 14400.0, 7200.0, 10800.0, True]]
    assert s.set_index("node").loc["n1", "last_resume_at"] == hours(2)
    # Window [4h, 8h]: n1's first interval ended before it; n2 counts 4 h of its 5.
    w = drain_summary(_log(), now=NOW, since=hours(4)).set_index("node")
    assert w.loc["n2", "drained_s"] == 14400.0 and w.loc["n1", "drains"] == 1
    assert w.loc["n1", "drained_s"] == 10800.0


def test_now_cuts_the_log_and_tie_order():
    iv = drain_intervals(_log(), now=hours(1.5))
    assert iv[["node", "duration_s", "open"]].values.tolist() == [["n1", 1800.0, True]]
    same = drain_intervals(actions([("n1", 1, "resume"), ("n1", 1, "drain")]), now=NOW)
    assert same["duration_s"].tolist() == [0.0] and not same["open"][0]


def test_tz_aware_other_zone_and_naive_now():
    log = _log()
    log["time"] = log["time"].dt.tz_convert("Asia/Tokyo")
    iv = drain_intervals(log, now=NOW.tz_convert("US/Pacific"))
    assert iv["duration_s"].tolist() == [3600.0, 10800.0, 18000.0]
    iv = drain_intervals(log, now=NOW.tz_localize(None))
    assert iv["duration_s"].tolist() == [3600.0, 10800.0, 18000.0]
    with pytest.raises(TypeError):
        drain_intervals(log, now=123)


def test_flapping_counts_cycles_in_window():
    rows = []
    for k in range(4):
        rows += [("n1", 10 * k, "drain"), ("n1", 10 * k + 1, "resume")]
    rows += [("n2", 0, "drain"), ("n2", 1, "resume"), ("n2", 35, "drain")]
    log = actions(rows)
    now = hours(40)
    f = flapping(log, now=now, window="2D", min_cycles=3)
    assert list(f.columns) == list(FLAPPING_COLUMNS)
    assert f.values.tolist() == [["n1", 4, T0, hours(31)]]
    assert flapping(log, now=now, window="20h", min_cycles=3).empty  # cycles at 20h, 30h only
    f = flapping(log, now=now, window="20h", min_cycles=2)
    assert f["cycles"].tolist() == [2] and f["first_drain_at"][0] == hours(20)


def test_reliability_hand_computed():
    runs = pd.DataFrame({
        "run_id": list("abcdefg"), "context": "prolog", "job_id": None, "duration_s": 0.02,
        "node": ["n1"] * 5 + ["n2", "n2"],
        "started_at": [hours(h) for h in (0, 1, 2, 3, 4, 2, 6)],
        "status": ["pass", "FAIL", "fail", "pass", "fail", "pass", "warn"]})
    r = reliability(runs.sample(frac=1.0, random_state=1), now=NOW, actions=_log())
    assert list(r.columns) == list(RELIABILITY_COLUMNS)
    n1, n2 = r.set_index("node").loc["n1"], r.set_index("node").loc["n2"]
    # n1: failures start at 1h and 4h -> 2; observed 8 h; drained 1 h + 3 h -> MTBF (8-4)/2 = 2 h.
    assert n1["failures"] == 2 and n1["ttff_s"] == 3600.0 and n1["first_failure_at"] == hours(1)
    assert n1["observed_s"] == 28800.0 and n1["drained_s"] == 14400.0 and n1["mtbf_s"] == 7200.0
    # n2: never failed; seen from 2h; its drain from 3h counts 5 h.
    assert n2["failures"] == 0 and math.isnan(n2["ttff_s"]) and math.isnan(n2["mtbf_s"])
    assert n2["observed_s"] == 21600.0 and n2["drained_s"] == 18000.0
    without = reliability(runs, now=NOW).set_index("node")
    assert without.loc["n1", "mtbf_s"] == 14400.0 and without.loc["n1", "drained_s"] == 0.0
    first_run_fails = reliability(runs.assign(status="fail"), now=NOW).set_index("node")
    assert first_run_fails.loc["n1", "failures"] == 1 and first_run_fails.loc["n1", "ttff_s"] == 0


def test_single_node_and_empty_frames():
    assert drain_intervals(pd.DataFrame(), now=NOW).empty
    assert list(drain_summary(actions([]), now=NOW).columns) == list(SUMMARY_COLUMNS)
    assert flapping(actions([]), now=NOW).empty
    assert list(reliability(pd.DataFrame(), now=NOW).columns) == list(RELIABILITY_COLUMNS)
    one = drain_summary(actions([("n1", 0, "drain")]), now=NOW)
    assert one.values.tolist()[0][:6] == ["n1", 1, 28800.0, 28800.0, 28800.0, True]
    with pytest.raises(ValueError, match="actions frame lacks"):
        drain_intervals(actions([("n1", 0, "drain")]).drop(columns=["action"]), now=NOW)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action_frames(), run_frames())
def test_fuzz_availability_never_raises(acts, runs):
    now = pd.Timestamp("2026-01-01", tz="UTC")
    iv = drain_intervals(acts, now=now)
    assert (iv["duration_s"] >= 0).all()
    s = drain_summary(acts, now=now, since="2025-01-01")
    assert (s["drained_s"] >= 0).all()
    flapping(acts, now=now, min_cycles=1)
    r = reliability(runs, now=now, actions=acts)
    assert (r["failures"] >= 0).all() and (r["mtbf_s"].dropna() >= 0).all()


def test_reliability_counts_drained_time_only_after_first_run():
    runs = pd.DataFrame({"run_id": ["a"], "context": "prolog", "job_id": None, "duration_s": 0.1,
                         "node": ["n1"], "started_at": [hours(4)], "status": ["fail"]})
    log = actions([("n1", 1, "drain"), ("n1", 6, "resume")])
    r = reliability(runs, now=NOW, actions=log).iloc[0]
    assert r["drained_s"] == 7200.0 and r["observed_s"] == 14400.0 and r["mtbf_s"] == 7200.0
