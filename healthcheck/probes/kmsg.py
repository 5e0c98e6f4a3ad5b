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


def read_raw(path: str, deadline: float, read=os.read) -> list[bytes]:
    """Every record of the ring buffer (``path``: /dev/kmsg), non-blocking, up to now, as read.
    Records overwritten while we read (EPIPE) are skipped, as dmesg does. Bounded by the deadline and
    by MAX_RECORDS. OSError when the file cannot be opened or read at all."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    out: list[bytes] = []
    append = out.append
    try:
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
    finally:
        os.close(fd)
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
