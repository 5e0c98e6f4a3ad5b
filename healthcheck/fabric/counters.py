"""Port error counters over a window: two samples of the same ports -> per-counter growth -> the ports
whose counters grew more than the thresholds allow, each named with its node, HCA, port and (when a
fabric graph or a mapping is given) the switch port on the other end. Pure: samples come in with the
time they were taken (the caller's clock), thresholds come from ``healthcheck/data/fabric_counters.toml``
(each with its reason) and a site's overrides through :func:`validate`.

Growth of one counter (:func:`counter_delta`):
- second value >= first: the difference;
- second value < first: the counter was reset (``perfquery -R``, a driver reload, a port reset) during
  the window: the growth is at least the second value, never negative (``reset``);
- a plain 8/16/32-bit PortCounters value at its maximum stops there (IBA: error counters do not wrap):
  the growth is at least what is shown (``saturated``), and a port whose counter was already at its
  maximum when the window started cannot be judged on it (a WARN saying so, with the fix: clear it).

A counter is over when its growth exceeds ``max(per_window, per_hour * window hours)``; its rule's
``severity`` says whether that FAILs or WARNs. Counters without a rule (traffic, PortXmitWait) are
reported, never judged.
"""
from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable, Iterable, Mapping

from ..parsers.perfquery import BASIC_WIDTH_BITS, EXTENDED_WIDTH_BITS, IbqueryerrorsResult, PerfqueryResult

CHECK = "fabric.counters"
SEVERITIES = ("fail", "warn")
_RULE_KEYS = {"per_window", "per_hour", "severity", "reason"}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
MAX_ALLOWANCE = 1e12


class CounterSettingsError(ValueError):
    """A thresholds file or section that cannot be used; the message names the counter and the key."""


@dataclass(frozen=True)
class CounterRule:
    name: str
    per_window: float
    per_hour: float
    severity: str
    reason: str

    def allowed(self, window_s: float) -> float:
        return max(self.per_window, self.per_hour * window_s / 3600.0)

    def to_dict(self) -> dict:
        return {"per_window": self.per_window, "per_hour": self.per_hour, "severity": self.severity,
                "reason": self.reason}


@dataclass(frozen=True)
class CounterSettings:
    rules: Mapping[str, CounterRule]

    def to_dict(self) -> dict:
        return {name: rule.to_dict() for name, rule in sorted(self.rules.items())}


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_ALLOWANCE:
        raise CounterSettingsError(f"{where}: expected a number in [0, {MAX_ALLOWANCE:g}], got {value!r}")
    return float(value)


def _rule(name: str, table: object, base: CounterRule | None, where: str) -> CounterRule:
    if not isinstance(table, dict):
        raise CounterSettingsError(f"{where}: expected a table of {', '.join(sorted(_RULE_KEYS))}, "
                                   f"got {type(table).__name__}")
    unknown = set(table) - _RULE_KEYS
    if unknown:
        raise CounterSettingsError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                                   f"(known: {', '.join(sorted(_RULE_KEYS))})")
    missing = [k for k in ("per_window", "per_hour", "severity") if k not in table and base is None]
    if missing:
        raise CounterSettingsError(f"{where}: a new counter needs {', '.join(missing)}")
    severity = table.get("severity", base.severity if base else None)
    if severity not in SEVERITIES:
        raise CounterSettingsError(f"{where}.severity: expected one of {', '.join(SEVERITIES)}, got {severity!r}")
    reason = table.get("reason", base.reason if base else "site rule")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 500:
        raise CounterSettingsError(f"{where}.reason: expected a one-line text, got {reason!r}")
    return CounterRule(name,
                       _number(table["per_window"], f"{where}.per_window") if "per_window" in table
                       else base.per_window,
                       _number(table["per_hour"], f"{where}.per_hour") if "per_hour" in table else base.per_hour,
                       severity, " ".join(reason.split()))


def _merge(section: object, base: Mapping[str, CounterRule], what: str) -> dict[str, CounterRule]:
    if not isinstance(section, dict):
        raise CounterSettingsError(f"{what}: expected a table of counters, got {type(section).__name__}")
    rules = dict(base)
    for name, table in section.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise CounterSettingsError(f"{what}: {name!r} is not a counter name (perfquery's spelling, "
                                       "e.g. SymbolErrorCounter)")
        rules[name] = _rule(name, table, base.get(name), f"{what}.{name}")
    return rules


_DEFAULTS: CounterSettings | None = None


