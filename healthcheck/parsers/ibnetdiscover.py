"""Parse ``ibnetdiscover`` output (the plain topology format and the ``-p`` ports report) into a
:class:`healthcheck.core.fabricgraph.Fabric`: devices by GUID, links with their width and speed.

Plain format (``ibnetdiscover``; also the ``ibdiagnet2.ibnetdiscover`` file ibdiagnet writes)::

    vendid=0x2c9                                         <- key=value lines before a header: skipped
    switchguid=0xb0cf0e0300d33fc0(b0cf0e0300d33fc0)
    Switch  65 "S-b0cf0e0300d33fc0"   # "leaf-1" enhanced port 0 lid 180 lmc 0
    [1](1/1/1) "H-5c25730300e6706e"[1](5c25730300e6706e)   # "gpu01 mlx5_0" lid 164 4xNDR
    [63](1/32/1) "S-fc6a1c030091cf00"[1]                    # "spine-1" lid 13 4xNDR
    Ca  1 "H-5c25730300e6706e"        # "gpu01 mlx5_0"
    [1](5c25730300e6706e) "S-b0cf0e0300d33fc0"[1]          # lid 164 lmc 0 "leaf-1" lid 180 4xNDR

``Rt`` (router) headers and ``"R-..."`` peers are read the same way. After a port number, optional
``(label)`` / ``(port guid)`` groups (Quantum-2 cage labels such as ``(1/2/1)``; a CA's port GUID) are
accepted; a switch port's first one is kept as that port's label.

Ports format (``ibnetdiscover -p``), one line per port, a linked port with its peer, an unlinked one
(down, polling) with its own description only::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

What each result means: see :mod:`healthcheck.core.fabricgraph`. Every link is recorded once (both
formats print it from each end); a port printed in two different links is kept in both and named in
``Fabric.warnings`` (real outputs never do it; trimmed fixtures do). A device seen only as a peer (an
output cut short) is kept with the description the peer line gives. SHARP Aggregation Nodes are CAs
with ``aggregation`` True. Node descriptions are stripped of surrounding blanks.

Raises :class:`ParseError` with the line number for a header or port line it cannot read, a port line
before any header, a line of neither format once the output has started (preamble lines before the
first header, such as a shell prompt, are skipped), or input with no device at all. Bounds: input over
MAX_INPUT_CHARS or MAX_LINES lines, or a line over MAX_LINE_CHARS, is refused with ParseError (a fabric
of 2,000 nodes x 8 HCAs prints ~150,000 lines of under 200 characters).
"""
from __future__ import annotations

import re

from ..core.fabricgraph import Device, End, Fabric, Link, Unconnected
from . import ParseError, as_text

MAX_INPUT_CHARS = 128 * 1024 * 1024
MAX_LINES = 2_000_000
MAX_LINE_CHARS = 4096

_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
_LETTERS = {"S": "switch", "H": "ca", "R": "router"}
_P_KINDS = {"SW": "switch", "CA": "ca", "RT": "router"}

_KEY_VALUE = re.compile(r"^[A-Za-z]{1,32}=\S{0,64}$")
_HEADER_START = re.compile(r"^(?:Switch|Ca|Rt)\s")
_HEADER = re.compile(r'^(?P<kind>Switch|Ca|Rt)\s+(?P<ports>\d{1,5})\s+"(?P<letter>[SHR])-(?P<guid>[0-9a-fA-F]{1,16})"'
                     r"\s*(?:#(?P<comment>.*))?$")
_EXTRA = r"(?:\([^()\"]{0,64}\)|\[[^\[\]\"]{0,64}\]){0,4}"
_PORT = re.compile(r"^\[(?P<port>\d{1,5})\](?P<local>" + _EXTRA + r")\s*"
                   r'"(?P<letter>[SHR])-(?P<guid>[0-9a-fA-F]{1,16})"\[(?P<rport>\d{1,5})\](?P<remote>' + _EXTRA + r")"
                   r"\s*(?:#(?P<comment>.*))?$")
