"""Parse ``iblinkinfo`` output into the same :class:`healthcheck.core.fabricgraph.Fabric` ``ibnetdiscover``
gives, so ``fabric check`` and ``fabric generate`` take either tool's output::

    Switch: 0x0002c9020040a000 MF0;leaf-1:IS5030/U1:
               1    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       3    1[  ] "gpu01 mlx5_0" ( )
               1    2[  ] ==(                Down/ Polling)==>             [  ] "" ( )
    CA: gpu01 mlx5_0:
          0x0002c90300001234      3    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       1    1[  ] "MF0;leaf-1:IS5030/U1" ( )

A device heading (``Switch: 0xGUID description:``, ``CA: description:``) is followed by its ports:
``[port GUID] LID PORT[..] ==( WIDTH SPEED Gbps STATE/ PHYS)==> PEER-LID PEER-PORT[..] "peer" ( )``.
A CA's GUID is its port line's first field; a switch's is in its heading. The peer is named by LID and
port, resolved to its GUID once every device is read (a peer whose LID no heading or port line gave
is kept as a device of unknown kind, GUID ``lid-N``). The per-lane rate names the speed: 2.5 SDR, 5.0
DDR, 10.0 QDR, 10.3125 FDR10, 14.0625 FDR, 25.78125 EDR, 53.125 HDR, 106.25 NDR, 212.5 XDR; a port
that is down (``==(   Down/ Polling)==>``) is recorded as unconnected. Every link is recorded once.

Raises ParseError with the line number for a port line before any heading or a line of neither form;
bounds as ``parsers.ibnetdiscover`` (MAX_INPUT_CHARS, MAX_LINES, MAX_LINE_CHARS).
"""
from __future__ import annotations

from ..core.fabricgraph import Device, End, Fabric, Unconnected
from ..core.lazyre import Pattern
from . import ParseError, as_text
from .ibnetdiscover import MAX_INPUT_CHARS, MAX_LINE_CHARS, MAX_LINES, FabricBuilder

_SWITCH = Pattern(r"^Switch:\s+0x(?P<guid>[0-9a-fA-F]{1,16})\s+(?P<desc>.*?):?\s*$")
_CA = Pattern(r"^(?P<kind>CA|Router):\s+(?P<desc>.*?):?\s*$")
_PORT = Pattern(r"^\s*(?:0x(?P<guid>[0-9a-fA-F]{1,16})\s+)?(?P<lid>\d{1,6})\s+(?P<port>\d{1,5})\[[^\]]{0,8}\]\s*"
                r"==\(\s*(?P<link>[^)]{0,80})\)==>\s*(?:(?P<plid>\d{1,6})\s+(?P<pport>\d{1,5}))?\s*\[[^\]]{0,8}\]\s*"
                r'"(?P<pdesc>[^"]{0,256})"')
SPEEDS = {"2.5": "SDR", "5.0": "DDR", "10.0": "QDR", "10.3125": "FDR10", "14.0625": "FDR", "25.78125": "EDR",
          "53.125": "HDR", "106.25": "NDR", "212.5": "XDR"}


def parse_iblinkinfo(text: str | bytes) -> Fabric:
    """The fabric an ``iblinkinfo`` output shows; see the module docstring."""
    text = as_text(text, "iblinkinfo output", MAX_INPUT_CHARS, MAX_LINES)
    builder = FabricBuilder("iblinkinfo")
    by_lid: dict[int, str] = {}
    pending = []  # (local End, peer lid, peer port, lanes, speed, peer description, line)
    current: tuple[str, str, str] | None = None  # (kind, guid or "", description)
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE_CHARS:
            raise ParseError(f"iblinkinfo output line {number}: {len(line)} characters, over the limit of "
                             f"{MAX_LINE_CHARS}")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        found = _SWITCH.match(stripped)
        if found:
            current = ("switch", found.group("guid").lower().zfill(16), found.group("desc").strip())
            builder.device(current[1], "switch", current[2], None, None, header=True)
            continue
        found = _CA.match(stripped)
        if found and "==(" not in stripped:
            current = ("ca" if found.group("kind") == "CA" else "router", "", found.group("desc").strip())
            continue
        port = _PORT.match(line)
        if port is None:
            raise ParseError(f"iblinkinfo output line {number}: neither a device heading nor a port line: "
                             f"{stripped[:80]!r}")
        if current is None:
            raise ParseError(f"iblinkinfo output line {number}: a port line before any device heading")
        kind, guid, desc = current
        if kind != "switch":
            if not port.group("guid"):
                raise ParseError(f"iblinkinfo output line {number}: a CA port line without its port GUID")
            guid = port.group("guid").lower().zfill(16)
            builder.device(guid, kind, desc, None, int(port.group("lid")), header=True)
        lid = int(port.group("lid"))
        by_lid.setdefault(lid, guid)
        local = End(guid, int(port.group("port")))
        lanes, speed, up = _link(port.group("link"))
        if not up or port.group("plid") is None:
            builder.fabric.unconnected.append(Unconnected(local, f"{lanes}x" if lanes else "?x", speed or "???",
                                                          number))
            continue
        pending.append((local, int(port.group("plid")), int(port.group("pport")), lanes, speed,
                        port.group("pdesc").strip(), number))
    if not builder.fabric.devices:
        raise ParseError("iblinkinfo output: no device heading found")
    for local, plid, pport, lanes, speed, pdesc, number in pending:
        peer = by_lid.get(plid)
        if peer is None:
            peer = f"lid-{plid}"
            if peer not in builder.fabric.devices:
                builder.fabric.devices[peer] = Device(peer, "unknown", pdesc, None, plid)
        builder.link(local, End(peer, pport), lanes, speed, number)
    return builder.fabric


def _link(text: str) -> tuple[int | None, str | None, bool]:
    """(lanes, speed name, up) of ``4X 25.78125 Gbps Active/  LinkUp`` (``Down/ Polling``: not up)."""
    words = text.replace("/", " ").split()
    up = "LinkUp" in words and "Active" in words
    lanes = next((int(w[:-1]) for w in words if w[:-1].isdigit() and w[-1] in "xX"), None)
    speed = next((SPEEDS.get(w) for w, nxt in zip(words, words[1:] + [""]) if nxt == "Gbps"), None)
    return lanes, speed, up
