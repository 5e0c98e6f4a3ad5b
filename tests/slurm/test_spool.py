"""The node-local spool: durable JSON-line appends, rotation, failure modes, corrupt-line reporting."""
from __future__ import annotations

import errno
import json
import multiprocessing
import os
import stat
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.spool import store as spool
from healthcheck.spool.store import CorruptLine, SpoolError


def _run(node: str = "gpu01", **extra) -> dict:
    record = {"kind": "run", "node": node, "context": "prolog", "job_id": "4711", "verdict": "pass",
              "started_at": "2024-05-01T10:00:00Z", "duration_s": 0.021,
              "results": [{"check": "gpu.ecc", "status": "pass", "component": "gpu0"}]}
    record.update(extra)
    return record


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_round_trip_preserves_records_and_order(tmp_path):
    d = tmp_path / "spool"
    ids = []
    for i in range(5):
        rid = uuid.uuid4().hex
        ids.append(rid)
        path = spool.append(d, _run(record_id=rid, seq=i))
    spool.append(d, {"kind": "action", "record_id": "a1", "node": "gpu01", "action": "drain",
                     "reason": "healthcheck: gpu.ecc gpu3 DBE", "job_id": "4711"})
    assert path == d / "records.jsonl"
    records, corrupt = spool.read_all(d)
    assert corrupt == []
    assert [r["record_id"] for r in records] == ids + ["a1"]
    assert [r.get("seq") for r in records[:5]] == list(range(5))
    assert records[0]["results"][0]["check"] == "gpu.ecc" and records[0]["duration_s"] == 0.021
    assert records[-1]["action"] == "drain"


def test_record_id_added_when_missing_and_caller_dict_untouched(tmp_path):
    rec = _run()
    spool.append(tmp_path, rec)
    assert "record_id" not in rec
    (got,) = list(spool.read(tmp_path))
    assert len(got["record_id"]) == 32 and int(got["record_id"], 16) >= 0


@pytest.mark.parametrize("bad", [{}, {"kind": "metric"}, {"kind": None}, {"node": "x"}])
def test_kind_is_required(tmp_path, bad):
    with pytest.raises(ValueError, match="kind"):
        spool.append(tmp_path, bad)
    assert not (tmp_path / "records.jsonl").exists()


def test_invalid_records_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="dict"):
        spool.append(tmp_path, ["kind", "run"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="record_id"):
        spool.append(tmp_path, {"kind": "run", "record_id": 5})
    with pytest.raises(ValueError, match="JSON"):
        spool.append(tmp_path, {"kind": "run", "x": object()})
    with pytest.raises(ValueError, match="JSON"):
        spool.append(tmp_path, {"kind": "run", "x": float("nan")})


def test_lines_over_one_mib_are_refused(tmp_path):
    with pytest.raises(ValueError, match="line limit"):
        spool.append(tmp_path, _run(blob="x" * (1 << 20)))
    spool.append(tmp_path, _run(blob="x" * ((1 << 20) - 400)))  # just under: fine
    assert len(list(spool.read(tmp_path))) == 1


def test_newlines_in_values_stay_on_one_line(tmp_path):
    spool.append(tmp_path, _run(message="line1\nline2\r\n\u2028 \u00e9"))
    text = (tmp_path / "records.jsonl").read_bytes()
    assert text.count(b"\n") == 1 and text.isascii()
    assert next(spool.read(tmp_path))["message"] == "line1\nline2\r\n\u2028 \u00e9"


def test_modes_of_created_dir_and_file(tmp_path):
    old = os.umask(0o022)
    try:
        d = tmp_path / "var" / "spool"
        spool.append(d, _run())
    finally:
        os.umask(old)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / "records.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((d / ".lock").stat().st_mode) == 0o600


def test_rotation_keeps_five_files_and_reads_oldest_first(tmp_path):
    line_len = len(spool.encode(_run(record_id="0" * 32, seq=0)))
    max_bytes = line_len * 3 + 3  # three records per file (seq grows to two digits)
    for i in range(30):
        spool.append(tmp_path, _run(record_id=f"{i:032d}", seq=i), max_bytes=max_bytes)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("records"))
    assert names == ["records.jsonl"] + [f"records.jsonl.{n}" for n in range(1, 6)]
    for p in tmp_path.glob("records.jsonl*"):
        assert p.stat().st_size <= max_bytes
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    seqs = [r["seq"] for r in spool.read(tmp_path)]
    assert seqs == list(range(12, 30))  # 6 files x 3 records, the oldest 12 rotated away, in order
    assert [p.name for p in spool.spool_files(tmp_path)] == [
        "records.jsonl.5", "records.jsonl.4", "records.jsonl.3", "records.jsonl.2", "records.jsonl.1",
        "records.jsonl"]


