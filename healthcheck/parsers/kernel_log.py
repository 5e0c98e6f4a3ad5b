"""Parse NVIDIA driver (NVRM) events out of a kernel log.

Input: the text of ``dmesg``, ``journalctl -k`` or ``/var/log/{syslog,kern.log,messages}``, in any of
the common line formats; output: :class:`healthcheck.core.model.KernelEvent` objects, in log order.

Line prefixes understood (everything before ``NVRM:`` is the prefix; it is only used for timestamps,
so unknown prefixes still yield events, just without a time):

- raw ``dmesg``:                ``[ 1234.567890] NVRM: ...``                  -> ``uptime_s``
- ``dmesg -T`` / ``--ctime``:   ``[Tue Mar  5 10:11:12 2024] NVRM: ...``      -> ``time``
  (other locales too: ``[Mo Mär 29 09:29:22 2021]``, months of de/fr/es/it/pt/nl)
- console captures:           ``[2023-06-22 21:55:31.352444][5975153.878190] ...``,
                                ``[2023/06/16-12:06:53:402] ...`` -> ``time`` (and ``uptime_s``)
- bare ctime:                   ``Tue Mar  5 10:11:12 2024 host kernel: ...`` -> ``time``
- ``dmesg --time-format iso``,
  ``journalctl -o short-iso``,
  rsyslog RFC 3339:             ``2024-03-05T10:11:12,123456+00:00 host kernel: NVRM: ...``
                                -> ``time`` "2024-03-05T10:11:12+00:00" (offset kept as printed,
                                   normalised to ``+HH:MM``; fractions dropped)
- ``journalctl -o short-full``: ``Tue 2024-03-05 10:11:12 UTC host kernel: ...`` -> ``time`` (naive)
- syslog / kern.log:            ``Mar  5 10:11:12 host kernel: [ 1234.5] NVRM: ...``
- ``journalctl -k`` default:    ``Mar 05 10:11:12 host kernel: NVRM: ...``
                                (no year printed: ``time`` stays None, the raw text is in ``line``;
                                 a ``[ 1234.5]`` after ``kernel:`` still gives ``uptime_s``)
- no prefix at all, ``kernel: NVRM: ...``, markdown quotes ``> `` (stripped, also from ``line``).

Events recognised:

- ``kind="xid"``: ``NVRM: Xid (PCI:0000:07:00): 48, pid=1234, name=python, <message>``; also
  ``pid='<unknown>', name=<unknown>`` (-> None), ``pid='N/A'`` without ``name=``, older drivers
  without pid/name (``Xid (PCI:0000:01:00): 13, Graphics ...``), very old drivers without the
  ``PCI:`` prefix (``Xid (0000:01:00): 8, ...``) and ``Xid: 13, ...`` without any device.
  ``message`` is the text after the Xid number with the pid/name fields removed.
- ``kind="fallen_off_bus"``: ``NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.``, and the
  console variant spread over several ``NVRM:`` lines (``The NVIDIA GPU 0000:02:00.0`` /
  ``(PCI ID: 10de:2bb5) installed in this system has`` / ``fallen off the bus and is not
  responding to commands.``): one event, timestamped by its first line, message joined.
  An Xid 79 line is one ``kind="xid"`` event; the separate ``GPU <pci>: GPU has fallen off the bus.``
  line newer drivers print next to it is its own ``fallen_off_bus`` event (checks may correlate them).
- ``kind="rm_init_failed"``: ``NVRM: [GPU 0000:81:00.0: ]RmInitAdapter failed! (0x25:0x40:1470)``;
  the PCI id comes from the line or from an adjacent ``NVRM: GPU <pci>: ...`` /
  ``NVRM: GPU at PCI:<pci>: ...`` line; an adjacent ``rm_init_adapter failed, device minor
  number N`` is appended to the message. ``rm_init_adapter`` lines are context, not events.

- ``kind="sxid"`` (issue 33): an NVSwitch's ``nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal,
  Link 44 Minion Link DLREQ interrupt`` (no ``NVRM:``): ``xid`` holds the SXid, ``event_class`` the
  severity the line states ("fatal" / "nonfatal"), ``device`` the switch ("nvswitch3"), ``pci_bus_id``
  the switch's address; its ``Data {...}`` and ``Severity N Engine instance`` lines are context.

Robustness: any ``str`` is accepted (NUL bytes are dropped, lines over 64 KiB are skipped); ``bytes``
are decoded as UTF-8 with ``errors="replace"`` (kernel logs carry stray binary); anything else raises
:class:`ParseError`. Text without NVIDIA events gives ``[]``.

Bounds: input over MAX_INPUT_CHARS (64 MiB) or MAX_LINES lines is refused with ParseError; of the
``NVRM:`` lines only the newest MAX_NVRM_LINES are read (a log with more is an Xid storm whose recent
part is what the policy windows judge), so time and memory stay linear and bounded.
"""
from __future__ import annotations

