"""One "action" record shape (healthcheck.spool.entries.action_record), written by the hooks, the queue, the
sweep and the burn-in job step, and accepted as it is by the history's ingest."""
from __future__ import annotations

import json

import pytest

from healthcheck.spool import entries as records
from healthcheck.spool import store as spool
from healthcheck.history.rows import ACTIONS, RecordInvalid, action_row


def _record(**over):
    args = dict(run_id="ab" * 16, node="gpu01", action="drain", reason="HC: gpu.ecc: 3 DBE",
                time="2026-12-03T10:00:00+00:00", job_id="123", context="prolog", why="gpu.ecc failed",
                checks=["gpu.ecc"])
    args.update(over)
    return records.action_record(args.pop("run_id"), args.pop("node"), args.pop("action"), args.pop("reason"), **args)


def test_the_record_written_is_the_record_the_history_stores():
    line = spool.encode(_record())
    rec = json.loads(line)
    row = action_row(rec)
    assert rec["kind"] == "action" and rec["schema_version"] == records.SCHEMA_VERSION
    assert row[0] == rec["record_id"] and row[1] == "ab" * 16 and row[2] == "gpu01"
    assert row[3].isoformat().startswith("2026-12-03T10:00:00")
    assert row[4:] == ("drain", "HC: gpu.ecc: 3 DBE", "123", "prolog", "gpu.ecc failed", "gpu.ecc")


def test_the_writer_and_the_history_know_the_same_actions():
    assert records.ACTIONS == ACTIONS


@pytest.mark.parametrize("action", ["restore", "none", "", None])
def test_an_unknown_action_is_refused_before_it_is_written(action):
    with pytest.raises(ValueError, match="is not one of drain, resume"):
        _record(action=action)


def test_a_queued_resume_without_job_or_checks_is_stored():
    rec = json.loads(spool.encode(_record(action="resume", reason=None, job_id=None, context="queued",
                                          checks=())))
    assert rec["checks"] == [] and rec["job_id"] is None
    row = action_row(rec)
    assert row[4] == "resume" and row[6] is None and row[-1] is None


def test_a_record_of_a_version_the_history_does_not_know_is_refused():
    rec = json.loads(spool.encode(_record()))
    rec["schema_version"] = records.SCHEMA_VERSION + 1
    with pytest.raises(RecordInvalid, match="schema_version"):
        action_row(rec)
