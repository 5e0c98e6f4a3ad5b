"""``mlxlink -d DEV [-p PORT] -m -c -e`` (NVIDIA MFT) text output -> :class:`MlxlinkPort`. Pure.

The output is sections (``Operational Info``, ``Supported Info``, ``Troubleshooting Info``, ``Tool
Information``, ``Module Info``, ``Physical Counters and BER Info``, ``EYE Opening Info``), each a
title, a dashed rule and ``Key : Value`` lines with the keys padded to a column. Lines that are not
``Key : Value`` (a wrapper's banner, the command line, warnings mlxlink prints) are ignored. Read:

- Operational Info: State, Physical state, Speed, Width, FEC;
- Troubleshooting Info: Status Opcode, Recommendation ("No issue was observed" when healthy);
- Physical Counters and BER Info (``-c``): Time Since Last Clear [Min], Effective Physical Errors,
  Effective Physical BER, Symbol Errors, Symbol BER (newer MFT), Raw Physical Errors Per Lane, Raw
  Physical BER, Link Down Counter, Link Error Recovery Counter;
- Module Info (``-m``): Identifier, Cable Type, Vendor Part Number, Temperature [C] ("48 [-5..75]":
  the reading and the module's own alarm range).

A BER is printed as ``15E-255`` (mlxlink's "no error seen"), ``1E-12``, ``3.2E-08``; ``N/A`` and
missing values are None. No ``State`` line at all: ParseError (not an mlxlink port report).
"""
from __future__ import annotations

import re

from ..core.model import MlxlinkPort
from . import ParseError, bounded_int

MAX_INPUT = 4 * 1024 * 1024
_KV_RE = re.compile(r"^\s*([A-Za-z][^:]*?)\s+:\s*(.*?)\s*$")
_RANGE_RE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(?:C\b)?\s*(?:\[\s*(-?\d+(?:\.\d+)?)\s*\.\.\s*(-?\d+(?:\.\d+)?)\s*\])?")
_NA = {"", "n/a", "na", "none", "-"}


def _float(text: str | None, what: str) -> float | None:
    if text is None or text.strip().lower() in _NA:
        return None
    value = text.strip().split()[0]
    try:
        return float(value)
    except ValueError:
        raise ParseError(f"mlxlink {what}: not a number: {text[:40]!r}") from None


def _int(text: str | None, what: str) -> int | None:
    value = text.strip().split()[0] if text and text.strip() else ""
    if value.isdigit():  # exact (a float would round a 20-digit count); over 20 digits: ParseError
        return bounded_int(value, f"mlxlink {what}")
    number = _float(text, what)
    if number is None:
        return None
    if number != number or number in (float("inf"), float("-inf")) or number != int(number) or number < 0:
        raise ParseError(f"mlxlink {what}: not a count: {text[:40]!r}")
    return int(number)


def _lanes(text: str | None) -> list[int] | None:
    if text is None or text.strip().lower() in _NA:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ParseError(f"mlxlink raw errors per lane: not counts: {text[:60]!r}")
        out.append(bounded_int(part, "mlxlink raw errors per lane"))
    return out


def _temperature(text: str | None) -> tuple[float | None, float | None, float | None]:
    if text is None or text.strip().lower() in _NA:
        return None, None, None
    match = _RANGE_RE.match(text.strip())
    if not match:
        raise ParseError(f"mlxlink module temperature: cannot parse {text[:40]!r}")
    low, high = match.group(2), match.group(3)
    return float(match.group(1)), float(low) if low else None, float(high) if high else None


def key_values(text: str) -> dict[str, str]:
    """Every ``Key : Value`` line, keys lower-cased with runs of spaces collapsed; the first occurrence
    of a key wins (sections do not repeat keys that matter here)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = _KV_RE.match(line)
        if match:
            key = " ".join(match.group(1).lower().split())
            out.setdefault(key, match.group(2))
    return out


def _first(kv: dict[str, str], *keys: str) -> str | None:
    for key in keys:
        if key in kv:
            return kv[key]
    return None


def parse_mlxlink(text: str, device: str, port: int = 1) -> MlxlinkPort:
    """One port's report. ParseError for input that is not text, too long, or has no ``State``."""
    if not isinstance(text, str):
        raise ParseError(f"mlxlink: expected text, got {type(text).__name__}")
    if len(text) > MAX_INPUT:
        raise ParseError(f"mlxlink: output larger than {MAX_INPUT} bytes")
    kv = key_values(text)
    if "state" not in kv:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        raise ParseError(f"mlxlink: no 'State' line (not an mlxlink port report): {first[:80]!r}")
    temp, low, high = _temperature(_first(kv, "temperature [c]", "module temperature [c]", "temperature"))
    fec = kv.get("fec")
    return MlxlinkPort(
        device=device, port=port, state=kv.get("state"), physical_state=kv.get("physical state"),
        speed=kv.get("speed"), width=kv.get("width"), fec=fec,
        status_opcode=_int(kv.get("status opcode"), "status opcode"),
        recommendation=kv.get("recommendation") or None,
        time_since_clear_min=_float(kv.get("time since last clear [min]"), "time since last clear"),
        effective_errors=_int(kv.get("effective physical errors"), "effective physical errors"),
        effective_ber=_float(kv.get("effective physical ber"), "effective physical BER"),
        symbol_errors=_int(kv.get("symbol errors"), "symbol errors"),
        symbol_ber=_float(kv.get("symbol ber"), "symbol BER"),
        raw_errors_per_lane=_lanes(kv.get("raw physical errors per lane")),
        raw_ber=_float(kv.get("raw physical ber"), "raw physical BER"),
        link_down=_int(kv.get("link down counter"), "link down counter"),
        link_error_recovery=_int(kv.get("link error recovery counter"), "link error recovery counter"),
        module_identifier=_na(kv.get("identifier")), cable_type=_na(kv.get("cable type")),
        module_part=_na(kv.get("vendor part number")),
        module_temperature_c=temp, module_temp_low_c=low, module_temp_high_c=high,
    )


def _na(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in _NA else value.strip()
