"""The fabric graph: devices (switches, channel adapters, routers) keyed by GUID, and the links between
their ports, with the width and speed each link trained at. Built by the ``ibnetdiscover`` parser
(:mod:`healthcheck.parsers.ibnetdiscover`); read by :mod:`healthcheck.fabric.design` (generate) and
:mod:`healthcheck.fabric.compare` (check). Plain data, no I/O.

What each field means:

- ``Device.guid``: 16 lower-case hex digits, no ``0x``. In the plain (topology) format it is the node
  GUID; in the ``-p`` (ports) format a CA is known only by its *port* GUID (that is all ``-p`` prints),
  a switch by its node GUID in both.
- ``Device.kind``: ``"switch"``, ``"ca"`` or ``"router"``. ``Device.aggregation`` is True for a SHARP
  Aggregation Node (a CA inside a switch, node description "... Aggregation Node"): part of its switch,
  not a host.
- ``Device.ports``: the port count from the node's header (plain format only; None in ``-p``).
- ``Link``: one cable, recorded once whatever the number of times the output prints it (ibnetdiscover
  prints each link from both ends). ``a`` and ``b`` are sorted ``End``s (GUID, port). ``lanes`` is the
  active width (4 for "4x"; None for "???"), ``speed`` the active speed name ("NDR", "HDR", "EDR",
  "FDR10", ...; None when unknown).
- ``Fabric.unconnected``: ports the ``-p`` format lists without a peer (down or polling): the width
  and speed printed for them are what the port reports, not a trained link, and are kept only as text.
- ``Fabric.labels``: the front-panel labels some outputs print after a port number ("1/2/1" on a
  Quantum-2 cage/port/split), by End.
- ``Fabric.warnings``: facts the output contradicts itself on (one port in two links) -- kept, not fatal.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# IBTA speeds, slowest first: a link "degrades" when it trains at a speed earlier in this list.
SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")
SPEED_RANK = {name: rank for rank, name in enumerate(SPEEDS)}
KINDS = ("switch", "ca", "router")


@dataclass(frozen=True, order=True)
class End:
    """One port of one device."""

    guid: str
    port: int

    def __str__(self) -> str:
        return f"{self.guid}/{self.port}"


@dataclass(frozen=True)
class Device:
    guid: str
    kind: str
    description: str = ""
    ports: int | None = None
    lid: int | None = None
    aggregation: bool = False


@dataclass(frozen=True)
class Link:
    a: End
    b: End
    lanes: int | None = None
    speed: str | None = None
    line: int | None = None  # where the output first printed it (1-based), for messages

    def other(self, end: End) -> End:
        return self.b if end == self.a else self.a

    @property
    def width(self) -> str:
        return f"{self.lanes}x" if self.lanes else "?x"

    @property
    def rate(self) -> str:
        """"4x NDR", as ibnetdiscover spells it (with a blank)."""
        return f"{self.width} {self.speed or '???'}"


@dataclass(frozen=True)
class Unconnected:
    end: End
    width: str
    speed: str
    line: int | None = None


@dataclass
class Fabric:
    """The parsed fabric. ``format`` is "plain", "ports" (``ibnetdiscover -p``) or "iblinkinfo"."""

    format: str
    devices: dict[str, Device] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    unconnected: list[Unconnected] = field(default_factory=list)
    labels: dict[End, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_end: dict[End, list[Link]] | None = None
        self._by_guid: dict[str, list[tuple[End, Link]]] | None = None
        self._indexed = -1  # len(self.links) when the indexes were built: links appended since rebuild them

    # ------------------------------------------------------------------ queries
    def _index(self) -> None:
        """One pass over the links: by End, and by device (local end, link) sorted by port. Every
        query after it is a dictionary lookup, so a comparison is linear in the links, not
        O(devices x links) (issue 30)."""
        if self._by_end is not None and self._indexed == len(self.links):
            return
        by_end: dict[End, list[Link]] = {}
        as_a: dict[str, list[tuple[End, Link]]] = {}
        as_b: dict[str, list[tuple[End, Link]]] = {}
        for link in self.links:
            by_end.setdefault(link.a, []).append(link)
            by_end.setdefault(link.b, []).append(link)
            as_a.setdefault(link.a.guid, []).append((link.a, link))
            if link.b.guid != link.a.guid:
                as_b.setdefault(link.b.guid, []).append((link.b, link))
        by_guid = {}
        for guid in as_a.keys() | as_b.keys():
            # a's ends first, then b's, each in link order; the sort by port is stable
            by_guid[guid] = sorted(as_a.get(guid, []) + as_b.get(guid, []), key=lambda pair: pair[0].port)
        self._by_end, self._by_guid, self._indexed = by_end, by_guid, len(self.links)

    def links_at(self, end: End) -> list[Link]:
        """The links at one port (normally 0 or 1; 2 when the output contradicts itself)."""
        self._index()
        return self._by_end.get(end, [])

    def links_of(self, guid: str) -> list[tuple[End, Link]]:
        """(local end, link) for every linked port of a device, by port number."""
        self._index()
        return list(self._by_guid.get(guid, ()))

    def neighbours(self) -> dict[str, set[str]]:
        """GUID -> the GUIDs of the devices it links to."""
        out: dict[str, set[str]] = {guid: set() for guid in self.devices}
        for link in self.links:
            out.setdefault(link.a.guid, set()).add(link.b.guid)
            out.setdefault(link.b.guid, set()).add(link.a.guid)
        return out

    def switches(self) -> list[Device]:
        return [d for d in self.devices.values() if d.kind == "switch"]

    def hosts(self) -> list[Device]:
        """CAs that are hosts' adapters (SHARP aggregation nodes left out)."""
        return [d for d in self.devices.values() if d.kind == "ca" and not d.aggregation]

    def to_dict(self) -> dict:
        """The JSON shape of ``healthcheck parse ibnetdiscover --format json``."""
        return {
            "format": self.format,
            "devices": [{"guid": d.guid, "kind": d.kind, "description": d.description, "ports": d.ports,
                         "lid": d.lid, "aggregation": d.aggregation}
                        for d in sorted(self.devices.values(), key=lambda d: (KINDS.index(d.kind), d.guid))],
            "links": [{"a": {"guid": k.a.guid, "port": k.a.port, "label": self.labels.get(k.a)},
                       "b": {"guid": k.b.guid, "port": k.b.port, "label": self.labels.get(k.b)},
                       "width": k.width if k.lanes else None, "speed": k.speed}
                      for k in self.links],
            "unconnected": [{"guid": u.end.guid, "port": u.end.port, "width": u.width, "speed": u.speed}
                            for u in self.unconnected],
            "warnings": list(self.warnings),
        }