_PAREN = re.compile(r"\(([^()\"]{0,64})\)")
_HEX = re.compile(r"^[0-9a-fA-F]{1,16}$")
_LID = re.compile(r"\blid\s+(\d{1,6})")
# "4xNDR" in the plain format; "???" or an unknown name is kept as unknown.
_RATE = re.compile(r"(?<![0-9A-Za-z])(\d{1,2})x(\?{3}|[A-Za-z][A-Za-z0-9]{0,7})\b")
_P_LINE = re.compile(r"^(?P<kind>CA|SW|RT)\s+(?P<lid>\d{1,6})\s+(?P<port>\d{1,5})\s+0x(?P<guid>[0-9a-fA-F]{1,16})"
                     r"\s+(?P<width>\d{1,2}x|\?{1,3})\s+(?P<speed>\S{1,16})\s*(?P<rest>.*)$")
_P_PEER = re.compile(r"^-\s+(?P<kind>CA|SW|RT)\s+(?P<lid>\d{1,6})\s+(?P<port>\d{1,5})\s+0x(?P<guid>[0-9a-fA-F]{1,16})"
                     r"\s+\((?P<descs>.*)\)\s*$")


def parse_ibnetdiscover(text: str | bytes) -> Fabric:
    """The fabric an ``ibnetdiscover`` (plain or ``-p``) output shows; see the module docstring."""
    text = as_text(text, "ibnetdiscover output", MAX_INPUT_CHARS, MAX_LINES)
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_CHARS:
            raise ParseError(f"ibnetdiscover output line {number}: {len(line)} characters, over the limit of "
                             f"{MAX_LINE_CHARS} (not a real tool output; refusing to parse it)")
    first = next((line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")), "")
    builder = FabricBuilder("ports" if _P_LINE.match(first) else "plain")
    if builder.fabric.format == "ports":
        _parse_ports(lines, builder)
    else:
        _parse_plain(lines, builder)
    fabric = builder.fabric
    if not fabric.devices:
        raise ParseError("not ibnetdiscover output: no 'Switch'/'Ca' header and no ports-report line "
                         "(expected the output of `ibnetdiscover` or `ibnetdiscover -p`)")
    return fabric


def _guid(text: str) -> str:
    return text.lower().zfill(16)


def _described(kind: str, description: str) -> tuple[str, bool]:
    description = description.strip()
    return description, kind == "ca" and "aggregation node" in description.lower()


class FabricBuilder:
    def __init__(self, fmt: str) -> None:
        self.fabric = Fabric(format=fmt)
        self._links: dict[tuple[End, End], Link] = {}
        self._ends: dict[End, tuple[End, End]] = {}
        self._headers: set[str] = set()

    def device(self, guid: str, kind: str, description: str, ports: int | None, lid: int | None,
               header: bool) -> None:
        """Record a device; a header's facts replace what a peer line guessed."""
        known = self.fabric.devices.get(guid)
        if known is not None and (guid in self._headers or not header):
            if known.lid is None and lid is not None:
                self.fabric.devices[guid] = Device(guid, known.kind, known.description, known.ports, lid,
                                                   known.aggregation)
            return
        description, aggregation = _described(kind, description)
        self.fabric.devices[guid] = Device(guid, kind, description, ports, lid, aggregation)
        if header:
            self._headers.add(guid)

    def link(self, one: End, two: End, lanes: int | None, speed: str | None, number: int) -> None:
        key = (one, two) if one <= two else (two, one)
        if key in self._links:
            return
        for end in key:
            other = self._ends.get(end)
            if other is not None and other != key:
                seen = self._links[other]
                self.fabric.warnings.append(
                    f"port {end} is in two links: with {seen.other(end)} (line {seen.line}) and with "
                    f"{key[1] if end == key[0] else key[0]} (line {number})")
            self._ends.setdefault(end, key)
        link = Link(key[0], key[1], lanes, speed, number)
        self._links[key] = link
        self.fabric.links.append(link)


def _rate(comment: str) -> tuple[int | None, str | None]:
    """(lanes, speed) from the end of a plain-format comment: "... lid 164 4xNDR"."""
    tail = comment[comment.rfind('"') + 1:]
    found = None
    for found in _RATE.finditer(tail):
        pass
    if found is None:
        return None, None
    speed = found.group(2).upper()
    return int(found.group(1)) or None, None if speed == "???" else speed


def _quoted(comment: str | None) -> str:
    """The text between the first and the last double quote of a comment ("" when none)."""
    if not comment:
        return ""
    start, stop = comment.find('"'), comment.rfind('"')
    return comment[start + 1:stop] if 0 <= start < stop else ""


def _parse_plain(lines: list[str], builder: FabricBuilder) -> None:
    current: Device | None = None
    started = False
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#") or _KEY_VALUE.match(line):
            continue
        if _HEADER_START.match(line):
            header = _HEADER.match(line)
            if not header or _LETTERS[header.group("letter")] != _KINDS[header.group("kind")]:
                raise ParseError(f"ibnetdiscover output line {number}: cannot read this node header: {line[:120]!r}")
            comment = header.group("comment") or ""
            lid = _LID.search(comment[comment.rfind('"') + 1:])
            guid = _guid(header.group("guid"))
            builder.device(guid, _KINDS[header.group("kind")], _quoted(comment), int(header.group("ports")),
                           int(lid.group(1)) if lid else None, header=True)
            current, started = builder.fabric.devices[guid], True
            continue
        if line.startswith("["):
            if current is None:
                raise ParseError(f"ibnetdiscover output line {number}: a port line before any "
                                 "'Switch'/'Ca'/'Rt' header")
            port = _PORT.match(line)
            if not port:
                raise ParseError(f"ibnetdiscover output line {number}: cannot read this port line: {line[:120]!r}")
            _plain_port(builder, current, port, number)
            continue
        if started:
            raise ParseError(f"ibnetdiscover output line {number}: not a line of ibnetdiscover's topology "
                             f"format: {line[:120]!r}")


def _plain_port(builder: FabricBuilder, current: Device, port: re.Match, number: int) -> None:
    comment = port.group("comment") or ""
    local = End(current.guid, int(port.group("port")))
    labels = _PAREN.findall(port.group("local"))
    if current.kind == "switch" and labels:
        builder.fabric.labels.setdefault(local, labels[0])
    elif len(labels) >= 2 and not _HEX.match(labels[0]):
        builder.fabric.labels.setdefault(local, labels[0])
    peer_guid, peer_kind = _guid(port.group("guid")), _LETTERS[port.group("letter")]
    tail_lid = _LID.search(comment[comment.rfind('"') + 1:])
    builder.device(peer_guid, peer_kind, _quoted(comment), None, int(tail_lid.group(1)) if tail_lid else None,
                   header=False)
    lanes, speed = _rate(comment)
    builder.link(local, End(peer_guid, int(port.group("rport"))), lanes, speed, number)


def _p_rate(width: str, speed: str) -> tuple[int | None, str | None]:
    lanes = int(width[:-1]) if width.endswith("x") and width[:-1].isdigit() else None
    speed = speed.upper()
    return lanes or None, None if speed.strip("?") == "" else speed


def _parse_ports(lines: list[str], builder: FabricBuilder) -> None:
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = _P_LINE.match(line)
        if not found:
            raise ParseError(f"ibnetdiscover -p output line {number}: not a ports-report line: {line[:120]!r}")
        kind, guid = _P_KINDS[found.group("kind")], _guid(found.group("guid"))
        local = End(guid, int(found.group("port")))
        rest = found.group("rest").strip()
        peer = _P_PEER.match(rest)
        if peer:
            descs = peer.group("descs").strip()
            split = descs.find("' - '")
            if not (descs.startswith("'") and descs.endswith("'")) or split < 0:
                raise ParseError(f"ibnetdiscover -p output line {number}: cannot read the descriptions "
                                 f"\"( 'local' - 'peer' )\": {line[:120]!r}")
            mine, theirs = descs[1:split], descs[split + 5:-1]
            peer_guid = _guid(peer.group("guid"))
            builder.device(guid, kind, mine, None, int(found.group("lid")), header=True)
            builder.device(peer_guid, _P_KINDS[peer.group("kind")], theirs, None, int(peer.group("lid")),
                           header=True)
            lanes, speed = _p_rate(found.group("width"), found.group("speed"))
            builder.link(local, End(peer_guid, int(peer.group("port"))), lanes, speed, number)
        elif len(rest) >= 2 and rest.startswith("'") and rest.endswith("'"):
            builder.device(guid, kind, rest[1:-1], None, int(found.group("lid")), header=True)
            builder.fabric.unconnected.append(Unconnected(local, found.group("width"), found.group("speed"), number))
        else:
            raise ParseError(f"ibnetdiscover -p output line {number}: expected \"- PEER ...\" or a quoted "
                             f"description after the speed: {line[:120]!r}")