def test_first_record_is_written_even_when_larger_than_max_bytes(tmp_path):
    spool.append(tmp_path, _run(), max_bytes=10)
    spool.append(tmp_path, _run(), max_bytes=10)
    assert (tmp_path / "records.jsonl.1").exists()
    assert len(list(spool.read(tmp_path))) == 2


def _writer(directory: str, worker: int, count: int) -> None:
    for i in range(count):
        spool.append(directory, _run(node=f"gpu{worker:02d}", seq=i, pad="p" * (worker * 700)))


def test_concurrent_appends_from_processes_give_whole_lines(tmp_path):
    workers, count = 6, 40
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records, corrupt = spool.read_all(tmp_path)
    assert corrupt == []
    assert len(records) == workers * count
    assert len({r["record_id"] for r in records}) == workers * count
    for w in range(workers):  # each writer's own records stay in its order
        mine = [r["seq"] for r in records if r["node"] == f"gpu{w:02d}"]
        assert mine == list(range(count))


def test_concurrent_appends_with_rotation_lose_nothing_kept(tmp_path):
    ctx = multiprocessing.get_context("fork")

    def writer(w):
        for i in range(25):
            spool.append(tmp_path, _run(node=f"n{w}", seq=i), max_bytes=4096, keep=50)

    procs = [ctx.Process(target=writer, args=(w,)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records, corrupt = spool.read_all(tmp_path)
    assert corrupt == [] and len(records) == 100


def _raise(err: int):
    def fail(*args, **kwargs):
        raise OSError(err, os.strerror(err))
    return fail


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO])
def test_write_failure_is_spool_error_and_file_still_parses(tmp_path, monkeypatch, err):
    spool.append(tmp_path, _run(record_id="a" * 32))
    monkeypatch.setattr(spool.os, "write", _raise(err))
    with pytest.raises(SpoolError) as info:
        spool.append(tmp_path, _run(record_id="b" * 32))
    assert info.value.errno == err
    monkeypatch.undo()
    records, corrupt = spool.read_all(tmp_path)
    assert [r["record_id"] for r in records] == ["a" * 32] and corrupt == []
    spool.append(tmp_path, _run(record_id="c" * 32))  # the spool works again once space is back
    assert [r["record_id"] for r in spool.read(tmp_path)] == ["a" * 32, "c" * 32]


def test_short_write_then_enospc_is_truncated_back(tmp_path, monkeypatch):
    spool.append(tmp_path, _run(record_id="a" * 32))
    real_write = os.write
    calls = []

    def half_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spool.os, "write", half_then_full)
    with pytest.raises(SpoolError):
        spool.append(tmp_path, _run(record_id="b" * 32))
    monkeypatch.undo()
    records, corrupt = spool.read_all(tmp_path)
    assert [r["record_id"] for r in records] == ["a" * 32] and corrupt == []


def test_fsync_failure_is_spool_error(tmp_path, monkeypatch):
    monkeypatch.setattr(spool.os, "fsync", _raise(errno.EIO))
    with pytest.raises(SpoolError):
        spool.append(tmp_path / "s", _run())


@pytest.mark.parametrize("err", [errno.EACCES, errno.EROFS, errno.EPERM])
def test_unopenable_spool_is_spool_error(tmp_path, monkeypatch, err):
    monkeypatch.setattr(spool.os, "open", _raise(err))
    with pytest.raises(SpoolError) as info:
        spool.append(tmp_path, _run())
    assert info.value.errno == err


def test_uncreatable_directory_is_spool_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SpoolError):
        spool.append(blocker / "spool", _run())


