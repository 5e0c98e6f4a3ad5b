"""The kernel's ring buffer read straight from /dev/kmsg: no ``dmesg`` process (the prolog pays for every
fork), and each record numbered, so a run can tell what was logged since the last one.

A record is ``<prio>,<seq>,<usec>,<flags>[,...];<message>`` followed by continuation lines
(`` KEY=value``) that ``dmesg`` does not print either. Records are kept as read (bytes) and decoded on
demand: a run that finds nothing new (``probes.kernel_cache``) decodes only the records logged since
the last one, about a microsecond each instead of four on a node with thousands of boot messages.
"""
from __future__ import annotations

import os
import time

KMSG = "/dev/kmsg"
MAX_RECORDS = 2_000_000  # the parsers' own line limit; a ring buffer holds far fewer
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def _open(path: str) -> int:
    return os.open(path, _FLAGS)


# A reader left open by :func:`keep_reading` in this process: {path: (descriptor, the records read)}.
# The agent's prepared child reads the ring buffer while it waits for its task; its run then reads only
# what was logged since (one read per record: a busy node's buffer holds thousands).
_kept: dict = {}


def read_raw(path: str, deadline: float, read=os.read) -> list[bytes]:
    """Every record of the ring buffer (``path``: /dev/kmsg), non-blocking, up to now, as read.
    Records overwritten while we read (EPIPE) are skipped, as dmesg does. Bounded by the deadline and
    by MAX_RECORDS. OSError when the file cannot be opened or read at all.

    After :func:`keep_reading` of ``path`` in this process, the records it read that are still in the
    buffer and those logged since: what a read from the start gives (used once)."""
    kept = _kept.pop(path, None)
    if kept is not None:
        try:
            return _continued(path, kept, deadline, read)
        except OSError:
            pass  # read it from the start
        finally:
            os.close(kept[0])
    fd = _open(path)
    try:
        return _drain(fd, deadline, read)
    finally:
        os.close(fd)


def keep_reading(path: str, deadline: float, read=os.read) -> None:
    """Read the ring buffer now and keep the descriptor open for this process's next :func:`read_raw`
    of ``path``. OSError when it cannot be read."""
    fd = _open(path)
    try:
        records = _drain(fd, deadline, read)
    except BaseException:
        os.close(fd)
        raise
    old = _kept.pop(path, None)
    if old is not None:
        os.close(old[0])
    _kept[path] = (fd, records)


def _continued(path: str, kept: tuple, deadline: float, read) -> list[bytes]:
    """The kept records still in the buffer, then what the kept descriptor reads since. A descriptor
    opened now starts at the oldest record the buffer still holds: records older than that one have
    been overwritten, and a read from the start would not see them."""
    fd, records = kept
    probe = _open(path)
    try:
        oldest = _first_seq(probe, read)
    finally:
        os.close(probe)
    new = _drain(fd, deadline, read)
    if oldest is None:
        if records or new:  # an empty buffer that was not: tell nothing, read from the start
            raise OSError("the ring buffer's oldest record could not be read")
        return []
    first = 0  # records come in order: those before the oldest still held were overwritten
    while first < len(records) and not _at_least(seq_of(records[first]), oldest):
        first += 1
    return (records[first:] + new)[:MAX_RECORDS]


def _at_least(seq: int | None, oldest: int) -> bool:
    return seq is not None and seq >= oldest


def _first_seq(fd: int, read) -> int | None:
    for _ in range(64):  # a record overwritten as we read it: the next one
        try:
            record = read(fd, 8192)
        except BlockingIOError:
            return None
        except BrokenPipeError:
            continue
        return seq_of(record) if record else None
    return None


def _drain(fd: int, deadline: float, read) -> list[bytes]:
    out: list[bytes] = []
    append = out.append
    while len(out) < MAX_RECORDS:
        try:
            record = read(fd, 8192)
        except BlockingIOError:
            break  # the end of the buffer: everything logged so far is read
        except BrokenPipeError:
            continue  # overwritten before we got to it
        if not record:
            break
        append(record)
        if len(out) % 4096 == 0 and time.monotonic() > deadline:
            break
    return out


def seq_of(record: bytes) -> int | None:
    """The record's sequence number; None for a record without a valid header."""
    fields = record.split(b";", 1)[0].split(b",", 3)
    if len(fields) < 3 or not fields[1].isdigit() or not fields[2].isdigit():
        return None
    return int(fields[1])


def line_of(record: bytes) -> str | None:
    """The record as ``dmesg`` prints it (``[   12.345678] message``, continuation lines dropped);
    None for a record without a valid header."""
    header, sep, message = record.decode("utf-8", "replace").partition(";")
    fields = header.split(",")
    if not sep or len(fields) < 3 or not fields[1].isdigit() or not fields[2].isdigit():
        return None
    usec = int(fields[2])
    return f"[{usec // 1_000_000:5d}.{usec % 1_000_000:06d}] {message.split(chr(10), 1)[0]}"


def read_kmsg(path: str, deadline: float, read=os.read) -> str:
    """The ring buffer as ``dmesg`` prints it, one line per record, each ended by a newline."""
    lines = (line_of(record) for record in read_raw(path, deadline, read))
    return "".join(line + "\n" for line in lines if line is not None)
