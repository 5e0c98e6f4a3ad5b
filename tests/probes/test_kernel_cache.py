"""The hooks' kernel-log cache (probes.kernel_cache): the events it hands back are always the events a
full parse of the same ring buffer gives, and the log is parsed again whenever a new or a dropped line
could change them."""
from __future__ import annotations

import os
import random

import pytest

from healthcheck.probes import kernel_cache
from healthcheck.probes.live import _host_event_markers, _parse_kernel_log

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/sys/kernel/random/boot_id"), reason="needs a boot id")

# message bodies: events (NVIDIA and host), lines holding a rule's literal without being an event, and
# plain boot noise that holds no marker at all
EVENTS = [
    "NVRM: Xid (PCI:0000:07:00): 48, pid=88123, name=python, An uncorrectable double bit error (DBE)",
    "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.",
    "NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
    "mce: [Hardware Error]: Machine check events logged",
    "EDAC MC0: 4 CE memory read error on CPU_SrcID#0_MC#0_Chan#0_DIMM#0 (channel:0 slot:0 page:0x1)",
    "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:03:00.0",
    "nvme nvme0: I/O 12 QID 3 timeout, aborting",
    "mlx5_core 0000:1a:00.0: mlx5_health_check:763: health compromised - reached miss count",
    "EXT4-fs error (device sda1): ext4_find_entry:1456: inode #2: comm ls: reading directory lblock 0",
]
NEAR_MISSES = [  # hold a literal (the cache must re-parse) but are no event
    "mlx5_core 0000:1a:00.0: firmware version: 28.39.1002",
    "nvme nvme0: 8/0/0 default/read/poll queues",
    "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0",
    "e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07",
]
NOISE = ["systemd[1]: Started Session 4 of user root.", "audit: type=1400 apparmor=\"STATUS\"",
         "IPv6: ADDRCONF(NETDEV_UP): eth0: ready", "random: crng init done", "Freeing unused kernel memory: 2048K"]


def _record(seq: int, usec: int, message: str) -> bytes:
    return f"6,{seq},{usec},-;{message}\n SUBSYSTEM=x\n".encode()


class Buffer:
    """A ring buffer: records numbered from 0, the oldest dropped beyond ``size``."""

    def __init__(self, size: int):
        self.size, self.records, self.seq = size, [], 0

    def log(self, message: str) -> None:
        self.records.append(_record(self.seq, 1_000_000 + self.seq * 1000, message))
        self.seq += 1
        del self.records[:-self.size]


def _full(records, nvidia):
    from healthcheck.probes.kmsg import line_of

    text = "".join(line + "\n" for line in (line_of(r) for r in records) if line is not None)
    return _parse_kernel_log(text, nvidia)


def _cached(records, nvidia, path, parses):
    def parse(text):
        parses.append(1)
        return _parse_kernel_log(text, nvidia)

    return kernel_cache.cached_events(records, nvidia, str(path), parse, _host_event_markers)


@pytest.mark.parametrize("nvidia", [True, False])
def test_cached_events_are_always_the_full_parse(tmp_path, nvidia):
    rng = random.Random(1500 + nvidia)
    buf = Buffer(size=60)
    for _ in range(20):
        buf.log(rng.choice(NOISE))
    parses: list[int] = []
    reused = 0
    for step in range(300):
        for _ in range(rng.choice([0, 0, 0, 1, 2, 5])):
            pool = rng.choices([EVENTS, NEAR_MISSES, NOISE], weights=[1, 1, 12])[0]
            buf.log(rng.choice(pool))
        before = len(parses)
        got = _cached(buf.records, nvidia, tmp_path / "kernel.cache", parses)
        reused += len(parses) == before
        assert got == _full(buf.records, nvidia), step
    assert reused > 100 and len(parses) > 20  # both paths were taken, many times


def test_a_quiet_buffer_is_parsed_once(tmp_path):
    buf = Buffer(size=1000)
    for message in NOISE + EVENTS + NOISE:
        buf.log(message)
    parses: list[int] = []
    first = _cached(buf.records, True, tmp_path / "c", parses)
    assert first and len(parses) == 1
    for message in NOISE * 3:  # only noise since: the same events, no parse
        buf.log(message)
        assert _cached(buf.records, True, tmp_path / "c", parses) == first
    assert len(parses) == 1
    buf.log(EVENTS[3])  # a new event: parsed again, and found
    assert len(_cached(buf.records, True, tmp_path / "c", parses)) == len(first) + 1 and len(parses) == 2


def test_a_marker_line_leaving_the_buffer_forces_a_parse(tmp_path):
    buf = Buffer(size=len(NOISE) + 2)
    buf.log(EVENTS[4])
    for message in NOISE:
        buf.log(message)
    parses: list[int] = []
    assert len(_cached(buf.records, False, tmp_path / "c", parses)) == 1
    buf.log(NOISE[0])
    buf.log(NOISE[1])  # the EDAC line is overwritten now
    assert _cached(buf.records, False, tmp_path / "c", parses) == [] and len(parses) == 2


def test_another_buffer_or_a_damaged_cache_is_a_full_parse(tmp_path):
    buf = Buffer(size=100)
    for message in NOISE + EVENTS:
        buf.log(message)
    path = tmp_path / "c"
    parses: list[int] = []
    expected = _full(buf.records, True)
    assert _cached(buf.records, True, path, parses) == expected
    older = Buffer(size=100)  # numbered from 0 again, fewer records: not the buffer parsed last
    for message in NOISE:
        older.log(message)
    assert _cached(older.records, True, path, parses) == _full(older.records, True) and len(parses) == 2
    for damage in (b"", b"\x00\x01garbage", path.read_bytes()[:10]):
        path.write_bytes(damage)
        assert _cached(buf.records, True, path, parses) == expected
    assert _cached(buf.records, False, path, parses) == _full(buf.records, False)  # another GPU mode


def test_an_unwritable_cache_place_still_judges(tmp_path):
    buf = Buffer(size=10)
    buf.log(EVENTS[0])
    missing = tmp_path / "file-not-dir"
    missing.write_text("x")
    parses: list[int] = []
    assert _cached(buf.records, True, missing / "c", parses) == _full(buf.records, True)
