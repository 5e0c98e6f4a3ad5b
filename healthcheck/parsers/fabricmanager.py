"""The NVSwitch errors the fabric manager logs (``/var/log/fabricmanager.log``; issue 33), as SXid events.

``[Dec 19 2024 19:17:49] [ERROR] [tid 1374] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci
bus id 00000000:83:00.0 physical id 0 port 34`` becomes a :class:`KernelEvent` of ``kind="sxid"`` (``xid``
12028, ``event_class`` "nonfatal", ``device`` "nvswitch physical id 0", ``pci_bus_id`` the switch's,
``time`` the line's, ``message`` "port 34"), so ``gpu.xid`` judges it as it judges the kernel's SXid lines
(the policy's ``sxid_fatal_action`` / ``sxid_nonfatal_action``). The same error logged twice on one line's
time is one event. Every other line is ignored. ParseError only; bounded (MAX_INPUT_CHARS).
"""
from __future__ import annotations

import re

from ..core.model import KernelEvent, normalize_pci_bus_id
from . import ParseError, as_text

MAX_INPUT_CHARS = 64 * 1024 * 1024
MAX_LINES = 2_000_000
_MARK = "detected NVSwitch"
_LINE = re.compile(
    r"^\[(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>\d{1,2}) (?P<year>\d{4}) (?P<time>\d\d:\d\d:\d\d)\][^\n]{0,200}?"
    r"detected NVSwitch (?P<severity>non-fatal|fatal) error (?P<sxid>\d{1,6}) on fid \d{1,6} on NVSwitch "
    r"pci bus id (?P<pci>[0-9a-fA-F:.]{7,20}) physical id (?P<phys>\d{1,4})(?: port (?P<port>\d{1,4}))?")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def parse_fabricmanager_log(text: str | bytes) -> list[KernelEvent]:
    """The NVSwitch errors of a fabric manager log, in log order."""
    text = as_text(text, "fabric manager log", MAX_INPUT_CHARS, MAX_LINES)
    events: list[KernelEvent] = []
    seen: set[str] = set()
    for line in text.splitlines():
        if _MARK not in line:
            continue
        found = _LINE.match(line.strip())
        if not found or found.group("mon") not in _MONTHS:
            continue
        if line in seen:
            continue  # the fabric manager logs each error twice
        seen.add(line)
        month = _MONTHS.index(found.group("mon")) + 1
        when = f"{found.group('year')}-{month:02d}-{int(found.group('day')):02d}T{found.group('time')}"
        port = found.group("port")
        events.append(KernelEvent(
            kind="sxid", pci_bus_id=normalize_pci_bus_id(found.group("pci")), xid=int(found.group("sxid")),
            message=f"port {port}" if port else "", time=when, line=line.strip(),
            event_class="fatal" if found.group("severity") == "fatal" else "nonfatal",
            device=f"nvswitch physical id {found.group('phys')}"))
    return events


__all__ = ["ParseError", "parse_fabricmanager_log"]
