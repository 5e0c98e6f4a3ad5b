"""BMC outputs -> :class:`~healthcheck.core.model.BmcEvent` / :class:`~healthcheck.core.model.BmcSensor`. Pure;
``ParseError`` only.

- ``ipmitool sel elist`` / ``sel list``: ``id | date | time | sensor | event | Asserted|Deasserted [| detail]``
  (``sel list`` names the sensor by type and number, ``Memory #0x02``; ``elist`` by type and SDR name,
  ``Power Supply PS2 Status``);
- FreeIPMI ``ipmi-sel``: a header ``ID | Date | Time | Name | Type | State | Event`` then rows;
- ``ipmitool sdr elist`` / ``sdr type X list``: ``name | 30h | ok | 7.1 | reading``; ``sdr list``:
  ``name | reading | status``.

Lines that are not records (a prompt, a banner, a blank line) are passed over; a listing with lines
but no record at all is a ParseError (it is not this tool's output).
"""
from __future__ import annotations

from ..core.model import BmcEvent, BmcSensor
from . import ParseError, as_text

MAX_INPUT_CHARS = 16 * 1024 * 1024  # a full SEL (about 3,000 records) is about 300 kB
MAX_INPUT_LINES = 200_000
MAX_LINE_CHARS = 4096  # longer lines are not records of these tools
MAX_RECORDS = 100_000  # per listing; the newest are kept

# IPMI sensor types (IPMI 2.0, table 42-3, as ipmitool and FreeIPMI print them), longest first so
# that "Power Supply" is found before "Power", "System Firmware Progress" before "System Firmware".
SENSOR_TYPES = tuple(sorted((
    "Temperature", "Voltage", "Current", "Fan", "Physical Security", "Platform Security", "Processor",
    "Power Supply", "Power Unit", "Cooling Device", "Other", "Memory", "Drive Slot", "Drive Slot / Bay",
    "POST Memory Resize", "System Firmware", "System Firmware Progress", "System Firmwares",
    "Event Logging Disabled", "Watchdog", "Watchdog1", "Watchdog2", "System Event", "Critical Interrupt",
    "Button", "Module / Board", "Microcontroller", "Add-in Card", "Chassis", "Chip Set", "Other FRU",
    "Cable / Interconnect", "Terminator", "System Boot Initiated", "System Boot / Restart Initiated",
    "Boot Error", "OS Boot", "OS Critical Stop", "OS Stop / Shutdown", "Slot / Connector",
    "System ACPI Power State", "Platform Alert", "Entity Presence", "Monitor ASIC", "LAN",
    "Management Subsystem Health", "Battery", "Session Audit", "Version Change", "FRU State",
), key=len, reverse=True))
_DIRECTIONS = {"asserted": "Asserted", "deasserted": "Deasserted"}
SDR_STATUSES = ("ok", "ns", "nc", "cr", "nr", "lnc", "unc", "lcr", "ucr", "lnr", "unr")


def sensor_type_of(sensor: str) -> str | None:
    """The IPMI sensor type a SEL sensor column starts with ("Power Supply PS2 Status" -> "Power
    Supply"); None when it names none."""
    low = sensor.lower()
    for kind in SENSOR_TYPES:
        k = kind.lower()
        if low == k or low.startswith(k + " "):
            return kind
    return None


def _cells(line: str) -> list[str] | None:
    if len(line) > MAX_LINE_CHARS or "|" not in line:
        return None
    return [c.strip() for c in line.split("|")]


