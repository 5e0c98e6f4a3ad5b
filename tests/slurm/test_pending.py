"""Node-local queue of actions that slurmctld could not take."""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import stat

import pytest

from healthcheck.slurm import pending
from healthcheck.slurm.pending import PendingAction, PendingError, queue, requeue, take_all


def act(node, action="drain", reason="healthcheck: gpu.ecc gpu0: 2 errors", t="2024-03-05T10:00:00+00:00",
        run="r1"):
    return PendingAction(node, action, reason if action == "drain" else None, t, run)


def test_round_trip_and_permissions(tmp_path):
    d = tmp_path / "state"
    queue(d, act("gpu01"))
    queue(d, act("gpu02", "resume"))
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / pending.FILENAME).stat().st_mode) == 0o600
    assert take_all(d) == [act("gpu01"), act("gpu02", "resume")]
    assert take_all(d) == []
    assert not (d / pending.FILENAME).exists() and not list(d.glob(pending.TAKING + "*"))


def test_missing_dir_is_empty(tmp_path):
    assert take_all(tmp_path / "nope") == []
    assert not (tmp_path / "nope").exists()


def test_newer_action_for_a_node_replaces_older(tmp_path):
    queue(tmp_path, act("gpu01"))
    queue(tmp_path, act("gpu02"))
    queue(tmp_path, act("gpu01", "resume", t="2024-03-05T11:00:00+00:00"))
    assert [(a.node, a.action) for a in take_all(tmp_path)] == [("gpu02", "drain"), ("gpu01", "resume")]


def test_requeue_does_not_override_newer(tmp_path):
    queue(tmp_path, act("gpu01"))
    queue(tmp_path, act("gpu02"))
    taken = take_all(tmp_path)
    queue(tmp_path, act("gpu01", "resume", t="2024-03-05T12:00:00+00:00"))  # newer intention meanwhile
    requeue(tmp_path, taken)
    assert [(a.node, a.action) for a in take_all(tmp_path)] == [("gpu01", "resume"), ("gpu02", "drain")]
    requeue(tmp_path, [])
    assert take_all(tmp_path) == []


def test_corrupt_lines_are_skipped_with_a_warning(tmp_path, caplog):
    good = act("gpu01")
    queue(tmp_path, good)
    with open(tmp_path / pending.FILENAME, "a") as fh:
        fh.write("{not json\n")
        fh.write(json.dumps({"node": "gpu02", "action": "reboot", "created_at": "x"}) + "\n")
        fh.write(json.dumps({"node": "gpu03", "action": "drain", "reason": None, "created_at": "x"}) + "\n")
        fh.write(json.dumps([1, 2]) + "\n")
        fh.write("\x00\xff garbage\n")
        fh.write(json.dumps({"node": "gpu04", "action": "resume", "reason": None,
                             "created_at": "2024-03-05T10:00:00+00:00", "run_id": None}) + "\n")
        fh.write('{"node": "gpu05", "action": "dr')  # truncated by a crash
    with caplog.at_level(logging.WARNING, logger="healthcheck.slurm.pending"):
        taken = take_all(tmp_path)
    assert [a.node for a in taken] == ["gpu01", "gpu04"]
    assert sum("set aside" in r.message for r in caplog.records) == 6
    kept = [json.loads(line) for line in (tmp_path / pending.REJECTED).read_text().splitlines()]
    assert len(kept) == 6 and sum(k["why"] == "corrupt line" for k in kept) == 5  # kept for an admin
    assert "not ours" in kept[2]["why"]


