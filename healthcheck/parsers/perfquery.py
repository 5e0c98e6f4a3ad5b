"""``perfquery`` (plain, ``-x`` extended, ``-E``/``-D`` error details) and ``ibqueryerrors`` text output
-> port counters. Pure: text in, plain objects out; :class:`~healthcheck.parsers.ParseError` only.

perfquery prints one block per port queried::

    # Port extended counters: Lid 1719 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
    PortSelect:......................1
    SymbolErrorCounter:..............0
    ...

(``# Port counters:`` for the plain query, ``# PortRcvErrorDetails counters:`` for ``-E``, and so on),
each line ``Name:`` dots, then a decimal or ``0x`` value. Lines outside a block (a prompt, ``ibwarn:``
and ``iberror:`` lines of a failed query) are kept as ``errors`` when they say a query failed, and
otherwise ignored. ``PortSelect``, ``CounterSelect`` and ``CounterSelect2`` are selectors, not counters.

ibqueryerrors prints only the ports whose counters exceed its thresholds (default 0)::

    Errors for 0x7cfe9003009ce5b0 "leaf01"
       GUID 0x7cfe9003009ce5b0 port 7: [SymbolErrorCounter == 12] [PortXmitWait == 41864608 (41.865M)]
           Link info:   1719    7[  ] ==( 4X 25.78125 Gbps Active/  LinkUp)==>  0x506b4b03005c2740   134    1[  ] "gpu01 mlx5_0" ( )
    Errors for "gpu02 mlx5_1"
       GUID 0x506b4b03005c2741 port 1: [LinkDownedCounter == 1]

    ## Summary: 40 nodes checked, 2 bad nodes found
    ##          80 ports checked, 2 ports have errors beyond threshold

(the ``Link info`` line only with ``--details``/``-l``; it names the port on the other end of the link).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import ParseError, as_text, bounded_int

MAX_INPUT_CHARS = 32 * 1024 * 1024  # ibqueryerrors of a 10,000-port fabric with link info is ~3 MB
MAX_LINES = 1_000_000

# Selectors printed among the counters (not counters themselves).
SELECTORS = frozenset({"PortSelect", "CounterSelect", "CounterSelect2"})

# Width in bits of each counter of the plain PortCounters attribute (IBA 16.1.3.5). These error counters
# *stop* at their maximum (they do not wrap): a value at the maximum means "at least this many".
# PortExtendedCounters (``-x``) are 64 bits wide.
BASIC_WIDTH_BITS = {
    "SymbolErrorCounter": 16, "LinkErrorRecoveryCounter": 8, "LinkDownedCounter": 8, "PortRcvErrors": 16,
    "PortRcvRemotePhysicalErrors": 16, "PortRcvSwitchRelayErrors": 16, "PortXmitDiscards": 16,
    "PortXmitConstraintErrors": 8, "PortRcvConstraintErrors": 8, "LocalLinkIntegrityErrors": 4,
    "ExcessiveBufferOverrunErrors": 4, "VL15Dropped": 16, "PortXmitWait": 32, "PortXmitData": 32,
    "PortRcvData": 32, "PortXmitPkts": 32, "PortRcvPkts": 32, "QP1Dropped": 16,
}
EXTENDED_WIDTH_BITS = 64

_HEADER = re.compile(r"^#\s*(?P<title>[A-Za-z][A-Za-z ]*?)\s*counters:\s*(?P<rest>.*)$")
_LID_PORT = re.compile(r"Lid\s+(?P<lid>\d+)\s+port\s+(?P<port>\d+|ALL)", re.IGNORECASE)
_CAPMASK = re.compile(r"CapMask:\s*(0x[0-9A-Fa-f]+)")
_FIELD = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_]*):\.*\s*(?P<value>\S+)\s*$")
_FAILED = re.compile(r"\b(ibwarn|iberror|failed|error:|can't|cannot|couldn't|unable)\b", re.IGNORECASE)

_ERRORS_FOR = re.compile(r'^Errors for\s+(?:0x(?P<guid>[0-9A-Fa-f]+)\s+)?"(?P<desc>[^"\n]*)"\s*$')
_PORT_LINE = re.compile(r"^\s+GUID\s+0x(?P<guid>[0-9A-Fa-f]+)\s+port\s+(?P<port>\d+|ALL):(?P<rest>.*)$")
_COUNTER_ITEM = re.compile(r"\[(?P<name>[A-Za-z][A-Za-z0-9_]*)\s*==\s*(?P<value>\d+)[^\]]*\]")
_LINK_INFO = re.compile(
    r"^\s+Link info:\s+(?P<lid>\d+)\s+(?P<port>\d+)\[[^\]]*\]\s+==\((?P<link>[^)]*)\)==>\s+"
    r"(?:0x(?P<rguid>[0-9A-Fa-f]+)\s+(?P<rlid>\d+)\s+(?P<rport>\d+)\[[^\]]*\]\s+\"(?P<rdesc>[^\"]*)\")?")
_SUMMARY = re.compile(r"^##\s*Summary:\s*(?P<nodes>\d+)\s+nodes checked,\s*(?P<bad>\d+)\s+bad nodes")
_SUMMARY_PORTS = re.compile(r"^##\s*(?P<ports>\d+)\s+ports checked,\s*(?P<bad>\d+)\s+ports have errors")


@dataclass
class PortCounters:
    """One block of perfquery output: the attribute (``kind``), the port it names, its counters."""

    kind: str                 # "basic" | "extended" | "rcv_error_details" | "xmit_discard_details" | ...
    lid: int
    port: int | None          # None for "port ALL" (perfquery -a: summed over the ports)
    capmask: str | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def width_bits(self) -> dict[str, int]:
        if self.kind == "extended":
            return {name: EXTENDED_WIDTH_BITS for name in self.counters}
        return {name: BASIC_WIDTH_BITS[name] for name in self.counters if name in BASIC_WIDTH_BITS}

    def to_dict(self) -> dict:
        return {"kind": self.kind, "lid": self.lid, "port": self.port, "capmask": self.capmask,
                "counters": dict(self.counters)}


@dataclass
class PerfqueryResult:
    blocks: list[PortCounters] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def merged(self) -> dict[tuple[int, int | None], dict[str, int]]:
        """Per (lid, port): every counter read, an extended (64-bit) value preferred over the plain one
        of the same name (the plain 32/16/8-bit counters stop at their maximum)."""
        out: dict[tuple[int, int | None], dict[str, int]] = {}
        for block in sorted(self.blocks, key=lambda b: b.kind == "extended"):
            out.setdefault((block.lid, block.port), {}).update(block.counters)
        return out

    def saturated(self) -> dict[tuple[int, int | None], list[str]]:
        """Per (lid, port): the plain counters at their maximum (in any of its basic blocks) and not
        read from an extended block, each named once (in the order first seen)."""
        extended: dict[tuple[int, int | None], set[str]] = {}
        for b in self.blocks:
            if b.kind == "extended":
                extended.setdefault((b.lid, b.port), set()).update(b.counters)
        found: dict[tuple[int, int | None], dict[str, None]] = {}
        for b in self.blocks:
            if b.kind != "basic":
                continue
            for name, value in b.counters.items():
                bits = BASIC_WIDTH_BITS.get(name)
                if bits and value >= (1 << bits) - 1 and name not in extended.get((b.lid, b.port), ()):
                    found.setdefault((b.lid, b.port), {})[name] = None
        return {key: list(names) for key, names in found.items()}

    def to_dict(self) -> dict:
        return {"blocks": [b.to_dict() for b in self.blocks], "errors": list(self.errors),
                "saturated": [{"lid": k[0], "port": k[1], "counters": v} for k, v in self.saturated().items()]}


_KIND_NAMES = {"rcverrordetails": "rcv_error_details", "xmitdiscarddetails": "xmit_discard_details",
               "opsrcvcounters": "op_rcv_counters", "flowctlcounters": "flow_ctl_counters",
               "vlopdata": "vl_op_data", "vlxmitflowctlupdateerrors": "vl_xmit_flow_ctl_update_errors",
               "vlxmitwaitcounters": "vl_xmit_wait", "swportvlcongestion": "sw_port_vl_congestion",
               "rcvsl": "rcv_sl", "xmitsl": "xmit_sl", "xmitdiscarddetail": "xmit_discard_details"}


def _block_kind(title: str) -> str:
    t = "".join(title.lower().split())
    if t == "port":
        return "basic"
    if t == "portextended":
        return "extended"
    key = t.removeprefix("port")
    return _KIND_NAMES.get(key, key or "unknown")


def _value(raw: str, name: str, lineno: int) -> int:
    """A counter's decimal or ``0x`` value. A decimal of more than 20 characters is refused before
    converting it (int() of a 5,000-digit run raises a plain ValueError, and is quadratic below that
    limit); hexadecimal converts in linear time, whatever its length."""
    hexa = raw.lower().startswith("0x")
    if not hexa and len(raw) > 20:
        raise ParseError(f"perfquery line {lineno}: {name}: a {len(raw)}-character value "
                         f"{raw[:24]!r}... is outside 0..2^64-1 or not a number")
    try:
        value = int(raw, 16) if hexa else int(raw)
    except ValueError:
        raise ParseError(f"perfquery line {lineno}: {name}: not a counter value: {raw[:40]!r}") from None
    if value < 0 or value >= 1 << 64:
        raise ParseError(f"perfquery line {lineno}: {name}: {raw[:40]!r} is outside 0..2^64-1")
    return value


def _int(digits: str, what: str, lineno: int, tool: str = "perfquery") -> int:
    return bounded_int(digits, f"{tool} line {lineno}: {what}")


def parse_perfquery(text: str) -> PerfqueryResult:
    """Every counter block of a perfquery output. ParseError when there is no block and no line saying
    why the query failed (not a perfquery output), or a counter value that is not a number."""
    text = as_text(text, "perfquery output", MAX_INPUT_CHARS, MAX_LINES)
    result = PerfqueryResult()
    block: PortCounters | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        header = _HEADER.match(stripped)
        if header:
            where = _LID_PORT.search(header.group("rest"))
            if not where:
                raise ParseError(f"perfquery line {lineno}: counter header without 'Lid N port M': "
                                 f"{stripped[:80]!r}")
            cap = _CAPMASK.search(header.group("rest"))
            port = where.group("port")
            block = PortCounters(_block_kind(header.group("title")), _int(where.group("lid"), "Lid", lineno),
                                 None if port.upper() == "ALL" else _int(port, "port", lineno),
                                 cap.group(1) if cap else None)
            result.blocks.append(block)
            continue
        match = _FIELD.match(line)
        if match and block is not None and not stripped.startswith("#"):
            name = match.group("name")
            value = _value(match.group("value"), name, lineno)
            if name not in SELECTORS:
                block.counters[name] = value
            elif name == "PortSelect" and block.port is None and value != 255:
                block.port = value
            continue
        if _FAILED.search(stripped):
            result.errors.append(stripped[:300])
            block = None
    if not result.blocks and not result.errors:
        first = next((l.strip() for l in text.splitlines() if l.strip()), "")
        raise ParseError(f"perfquery: no '# Port ... counters: Lid N port M' block (not a perfquery output): "
                         f"{first[:80]!r}")
    return result


# ------------------------------------------------------------------------------------------ ibqueryerrors

@dataclass
class LinkInfo:
    """The ``Link info`` line under a port: its link state and the port on the other end."""

    width: str | None
    speed: str | None
    state: str | None
    remote_guid: str | None = None
    remote_lid: int | None = None
    remote_port: int | None = None
    remote_desc: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class ErrorPort:
    node_desc: str
    node_guid: str | None       # printed for switches only
    port_guid: str
    port: int | None            # None for "port ALL"
    counters: dict[str, int] = field(default_factory=dict)
    link: LinkInfo | None = None

    def to_dict(self) -> dict:
        return {"node_desc": self.node_desc, "node_guid": self.node_guid, "port_guid": self.port_guid,
                "port": self.port, "counters": dict(self.counters),
                "link": self.link.to_dict() if self.link else None}


@dataclass
class IbqueryerrorsResult:
    ports: list[ErrorPort] = field(default_factory=list)
    nodes_checked: int | None = None
    bad_nodes: int | None = None
    ports_checked: int | None = None
    bad_ports: int | None = None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"ports": [p.to_dict() for p in self.ports], "nodes_checked": self.nodes_checked,
                "bad_nodes": self.bad_nodes, "ports_checked": self.ports_checked, "bad_ports": self.bad_ports,
                "errors": list(self.errors)}


def _link(text: str) -> tuple[str | None, str | None, str | None]:
    """``( 4X 25.78125 Gbps Active/  LinkUp)`` -> ("4X", "25.78125 Gbps", "Active/LinkUp"); a down port
    has no width or speed (``(   Down/ Polling)`` -> (None, None, "Down/Polling"))."""
    parts = text.split()
    width = parts[0] if parts and parts[0].upper().endswith("X") and parts[0][:-1].isdigit() else None
    gbps = next((i for i, p in enumerate(parts) if p.lower() == "gbps"), None)
    speed = " ".join(parts[gbps - 1:gbps + 1]) if gbps else None
    rest = parts[gbps + 1:] if gbps is not None else parts[1 if width else 0:]
    return width, speed, "".join(rest) or None


def parse_ibqueryerrors(text: str) -> IbqueryerrorsResult:
    """The ports ibqueryerrors reports, with their counters and (``--details``) the far end of their
    link. An output with no ``Errors for`` block but its summary is a clean fabric; neither: ParseError."""
    text = as_text(text, "ibqueryerrors output", MAX_INPUT_CHARS, MAX_LINES)
    result = IbqueryerrorsResult()
    node: tuple[str, str | None] | None = None
    port: ErrorPort | None = None
    seen_summary = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        head = _ERRORS_FOR.match(line.strip())
        if head:
            node, port = (head.group("desc"), head.group("guid") and head.group("guid").lower()), None
            continue
        m = _PORT_LINE.match(line)
        if m:
            if node is None:
                raise ParseError(f"ibqueryerrors line {lineno}: a port line before any 'Errors for' line")
            counters = {c.group("name"): _int(c.group("value"), c.group("name"), lineno, "ibqueryerrors")
                        for c in _COUNTER_ITEM.finditer(m.group("rest"))}
            if not counters and m.group("rest").strip():
                raise ParseError(f"ibqueryerrors line {lineno}: no '[Counter == N]' item: {line.strip()[:80]!r}")
            p = m.group("port")
            port = ErrorPort(node[0], node[1], m.group("guid").lower(),
                             None if p.upper() == "ALL" else _int(p, "port", lineno, "ibqueryerrors"), counters)
            result.ports.append(port)
            continue
        m = _LINK_INFO.match(line)
        if m:
            if port is None:
                raise ParseError(f"ibqueryerrors line {lineno}: a 'Link info' line without a port line above")
            width, speed, state = _link(m.group("link"))
            rlid, rport = m.group("rlid"), m.group("rport")
            port.link = LinkInfo(width, speed, state, m.group("rguid") and m.group("rguid").lower(),
                                 _int(rlid, "remote lid", lineno, "ibqueryerrors") if rlid else None,
                                 _int(rport, "remote port", lineno, "ibqueryerrors") if rport else None,
                                 m.group("rdesc"))
            continue
        m = _SUMMARY.match(line.strip())
        if m:
            seen_summary = True
            result.nodes_checked = _int(m.group("nodes"), "nodes checked", lineno, "ibqueryerrors")
            result.bad_nodes = _int(m.group("bad"), "bad nodes", lineno, "ibqueryerrors")
            continue
        m = _SUMMARY_PORTS.match(line.strip())
        if m:
            result.ports_checked = _int(m.group("ports"), "ports checked", lineno, "ibqueryerrors")
            result.bad_ports = _int(m.group("bad"), "bad ports", lineno, "ibqueryerrors")
            continue
        if line.lstrip().startswith("##"):
            continue
        if _FAILED.search(line):
            result.errors.append(line.strip()[:300])
    if not result.ports and not seen_summary and not result.errors:
        first = next((l.strip() for l in text.splitlines() if l.strip()), "")
        raise ParseError(f"ibqueryerrors: no 'Errors for' block and no '## Summary' line "
                         f"(not an ibqueryerrors output): {first[:80]!r}")
    return result


def parse_counters(text: str) -> PerfqueryResult | IbqueryerrorsResult:
    """perfquery or ibqueryerrors, told apart by their headers."""
    text = as_text(text, "port counters output", MAX_INPUT_CHARS, MAX_LINES)
    if re.search(r"^Errors for |^##\s*Summary:", text, re.MULTILINE) and not re.search(
            r"^#\s*Port[A-Za-z ]*counters:", text, re.MULTILINE):
        return parse_ibqueryerrors(text)
    return parse_perfquery(text)