def test_lock_held_too_long_is_spool_error(tmp_path, monkeypatch):
    import fcntl

    spool.append(tmp_path, _run())
    monkeypatch.setattr(spool, "LOCK_TIMEOUT_S", 0.05)
    fd = os.open(tmp_path / ".lock", os.O_RDWR)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    release = ctx.Event()

    def holder():
        fcntl.flock(os.open(tmp_path / ".lock", os.O_RDWR), fcntl.LOCK_EX)
        ready.set()
        release.wait(10)

    p = ctx.Process(target=holder)
    p.start()
    try:
        assert ready.wait(10)
        with pytest.raises(SpoolError, match="lock busy"):
            spool.append(tmp_path, _run())
        assert len(list(spool.read(tmp_path))) == 1  # readers go on without the lock
    finally:
        release.set()
        p.join(10)
        os.close(fd)


def test_corrupt_lines_are_skipped_and_reported(tmp_path):
    spool.append(tmp_path, _run(record_id="a" * 32))
    with open(tmp_path / "records.jsonl", "ab") as f:
        f.write(b'{"kind": "run", "record_id": "tru\n')  # truncated JSON
        f.write(b"[1, 2]\n")  # not an object
        f.write(b'{"kind": "metric", "record_id": "x"}\n')  # another tool's record
        f.write(b'{"kind": "run"}\n')  # no record_id
        f.write(b"\n")
        f.write(b"\xff\xfe garbage\n")
    spool.append(tmp_path, _run(record_id="b" * 32))
    seen: list[CorruptLine] = []
    records = list(spool.read(tmp_path, on_corrupt=seen.append))
    assert [r["record_id"] for r in records] == ["a" * 32, "b" * 32]
    assert [c.lineno for c in seen] == [2, 3, 4, 5, 6, 7]
    assert all(c.path == tmp_path / "records.jsonl" for c in seen)
    assert "not JSON" in seen[0].reason and "object" in seen[1].reason
    assert "kind 'metric'" in seen[2].reason and "record_id" in seen[3].reason


def test_partial_line_from_a_crash_is_terminated_by_the_next_append(tmp_path):
    spool.append(tmp_path, _run(record_id="a" * 32))
    with open(tmp_path / "records.jsonl", "ab") as f:
        f.write(b'{"kind": "run", "record_id": "half')  # the writer died mid-line
    records, corrupt = spool.read_all(tmp_path)
    assert len(records) == 1 and len(corrupt) == 1 and "incomplete" in corrupt[0].reason
    spool.append(tmp_path, _run(record_id="b" * 32))
    records, corrupt = spool.read_all(tmp_path)
    assert [r["record_id"] for r in records] == ["a" * 32, "b" * 32]
    assert len(corrupt) == 1 and corrupt[0].lineno == 2


def test_oversized_line_in_file_is_skipped(tmp_path):
    with open(tmp_path / "records.jsonl", "wb") as f:
        f.write(b'{"kind":"run","record_id":"' + b"z" * (2 << 20) + b'"}\n')
    spool.append(tmp_path, _run(record_id="a" * 32))
    records, corrupt = spool.read_all(tmp_path)
    assert [r["record_id"] for r in records] == ["a" * 32]
    assert len(corrupt) == 1 and "longer than" in corrupt[0].reason


def test_default_report_is_a_log_warning(tmp_path, caplog):
    (tmp_path / "records.jsonl").write_bytes(b"nope\n")
    with caplog.at_level("WARNING", logger="healthcheck.spool.store"):
        assert list(spool.read(tmp_path)) == []
    assert "line 1 skipped" in caplog.text


def test_missing_spool_reads_empty(tmp_path):
    assert list(spool.read(tmp_path / "absent")) == []


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_read_survives_arbitrary_bytes(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "records.jsonl").write_bytes(data)
    records, corrupt = spool.read_all(d)
    for r in records:
        assert r["kind"] in ("run", "action") and isinstance(r["record_id"], str)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=10), max_size=5))
def test_any_json_record_round_trips(tmp_path_factory, payload):
    d = tmp_path_factory.mktemp("rt")
    record = {**payload, "kind": "action", "record_id": "r1"}
    spool.append(d, record)
    assert list(spool.read(d)) == [record]


def test_new_record_id_is_a_uuid4_hex():
    import uuid

    ids = {spool.new_record_id() for _ in range(100)}
    assert len(ids) == 100
    for rid in ids:
        parsed = uuid.UUID(hex=rid)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and parsed.hex == rid
