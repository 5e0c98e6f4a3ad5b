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
