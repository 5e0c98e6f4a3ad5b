"""The kernel log read straight from /dev/kmsg (no dmesg process in the prolog): records become the
lines dmesg prints, continuation lines and overwritten records are skipped, the read ends at the end of
the buffer."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from healthcheck.probes.live import read_kmsg


def fake_reader(records):
    items = list(records)

    def read(fd, size):
        if not items:
            raise BlockingIOError
        item = items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item
    return read


def test_records_become_dmesg_lines(tmp_path):
    path = tmp_path / "kmsg"
    path.write_text("")
    text = read_kmsg(str(path), time.monotonic() + 5, fake_reader([
        b"6,339,5140900,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07\n",
        b"3,340,100000001,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"
        b" SUBSYSTEM=pci\n DEVICE=+pci:0000:18:00.0\n",
        BrokenPipeError(),  # a record overwritten while we read: skipped
        b"garbage without a header\n",
        b"4,341,7,c,extra;mce: [Hardware Error]: Machine check events logged\n",
    ]))
    assert text.splitlines() == [
        "[    5.140900] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07",
        "[  100.000001] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
        "[    0.000007] mce: [Hardware Error]: Machine check events logged",
    ]


def test_an_unreadable_device_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        read_kmsg(str(tmp_path / "missing"), time.monotonic() + 1)


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg not readable here")
def test_the_real_device_reads_like_dmesg():
    ours = read_kmsg("/dev/kmsg", time.monotonic() + 5).splitlines()
    theirs = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert ours and ours[0] == theirs[0]
    assert set(ours[:50]) <= set(theirs)


class FakeRing:
    """/dev/kmsg's semantics over a list: every descriptor starts at the oldest record the ring holds,
    reads one record per call, gets EPIPE (and moves to the oldest) when its next record was
    overwritten, EAGAIN at the end."""

    def __init__(self, first: int, last: int):
        self.first, self.last, self.cursor = first, last, {}

    def log(self, count: int, keep: int | None = None) -> None:
        """``count`` new records; the ring then holds the last ``keep`` of them all."""
        self.last += count
        if keep is not None:
            self.first = max(self.first, self.last - keep + 1)

    def read(self, fd, size):
        seq = self.cursor.setdefault(fd, self.first)
        if seq < self.first:
            self.cursor[fd] = self.first
            raise BrokenPipeError
        if seq > self.last:
            raise BlockingIOError
        self.cursor[fd] = seq + 1
        return f"6,{seq},{seq * 1000},-;message {seq}\n".encode()


def _seqs(records):
    from healthcheck.probes.kmsg import seq_of

    return [seq_of(r) for r in records]


@pytest.mark.parametrize("logged, keep", [(0, None), (3, None), (3, 6), (40, 5)])
def test_a_kept_reader_gives_what_a_read_from_the_start_gives(tmp_path, monkeypatch, logged, keep):
    """The prepared child's reader, kept open from its warm-up: at its run, the records it read that the
    ring still holds (older ones were overwritten: a read from the start would not see them) and those
    logged since, even when some of those were overwritten before it read them (EPIPE)."""
    from healthcheck.probes import kmsg

    path = tmp_path / "kmsg"
    path.write_text("")  # real descriptors, to tell readers apart; the ring is the fake's
    ring = FakeRing(1, 8)

    def opened(name):  # a new descriptor starts at the oldest record (its number may be a closed one's)
        fd = os.open(name, os.O_RDONLY)
        ring.cursor.pop(fd, None)
        return fd

    monkeypatch.setattr(kmsg, "_open", opened)
    kmsg.keep_reading(str(path), time.monotonic() + 5, ring.read)
    ring.log(logged, keep)
    continued = kmsg.read_raw(str(path), time.monotonic() + 5, ring.read)
    fresh = kmsg.read_raw(str(path), time.monotonic() + 5, ring.read)  # the kept reader is used once
    assert _seqs(continued) == _seqs(fresh) == list(range(ring.first, ring.last + 1))
    assert str(path) not in kmsg._kept


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg not readable here")
def test_a_kept_reader_of_the_real_device_reads_what_a_fresh_one_does():
    from healthcheck.probes import kmsg

    kmsg.keep_reading(kmsg.KMSG, time.monotonic() + 5)
    continued = kmsg.read_raw(kmsg.KMSG, time.monotonic() + 5)
    fresh = kmsg.read_raw(kmsg.KMSG, time.monotonic() + 5)
    assert continued and continued == fresh[:len(continued)]  # (the kernel may log in between)
