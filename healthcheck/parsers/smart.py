"""Storage health outputs -> :class:`~healthcheck.core.model.StorageDevice`. Pure; ``ParseError`` only.

Formats:
- ``nvme smart-log /dev/nvmeX -o json`` (nvme-cli 1.x and 2.x key names) and its text form;
- ``smartctl -j -a /dev/X`` (the primary format: ``smart_status``, the NVMe health log, the ATA
  attribute table, ``smartctl.exit_status``);
- smartctl's text output, as far as it goes: the overall-health line (``SMART overall-health
  self-assessment test result: PASSED|FAILED!``, SCSI ``SMART Health Status: OK``) and the NVMe
  health lines (``Critical Warning: 0x00``, ``Media and Data Integrity Errors: 0``, ...).

:func:`parse_storage_health` tells them apart by content.
"""
from __future__ import annotations

import json
import re

from ..core.model import StorageDevice
from . import ParseError, as_text

MAX_INPUT_CHARS = 4 * 1024 * 1024  # smartctl -x -j of a SAS disk with its logs: about 200 kB
MAX_INPUT_LINES = 100_000

# smartctl exit status bit 3: "SMART status check returned DISK FAILING" (smartctl(8), EXIT STATUS)
_EXIT_DISK_FAILING = 1 << 3
# ATA attributes whose raw value is kept (ids from the ATA SMART attribute convention smartctl uses)
_ATA_REALLOCATED, _ATA_PENDING = 5, 197

# nvme-cli JSON key (1.x and 2.x spellings) -> StorageDevice field
_NVME_CLI_KEYS = {
    "critical_warning": "critical_warning",
    "media_errors": "media_errors",
    "num_err_log_entries": "num_err_log_entries",
    "percent_used": "percentage_used",
    "percentage_used": "percentage_used",
    "avail_spare": "available_spare_pct",
    "available_spare": "available_spare_pct",
    "spare_thresh": "available_spare_threshold_pct",
    "available_spare_threshold": "available_spare_threshold_pct",
}
# text lines (lower-case key before the colon) -> field, for `nvme smart-log` and smartctl's NVMe section
_TEXT_KEYS = {
    "critical_warning": "critical_warning",
    "critical warning": "critical_warning",
    "media_errors": "media_errors",
    "media and data integrity errors": "media_errors",
    "num_err_log_entries": "num_err_log_entries",
    "error information log entries": "num_err_log_entries",
    "percentage_used": "percentage_used",
    "percentage used": "percentage_used",
    "available_spare": "available_spare_pct",
    "available spare": "available_spare_pct",
    "available_spare_threshold": "available_spare_threshold_pct",
    "available spare threshold": "available_spare_threshold_pct",
}
_OVERALL = re.compile(r"SMART overall-health self-assessment test result:[ \t]*([A-Za-z_]+)")
_SCSI_HEALTH = re.compile(r"SMART Health Status:[ \t]*([A-Za-z_]+)")
_DEVICE_ARG = re.compile(r"(?:smartctl|nvme)[^\n]{0,200}?/dev/([A-Za-z0-9_]{1,32})")
_NVME_HEADER = re.compile(r"Smart Log for NVME device:[ \t]*([A-Za-z0-9_]{1,32})")
_INT = re.compile(r"(0[xX][0-9a-fA-F]{1,16}|[0-9][0-9,]{0,31})")  # longer numbers are no SMART value


def parse_storage_health(text: str | bytes, name: str | None = None) -> StorageDevice:
    """Any of the formats above -> one device. ``name`` (``nvme0``) wins over what the output says."""
    text = as_text(text, "storage health output", MAX_INPUT_CHARS, MAX_INPUT_LINES)
    if text.lstrip().startswith("{"):
        return parse_json(text, name)
    return parse_text(text, name)


def parse_json(text: str, name: str | None = None) -> StorageDevice:
    """``smartctl -j`` or ``nvme smart-log -o json``."""
    text = as_text(text, "storage health JSON", MAX_INPUT_CHARS, MAX_INPUT_LINES)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"storage health output is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ParseError("storage health JSON must hold an object")
    if any(k in data for k in ("smartctl", "smart_status", "nvme_smart_health_information_log",
                               "ata_smart_attributes", "device")):
        return _smartctl_json(data, name)
    if "critical_warning" in data or "media_errors" in data:
        return _nvme_cli_json(data, name)
    raise ParseError("JSON is neither `smartctl -j` nor `nvme smart-log -o json` output "
                     "(no smart_status, health log or critical_warning)")


