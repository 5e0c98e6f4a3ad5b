"""The declared fabric design (``topology.toml``): load and validate it, and generate it from a
known-good fabric. Pure: text in, :class:`Design` or text out; reading files is the CLI's job.

The file (every key is checked; an unknown one is an error, so a typo never silently declares nothing)::

    [fabric]
    hca_regex = '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$'  # node description -> node and HCA ("gpu017 mlx5_3")
    rail_optimized = true                          # HCA k of every node goes to rail switch(es) k

    [tiers.leaf]                                   # the links whose upper end is a switch of this tier
    level = 1                                      # leaf 1, spine 2, core 3: uplinks go to higher levels
    width = "4x"                                   # expected active width (a link trained 2x is degraded)
    speed = "NDR"                                  # expected speed (SDR < DDR < QDR < FDR10 < FDR < EDR < HDR < NDR < XDR)

    [switches."leaf-1"]                            # a name of your choice
    guid = "0xb0cf0e0300d33fc0"                    # matched by GUID when given, else by description
    description = "ib-leaf-1"
    tier = "leaf"
    rail = "mlx5_0"                                # optional: the HCA name this rail switch carries
    uplinks = 4                                    # optional: at least this many links to higher tiers

    [cables]
    hosts = [                                      # one HCA port -> one switch port, per line
      { node = "gpu01", hca = "mlx5_0", hca_port = 1, switch = "leaf-1", port = 1 },
      { guid = "0x0002c90300002779", hca_port = 1, switch = "leaf-1", port = 2 },  # an unnamed CA
    ]
    uplinks = [
      { switch = "leaf-1", port = 63, peer = "spine-1", peer_port = 1 },
    ]

Errors: :class:`DesignError`, whose message starts with ``FILE:KEY`` (``topology.toml:switches.leaf-1.tier``)
or ``FILE:line N`` for TOML syntax. Bounds: MAX_DESIGN_CHARS, MAX_ENTRIES cables.

``hca_regex`` is matched against node descriptions, which any root on the fabric can set: it is vetted
at load (:mod:`healthcheck.fabric.hcaregex`: no nested quantifier such as ``(a+)+``, no repeated
alternation such as ``(a|a)*``, a few choice points at most), and only descriptions of at most
MAX_DESCRIPTION characters are matched (InfiniBand's NodeDescription is 64 bytes); a longer one names
no node and HCA (the CA is then known by its GUID alone).
"""
from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field

from ..core.fabricgraph import SPEED_RANK, Device, Fabric
from .hcaregex import hca_regex_problem, match_description

DEFAULT_HCA_REGEX = r"^(?P<node>\S+)\s+(?P<hca>\S+)$"
MAX_DESIGN_CHARS = 64 * 1024 * 1024
MAX_ENTRIES = 1_000_000
MAX_NAME = 256
_WIDTH = re.compile(r"^(\d{1,2})x$")
TIER_NAMES = {1: "leaf", 2: "spine", 3: "core"}


class DesignError(ValueError):
    """The topology file is not a valid design; the message names FILE:KEY and what is wrong."""


@dataclass(frozen=True)
class Tier:
    name: str
    level: int
    lanes: int | None = None
    speed: str | None = None

    @property
    def rate(self) -> str:
        return f"{self.lanes or '?'}x {self.speed or '?'}"


@dataclass(frozen=True)
class SwitchDecl:
    name: str
    tier: str
    guid: str | None = None
    description: str | None = None
    rail: str | None = None
    uplinks: int | None = None


@dataclass(frozen=True)
class HostCable:
    """HCA port -> switch port. The HCA is named (node, hca) or, for a CA without a usable node
    description, by its GUID."""

    switch: str
    port: int
    hca_port: int = 1
    node: str | None = None
    hca: str | None = None
    guid: str | None = None

    @property
    def hca_name(self) -> str:
        return f"{self.node} {self.hca}" if self.node else f"CA {self.guid}"


@dataclass(frozen=True)
class Uplink:
    switch: str
    port: int
    peer: str
    peer_port: int