def defaults() -> CounterSettings:
    """The packaged thresholds (read once per process)."""
    global _DEFAULTS
    if _DEFAULTS is None:
        text = resources.files("healthcheck.data").joinpath("fabric_counters.toml").read_text()
        _DEFAULTS = parse_thresholds(text, "fabric_counters.toml")
    return _DEFAULTS


def parse_thresholds(text: str, name: str = "thresholds") -> CounterSettings:
    """A thresholds file: ``[counters.<Name>]`` tables with every key."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CounterSettingsError(f"{name}: {exc}") from None
    unknown = set(doc) - {"counters"}
    if unknown:
        raise CounterSettingsError(f"{name}: unknown table(s) {', '.join(sorted(unknown))} (expected [counters.*])")
    return CounterSettings(_merge(doc.get("counters", {}), {}, f"{name}: counters"))


def validate(section: dict, base: CounterSettings | None = None) -> CounterSettings:
    """A site's ``[fabric.counters]`` section: per counter, any of per_window, per_hour, severity,
    reason over the packaged rule (a counter not packaged needs the first three)."""
    return CounterSettings(_merge(section, (base or defaults()).rules, "[fabric.counters]"))


# ------------------------------------------------------------------------------------------ samples

@dataclass(frozen=True, order=True)
class PortKey:
    node: str
    hca: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}/{self.hca}/{self.port}"


@dataclass
class Sample:
    """The counters of one port at one time. ``widths``: bits per counter (absent: 64, extended)."""

    key: PortKey
    taken_at: float                      # seconds (epoch or monotonic: only differences are used)
    counters: dict[str, int]
    widths: dict[str, int] = field(default_factory=dict)
    guid: str | None = None              # the port's (or CA's) GUID when known: finds it in a fabric graph


def samples_from_perfquery(result: PerfqueryResult, node: str, hca: str, taken_at: float) -> list[Sample]:
    """perfquery run on ``node`` against ``hca`` (``perfquery -x -C mlx5_0 -P 1``): one sample per port
    block, plain and extended blocks of a port merged (the extended, 64-bit, values win)."""
    widths: dict[tuple, dict[str, int]] = {}
    for block in result.blocks:
        w = widths.setdefault((block.lid, block.port), {})
        for name in block.counters:
            bits = EXTENDED_WIDTH_BITS if block.kind == "extended" else BASIC_WIDTH_BITS.get(name, EXTENDED_WIDTH_BITS)
            w[name] = max(w.get(name, 0), bits)
    out = []
    for (lid, port), counters in result.merged().items():
        if port is None:
            continue  # "port ALL" sums every port: nothing to name
        out.append(Sample(PortKey(node, hca, port), taken_at, dict(counters), widths[(lid, port)]))
    return out


def split_description(desc: str) -> tuple[str, str]:
    """A CA's node description, "gpu01 mlx5_0" or "gpu01 HCA-1", -> (node, hca); one word -> (word, "")."""
    parts = desc.split()
    return (parts[0], " ".join(parts[1:])) if parts else ("?", "")


def samples_from_ibqueryerrors(result: IbqueryerrorsResult, taken_at: float) -> list[Sample]:
    """Every port ibqueryerrors reported (ports it did not report were at or below its thresholds, 0 by
    default: judge such samples with ``missing_as_zero=True``). A switch port is keyed (switch name,
    switch GUID, port)."""
    out = []
    for p in result.ports:
        if p.port is None:
            continue
        node, hca = split_description(p.node_desc)
        if p.node_guid:  # a switch: its name is the whole description
            node, hca = p.node_desc or p.node_guid, p.node_guid
        out.append(Sample(PortKey(node, hca or p.port_guid, p.port), taken_at, dict(p.counters), {}, p.port_guid))
    return out


def peers_from_ibqueryerrors(result: IbqueryerrorsResult) -> dict[PortKey, str]:
    """The far end of each reported port from ibqueryerrors' ``Link info`` lines (``--details``)."""
    out: dict[PortKey, str] = {}
    for sample, p in zip(samples_from_ibqueryerrors(result, 0.0), [q for q in result.ports if q.port is not None]):
        if p.link and p.link.remote_port is not None:
            out[sample.key] = f"{p.link.remote_desc or p.link.remote_guid} port {p.link.remote_port}"
    return out


