"""Parse host events (machine checks, EDAC memory errors, PCIe AER, NVMe/block/filesystem errors, mlx5
health and module events, link flaps) out of a kernel log, through the host-event policy.

Input: the same text as :func:`healthcheck.parsers.kernel_log.parse_kernel_log`, from any front-end
(:func:`split_line`: raw ``/dev/kmsg`` records, ``dmesg`` in every time format and locale, ``journalctl
-k`` in every short form, RFC 3164/5424 syslog, kern.log, console captures, lines with no time);
output: :class:`healthcheck.core.model.KernelEvent` objects of ``kind="host"`` in log order, each with its
``event_class`` (a class of ``healthcheck/data/host_events.toml``), ``pci_bus_id`` and/or ``device``,
``count`` (what the line reports), time stamps and the line.

Each policy pattern is anchored at the start of the kernel *message*: the part of the line after its
time stamps, host name and ``kernel:`` tag (a kernel line spliced after other console output is tried
again after its uptime stamp). Lines with no time at all are judged as of the recording and counted
once per content (a paste or relay that repeats a line is one event). Only lines holding one of the classes' ``literal`` strings are
tried against that class's patterns, and the first class (in policy order) whose pattern matches wins.

An AER error, a DPC containment or a failed recovery on a port names what sits behind it: the devices
the kernel reports as affected (``device has no AER-aware driver``, ``AER: can't recover``) within 5
seconds (or 20 lines, where lines carry no time stamp) are appended to its message, with what the
driver says they are (GPU, HCA, NVMe, PCIe port: the policy's ``[drivers]`` table).

Bounds: the limits of the kernel-log parser (64 MiB, 2,000,000 lines, lines over 64 KiB skipped); only
the newest MAX_EVENTS events are kept (a storm's recent part is what the windows judge); every policy
pattern is bounded and linear (the policy loader refuses nested quantifiers).
"""
from __future__ import annotations

import re

from ..core.model import KernelEvent, normalize_pci_bus_id
from . import ParseError, as_text
from .kernel_log import MAX_INPUT_CHARS, MAX_LINE_CHARS, MAX_LINES, uptime_seconds, wall_time

MAX_EVENTS = 20_000
MAX_MESSAGE_CHARS = 400
_BEHIND_S = 5.0
_BEHIND_LINES = 20
_BEHIND_MAX = 8
_PORT_CLASSES = frozenset({"aer_fatal", "aer_nonfatal", "aer_recovery_failed", "dpc_containment",
                           "aer_corrected"})
_AFFECTED = "aer_affected"

_QUOTE = re.compile(r"^(?:\s*>)+\s?")
# raw /dev/kmsg record: "6,1234,5678901,-;message" (usec since boot in the third field)
_KMSG = re.compile(r"^\d{1,3},\d{1,20},(?P<usec>\d{1,20}),[^;]{0,16};")
# a stamp in brackets before the message: "[ 1234.567890]", "[Tue Mar  5 10:11:12 2024]", "[Mo Mär 29 ...]",
# "[Mar 5 10:11]", "[  +0.000123]" (dmesg -H/--reltime), a console's "[2023-06-22 21:55:31.352444]" or
# "[2023/06/16-12:06:53:402]"; one with a digit only ("[drm] ..." is a message, not a stamp)
_BRACKET = re.compile(r"^\s{0,8}\[(?=[^\]\d]{0,40}\d)[^\]]{1,48}\]\s?")
_MAX_STAMPS = 3  # a console capture's wall clock, then the kernel's uptime, then (rarely) a relay's
# an uptime stamp later in a line: a kernel line spliced after other console output ("login: [  12.3] EDAC")
_SPLICED = re.compile(r"\[\s{0,12}\d{1,12}\.\d{1,9}\]\s?")
# "dmesg --time-format iso" without a kernel: tag
_ISO_START = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d[.,]?\d{0,9}(?:Z|[+-]\d\d:?\d\d)?\s")
# RFC 5424 syslog: "<4>1 2024-03-05T10:11:12.123456+00:00 host kernel - - - message" (SD "-" or "[...]")
_RFC5424 = re.compile(r"^<\d{1,3}>1 \S{1,64} \S{1,255} kernel \S{1,128} \S{1,32} (?:-|\[[^\]]{0,2048}\]) ?")
# RFC 3164 priority before a syslog header ("<4>Mar  5 10:11:12 host kernel: ..."); dmesg -x/-r "kern  :err   : "
_PRI = re.compile(r"^<\d{1,3}>")
_FACILITY = re.compile(r"^(?:kern|user|mail|daemon|auth|syslog|lpr|news) {0,4}:(?:emerg|alert|crit|err|warn|"
                       r"notice|info|debug) {0,6}: ")