@dataclass
class Design:
    hca_regex: str = DEFAULT_HCA_REGEX
    rail_optimized: bool = False
    tiers: dict[str, Tier] = field(default_factory=dict)
    switches: dict[str, SwitchDecl] = field(default_factory=dict)
    hosts: list[HostCable] = field(default_factory=list)
    uplinks: list[Uplink] = field(default_factory=list)
    source: str = "topology.toml"

    @property
    def pattern(self) -> re.Pattern:
        """``hca_regex`` compiled, vetted first (DesignError naming FILE:fabric.hca_regex)."""
        return compile_hca_regex(self.hca_regex, f"{self.source}:fabric.hca_regex")


def compile_hca_regex(text, where: str) -> re.Pattern:
    """``text`` as the pattern node descriptions are matched with: vetted (at most MAX_PATTERN characters,
    no nested quantifier, no repeated alternation, at most MAX_CHOICES choice points: see
    :mod:`healthcheck.fabric.hcaregex`), compiled, with the named groups node and hca; DesignError
    starting with ``where``."""
    problem = hca_regex_problem(text)
    if problem:
        raise DesignError(f"{where}: {problem}"[:400])
    try:
        compiled = re.compile(text)
    except re.error as exc:
        raise DesignError(f"{where}: not a regular expression: {exc}") from None
    if not {"node", "hca"} <= set(compiled.groupindex):
        raise DesignError(f"{where}: must have the named groups (?P<node>...) and (?P<hca>...)")
    return compiled


def hca_identity(device: Device, pattern: re.Pattern) -> tuple[str, str] | None:
    """(node, HCA) from a CA's node description ("gpu017 mlx5_3" -> ("gpu017", "mlx5_3")), or None.
    A description over MAX_DESCRIPTION characters is not matched (None): the time a pattern takes grows
    with the text, and no real one is that long."""
    found = match_description(pattern, device.description)
    if not found:
        return None
    node, hca = found.group("node"), found.group("hca")
    return (node, hca) if node and hca else None