def parse_sel(text: str | bytes) -> list[BmcEvent]:
    """``ipmitool sel elist``/``sel list`` or FreeIPMI ``ipmi-sel`` -> events in listing order."""
    text = as_text(text, "SEL listing", MAX_INPUT_CHARS, MAX_INPUT_LINES)
    events: list[BmcEvent] = []
    columns: list[str] | None = None  # FreeIPMI's header, lower-case
    saw_line = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        saw_line = True
        cells = _cells(line)
        if not cells or len(cells) < 4:
            continue
        if cells[0].lower() == "id" and "date" in (c.lower() for c in cells):
            columns = [c.lower() for c in cells]
            continue
        if not _is_record_id(cells[0]):
            continue
        event = _freeipmi(cells, columns, line) if columns else _ipmitool(cells, line)
        if event is not None:
            events.append(event)
            if len(events) > MAX_RECORDS:
                del events[0]
    if saw_line and not events and not columns and "SEL has no entries" not in text:
        raise ParseError("no SEL record in this text (expected `ipmitool sel elist` or `ipmi-sel` lines "
                         "like '1 | 01/27/2015 | 11:41:08 | Memory | Correctable ECC | Asserted')")
    return events


def _is_record_id(cell: str) -> bool:
    return 0 < len(cell) <= 8 and all(c in "0123456789abcdefABCDEF" for c in cell)


def _ipmitool(cells: list[str], line: str) -> BmcEvent | None:
    # id | date | time | sensor | event | Asserted|Deasserted [| detail]; an event logged before the
    # BMC's clock was set reads "Pre-Init | 0000000011" in the date and time cells.
    rest = cells[1:]
    if len(rest) < 4 or not ("/" in rest[0] or "-" in rest[0] or rest[0].lower().startswith("pre-init")):
        return None
    date, time, sensor, description = rest[:4]
    tail = rest[4:]
    direction = _DIRECTIONS.get(tail[0].lower()) if tail else None
    if tail and direction is None:
        return None  # not a SEL record (an SDR row pasted into the listing: "VBAT | 38h | lcr | ...")
    rid = cells[0]
    detail = " | ".join(c for c in tail[1:] if c) or None
    return BmcEvent(record_id=rid.lower(), sensor=sensor, sensor_type=sensor_type_of(sensor),
                    description=description, direction=direction, detail=detail, date=date, time=time,
                    line=line[:512])


def _freeipmi(cells: list[str], columns: list[str], line: str) -> BmcEvent | None:
    row = dict(zip(columns, cells))
    sensor = row.get("name") or row.get("sensor name") or ""
    description = row.get("event") or ""
    if not sensor and not description:
        return None
    kind = row.get("type") or row.get("sensor type")
    direction = _DIRECTIONS.get((row.get("event direction") or "").lower())
    return BmcEvent(record_id=cells[0].lower(), sensor=sensor, sensor_type=_known_type(kind) or sensor_type_of(sensor),
                    description=description, direction=direction, severity=row.get("state") or None,
                    date=row.get("date"), time=row.get("time"), line=line[:512])


def _known_type(kind: str | None) -> str | None:
    if not kind:
        return None
    for known in SENSOR_TYPES:
        if known.lower() == kind.lower():
            return known
    return kind[:64]


def parse_sdr(text: str | bytes) -> list[BmcSensor]:
    """``ipmitool sdr elist`` (5 columns) or ``sdr list`` (3 columns) -> sensors."""
    text = as_text(text, "SDR listing", MAX_INPUT_CHARS, MAX_INPUT_LINES)
    sensors: list[BmcSensor] = []
    saw_line = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        saw_line = True
        cells = _cells(line)
        if not cells or not cells[0]:
            continue
        if len(cells) >= 5 and cells[2].lower() in SDR_STATUSES:
            sensors.append(BmcSensor(cells[0][:128], cells[2].lower(), " | ".join(cells[4:])[:256],
                                     sensor_id=cells[1][:16] or None, entity=cells[3][:16] or None))
        elif len(cells) == 3 and cells[2].lower() in SDR_STATUSES:
            sensors.append(BmcSensor(cells[0][:128], cells[2].lower(), cells[1][:256]))
        if len(sensors) > MAX_RECORDS:
            raise ParseError(f"SDR listing: more than {MAX_RECORDS} sensors (not a real BMC's)")
    if saw_line and not sensors:
        raise ParseError("no sensor in this text (expected `ipmitool sdr elist` lines like "
                         "'FAN1 | 41h | ok | 29.1 | 3400 RPM')")
    return sensors
