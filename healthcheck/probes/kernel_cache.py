"""The kernel-log events of the hook's last run, kept so that the next run parses the log only when
something that could be an event was logged since.

The prolog reads the whole ring buffer before every job (events are judged by age and acknowledged by
key, so the whole buffer matters), but a healthy node's buffer rarely changes between two jobs, and
parsing it (the host-event rules' patterns compiled, every line tried) was the largest part of the
prolog's own time (issue 15). /dev/kmsg numbers its records, so a run knows exactly what is new.

The events of the last parse are reused, unchanged, when all of this holds (else the log is parsed
afresh, as without a cache):

- same boot, same tool version, same packaged host-event policy (size and mtime), same GPU mode
  (NVIDIA events are parsed only where the PCI bus shows an NVIDIA GPU);
- no new record holds a *marker*: a literal of a host-event rule (every line a rule can match holds
  its literal: the parser skips all other lines) or "NVRM"/"Xid"/"fallen off"/"RmInit"/"rm_init" (the
  NVIDIA parser reads only lines holding "NVRM:"). The markers are stored with the events;
- no record that held a marker has left the ring buffer since (the events near it, e.g. the device
  named behind an AER event, could differ).

Lines without a marker cannot make or change an event: the parsers relate events to each other only by
the distance between their own lines and by time, both unchanged by lines appended after them or
dropped before them. So the reused list is the list a full parse would return (a test compares them).

The cache file lives in the hook's node state directory (root's alone, see :mod:`healthcheck.safeio.trust`),
in ``marshal`` format (built in: reading it imports nothing); every failure to read or write it is a
full parse, never an error.
"""
from __future__ import annotations

import marshal
import os

from ..core.model import KernelEvent
from .kmsg import line_of, seq_of

FORMAT = 1
NVIDIA_MARKERS = ("NVRM", "Xid", "fallen off", "RmInit", "rm_init")
MAX_CACHE_BYTES = 64 << 20
_POLICY_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "host_events.toml")
_FIELDS = ("kind", "pci_bus_id", "xid", "pid", "process", "message", "uptime_s", "time", "line", "event_class",
           "device", "count")


def cached_events(records: list[bytes], nvidia: bool, cache_path: str, parse, markers_of) -> list:
    """The events of ``records`` (/dev/kmsg records as :func:`healthcheck.probes.kmsg.read_raw` gives
    them, in log order).

    ``parse(text)``: the full parse of the log's text; ``markers_of()``: the host-event literals of the
    policy ``parse`` used (called only after a full parse)."""
    key = _key(nvidia)
    state = _load(cache_path)
    if state is not None and state.get("key") == key and _unchanged(records, state):
        try:
            return [KernelEvent(**event) for event in state["events"]]
        except (TypeError, KeyError):
            pass  # an entry of another shape: parse afresh
    numbered = [(seq_of(raw), line_of(raw)) for raw in records]
    numbered = [(seq, line) for seq, line in numbered if seq is not None and line is not None]
    events = parse("".join(line + "\n" for _, line in numbered))
    markers = tuple(markers_of()) + (NVIDIA_MARKERS if nvidia else ())
    relevant = [seq for seq, line in numbered if _holds_marker(line, markers)]
    _store(cache_path, {"key": key, "last_seq": numbered[-1][0] if numbered else -1, "markers": list(markers),
                        "relevant": relevant,
                        "events": [{name: getattr(ev, name) for name in _FIELDS} for ev in events]})
    return events


def _unchanged(records: list[bytes], state: dict) -> bool:
    last, relevant, markers = state.get("last_seq"), state.get("relevant"), state.get("markers")
    if type(last) is not int or not isinstance(relevant, list) or not isinstance(markers, list):
        return False
    first = next((seq for seq in map(seq_of, records) if seq is not None), None)
    if first is None:
        return False
    if relevant and min(relevant) < first:  # a line that held a marker left the ring buffer
        return False
    newest = next((seq for seq in map(seq_of, reversed(records)) if seq is not None), None)
    if newest < last:  # the numbering went back: not the buffer we parsed
        return False
    markers = tuple(m for m in markers if isinstance(m, str) and m)
    for raw in reversed(records):  # the records logged since the last parse: none may hold a marker
        seq = seq_of(raw)
        if seq is None:
            continue
        if seq <= last:
            return True
        line = line_of(raw)
        if line is not None and _holds_marker(line, markers):
            return False
    return False  # every record is newer than the last parse: not the buffer we parsed


def _holds_marker(line: str, markers: tuple) -> bool:
    for marker in markers:
        if marker in line:
            return True
    return False


def _key(nvidia: bool) -> list:
    from .. import __version__

    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as fh:
            boot = fh.read(64).strip().decode("ascii", "replace")
        st = os.stat(_POLICY_FILE)
        policy = [st.st_size, st.st_mtime_ns]
    except OSError:
        return [FORMAT, None]  # never equal to a stored key: no reuse without a boot id
    return [FORMAT, __version__, boot, bool(nvidia), policy]


def _load(path: str) -> dict | None:
    from ..safeio.trust import read_regular

    try:
        if os.geteuid() == 0:
            from ..safeio.trust import check_trusted

            check_trusted(path, "kernel-event cache")
        state = marshal.loads(read_regular(path, "kernel-event cache", MAX_CACHE_BYTES))
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return state if isinstance(state, dict) else None


def _store(path: str, state: dict) -> None:
    try:
        data = marshal.dumps(state)
    except ValueError:
        return
    if len(data) > MAX_CACHE_BYTES:
        return
    from ..safeio.atomic import atomic_write
    from ..safeio.trust import make_private

    try:
        make_private(os.path.dirname(path))
        atomic_write(path, data, 0o600, private_dir=True, durable=False)  # lost in a crash: one full parse
    except OSError:
        pass