# ---------------------------------------------------------------------------------------- loading
def load_design(text: str | bytes, source: str = "topology.toml") -> Design:
    """Parse and validate a topology file's text; :class:`DesignError` names FILE:KEY on any fault."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_DESIGN_CHARS:
            raise DesignError(f"{source}: {len(text)} bytes, over the limit of {MAX_DESIGN_CHARS}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DesignError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if len(text) > MAX_DESIGN_CHARS:
        raise DesignError(f"{source}: {len(text)} characters, over the limit of {MAX_DESIGN_CHARS}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DesignError(f"{source}: not valid TOML: {exc}") from None
    return _Validator(source).design(data)


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> DesignError:
        return DesignError(f"{self.source}:{key}: {message}")

    def table(self, value, key: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table, got {type(value).__name__}")
        return value

    def only(self, table: dict, key: str, allowed: tuple[str, ...]) -> None:
        for name in table:
            if name not in allowed:
                prefix = f"{key}." if key else ""
                raise self.fail(f"{prefix}{name}", f"unknown key (allowed here: {', '.join(allowed)})")

    def string(self, value, key: str, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
            raise self.fail(key, f"must be a non-empty string of at most {MAX_NAME} characters, got {value!r}"[:300])
        return value

    def integer(self, value, key: str, low: int, high: int, optional: bool = False) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(key, f"must be an integer from {low} to {high}, got {value!r}"[:300])
        return value

    def design(self, data: dict) -> Design:
        self.only(data, "", ("fabric", "tiers", "switches", "cables"))
        design = Design(source=self.source)
        head = self.table(data.get("fabric", {}), "fabric")
        self.only(head, "fabric", ("hca_regex", "rail_optimized"))
        regex = self.string(head.get("hca_regex", DEFAULT_HCA_REGEX), "fabric.hca_regex")
        compile_hca_regex(regex, f"{self.source}:fabric.hca_regex")
        design.hca_regex = regex
        rail = head.get("rail_optimized", False)
        if not isinstance(rail, bool):
            raise self.fail("fabric.rail_optimized", f"must be true or false, got {rail!r}")
        design.rail_optimized = rail
        design.tiers = self.tiers(self.table(data.get("tiers", {}), "tiers"))
        design.switches = self.switches(self.table(data.get("switches", {}), "switches"), design.tiers)
        cables = self.table(data.get("cables", {}), "cables")
        self.only(cables, "cables", ("hosts", "uplinks"))
        design.hosts = self.hosts(cables.get("hosts", []), design.switches)
        design.uplinks = self.uplinks(cables.get("uplinks", []), design.switches)
        self.no_double_use(design)
        return design

    def tiers(self, table: dict) -> dict[str, Tier]:
        if not table:
            raise self.fail("tiers", "at least one tier must be declared ([tiers.leaf] level = 1 ...)")
        tiers = {}
        for name, value in table.items():
            key = f"tiers.{name}"
            value = self.table(value, key)
            self.only(value, key, ("level", "width", "speed"))
            level = self.integer(value.get("level"), f"{key}.level", 1, 16)
            lanes = None
            if "width" in value:
                width = value["width"]
                found = _WIDTH.match(width) if isinstance(width, str) else None
                if not found or int(found.group(1)) not in (1, 2, 4, 8, 12):
                    raise self.fail(f"{key}.width", f"must be one of \"1x\", \"2x\", \"4x\", \"8x\", \"12x\", got {width!r}")
                lanes = int(found.group(1))
            speed = None
            if "speed" in value:
                speed = value["speed"].upper() if isinstance(value["speed"], str) else value["speed"]
                if speed not in SPEED_RANK:
                    raise self.fail(f"{key}.speed", f"must be one of {', '.join(SPEED_RANK)}, got {value['speed']!r}")
            tiers[name] = Tier(name, level, lanes, speed)
        return tiers

    def switches(self, table: dict, tiers: dict[str, Tier]) -> dict[str, SwitchDecl]:
        switches, guids = {}, {}
        for name, value in table.items():
            key = f"switches.{name}"
            if len(name) > MAX_NAME:
                raise self.fail(key[:80], "name too long")
            value = self.table(value, key)
            self.only(value, key, ("guid", "description", "tier", "rail", "uplinks"))
            tier = self.string(value.get("tier"), f"{key}.tier")
            if tier not in tiers:
                raise self.fail(f"{key}.tier", f"{tier!r} is not a declared tier ({', '.join(tiers)})")
            guid = self.guid(value.get("guid"), f"{key}.guid")
            if guid is not None:
                if guid in guids:
                    raise self.fail(f"{key}.guid", f"0x{guid} is already the GUID of switch {guids[guid]!r}")
                guids[guid] = name
            switches[name] = SwitchDecl(
                name, tier, guid, self.string(value.get("description"), f"{key}.description", optional=True),
                self.string(value.get("rail"), f"{key}.rail", optional=True),
                self.integer(value.get("uplinks"), f"{key}.uplinks", 0, 4096, optional=True))
        return switches

    def guid(self, value, key: str) -> str | None:
        if value is None:
            return None
        text = value.lower() if isinstance(value, str) else ""
        text = text[2:] if text.startswith("0x") else text
        if not re.fullmatch(r"[0-9a-f]{1,16}", text):
            raise self.fail(key, f"must be a GUID such as \"0x0002c90300002779\", got {value!r}"[:300])
        return text.zfill(16)

    def entries(self, value, key: str) -> list:
        if not isinstance(value, list):
            raise self.fail(key, f"must be an array of inline tables, got {type(value).__name__}")
        if len(value) > MAX_ENTRIES:
            raise self.fail(key, f"{len(value)} entries, over the limit of {MAX_ENTRIES}")
        return value

    def switch_ref(self, value, key: str, switches: dict) -> str:
        name = self.string(value, key)
        if name not in switches:
            raise self.fail(key, f"{name!r} is not a declared switch ([switches.{name!r}] is missing)"[:300])
        return name

    def hosts(self, value, switches: dict) -> list[HostCable]:
        cables = []
        for i, entry in enumerate(self.entries(value, "cables.hosts")):
            key = f"cables.hosts[{i}]"
            entry = self.table(entry, key)
            self.only(entry, key, ("node", "hca", "guid", "hca_port", "switch", "port"))
            named = "node" in entry or "hca" in entry
            if named == ("guid" in entry):
                raise self.fail(key, "name the HCA by node and hca, or by guid (one of the two)")
            cables.append(HostCable(
                self.switch_ref(entry.get("switch"), f"{key}.switch", switches),
                self.integer(entry.get("port"), f"{key}.port", 0, 4096),
                self.integer(entry.get("hca_port", 1), f"{key}.hca_port", 1, 255),
                self.string(entry.get("node"), f"{key}.node") if named else None,
                self.string(entry.get("hca"), f"{key}.hca") if named else None,
                None if named else self.guid(entry.get("guid"), f"{key}.guid")))
        return cables

    def uplinks(self, value, switches: dict) -> list[Uplink]:
        links = []
        for i, entry in enumerate(self.entries(value, "cables.uplinks")):
            key = f"cables.uplinks[{i}]"
            entry = self.table(entry, key)
            self.only(entry, key, ("switch", "port", "peer", "peer_port"))
            links.append(Uplink(self.switch_ref(entry.get("switch"), f"{key}.switch", switches),
                                self.integer(entry.get("port"), f"{key}.port", 0, 4096),
                                self.switch_ref(entry.get("peer"), f"{key}.peer", switches),
                                self.integer(entry.get("peer_port"), f"{key}.peer_port", 0, 4096)))
        return links

    def no_double_use(self, design: Design) -> None:
        """One cable per switch port and per HCA port."""
        ports: dict[tuple[str, int], str] = {}
        hcas: dict[tuple, str] = {}

        def take(switch: str, port: int, key: str) -> None:
            if (switch, port) in ports:
                raise self.fail(key, f"switch {switch!r} port {port} is already used by {ports[(switch, port)]}")
            ports[(switch, port)] = key

        for i, cable in enumerate(design.hosts):
            key = f"cables.hosts[{i}]"
            take(cable.switch, cable.port, key)
            ident = (cable.node, cable.hca, cable.guid, cable.hca_port)
            if ident in hcas:
                raise self.fail(key, f"{cable.hca_name} port {cable.hca_port} is already cabled by {hcas[ident]}")
            hcas[ident] = key
        for i, link in enumerate(design.uplinks):
            key = f"cables.uplinks[{i}]"
            if link.switch == link.peer and link.port == link.peer_port:
                raise self.fail(key, "a port cannot be linked to itself")
            take(link.switch, link.port, key)
            take(link.peer, link.peer_port, key)


# ------------------------------------------------------------------------------------- generating
def infer_levels(fabric: Fabric) -> dict[str, int]:
    """Switch GUID -> level: 1 for a switch with host CAs (leaf), 2 for one linked to a leaf (spine),
    3 for the rest (core). SHARP aggregation nodes do not count as hosts."""
    switches = {d.guid for d in fabric.devices.values() if d.kind in ("switch", "router")}
    hosts = {d.guid for d in fabric.hosts()}
    near = fabric.neighbours()
    levels = {guid: 1 for guid in switches if near.get(guid, set()) & hosts}
    spines = {g for g in switches - set(levels) if any(levels.get(n) == 1 for n in near.get(g, ()))}
    for guid in switches - set(levels):
        # A switch above the spines is core; one with no link to either (isolated) stays a spine.
        above = guid not in spines and near.get(guid, set()) & spines
        levels[guid] = 3 if above else 2
    return levels


def _switch_names(fabric: Fabric, guids: list[str]) -> dict[str, str]:
    """Description when it is unique among the switches, else ibnetdiscover's own "S-<guid>"."""
    counts = Counter(fabric.devices[g].description for g in guids)
    return {g: fabric.devices[g].description if fabric.devices[g].description and counts[fabric.devices[g].description] == 1
            else f"S-{g}" for g in guids}