def peers_from_fabric(fabric: object, keys: Iterable[PortKey], guids: Mapping[PortKey, str] | None = None
                      ) -> dict[PortKey, str]:
    """The far end of each port from a parsed ``ibnetdiscover`` graph (:class:`healthcheck.core.fabricgraph.
    Fabric`): the port is found by its GUID when given, else by the CA whose description is "<node>
    <hca>" (ibnetdiscover's node description, e.g. "gpu01 mlx5_0")."""
    from ..core.fabricgraph import End

    by_desc = {" ".join(d.description.split()).lower(): d.guid for d in fabric.devices.values() if d.kind == "ca"}
    out: dict[PortKey, str] = {}
    for key in keys:
        guid = (guids or {}).get(key) or by_desc.get(f"{key.node} {key.hca}".lower())
        if not guid:
            continue
        links = fabric.links_at(End(guid, key.port))
        if len(links) != 1:
            continue
        far = links[0].other(End(guid, key.port))
        device = fabric.devices.get(far.guid)
        name = (device.description if device and device.description else far.guid)
        out[key] = f"{name} port {far.port}"
    return out


# ------------------------------------------------------------------------------------------ deltas

@dataclass(frozen=True)
class CounterDelta:
    name: str
    before: int
    after: int
    growth: int
    reset: bool = False       # the second value was smaller: growth counted from 0
    saturated: bool = False   # the second value is at the counter's maximum: growth is at least this
    stuck: bool = False       # at the maximum in both samples: growth unknown

    def to_dict(self) -> dict:
        return {"name": self.name, "before": self.before, "after": self.after, "growth": self.growth,
                "reset": self.reset, "saturated": self.saturated, "stuck": self.stuck}


def counter_delta(name: str, before: int, after: int, width_bits: int = EXTENDED_WIDTH_BITS) -> CounterDelta:
    """Growth of one counter between two readings (see the module docstring). ValueError for values
    that are not counts of that width."""
    top = (1 << width_bits) - 1
    for value in (before, after):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            raise ValueError(f"{name}: {value!r} is not a {width_bits}-bit counter value")
    full = width_bits < EXTENDED_WIDTH_BITS and after == top
    if after < before:
        return CounterDelta(name, before, after, after, reset=True, saturated=full)
    return CounterDelta(name, before, after, after - before, saturated=full, stuck=full and before == top)


# ------------------------------------------------------------------------------------------ judging

@dataclass
class Breach:
    delta: CounterDelta
    allowed: float
    severity: str
    reason: str

    def to_dict(self) -> dict:
        return {**self.delta.to_dict(), "allowed": round(self.allowed, 3), "severity": self.severity,
                "reason": self.reason}


@dataclass
class PortResult:
    key: PortKey
    window_s: float | None
    status: str                                   # "pass" | "warn" | "fail"
    deltas: list[CounterDelta] = field(default_factory=list)
    breaches: list[Breach] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    peer: str | None = None

    @property
    def name(self) -> str:
        """"gpu01 mlx5_0 port 1 (-> leaf03 port 17)"."""
        hca = f" {self.key.hca}" if self.key.hca else ""
        peer = f" (-> {self.peer})" if self.peer else ""
        return f"{self.key.node}{hca} port {self.key.port}{peer}"

    def message(self) -> str:
        if not self.breaches and not self.notes:
            return f"{self.name}: no error counter grew beyond its threshold"
        parts = [f"{b.delta.name} +{b.delta.growth}{' (reset during the window)' if b.delta.reset else ''}"
                 f" > {b.allowed:g} allowed" for b in self.breaches]
        window = f" in {self.window_s / 60:.0f} min" if self.window_s else ""
        return f"{self.name}: " + "; ".join(parts + self.notes) + window

    def to_dict(self) -> dict:
        return {"node": self.key.node, "hca": self.key.hca, "port": self.key.port, "peer": self.peer,
                "name": self.name, "status": self.status, "window_s": self.window_s,
                "breaches": [b.to_dict() for b in self.breaches], "notes": list(self.notes),
                "deltas": [d.to_dict() for d in self.deltas if d.growth or d.reset or d.stuck]}


