"""Parse ``ibstat`` (infiniband-diags) output into :class:`healthcheck.core.model.IbPort` objects.

Format (one block per HCA; indentation is a tab in most builds, 8 spaces in others -- we key on the
text, not the indentation)::

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Firmware version: 28.39.1002
            ...
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 400
                    ...
                    Link layer: InfiniBand

Variants handled: tab- or space-indented; ``ibstat <ca>`` (one block); old builds without
``Link layer`` (-> ``link_layer`` None); numeric prefixes as sysfs prints them (``4: ACTIVE``,
``5: LinkUp``); shell-prompt or other preamble lines before the first ``CA '...'`` (skipped);
``ibpanic:`` / ``ibwarn:`` lines anywhere (e.g. ``ibpanic: [1400444] main: stat of IB device 'mlx5_8'
failed: No such file or directory`` when a device vanished mid-listing, ibstat exit 255).

Result: :class:`IbstatResult`, which *is* the ``list[IbPort]`` of the ports parsed (so callers that
want a list use it as one) and also carries ``errors``: the ibpanic/ibwarn lines, so a check can report
a missing device even though the ports before it parsed fine.

Raises :class:`ParseError` for input that is not ibstat output: not text, empty, or neither a
``CA '<name>'`` header nor an ibpanic/ibwarn line anywhere. ``bytes`` are decoded as UTF-8 with
``errors="replace"``. Bounds: input over MAX_INPUT_CHARS (16 MiB) or MAX_LINES lines is refused with
ParseError (a real 8-HCA output is ~200 lines).
"""
from __future__ import annotations

import re

from ..core.model import IbPort
from . import ParseError, as_text

MAX_INPUT_CHARS = 16 * 1024 * 1024
MAX_LINES = 200_000

_CA = re.compile(r"^CA\s+'(?P<name>[^']{0,256})'\s*$")
_PORT = re.compile(r"^Port\s+(?P<port>\d{1,4})\s*:\s*$")
# The shortest key never ends in a blank (\s* takes it): (?<! ) skips those tries; blanks are possessive.
_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]{0,40}?)(?<! )\s*+:\s*(?P<value>.*)$")
_ERROR = re.compile(r"^(?:ibpanic|ibwarn|ibstat|iberror)\s*:", re.IGNORECASE)
_NUMERIC_PREFIX = re.compile(r"^\d+\s*:\s*")
_RATE = re.compile(r"^(?P<rate>\d{1,6}(?:\.\d{1,6})?)\b")
# ibstat prints the IBTA port state names; the model uses the short upper-case ones.
_STATES = {"ACTIVE": "ACTIVE", "DOWN": "DOWN", "INIT": "INIT", "INITIALIZING": "INIT", "ARMED": "ARMED",
           "ACTIVE DEFER": "ACTIVE_DEFER", "ACTIVE_DEFER": "ACTIVE_DEFER", "NOP": "NOP"}


class IbstatResult(list[IbPort]):
    """The ports of an ibstat run (this object is their list) plus the ibpanic/ibwarn ``errors``."""

    def __init__(self, ports=(), errors=()) -> None:
        super().__init__(ports)
        self.errors: list[str] = list(errors)

    @property
    def ports(self) -> list[IbPort]:
        return list(self)

    def __repr__(self) -> str:
        return f"IbstatResult(ports={list(self)!r}, errors={self.errors!r})"


def parse_ibstat(text: str | bytes) -> IbstatResult:
    """Ports and error lines of ``ibstat`` output; see the module docstring for the variants."""
    text = as_text(text, "ibstat output", MAX_INPUT_CHARS, MAX_LINES)
    if not text.strip():
        raise ParseError("ibstat output is empty")

    ports: list[IbPort] = []
    errors: list[str] = []
    device: str | None = None
    ca_fields: dict[str, str] = {}
    port: IbPort | None = None
    seen_ca = False
    for raw in text.split("\n"):
        line = raw.replace("\x00", "").strip()
        if not line:
            continue
        if _ERROR.match(line):
            errors.append(line)
            continue
        ca = _CA.match(line)
        if ca:
            seen_ca = True
            device, ca_fields, port = ca.group("name"), {}, None
            continue
        if device is None:
            continue  # preamble: prompt, "$ ibstat", blank banners
        port_match = _PORT.match(line)
        if port_match:
            port = IbPort(device=device, port=int(port_match.group("port")),
                          firmware=ca_fields.get("firmware version"), hca_type=ca_fields.get("ca type"))
            ports.append(port)
            continue
        field = _FIELD.match(line)
        if not field:
            continue  # unknown free text inside a block: newer builds may add lines
        key, value = field.group("key").strip().lower(), field.group("value").strip()
        if port is None:
            ca_fields[key] = value
        else:
            _set_port_field(port, key, value)

    if not seen_ca and not errors:
        raise ParseError("not ibstat output: no \"CA '<name>'\" header and no ibpanic/ibwarn line")
    return IbstatResult(ports, errors)


def _set_port_field(port: IbPort, key: str, value: str) -> None:
    """Fill one ``Port N:`` field; unknown keys (Base lid, LMC, SM lid, GUIDs...) are skipped."""
    if key == "state":
        port.state = _state(value)
    elif key == "physical state":
        port.phys_state = _NUMERIC_PREFIX.sub("", value).strip() or None
    elif key == "rate":
        found = _RATE.match(value)
        port.rate_gbps = float(found.group("rate")) if found else None
    elif key == "link layer":
        port.link_layer = value or None


def _state(value: str) -> str | None:
    """"Active" -> "ACTIVE", "4: ACTIVE" -> "ACTIVE", "Initializing" -> "INIT"."""
    name = _NUMERIC_PREFIX.sub("", value).strip().upper()
    if not name:
        return None
    return _STATES.get(name, "_".join(name.split()))