_KERNEL_TAG = "kernel:"
_TAG_SEARCH = 200  # the kernel: tag sits within the first 200 characters of a syslog/journal line


def literals(policy=None) -> tuple[str, ...]:
    """The literals of the rules :func:`parse_host_events` applies: a line holding none of them is
    never tried (``probes.kernel_cache`` reuses events while no new line holds one)."""
    if policy is None:
        from ..policies.host_events import load_host_event_policy

        policy = load_host_event_policy()
    return tuple(sorted({r.literal for r in policy.rules.values() if r.pattern_texts}))


def parse_host_events(text: str | bytes, policy=None) -> list[KernelEvent]:
    """The host events in ``text`` (kernel log), in log order. ``policy``: a
    :class:`healthcheck.policies.host_events.HostEventPolicy` (the packaged default when None)."""
    text = as_text(text, "kernel log", MAX_INPUT_CHARS, MAX_LINES)
    if policy is None:
        from ..policies.host_events import load_host_event_policy

        try:
            policy = load_host_event_policy()
        except ValueError as exc:  # a broken packaged policy is not a fault of the log
            raise ParseError(f"host-event policy: {exc}") from exc
    rules = [r for r in policy.rules.values() if r.pattern_texts]  # (texts: nothing compiled yet)
    if not rules:
        return []
    literals = sorted({r.literal for r in rules})
    prefilter = re.compile("|".join(re.escape(lit) for lit in literals))
    found: list[tuple[int, KernelEvent, str | None]] = []  # (line index, event, driver)
    timeless: set[tuple[str | None, str]] = set()  # (class, whole line) of the lines without a time
    lines = text.split("\n")
    for index in range(len(lines) - 1, -1, -1):  # newest first: a storm stops at MAX_EVENTS
        raw = lines[index]
        if len(raw) > MAX_LINE_CHARS or not prefilter.search(raw):
            continue
        got = _match_line(raw, rules)
        if got is not None:
            event = got[0]
            if event.time is None and event.uptime_s is None and event.line.startswith(event.message[:80]):
                # no time at all (the line is the message: no stamp, no syslog header): judged as of the
                # recording, so a line repeated (a paste, a relay that logged it twice) is one event
                key = (event.event_class, event.line)
                if key in timeless:
                    continue
                timeless.add(key)
            found.append((index, *got))
            if len(found) >= MAX_EVENTS:
                break
    found.reverse()
    _name_what_is_behind(found, policy.drivers)
    return [ev for _, ev, _ in found]


def _match_line(raw: str, rules) -> tuple[KernelEvent, str | None] | None:
    line = _QUOTE.sub("", raw.replace("\x00", "")).strip()
    message, prefix, kmsg_uptime = split_line(line)
    if not message:
        return None
    got = _match_message(message, rules)
    if got is None:
        # a kernel line spliced after other console output: the message after its uptime stamp
        spliced = None
        for spliced in _SPLICED.finditer(message):
            pass
        if spliced is None or spliced.start() == 0:
            return None
        prefix, message = prefix + message[:spliced.end()], message[spliced.end():].strip()
        got = _match_message(message, rules)
        if got is None:
            return None
    rule, found = got
    return _event(rule, found, message, line, prefix, kmsg_uptime)


def _match_message(message: str, rules):
    for rule in rules:
        if rule.literal not in message:
            continue
        for pattern in rule.patterns:
            got = pattern.match(message)
            if got is not None:
                return rule, got
    return None