from ..core.lazyre import Pattern
from ..core.struct import record as dataclass

from ..core.model import KernelEvent, normalize_pci_bus_id
from . import as_text

MAX_LINE_CHARS = 64 * 1024
MAX_INPUT_CHARS = 64 * 1024 * 1024
MAX_LINES = 2_000_000
MAX_NVRM_LINES = 100_000
# How many NVRM lines around an event to look at for context (PCI id, minor number, console text).
_CONTEXT_LINES = 2
_CONSOLE_FOB_LINES = 4

_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MON = r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"

_QUOTE = Pattern(r"^(?:\s*>)+\s?")
_UPTIME = Pattern(r"\[\s*(?P<up>\d{1,12}\.\d{1,9})\]")
# Prefix expressions scan up to 64 KiB per line: a lookahead on the first character skips most
# positions cheaply, and possessive blanks (each is followed by a non-blank) never give back a run.
_CTIME = Pattern(
    r"(?i)(?=[FMSTWfmstw])" + _DAY + r"\s++" + _MON
    + r"\s++(?P<day>\d{1,2})\s++(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\s++(?P<y>\d{4})\b")
_ISO = Pattern(
    r"(?=\d)(?<!\d)(?P<y>\d{4})(?P<sep>[-/])(?P<mo>\d\d)(?P=sep)(?P<day>\d\d)[T _-](?P<h>\d\d):(?P<m>\d\d)"
    r":(?P<s>\d\d)(?:[.,:]\d{1,9})?(?P<tz>Z|[+-]\d\d:?\d\d)?")
# ``dmesg -T`` in another locale: "[Mo Mär 29 09:29:22 2021]", "[mar. déc.  3 10:11:12 2024]"
_CTIME_LOCAL = Pattern(
    r"\[(?P<wd>[^\W\d_]{2,5}\.?)\s{1,4}(?P<mon>[^\W\d_]{3,5}\.?)\s{1,4}(?P<day>\d{1,2})\s{1,4}(?P<h>\d\d):"
    r"(?P<m>\d\d):(?P<s>\d\d)\s{1,4}(?P<y>\d{4})\]")
# month abbreviations dmesg -T prints under common locales (glibc's abmon), lower case, without a dot
_LOCAL_MONTHS = {
    **{m: i for i, m in enumerate(("jan", "feb", "mär", "apr", "mai", "jun", "jul", "aug", "sep", "okt", "nov",
                                   "dez"), start=1)},  # de
    **{m: i for i, m in enumerate(("janv", "févr", "mars", "avr", "mai", "juin", "juil", "août", "sept", "oct",
                                   "nov", "déc"), start=1)},  # fr
    **{m: i for i, m in enumerate(("ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sep", "oct", "nov",
                                   "dic"), start=1)},  # es
    **{m: i for i, m in enumerate(("gen", "feb", "mar", "apr", "mag", "giu", "lug", "ago", "set", "ott", "nov",
                                   "dic"), start=1)},  # it
    **{m: i for i, m in enumerate(("jan", "fev", "mar", "abr", "mai", "jun", "jul", "ago", "set", "out", "nov",
                                   "dez"), start=1)},  # pt
    **{m: i for i, m in enumerate(("jan", "feb", "mrt", "apr", "mei", "jun", "jul", "aug", "sep", "okt", "nov",
                                   "dec"), start=1)},  # nl
    **_MONTHS,
}