def test_bounded(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(pending, "MAX_ACTIONS", 5)
    with caplog.at_level(logging.WARNING, logger="healthcheck.slurm.pending"):
        for i in range(8):
            queue(tmp_path, act(f"gpu{i:02d}"))
    assert [a.node for a in take_all(tmp_path)] == [f"gpu{i:02d}" for i in range(3, 8)]
    assert any("dropping the 1 oldest" in r.message for r in caplog.records)


def test_leftover_from_a_dead_taker_is_taken(tmp_path):
    queue(tmp_path, act("gpu01"))
    os.rename(tmp_path / pending.FILENAME, tmp_path / f"{pending.TAKING}999.dead")
    queue(tmp_path, act("gpu02"))
    assert [a.node for a in take_all(tmp_path)] == ["gpu01", "gpu02"]
    assert not list(tmp_path.glob(pending.TAKING + "*"))


def test_unwritable_dir_raises_pending_error_with_path(tmp_path):
    if os.geteuid() == 0:
        target = tmp_path / "file-not-dir"
        target.write_text("x")
        bad = target / "state"  # cannot mkdir under a regular file, even as root
    else:
        bad = tmp_path / "ro"
        bad.mkdir(mode=0o500)
    with pytest.raises(PendingError) as exc:
        queue(bad, act("gpu01"))
    assert str(bad) in str(exc.value) and exc.value.path == str(bad)


def test_unknown_action_refused(tmp_path):
    with pytest.raises(ValueError):
        queue(tmp_path, PendingAction("gpu01", "reboot", None, "t", None))


def test_now_helper():
    a = PendingAction.now("gpu01", "resume", None, "r9")
    assert a.created_at.endswith("+00:00") and a.run_id == "r9"


def _worker(args):
    d, i = args
    if i % 2:
        queue(d, act(f"n{i:03d}"))
        return []
    return [a.node for a in take_all(d)]


def test_concurrent_queue_and_take_lose_nothing_and_duplicate_nothing(tmp_path):
    for i in range(0, 40, 2):
        queue(tmp_path, act(f"n{i:03d}"))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(8) as pool:
        results = pool.map(_worker, [(str(tmp_path), i) for i in range(40)])
    taken = [n for r in results for n in r] + [a.node for a in take_all(tmp_path)]
    assert sorted(taken) == sorted(f"n{i:03d}" for i in range(40))  # each exactly once


# -- a queued drain's kernel events ----------------------------------------------------------------------

def test_events_round_trip_and_lines_without_them_still_read(tmp_path):
    with_events = PendingAction("gpu01", "drain", "healthcheck: gpu.xid gpu0: Xid 79", "t1", "r1", ("k1", "k2"))
    queue(tmp_path, with_events)
    queue(tmp_path, act("gpu02", "resume"))
    lines = [json.loads(line) for line in (tmp_path / pending.FILENAME).read_text().splitlines()]
    assert lines[0]["events"] == ["k1", "k2"] and "events" not in lines[1]  # a resume's line as before
    with open(tmp_path / pending.FILENAME, "a") as fh:  # a line an earlier release wrote
        fh.write(json.dumps({"node": "gpu03", "action": "drain", "reason": "healthcheck: x: y",
                             "created_at": "t0", "run_id": None}) + "\n")
    taken = take_all(tmp_path)
    assert taken[0] == with_events and taken[2].events == () and taken[2].node == "gpu03"


@pytest.mark.parametrize("events", ["k1", [1], [""], ["x" * (pending.MAX_EVENT_LEN + 1)],
                                    ["k"] * (pending.MAX_EVENTS + 1)])
def test_malformed_events_set_the_line_aside(tmp_path, events):
    (tmp_path / pending.FILENAME).write_text(json.dumps(
        {"node": "gpu01", "action": "drain", "reason": "healthcheck: x: y", "created_at": "t", "events": events}) + "\n")
    assert take_all(tmp_path) == []
    assert "corrupt line" in (tmp_path / pending.REJECTED).read_text()


def test_the_most_events_a_drain_carries_fit_in_one_line(tmp_path):
    keys = [f"{i:06d}|" + "b" * (pending.MAX_EVENT_LEN - 7) for i in range(pending.MAX_EVENTS + 50)]
    item = PendingAction.now("gpu01", "drain", "healthcheck: gpu.xid gpu0: " + "x" * 180, "r" * 32, keys)
    assert len(item.events) == pending.MAX_EVENTS and item.events[-1] == keys[-1]  # the newest kept
    queue(tmp_path, item)
    assert take_all(tmp_path) == [item]


def test_a_newer_drain_keeps_the_events_of_the_one_it_replaces(tmp_path):
    queue(tmp_path, PendingAction("gpu01", "drain", "healthcheck: a: 1", "t1", "r1", ("k1", "k2")))
    queue(tmp_path, PendingAction("gpu01", "drain", "healthcheck: b: 2", "t2", "r2", ("k2", "k3")))
    [kept] = take_all(tmp_path)
    assert (kept.reason, kept.run_id, kept.events) == ("healthcheck: b: 2", "r2", ("k1", "k2", "k3"))
    # put back under a newer drain queued meanwhile: the newer stays, with both sets of events
    queue(tmp_path, PendingAction("gpu01", "drain", "healthcheck: c: 3", "t3", "r3", ("k4",)))
    requeue(tmp_path, [kept])
    [newest] = take_all(tmp_path)
    assert newest.run_id == "r3" and newest.events == ("k1", "k2", "k3", "k4")


def test_a_resume_replacing_a_drain_is_logged(tmp_path, caplog):
    queue(tmp_path, act("gpu01"))
    with caplog.at_level(logging.WARNING, logger="healthcheck.slurm.pending"):
        queue(tmp_path, act("gpu01", "resume", t="2024-03-05T11:00:00+00:00"))
    assert any("queued drain of gpu01" in r.getMessage() and "superseded by the newer resume" in r.getMessage()
               for r in caplog.records)


def test_supersede_removes_only_that_nodes_actions(tmp_path):
    assert pending.supersede(tmp_path / "none", "gpu01") == [] and not (tmp_path / "none").exists()
    queue(tmp_path, act("gpu01"))
    queue(tmp_path, act("gpu02"))
    assert [a.node for a in pending.supersede(tmp_path, "gpu01")] == ["gpu01"]
    assert [a.node for a in take_all(tmp_path)] == ["gpu02"]
    queue(tmp_path, act("gpu01"))
    assert len(pending.supersede(tmp_path, "gpu01")) == 1
    assert not (tmp_path / pending.FILENAME).exists()  # an empty queue is no file (the prolog's gate)