def split_line(line: str) -> tuple[str, str, float | None]:
    """(message, prefix, uptime from a kmsg record) of one kernel-log line, whatever front-end wrote it:
    raw ``/dev/kmsg`` records; ``dmesg`` with any time format (raw, ``-T`` in any locale, ``-H``,
    ``--reltime``, ``--time-format iso``, ``-x``); ``journalctl -k`` in its short, short-iso,
    short-precise, short-full and short-monotonic forms; RFC 3164 and RFC 5424 syslog; kern.log with a
    syslog header and an uptime stamp; console captures with a wall clock and an uptime stamp; lines
    with no time at all. The prefix holds every stamp (``kernel_log.wall_time`` and ``uptime_seconds``
    read it)."""
    kmsg = _KMSG.match(line)
    if kmsg:
        return line[kmsg.end():].strip(), "", int(kmsg.group("usec")) / 1e6
    rfc5424 = _RFC5424.match(line)
    if rfc5424:
        prefix, rest = line[:rfc5424.end()], line[rfc5424.end():]
    else:
        at = line.find(_KERNEL_TAG, 0, _TAG_SEARCH)
        if at >= 0:
            prefix, rest = line[:at + len(_KERNEL_TAG)], line[at + len(_KERNEL_TAG):]
        else:
            prefix, rest = "", line
            pri = _PRI.match(rest)
            if pri:
                prefix, rest = rest[:pri.end()], rest[pri.end():]
            iso = _ISO_START.match(rest)
            if iso:
                prefix, rest = prefix + rest[:iso.end()], rest[iso.end():]
            facility = _FACILITY.match(rest)
            if facility:
                prefix, rest = prefix + rest[:facility.end()], rest[facility.end():]
    for _ in range(_MAX_STAMPS):
        bracket = _BRACKET.match(rest)
        if not bracket:
            break
        prefix, rest = prefix + rest[:bracket.end()], rest[bracket.end():]
    return rest.strip(), prefix, None



def _event(rule, got: re.Match, message: str, line: str, prefix: str,
           kmsg_uptime) -> tuple[KernelEvent, str | None]:
    groups = got.groupdict()
    event_class = rule.event_class
    status = groups.get("status")
    if status and rule.when_corrected and not (int(status, 16) >> 61) & 1:
        event_class = rule.when_corrected  # MCi_STATUS.UC clear: a corrected error
    pci = normalize_pci_bus_id(groups.get("pci")) if groups.get("pci") else None
    device = groups.get("dev")
    if device is not None and device.isdigit():
        device = f"cpu{device}"  # the machine-check patterns capture the CPU number
    count = 1
    if rule.count == "sum" and groups.get("n"):
        n = groups["n"].lstrip("0") or "0"  # a site's pattern may capture an unbounded digit run:
        count = max(1, min(int(n), 10**9)) if len(n) <= 10 else 10**9  # over 10 digits is the cap anyway
    driver = groups.get("driver") or ("mlx5_core" if message.startswith("mlx5_core") else None)
    text = message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + "..."
    return KernelEvent(kind="host", pci_bus_id=pci, message=text,
                       uptime_s=kmsg_uptime if kmsg_uptime is not None else uptime_seconds(prefix),
                       time=wall_time(prefix), line=line, event_class=event_class, device=device,
                       count=count), driver


def _name_what_is_behind(found: list, drivers: dict[str, str]) -> None:
    """Append to each AER/DPC event on a port the devices reported affected near it, and to each
    AER/DPC event what its own device is."""
    affected = [(i, ev, drv) for i, ev, drv in found if ev.event_class == _AFFECTED]
    for index, ev, driver in found:
        if ev.event_class in _PORT_CLASSES and driver:
            ev.message = f"{drivers.get(driver, 'device')} ({driver}): {ev.message}"
    if not affected:
        return
    for index, ev, _driver in found:
        if ev.event_class not in _PORT_CLASSES or ev.event_class == "aer_corrected":
            continue
        behind: list[str] = []
        for other_index, other, other_driver in affected:
            if other.pci_bus_id == ev.pci_bus_id or not _near(index, ev, other_index, other):
                continue
            what = drivers.get(other_driver or "", "device")
            label = f"{what} {other.pci_bus_id} ({other_driver})"
            if label not in behind:
                behind.append(label)
            if len(behind) >= _BEHIND_MAX:
                break
        if behind:
            ev.message = f"{ev.message} [behind it: {', '.join(behind)}]"


def _near(index: int, ev: KernelEvent, other_index: int, other: KernelEvent) -> bool:
    if ev.uptime_s is not None and other.uptime_s is not None:
        return abs(ev.uptime_s - other.uptime_s) <= _BEHIND_S
    if ev.time and other.time:
        return ev.time[:16] == other.time[:16]  # same minute
    return abs(index - other_index) <= _BEHIND_LINES