_NVRM = "NVRM:"
# The blanks after "(dev)" sit inside its optional group: "Xid\s*(?:...)?\s*:" would split a run of
# blanks two ways when the group is absent (quadratic on "Xid<60k spaces>x").
_XID = Pattern(
    r"^Xid\s*(?:\((?P<dev>[^)]{0,64})\)\s*)?:\s*(?P<xid>\d{1,6})\b\s*,?\s*(?P<rest>.*)$")
_PID = Pattern(r"^pid=(?P<pid>'[^']*'|\"[^\"]*\"|[^,\s]*)\s*,?\s*")
_NAME = Pattern(r"^name=(?P<name>[^,]*)(?:,\s*|$)")
_PCI_TEXT = Pattern(r"^(?:PCI:)?(?P<pci>(?:[0-9a-fA-F]{1,8}:)?[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}"
                    r"(?:\.[0-7])?)$")
# "GPU 0000:81:00.0: ...", "GPU at PCI:0000:0a:00: GPU-...", "GPU at 0000:01:00: ..."
_GPU_PCI = Pattern(r"\bGPU\s++(?:at\s++)?(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:"
                   r"[0-9a-fA-F]{2}(?:\.[0-7])?)\b")
_RMINIT = Pattern(r"RmInitAdapter failed!?\s*(?P<code>\([^)]{0,64}\))?")
_MINOR = Pattern(r"rm_init_adapter failed.{0,200}?minor number\s{1,8}(?P<minor>\d{1,6})")
_FOB = Pattern(r"(?i)fallen\s+off\s+the\s+bus")
_CONSOLE_FOB_START = Pattern(r"^The NVIDIA GPU\s+(?P<pci>[0-9a-fA-F:.]{7,20})")


@dataclass
class _Nvrm:
    """One NVRM line: where it is, its timestamps and the text after ``NVRM:``."""

    index: int
    line: str
    body: str
    uptime_s: float | None
    time: str | None


def parse_kernel_log(text: str | bytes) -> list[KernelEvent]:
    """All NVIDIA events (Xid, fallen off the bus, RmInitAdapter failures, NVSwitch SXids) in ``text``,
    in log order."""
    text = as_text(text, "kernel log", MAX_INPUT_CHARS, MAX_LINES)
    records = _nvrm_lines(text)
    events: list[KernelEvent] = []
    consumed: set[int] = set()  # NVRM records folded into a multi-line console event
    at: list[int] = []  # the log line of each event (to merge the SXids in, in log order)
    for pos, rec in enumerate(records):
        if pos in consumed:
            continue
        event = (_xid_event(rec) or _rminit_event(records, pos)
                 or _fallen_off_bus_event(records, pos, consumed))
        if event is not None:
            events.append(event)
            at.append(rec.index)
    if _SXID_MARK in text:
        sxids = _sxid_events(text)
        if sxids:
            merged = sorted(zip(at, range(len(events)), events), key=lambda t: (t[0], t[1]))
            merged += [(index, len(events) + n, ev) for n, (index, ev) in enumerate(sxids)]
            events = [ev for _, _, ev in sorted(merged, key=lambda t: (t[0], t[1]))]
    return events


# ------------------------------------------------------------------------------- NVSwitch SXids

_SXID_MARK = "SXid ("
# "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt"; the
# same SXid's "Data {...}" and "Severity 0 Engine instance ..." lines are its context, not events
_SXID = Pattern(r"(?P<dev>nvidia-nvswitch\d{1,4}):\s{1,4}SXid\s{0,4}\((?:PCI:)?(?P<pci>[0-9a-fA-F:.]{7,20})\)"
                r":\s{0,4}(?P<sxid>\d{1,6}),\s{0,4}(?P<rest>.*)$")