@dataclass
class CounterReport:
    ports: list[PortResult]
    rules: dict[str, dict]

    @property
    def status(self) -> str:
        statuses = {p.status for p in self.ports}
        return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"

    def named(self) -> list[PortResult]:
        """The ports whose counters grew beyond their thresholds (or could not be judged), worst first."""
        order = {"fail": 0, "warn": 1}
        return sorted((p for p in self.ports if p.status != "pass"), key=lambda p: (order[p.status], p.key))

    def findings(self) -> list:
        """One :class:`healthcheck.core.model.Finding` per named port (check ``fabric.counters``, component
        "<node>/<hca>/<port>"), or one PASS for the whole window."""
        from ..core.model import Finding, Status

        named = self.named()
        if not named:
            return [Finding(CHECK, Status.PASS, f"{len(self.ports)} ports: no error counter grew beyond its "
                                                "threshold", None, {"ports": float(len(self.ports))})]
        out = []
        for p in named:
            metrics = {f"{b.delta.name}_growth": float(b.delta.growth) for b in p.breaches}
            out.append(Finding(CHECK, Status.FAIL if p.status == "fail" else Status.WARN, p.message(),
                               str(p.key), metrics))
        return out

    def to_dict(self) -> dict:
        return {"status": self.status, "named": [p.name for p in self.named()],
                "ports": [p.to_dict() for p in self.ports], "rules": self.rules}


Peers = Mapping[PortKey, str] | Callable[[PortKey], "str | None"]


def _peer(peers: Peers | None, key: PortKey) -> str | None:
    if peers is None:
        return None
    return peers(key) if callable(peers) else peers.get(key)


def judge_port(before: Sample, after: Sample, settings: CounterSettings, peer: str | None = None) -> PortResult:
    window = after.taken_at - before.taken_at
    if not (isinstance(window, (int, float)) and math.isfinite(window) and window > 0):
        raise ValueError(f"{after.key}: the second sample must be taken after the first "
                         f"(window {window!r} s)")
    result = PortResult(after.key, float(window), "pass", peer=peer)
    worst = 0
    for name in sorted(set(before.counters) | set(after.counters)):
        if name not in after.counters:
            continue
        if name not in before.counters:
            result.notes.append(f"{name} absent from the first sample (not judged)")
            continue
        bits = min(before.widths.get(name, EXTENDED_WIDTH_BITS), after.widths.get(name, EXTENDED_WIDTH_BITS))
        delta = counter_delta(name, before.counters[name], after.counters[name], bits)
        result.deltas.append(delta)
        rule = settings.rules.get(name)
        if rule is None:
            continue
        if delta.stuck:
            result.notes.append(f"{name} at its maximum ({delta.after}) in both samples: growth unknown, clear the "
                                "counters (perfquery -R) or read the extended ones (perfquery -x)")
            worst = max(worst, 1)
            continue
        allowed = rule.allowed(window)
        if delta.growth > allowed:
            result.breaches.append(Breach(delta, allowed, rule.severity, rule.reason))
            worst = max(worst, 2 if rule.severity == "fail" else 1)
    result.status = ("pass", "warn", "fail")[worst]
    return result


def judge_window(before: Iterable[Sample], after: Iterable[Sample], settings: CounterSettings | None = None,
                 peers: Peers | None = None, missing_as_zero: bool = False,
                 started_at: float | None = None) -> CounterReport:
    """Every port of ``after`` against its sample in ``before``. A port only in ``before`` is named
    (WARN: it was not read at the end of the window); a port only in ``after`` is judged from zero when
    ``missing_as_zero`` (ibqueryerrors omits ports under its thresholds; the window then starts at
    ``started_at``, or at the first set's time), else noted and not judged."""
    settings = settings or defaults()
    first: dict[PortKey, Sample] = {}
    for s in before:
        if s.key in first:
            raise ValueError(f"{s.key}: two samples in the first set")
        first[s.key] = s
    seen: set[PortKey] = set()
    ports: list[PortResult] = []
    for s in after:
        if s.key in seen:
            raise ValueError(f"{s.key}: two samples in the second set")
        seen.add(s.key)
        prev = first.get(s.key)
        if prev is None and missing_as_zero:
            times = [x.taken_at for x in first.values()]
            start = started_at if started_at is not None else min(times) if times else None
            if start is None:
                raise ValueError("missing_as_zero with an empty first set: give started_at (when it was taken)")
            prev = Sample(s.key, start, {n: 0 for n in s.counters}, dict(s.widths))
        if prev is None:
            res = PortResult(s.key, None, "pass", peer=_peer(peers, s.key))
            res.notes.append("not in the first sample: nothing to compare (not judged)")
            ports.append(res)
            continue
        ports.append(judge_port(prev, s, settings, _peer(peers, s.key)))
    for key in sorted(set(first) - seen):
        if missing_as_zero:
            continue  # under the tool's thresholds at the end: no growth to judge
        res = PortResult(key, None, "warn", peer=_peer(peers, key))
        res.notes.append("read at the start of the window but not at its end (port or node gone?)")
        ports.append(res)
    ports.sort(key=lambda p: p.key)
    return CounterReport(ports, settings.to_dict())