def _int(value) -> int | None:
    """JSON number, or nvme-cli's {"value": n} / numeric string -> int; anything else None."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 1 << 64 else None  # a SMART counter is at most 128 bits; we keep 64
    if isinstance(value, float) and value == value and abs(value) < 1e18:
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        m = _INT.match(text)
        if m and not text[m.end():m.end() + 1].isalnum():
            digits = m.group(1).replace(",", "")
            return int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
    return None


def _str(value) -> str | None:
    return value.strip()[:200] if isinstance(value, str) and value.strip() else None


def _device_name(raw: str | None) -> str | None:
    if not raw:
        return None
    base = raw.rsplit("/", 1)[-1]
    return base[:64] or None


def _nvme_cli_json(data: dict, name: str | None) -> StorageDevice:
    dev = StorageDevice(name=name or "nvme?", kind="nvme", source="nvme-smart-log")
    for key, attr in _NVME_CLI_KEYS.items():
        if key in data and getattr(dev, attr) is None:
            setattr(dev, attr, _int(data[key]))
    kelvin = _int(data.get("temperature"))
    if kelvin is not None and kelvin > 0:
        dev.temperature_c = float(kelvin - 273)  # nvme-cli reports the composite temperature in kelvin
    return dev


def _smartctl_json(data: dict, name: str | None) -> StorageDevice:
    device = data.get("device") if isinstance(data.get("device"), dict) else {}
    protocol = (_str(device.get("protocol")) or _str(device.get("type")) or "").lower()
    kind = "nvme" if protocol == "nvme" else ("sata" if protocol in ("ata", "sat") else (protocol or "disk"))
    dev = StorageDevice(name=name or _device_name(_str(device.get("name"))) or "disk?", kind=kind,
                        model=_str(data.get("model_name")), serial=_str(data.get("serial_number")),
                        source="smartctl-json")
    status = data.get("smart_status")
    if isinstance(status, dict) and isinstance(status.get("passed"), bool):
        dev.smart_passed = status["passed"]
    tool = data.get("smartctl") if isinstance(data.get("smartctl"), dict) else {}
    exit_status = _int(tool.get("exit_status"))
    if exit_status is not None and exit_status & _EXIT_DISK_FAILING:
        dev.smart_passed = False
    log = data.get("nvme_smart_health_information_log")
    if isinstance(log, dict):
        for key in ("critical_warning", "media_errors", "num_err_log_entries", "percentage_used"):
            setattr(dev, key, _int(log.get(key)))
        dev.available_spare_pct = _int(log.get("available_spare"))
        dev.available_spare_threshold_pct = _int(log.get("available_spare_threshold"))
    temp = data.get("temperature")
    if isinstance(temp, dict) and _int(temp.get("current")) is not None:
        dev.temperature_c = float(_int(temp.get("current")))
    attrs = data.get("ata_smart_attributes")
    table = attrs.get("table") if isinstance(attrs, dict) else None
    if isinstance(table, list):
        failing = []
        for row in table[:512]:
            if not isinstance(row, dict):
                continue
            when = _str(row.get("when_failed"))
            if when == "now":
                failing.append(_str(row.get("name")) or f"attribute {_int(row.get('id'))}")
            raw = row.get("raw")
            value = _int(raw.get("value")) if isinstance(raw, dict) else None
            if row.get("id") == _ATA_REALLOCATED:
                dev.reallocated_sectors = value
            elif row.get("id") == _ATA_PENDING:
                dev.pending_sectors = value
        dev.failing_attributes = failing
    if (dev.smart_passed is None and not isinstance(log, dict) and not isinstance(table, list)
            and exit_status is not None and exit_status & 0b11):
        # bits 0-1: command line not parsed / device open failed: there is no health in this output
        messages = tool.get("messages") if isinstance(tool.get("messages"), list) else []
        said = "; ".join(_str(m.get("string")) or "" for m in messages[:3] if isinstance(m, dict))
        dev.unread = f"smartctl could not read the device (exit status {exit_status}){': ' + said if said else ''}"
        dev.source = None
    return dev


def parse_text(text: str, name: str | None = None) -> StorageDevice:
    """``nvme smart-log`` text or smartctl text: what the overall-health and NVMe lines say. Raises
    ParseError when neither is there (an excerpt without them cannot be judged)."""
    text = as_text(text, "storage health text", MAX_INPUT_CHARS, MAX_INPUT_LINES)
    header = _NVME_HEADER.search(text)
    arg = _DEVICE_ARG.search(text)
    guess = name or (header.group(1) if header else None) or (arg.group(1) if arg else None)
    dev = StorageDevice(name=guess or "disk?", kind="nvme" if guess and guess.startswith("nvme") else "disk")
    found = False
    overall = _OVERALL.search(text) or _SCSI_HEALTH.search(text)
    if overall:
        word = overall.group(1).upper()
        dev.smart_passed = word in ("PASSED", "OK")
        found = True
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        attr = _TEXT_KEYS.get(key.strip().lower())
        if attr and getattr(dev, attr) is None:
            number = _int(value)
            if number is not None:
                setattr(dev, attr, number)
                found = True
                dev.kind = "nvme"
        elif key.strip() in ("Device Model", "Model Number", "Product") and dev.model is None:
            dev.model = _str(value)
        elif key.strip() == "Serial Number" and dev.serial is None:
            dev.serial = _str(value)
    if not found:
        raise ParseError("no SMART health in this text (neither the overall-health line nor NVMe health "
                         "lines such as 'critical_warning : 0')")
    dev.source = "nvme-smart-log-text" if header else "smartctl-text"
    if dev.kind == "disk" and dev.smart_passed is not None and "ATA Version" in text:
        dev.kind = "sata"
    return dev


def merge(devices: list[StorageDevice]) -> StorageDevice:
    """Several readings of one device (nvme-cli and smartctl) -> one: the first known value of each
    field wins; ``source`` lists them all."""
    if not devices:
        raise ValueError("nothing to merge")
    first = devices[0]
    out = StorageDevice(name=first.name, kind=first.kind)
    for dev in devices:
        for spec in StorageDevice.__record_fields__:
            attr = spec.name
            if attr in ("name", "source", "unread"):
                continue
            if getattr(out, attr) in (None, "disk") and getattr(dev, attr) is not None:
                setattr(out, attr, getattr(dev, attr))
    sources = [d.source for d in devices if d.source]
    out.source = "+".join(dict.fromkeys(sources)) or None
    unread = [d.unread for d in devices if d.unread]
    out.unread = "; ".join(unread) if unread and not sources else None
    return out