_SXID_SEVERITY = {"fatal": "fatal", "non-fatal": "nonfatal", "nonfatal": "nonfatal"}


def _sxid_events(text: str) -> list[tuple[int, KernelEvent]]:
    """(line index, event) per NVSwitch SXid line that states its severity (``kind="sxid"``, ``xid`` the
    SXid, ``device`` "nvswitchN", ``event_class`` "fatal" / "nonfatal", ``pci_bus_id`` the switch's).
    Only the newest MAX_NVRM_LINES such lines are read, as for the NVRM lines."""
    lines = text.split("\n")
    candidates = [i for i, raw in enumerate(lines) if _SXID_MARK in raw and len(raw) <= MAX_LINE_CHARS]
    out = []
    for index in candidates[-MAX_NVRM_LINES:]:
        line = _QUOTE.sub("", lines[index].replace("\x00", "")).strip()
        found = _SXID.search(line)
        if not found:
            continue
        rest = found.group("rest").strip()
        head, _, tail = rest.partition(",")
        severity = _SXID_SEVERITY.get(head.strip().lower())
        if severity is None:
            continue  # "Data {...}", "Severity 0 Engine instance ...": context of the event line
        prefix = line[:found.start()]
        out.append((index, KernelEvent(
            kind="sxid", pci_bus_id=_pci(found.group("pci")), xid=int(found.group("sxid")),
            message=tail.strip() or rest, uptime_s=uptime_seconds(prefix), time=wall_time(prefix), line=line,
            event_class=severity, device=found.group("dev").replace("nvidia-", ""))))
    return out


# ----------------------------------------------------------------------------------- line splitting


def _nvrm_lines(text: str) -> list[_Nvrm]:
    records: list[_Nvrm] = []
    lines = text.split("\n")
    nvrm = [i for i, raw in enumerate(lines) if _NVRM in raw and len(raw) <= MAX_LINE_CHARS]
    for index in nvrm[-MAX_NVRM_LINES:]:
        raw = lines[index]
        line = _QUOTE.sub("", raw.replace("\x00", "")).strip()
        at = line.find(_NVRM)
        if at < 0:
            continue
        prefix, body = line[:at], line[at + len(_NVRM):].strip()
        records.append(_Nvrm(index, line, body, uptime_seconds(prefix), wall_time(prefix)))
    return records


def uptime_seconds(prefix: str) -> float | None:
    found = _UPTIME.search(prefix)
    return float(found.group("up")) if found else None


def wall_time(prefix: str) -> str | None:
    """ISO 8601 wall time from a line prefix, or None (syslog / journal lines print no year)."""
    found = _CTIME.search(prefix)
    if found:
        month = _MONTHS[found.group("mon").lower()]
        return _iso(found.group("y"), month, found.group("day"), found, None)
    found = _ISO.search(prefix)
    if found:
        return _iso(found.group("y"), found.group("mo"), found.group("day"), found, found.group("tz"))
    found = _CTIME_LOCAL.search(prefix)
    if found:
        month = _LOCAL_MONTHS.get(found.group("mon").rstrip(".").lower())
        if month is not None:
            return _iso(found.group("y"), month, found.group("day"), found, None)
    return None


def _iso(year, month, day, found, tz: str | None) -> str | None:
    from datetime import datetime  # only for syslog stamps with a year

    try:
        stamp = datetime(int(year), int(month), int(day),
                         int(found.group("h")), int(found.group("m")), int(found.group("s")))
    except ValueError:  # Feb 30, hour 25: not a timestamp after all
        return None
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if tz:
        if tz == "Z":
            tz = "+00:00"
        elif ":" not in tz:
            tz = f"{tz[:3]}:{tz[3:]}"
        text += tz
    return text


# -------------------------------------------------------------------------------------- event kinds


