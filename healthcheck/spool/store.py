"""Node-local spool of run and action records: JSON lines, appended durably, read back in order.

Every run (prolog, epilog, slurm-check, ``healthcheck check``) and every Slurm action (drain, resume)
becomes one record, written here first and ingested into the history database later, idempotently by
``record_id``. The spool is on the prolog's path, so ``append`` is small and bounded: one ``flock``, one
``write``, one ``fsync``.

Layout of ``spool_dir`` (created 0700; files 0600)::

    records.jsonl        current file; one JSON object per line, '\\n'-terminated
    records.jsonl.1      the previous file ... records.jsonl.<keep> the oldest kept
    .lock                writers take an exclusive flock on it; readers a shared one, briefly

Record contract: a JSON object with ``"kind"`` ("run" or "action") and ``"record_id"`` (added as a
uuid4 hex string when the caller did not set one; set it yourself when you need to know it). Lines
longer than ``MAX_LINE_BYTES`` are refused.

Failure model: any OS error while writing (ENOSPC full disk, EDQUOT, EROFS read-only filesystem,
EACCES/EPERM, EIO, a lock not obtained in time) raises ``SpoolError``; the caller decides (the hooks log
a warning and go on: a full /var never fails a job). A write that fails half-way is truncated back, and
a partial line left by a crash is terminated by the next append, so the file always parses line by line.
"""
from __future__ import annotations

import fcntl
import os
from ..core.struct import record as dataclass
if False:  # annotations only (typing is not imported on the hot path)
    from pathlib import Path  # noqa: F401
    from typing import Any, Callable, Iterator  # noqa: F401
from ..core.jsonwrite import dumps
from ..core.lazylog import LazyLog

from .append import (CURRENT, DEFAULT_KEEP, DEFAULT_MAX_BYTES, LOCK, LOCK_TIMEOUT_S,  # noqa: F401 - re-exported
                         MAX_LINE_BYTES, SpoolError, locked, append_line, new_record_id)

KINDS = ("run", "action")

log = LazyLog(__name__)


@dataclass(frozen=True)
class CorruptLine:
    """A line ``read`` skipped: the file, its 1-based line number, and why."""

    path: Path
    lineno: int
    reason: str


# ------------------------------------------------------------------------------------------ write


def encode(record: dict[str, Any]) -> bytes:
    """The line ``append`` would write (with its trailing newline); pure. ValueError when invalid."""
    if not isinstance(record, dict):
        raise ValueError(f"a spool record must be a dict, got {type(record).__name__}")
    kind = record.get("kind")
    if kind not in KINDS:
        raise ValueError(f"a spool record needs 'kind' in {KINDS}, got {kind!r}")
    record = dict(record)
    rid = record.setdefault("record_id", new_record_id())
    if not isinstance(rid, str) or not rid:
        raise ValueError(f"'record_id' must be a non-empty string, got {rid!r}")
    try:
        text = dumps(record)  # = json.dumps(record, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"spool record is not JSON-serialisable: {exc}") from None
    data = text.encode("ascii")
    if len(data) > MAX_LINE_BYTES:
        raise ValueError(f"spool record of {len(data)} bytes exceeds the {MAX_LINE_BYTES}-byte line limit")
    return data + b"\n"


def append(spool_dir: str | os.PathLike[str], record: dict[str, Any],
           max_bytes: int = DEFAULT_MAX_BYTES, keep: int = DEFAULT_KEEP) -> Path:
    """Append ``record`` as one line to ``spool_dir/records.jsonl``; return the file's path.

    Rotates first when the line would take the current file over ``max_bytes`` (a first line is
    always written, however small ``max_bytes``). ValueError for an invalid record; SpoolError for
    any OS failure.
    """
    from pathlib import Path  # (the hooks write through here: pathlib is not on their path)

    return Path(append_line(os.fspath(spool_dir), encode(record), max_bytes, keep))


# ------------------------------------------------------------------------------------------- read


def spool_files(spool_dir: str | os.PathLike[str]) -> list[Path]:
    """The spool's files, oldest first: records.jsonl.N ... records.jsonl.1, records.jsonl."""
    from pathlib import Path

    directory = Path(spool_dir)
    rotated = []
    for entry in directory.glob(CURRENT + ".*"):
        suffix = entry.name[len(CURRENT) + 1:]
        if suffix.isdigit():
            rotated.append((int(suffix), entry))
    files = [p for _, p in sorted(rotated, reverse=True)]
    current = directory / CURRENT
    if current.exists():
        files.append(current)
    return files


def read(spool_dir: str | os.PathLike[str],
         on_corrupt: Callable[[CorruptLine], None] | None = None) -> Iterator[dict[str, Any]]:
    """Yield the spool's records in write order across rotated files (oldest first).

    A line that is not a JSON object with a known ``kind`` and a ``record_id`` (truncated by a crash,
    another tool's file, an over-long line) is skipped and reported: to ``on_corrupt`` when given,
    else as a logging warning. A missing spool directory yields nothing.

    Every file is opened under a shared lock before reading starts, so a rotation during the read
    neither loses nor repeats a file; records appended while reading may or may not be seen (ingest is
    idempotent by record_id, so the next read picks them up).
    """
    report = on_corrupt or _log_corrupt
    from pathlib import Path

    directory = Path(spool_dir)
    if not directory.is_dir():
        return
    handles = []
    with locked(str(directory), fcntl.LOCK_SH, optional=True):
        for path in spool_files(directory):
            try:
                handles.append((path, open(path, "rb")))
            except FileNotFoundError:
                continue
    try:
        for path, handle in handles:
            yield from _read_file(path, handle, report)
    finally:
        for _, handle in handles:
            handle.close()


def read_all(spool_dir: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[CorruptLine]]:
    """``read`` collected: (records, corrupt lines)."""
    corrupt: list[CorruptLine] = []
    records = list(read(spool_dir, corrupt.append))
    return records, corrupt


def _read_file(path: Path, handle, report: Callable[[CorruptLine], None]) -> Iterator[dict[str, Any]]:
    lineno = 0
    while True:
        raw = handle.readline(MAX_LINE_BYTES + 2)
        if not raw:
            return
        lineno += 1
        if not raw.endswith(b"\n"):
            if len(raw) > MAX_LINE_BYTES:  # over-long line: skip to its end
                while raw and not raw.endswith(b"\n"):
                    raw = handle.readline(MAX_LINE_BYTES + 2)
                report(CorruptLine(path, lineno, f"line longer than {MAX_LINE_BYTES} bytes"))
            else:
                report(CorruptLine(path, lineno, "incomplete line (no newline; crashed or in progress)"))
            continue
        record, why = _decode(raw)
        if record is None:
            report(CorruptLine(path, lineno, why))
        else:
            yield record


def _decode(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    import json  # reading is ingest's: the hooks only append (jsonwrite)

    text = raw.strip()
    if not text:
        return None, "empty line"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON: {exc}"[:200]
    if not isinstance(value, dict):
        return None, f"not a JSON object ({type(value).__name__})"
    if value.get("kind") not in KINDS:
        return None, f"not a healthcheck record: kind {value.get('kind')!r}"[:200]
    if not isinstance(value.get("record_id"), str) or not value["record_id"]:
        return None, "record without a record_id"
    return value, ""


def _log_corrupt(item: CorruptLine) -> None:
    log.warning("spool %s line %d skipped: %s", item.path, item.lineno, item.reason)