def _q(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def _literal(text: str) -> str:
    """A TOML literal string (no escapes: regular expressions read as written) when it can be one."""
    return f"'{text}'" if "'" not in text and text.isprintable() else _q(text)


def generate_design(fabric: Fabric, hca_regex: str = DEFAULT_HCA_REGEX) -> str:
    """A topology.toml declaring ``fabric`` as it is: switches with inferred tiers and rails, every HCA
    port's cable, every switch-to-switch link, the most common width and speed per tier. Raises
    DesignError for a bad ``hca_regex``."""
    pattern = compile_hca_regex(hca_regex, "--hca-regex")
    levels = infer_levels(fabric)
    guids = sorted(levels, key=lambda g: (levels[g], fabric.devices[g].description, g))
    names = _switch_names(fabric, guids)
    hosts, uplinks, skipped = [], [], []
    tier_rates: dict[int, Counter] = {}
    uplink_count: Counter = Counter()
    rails: dict[str, set[str]] = {}
    for link in fabric.links:
        one, two = fabric.devices.get(link.a.guid), fabric.devices.get(link.b.guid)
        if one is None or two is None or one.aggregation or two.aggregation:
            continue
        if one.guid in levels and two.guid in levels:
            low, high = (link.a, link.b) if levels[one.guid] <= levels[two.guid] else (link.b, link.a)
            uplinks.append((names[low.guid], low.port, names[high.guid], high.port))
            if levels[low.guid] < levels[high.guid]:
                uplink_count[low.guid] += 1
            tier_rates.setdefault(levels[high.guid], Counter())[(link.lanes, link.speed)] += 1
            continue
        ca, sw = (link.a, link.b) if two.guid in levels else (link.b, link.a)
        if sw.guid not in levels or fabric.devices[ca.guid].kind != "ca":
            skipped.append(f"{one.description or one.guid} - {two.description or two.guid}")
            continue
        ident = hca_identity(fabric.devices[ca.guid], pattern)
        hosts.append((ident, ca, names[sw.guid], sw.port))
        tier_rates.setdefault(1, Counter())[(link.lanes, link.speed)] += 1
        if ident:
            rails.setdefault(sw.guid, set()).add(ident[1])
    rail_optimized = (bool(rails) and all(len(v) == 1 for v in rails.values())
                      and len({next(iter(v)) for v in rails.values()}) >= 2)
    out = ["# The declared InfiniBand fabric, written by `healthcheck fabric generate` from a known-good",
           f"# fabric ({fabric.format} format: {len(guids)} switches, {len(fabric.hosts())} host CAs, "
           f"{len(fabric.links)} links).",
           "# Edit by hand: rename switches (keep the guid), fix tiers, widths, speeds and uplink counts.",
           "# `healthcheck fabric check` reports every difference from this file.",
           "", "[fabric]", f"hca_regex = {_literal(hca_regex)}", f"rail_optimized = {str(rail_optimized).lower()}", ""]
    for level in sorted(set(levels.values()) | set(tier_rates)):
        rates = tier_rates.get(level, Counter())
        out.append(f"[tiers.{TIER_NAMES.get(level, f'level{level}')}]")
        out.append(f"level = {level}")
        if rates:
            (lanes, speed), count = rates.most_common(1)[0]
            if lanes:
                out.append(f'width = "{lanes}x"')
            if speed in SPEED_RANK:
                out.append(f'speed = "{speed}"')
            if count < sum(rates.values()):
                out.append(f"# {sum(rates.values()) - count} of {sum(rates.values())} links of this tier "
                           "trained otherwise when this file was generated: "
                           + ", ".join(f"{n} at {w or '?'}x {s or '???'}" for (w, s), n in rates.items() if (w, s) != (lanes, speed)))
        out.append("")
    for guid in guids:
        device = fabric.devices[guid]
        out.append(f"[switches.{_q(names[guid])}]")
        out.append(f'guid = "0x{guid}"')
        if device.description:
            out.append(f"description = {_q(device.description)}")
        out.append(f'tier = "{TIER_NAMES.get(levels[guid], "level%d" % levels[guid])}"')
        if rail_optimized and guid in rails:
            out.append(f"rail = {_q(next(iter(rails[guid])))}")
        if uplink_count[guid]:
            out.append(f"uplinks = {uplink_count[guid]}")
        out.append("")
    out += ["[cables]", "hosts = ["]
    for ident, ca, switch, port in sorted(hosts, key=lambda h: (h[0] or ("~", h[1].guid), h[1].port)):
        who = f"node = {_q(ident[0])}, hca = {_q(ident[1])}" if ident else f'guid = "0x{ca.guid}"'
        out.append(f"  {{ {who}, hca_port = {ca.port}, switch = {_q(switch)}, port = {port} }},")
    out += ["]", "uplinks = ["]
    for switch, port, peer, peer_port in sorted(uplinks):
        out.append(f"  {{ switch = {_q(switch)}, port = {port}, peer = {_q(peer)}, peer_port = {peer_port} }},")
    out.append("]")
    if skipped:
        out.append("# links with no switch end, not declared: " + "; ".join(skipped[:20])
                   + (f" (and {len(skipped) - 20} more)" if len(skipped) > 20 else ""))
    return "\n".join(out) + "\n"