def _xid_event(rec: _Nvrm) -> KernelEvent | None:
    found = _XID.match(rec.body)
    if not found:
        return None
    rest = found.group("rest")
    pid: int | None = None
    process: str | None = None
    pid_match = _PID.match(rest)
    if pid_match:
        value = pid_match.group("pid").strip("'\"")
        pid = int(value) if value.isdigit() and len(value) <= 10 else None
        rest = rest[pid_match.end():]
        name_match = _NAME.match(rest)
        if name_match:
            name = name_match.group("name").strip()
            process = None if name in ("", "<unknown>") else name
            rest = rest[name_match.end():]
    return KernelEvent(
        kind="xid",
        pci_bus_id=_pci(found.group("dev")),
        xid=int(found.group("xid")),
        pid=pid,
        process=process,
        message=rest.strip(),
        uptime_s=rec.uptime_s,
        time=rec.time,
        line=rec.line,
    )


def _rminit_event(records: list[_Nvrm], pos: int) -> KernelEvent | None:
    rec = records[pos]
    found = _RMINIT.search(rec.body)
    if not found:
        return None
    message = found.group(0).strip()
    pci = _gpu_pci(rec.body)
    minor = None
    for near in _neighbours(records, pos, _CONTEXT_LINES):
        if pci is None and not _RMINIT.search(near.body):
            pci = _gpu_pci(near.body)
        if minor is None:
            got = _MINOR.search(near.body)
            # only a minor-number line that belongs to this failure (same GPU or no GPU named)
            if got and (pci is None or _gpu_pci(near.body) in (None, pci)):
                minor = got.group("minor")
    if minor is not None:
        message += f"; device minor number {minor}"
    return KernelEvent(kind="rm_init_failed", pci_bus_id=pci, message=message,
                       uptime_s=rec.uptime_s, time=rec.time, line=rec.line)


def _fallen_off_bus_event(records: list[_Nvrm], pos: int, consumed: set[int]) -> KernelEvent | None:
    rec = records[pos]
    start = _CONSOLE_FOB_START.match(rec.body)
    if start and not _FOB.search(rec.body):
        # Console variant: the sentence continues over the next NVRM lines.
        parts = [rec.body]
        for offset in range(1, _CONSOLE_FOB_LINES + 1):
            nxt = pos + offset
            if nxt >= len(records) or records[nxt].index - rec.index > _CONSOLE_FOB_LINES:
                break
            parts.append(records[nxt].body)
            if _FOB.search(records[nxt].body):
                consumed.update(range(pos + 1, nxt + 1))
                return KernelEvent(kind="fallen_off_bus", pci_bus_id=_pci(start.group("pci")),
                                   message=" ".join(parts), uptime_s=rec.uptime_s, time=rec.time,
                                   line=records[nxt].line)
        return None
    if not _FOB.search(rec.body):
        return None
    pci = _pci(start.group("pci")) if start else _gpu_pci(rec.body)
    if pci is None:
        for near in _neighbours(records, pos, 1):
            pci = _gpu_pci(near.body)
            if pci:
                break
    return KernelEvent(kind="fallen_off_bus", pci_bus_id=pci, message=rec.body,
                       uptime_s=rec.uptime_s, time=rec.time, line=rec.line)


# ------------------------------------------------------------------------------------------ helpers


def _neighbours(records: list[_Nvrm], pos: int, span: int):
    """NVRM records just before and after ``pos`` (nearest first), on nearby log lines only."""
    here = records[pos].index
    for distance in range(1, span + 1):
        for other in (pos - distance, pos + distance):
            if 0 <= other < len(records) and abs(records[other].index - here) <= span + 1:
                yield records[other]


def _gpu_pci(body: str) -> str | None:
    found = _GPU_PCI.search(body)
    return _pci(found.group("pci")) if found else None


def _pci(device: str | None) -> str | None:
    """Normalise a kernel-printed device ("PCI:0000:07:00", "0000:01:00", "07:00") or None."""
    if not device:
        return None
    found = _PCI_TEXT.match(device.strip())
    if not found:
        return None
    return normalize_pci_bus_id(found.group("pci"))
