"""Record validation: real shapes accepted, every bad field named, fuzzing lets only RecordInvalid out."""
from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from healthcheck.history.rows import RecordInvalid, action_row, run_rows
from healthcheck.history.queries import parse_since
from tests.history.recs import action_record, run_record

NOW = datetime(2026, 5, 20, tzinfo=timezone.utc)


def test_run_rows_of_a_real_record():
    rec = dict(run_record("gpu01", 3), record_id="ab" * 16)
    rows = run_rows(rec, NOW)
    assert rows.run_dict()["started_at"] == datetime(2026, 5, 1, 11, tzinfo=timezone.utc)
    assert rows.run_id == rec["run_id"] and rows.run_dict()["ingested_at"] == NOW
    assert len(rows.results) == 10 and rows.results[3][4:7] == ("gpu.ecc", "GPU3", "pass")
    assert ("ecc_sbe_volatile", 3.0) in [(m[2], m[7]) for m in rows.metrics if m[6] == "GPU3"]
    assert action_row(dict(action_record("gpu01", 1)))[4] == "drain"


@pytest.mark.parametrize("mutate,reason", [
    (lambda r: r.pop("run_id"), "missing 'run_id'"),
    (lambda r: r.update(started_at="yesterday"), "not an ISO-8601 time"),
    (lambda r: r.update(status="ok"), "status 'ok'"),
    (lambda r: r.update(schema_version=2), "unknown schema_version 2"),
    (lambda r: r["results"][1].update(metrics={"t": "hot"}), "results[1].metrics['t'] is not a number"),
    (lambda r: r["results"].append("x"), "must be an object"),
    (lambda r: r.update(node=["a"]), "'node' must be a string"),
])
def test_bad_fields_are_named(mutate, reason):
    rec = dict(run_record("gpu01", 1), record_id="r1")
    mutate(rec)
    with pytest.raises(RecordInvalid, match=None) as err:
        run_rows(rec, NOW)
    assert reason in str(err.value)


def test_non_finite_metrics_are_dropped_and_naive_times_are_utc():
    rec = dict(run_record("gpu01", 1, gpus=1), record_id="r1", started_at="2026-05-01T08:00:00")
    rec["results"][0]["metrics"] = json.loads('{"a": NaN, "b": Infinity, "c": 1.5}')
    rows = run_rows(rec, NOW)
    assert [m[2] for m in rows.metrics if m[1] == 0] == ["c"]
    assert rows.run_dict()["started_at"].tzinfo == timezone.utc


def test_parse_since():
    assert parse_since("7d", NOW) == datetime(2026, 5, 13, tzinfo=timezone.utc)
    assert parse_since("12h", NOW).hour == 12
    assert parse_since("2026-05-01", NOW) == datetime(2026, 5, 1, tzinfo=timezone.utc)
    assert parse_since("2026-05-01T10:00:00+02:00", NOW).hour == 8
    with pytest.raises(ValueError, match="expected a duration"):
        parse_since("soon", NOW)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=20)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["run_id", "record_id", "node", "context", "job_id", "started_at",
                                        "duration_s", "status", "results", "schema_version", "time", "action",
                                        "checks", "reason"]), json_values, max_size=10))
def test_fuzz_only_record_invalid_escapes(rec):
    for func in (lambda r: run_rows(r, NOW), action_row):
        try:
            func(rec)
        except RecordInvalid:
            pass


@settings(max_examples=200)
@given(st.data())
def test_fuzz_mutated_real_records(data):
    rec = dict(run_record("gpu01", 2, gpus=2), record_id="r")
    path = data.draw(st.sampled_from(["started_at", "status", "results", "duration_s", "job_id", "node"]))
    mutated = copy.deepcopy(rec)
    mutated[path] = data.draw(json_values)
    if data.draw(st.booleans()) and mutated.get("results") and isinstance(mutated["results"], list):
        mutated["results"][0] = {k: data.draw(json_values) for k in ("check", "status", "metrics")}
    try:
        run_rows(mutated, NOW)
    except RecordInvalid:
        pass
