"""The host-event policy as data: which kernel-log lines are machine-check, memory, PCIe, storage,
filesystem, HCA/NIC and link events, and what each class does (fail / warn / ignore, window, counts).

The packaged default is ``healthcheck/data/host_events.toml`` (one ``[[event]]`` entry per class, with its
source). :func:`load_host_event_policy` validates it (unknown keys, severities, counts, windows, and every
pattern: anchored, compilable, no nested quantifier and no repeated alternation: ``regexvet``) and raises only :class:`ValueError` naming the class
and key at fault. ``overrides`` (``{class: {"severity", "min_count", "warn_count", "window_s"}}``) change
single entries the way the site config's ``[xid]`` table changes the Xid policy.

Severity per context: an entry may add ``severity_by_context = { prolog = "warn", ... }`` (contexts of
:data:`healthcheck.checks.registry.CONTEXTS`, severities as ``severity``); ``severity`` applies in the
contexts it does not name. The check learns its context from the judge (threshold key ``"_context"``)
and asks :meth:`HostEventRule.severity_in`.
"""
from __future__ import annotations

import math
import os

from .loader import once, packaged, parse
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401

SEVERITIES = ("fail", "warn", "ignore")
COUNTS = ("events", "sum", "repeats")
# what decides, besides the class, whether an event drains: the device it names (docs/host-events.md)
DEVICE_KINDS = ("block", "hca_port")
DEVICE_SEVERITIES = ("fail", "warn", "note")  # "note": a line in the verdict, never a drain
# the device cases each kind judges, and the entry key giving each one's severity
DEVICE_CASES = {"block": ("unused",), "hca_port": ("expected", "unexpected")}
_ENTRY_KEYS = {"class", "what", "literal", "patterns", "severity", "min_count", "warn_count", "window_s",
               "count", "cleared_by", "when_corrected", "source", "note", "severity_by_context", "device",
               "severity_unused", "severity_expected", "severity_unexpected"}
_TOP_KEYS = {"drivers", "event", "devices"}
_DEVICES_KEYS = {"never_drain", "never_drain_what", "virtual_media"}
_OVERRIDE_KEYS = {"severity", "severity_by_context", "min_count", "warn_count", "window_s"}
_GROUPS = {"pci", "dev", "driver", "n", "status"}
_MAX_PATTERN = 1000

DEFAULT_POLICY_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "host_events.toml")


class HostEventRule:
    """One class of host event and how it is judged."""

    __slots__ = ("event_class", "what", "literal", "_patterns", "_texts", "severity", "min_count", "warn_count",
                 "window_s", "count", "cleared_by", "when_corrected", "source", "by_context", "device",
                 "by_device")

    def __init__(self, event_class: str, what: str, literal: str, patterns: tuple, severity: str,
                 min_count: int, warn_count: int, window_s: float, count: str, cleared_by: str,
                 when_corrected: str, source: str, by_context: dict[str, str] | None = None,
                 device: str = "", by_device: dict[str, str] | None = None):
        # compiled patterns, or their texts (a policy read back from the cache, validated when it was
        # written): compiled on first use, so a log without the class's literal never compiles them
        texts = all(isinstance(p, str) for p in patterns)
        self._texts = tuple(patterns) if texts else None
        self._patterns = None if texts else tuple(patterns)
        self.event_class, self.what, self.literal = event_class, what, literal
        self.severity, self.min_count, self.warn_count, self.window_s = severity, min_count, warn_count, window_s
        self.count, self.cleared_by, self.when_corrected, self.source = count, cleared_by, when_corrected, source
        self.by_context = dict(by_context or {})  # context -> severity, where it differs from ``severity``
        self.device = device  # "", "block" or "hca_port": the device the line names decides too
        self.by_device = dict(by_device or {})  # device case ("unused", "expected", ...) -> severity

    def severity_in(self, context: str | None) -> str:
        """The class's severity in ``context`` (``severity`` where the policy names no other for it,
        or where the context is unknown: a direct call of the check)."""
        return self.by_context.get(context, self.severity) if context else self.severity

    @property
    def patterns(self) -> tuple:
        if self._patterns is None:
            import re  # on use: a prolog whose kernel log holds no rule's literal compiles nothing

            self._patterns = tuple(re.compile(text) for text in self._texts)
        return self._patterns

    @property
    def pattern_texts(self) -> tuple[str, ...]:
        return self._texts if self._texts is not None else tuple(p.pattern for p in self._patterns)

    def __repr__(self) -> str:
        by = f", by_context={self.by_context}" if self.by_context else ""
        return (f"HostEventRule({self.event_class!r}, {self.severity}, min_count={self.min_count}, "
                f"warn_count={self.warn_count}, window_s={self.window_s:g}{by})")


class HostEventPolicy:
    """The classes in policy order (the parser tries them in this order) and the driver names."""

    __slots__ = ("rules", "drivers", "devices")

    def __init__(self, rules: dict[str, HostEventRule], drivers: dict[str, str],
                 devices: "DeviceRules | None" = None):
        self.rules, self.drivers = rules, drivers
        self.devices = devices if devices is not None else DeviceRules((), {}, ())

    def rule(self, event_class: str) -> HostEventRule | None:
        return self.rules.get(event_class)


def default_policy_text() -> str:
    return open(DEFAULT_POLICY_FILE, encoding="utf-8").read()


@once
def default_policy() -> HostEventPolicy:
    """The packaged policy, read and validated once per process."""
    data, cached = packaged(DEFAULT_POLICY_FILE, "host-event policy", _read_valid)
    if cached:  # parsed and validated when the cache entry was written: patterns compiled on use
        try:
            return _build(data, validated=True)
        except (ValueError, TypeError, KeyError):
            pass  # an entry that does not fit: read the file afresh
        data = _read(default_policy_text())
    return _build(data)


def load_host_event_policy(text: str | None = None, overrides: dict | None = None) -> HostEventPolicy:
    """Parse and validate a policy (the packaged default when ``text`` is None), then apply overrides."""
    policy = default_policy() if text is None else _build(_read(text))
    if not overrides:
        return policy
    if not isinstance(overrides, dict):
        raise ValueError(f"host-event policy overrides must be a table, got {type(overrides).__name__}")
    rules = dict(policy.rules)
    for name, change in overrides.items():
        base = rules.get(name)
        if base is None:
            raise ValueError(f"host-event policy override: unknown class {name!r} "
                             f"(known: {', '.join(sorted(rules))})")
        rules[name] = _override(base, change)
    return HostEventPolicy(rules, policy.drivers, policy.devices)


class DeviceRules:
    """The ``[devices]`` table: block devices whose errors never drain (name prefixes followed by digits,
    what each is) and the vendor/model words of a BMC's virtual media."""

    __slots__ = ("never_drain", "never_drain_what", "virtual_media")

    def __init__(self, never_drain: tuple[str, ...], never_drain_what: dict[str, str],
                 virtual_media: tuple[str, ...]):
        self.never_drain, self.never_drain_what, self.virtual_media = never_drain, never_drain_what, virtual_media

    def never_drained(self, device: str | None, vendor_model: str | None = None) -> str | None:
        """Why an error on block ``device`` never drains (what it is), or None."""
        if device:
            for prefix in self.never_drain:
                rest = device[len(prefix):]
                if device.startswith(prefix) and rest[:1].isdigit() and rest.isalnum():
                    return self.never_drain_what.get(prefix, f"{prefix}* device")
        text = (vendor_model or "").lower()
        if text and any(word in text for word in self.virtual_media):
            return f"virtual media ({vendor_model.strip()})"
        return None


def describe(policy: HostEventPolicy) -> list[dict[str, Any]]:
    """One row per class, in policy order, for docs."""
    return [{"class": r.event_class, "what": r.what, "severity": r.severity,
             "severity_by_context": dict(r.by_context), "min_count": r.min_count,
             "warn_count": r.warn_count, "window_s": r.window_s, "count": r.count,
             "cleared_by": r.cleared_by, "device": r.device, "severity_by_device": dict(r.by_device),
             "source": r.source} for r in policy.rules.values()]


# ------------------------------------------------------------------------------------- validation


def _read(text: str) -> dict[str, Any]:
    return parse(text, "host-event policy", _TOP_KEYS)


def _read_valid(text: str) -> dict[str, Any]:
    """Parsed and validated (every pattern compiled and checked): what the parse cache may keep."""
    data = _read(text)
    _build(data)
    return data


def _build(data: dict[str, Any], validated: bool = False) -> HostEventPolicy:
    """``validated``: ``data`` is the cached copy of a policy this function validated before (root's
    alone, keyed by the file's identity and our version): its patterns are kept as text and compiled
    on first use instead of compiled and checked now."""
    drivers = data.get("drivers", {})
    if not isinstance(drivers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in drivers.items()):
        raise ValueError("host-event policy: [drivers] must map driver names to strings")
    entries = data.get("event", [])
    if not isinstance(entries, list) or not entries:
        raise ValueError("host-event policy: 'event' must be a non-empty array of tables ([[event]])")
    rules: dict[str, HostEventRule] = {}
    for position, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ValueError(f"host-event policy: [[event]] entry #{position} is not a table")
        name = entry.get("class")
        if not isinstance(name, str) or not _is_class_name(name):
            raise ValueError(f"host-event policy: [[event]] entry #{position}: 'class' must be a "
                             f"lower-case identifier, got {name!r}")
        where = f"class {name!r}"
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            raise ValueError(f"host-event policy: {where}: unknown key(s) {', '.join(map(repr, unknown))} "
                             f"(allowed: {', '.join(sorted(_ENTRY_KEYS))})")
        if name in rules:
            raise ValueError(f"host-event policy: {where}: listed twice")
        for key in ("severity", "patterns", "literal"):
            if key not in entry:
                raise ValueError(f"host-event policy: {where}: missing key {key!r}")
        patterns = entry["patterns"]
        if not isinstance(patterns, list):
            raise ValueError(f"host-event policy: {where}: 'patterns' must be a list of strings")
        rules[name] = HostEventRule(
            event_class=name,
            what=_text(entry.get("what", ""), where, "what"),
            literal=_text(entry["literal"], where, "literal"),
            patterns=(tuple(str(p) for p in patterns) if validated
                      else tuple(_pattern(p, where, i) for i, p in enumerate(patterns, start=1))),
            severity=_severity(entry["severity"], where),
            min_count=_count(entry.get("min_count", 1), where, "min_count", 1),
            warn_count=_count(entry.get("warn_count", 0), where, "warn_count", 0),
            window_s=_window(entry.get("window_s", 0), where),
            count=_choice(entry.get("count", "events"), COUNTS, where, "count"),
            cleared_by=_text(entry.get("cleared_by", ""), where, "cleared_by"),
            when_corrected=_text(entry.get("when_corrected", ""), where, "when_corrected"),
            source=_text(entry.get("source", ""), where, "source"),
            by_context=_by_context(entry.get("severity_by_context", {}), where),
            **_device(entry, where),
        )
        if rules[name].pattern_texts and not rules[name].literal:
            raise ValueError(f"host-event policy: {where}: 'literal' must not be empty")
    for rule in rules.values():
        for key in ("cleared_by", "when_corrected"):
            other = getattr(rule, key)
            if other and other not in rules:
                raise ValueError(f"host-event policy: class {rule.event_class!r}: {key} names unknown "
                                 f"class {other!r}")
        if rule.warn_count and rule.warn_count >= rule.min_count:
            raise ValueError(f"host-event policy: class {rule.event_class!r}: warn_count must be below "
                             f"min_count")
        if rule.when_corrected and not validated and not any("status" in p.groupindex for p in rule.patterns):
            raise ValueError(f"host-event policy: class {rule.event_class!r}: when_corrected needs a "
                             f"pattern with a (?P<status>...) group")
    return HostEventPolicy(rules, dict(drivers), _devices(data.get("devices", {})))


def _device(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """``device`` and its cases' severities (``severity_unused``, ``severity_expected``, ...)."""
    kind = entry.get("device", "")
    cases = {key[len("severity_"):] for key in entry if key.startswith("severity_") and key != "severity_by_context"}
    if not kind:
        if cases:
            raise ValueError(f"host-event policy: {where}: {', '.join(sorted('severity_' + c for c in cases))} "
                             f"need 'device' ({' or '.join(DEVICE_KINDS)})")
        return {}
    kind = _choice(kind, DEVICE_KINDS, where, "device")
    wrong = sorted(cases - set(DEVICE_CASES[kind]))
    if wrong:
        raise ValueError(f"host-event policy: {where}: device {kind!r} has no case(s) "
                         f"{', '.join(wrong)} (it judges: {', '.join(DEVICE_CASES[kind])})")
    return {"device": kind,
            "by_device": {case: _choice(entry[f"severity_{case}"], DEVICE_SEVERITIES, where, f"severity_{case}")
                          for case in sorted(cases)}}


def _devices(value: Any) -> DeviceRules:
    where = "[devices]"
    if not isinstance(value, dict):
        raise ValueError(f"host-event policy: {where} must be a table")
    unknown = sorted(set(value) - _DEVICES_KEYS)
    if unknown:
        raise ValueError(f"host-event policy: {where}: unknown key(s) {', '.join(map(repr, unknown))} "
                         f"(allowed: {', '.join(sorted(_DEVICES_KEYS))})")

    def strings(key: str) -> tuple[str, ...]:
        items = value.get(key, [])
        if not isinstance(items, list) or not all(isinstance(s, str) and s.strip() for s in items):
            raise ValueError(f"host-event policy: {where}: {key!r} must be a list of non-empty strings")
        return tuple(s.strip() for s in items)

    never = strings("never_drain")
    for prefix in never:
        if not prefix.isalpha():
            raise ValueError(f"host-event policy: {where}: never_drain: {prefix!r} must be letters only "
                             "(a device-name prefix: sr, loop, ...)")
    what = value.get("never_drain_what", {})
    if not isinstance(what, dict) or not all(isinstance(v, str) for v in what.values()):
        raise ValueError(f"host-event policy: {where}: 'never_drain_what' must map prefixes to strings")
    extra = sorted(set(what) - set(never))
    if extra:
        raise ValueError(f"host-event policy: {where}: never_drain_what names prefixes not in never_drain: "
                         f"{', '.join(extra)}")
    return DeviceRules(never, dict(what), tuple(s.lower() for s in strings("virtual_media")))


def _override(base: HostEventRule, change: Any) -> HostEventRule:
    where = f"class {base.event_class!r}"
    if not isinstance(change, dict):
        raise ValueError(f"host-event policy override: {where}: expected a table of "
                         f"{', '.join(sorted(_OVERRIDE_KEYS))}, got {type(change).__name__}")
    unknown = sorted(set(map(str, change)) - _OVERRIDE_KEYS)
    if unknown:
        raise ValueError(f"host-event policy override: {where}: unknown key(s) "
                         f"{', '.join(map(repr, unknown))} (allowed: {', '.join(sorted(_OVERRIDE_KEYS))})")
    # A site's "severity" applies in every context unless it names contexts too (severity_by_context).
    by_context = change.get("severity_by_context", {} if "severity" in change else base.by_context)
    rule = HostEventRule(
        base.event_class, base.what, base.literal, base.pattern_texts,
        _severity(change.get("severity", base.severity), where),
        _count(change.get("min_count", base.min_count), where, "min_count", 1),
        _count(change.get("warn_count", base.warn_count), where, "warn_count", 0),
        _window(change.get("window_s", base.window_s), where),
        base.count, base.cleared_by, base.when_corrected, "site override", _by_context(by_context, where),
        base.device, base.by_device)
    if rule.warn_count and rule.warn_count >= rule.min_count:
        raise ValueError(f"host-event policy override: {where}: warn_count must be below min_count")
    return rule


# A quantifier after a group whose body holds a quantifier: "(a+)+", "(?:\s*x)*", "(a{1,9}){2,}".
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_CLASS_CHARS = _LOWER | frozenset("0123456789_")


def _is_class_name(name: str) -> bool:
    """``[a-z][a-z0-9_]{0,47}``, checked without re (the prolog builds the policy from its cache)."""
    return 0 < len(name) <= 48 and name[0] in _LOWER and _CLASS_CHARS.issuperset(name)


def _pattern(value: Any, where: str, index: int):
    import re  # validation: the packaged policy is validated when its cache entry is written

    what = f"host-event policy: {where}: pattern #{index}"
    if not isinstance(value, str) or not value or len(value) > _MAX_PATTERN:
        raise ValueError(f"{what}: must be a non-empty string of at most {_MAX_PATTERN} characters")
    if not value.startswith("^"):
        raise ValueError(f"{what}: must be anchored with '^' at the start of the kernel message")
    from .regexvet import vet_regex  # on use: the policy is validated once, then read from its cache

    problem = vet_regex(value, _MAX_PATTERN)
    if problem:
        raise ValueError(f"{what}: {problem}")
    try:
        compiled = re.compile(value)
    except re.error as exc:
        raise ValueError(f"{what}: invalid regular expression: {exc}") from exc
    extra = sorted(set(compiled.groupindex) - _GROUPS)
    if extra:
        raise ValueError(f"{what}: unknown named group(s) {', '.join(extra)} (allowed: "
                         f"{', '.join(sorted(_GROUPS))})")
    return compiled


def _severity(value: Any, where: str) -> str:
    return _choice(value, SEVERITIES, where, "severity")


def _by_context(value: Any, where: str) -> dict[str, str]:
    """``severity_by_context``: a table of known contexts to severities."""
    from ..core.model import CONTEXTS

    if not isinstance(value, dict):
        raise ValueError(f"host-event policy: {where}: key 'severity_by_context' must be a table of "
                         f"context = severity, got {type(value).__name__}")
    out = {}
    for context, severity in value.items():
        if context not in CONTEXTS:
            raise ValueError(f"host-event policy: {where}: severity_by_context: unknown context {context!r} "
                             f"(known: {', '.join(CONTEXTS)})")
        out[context] = _choice(severity, SEVERITIES, where, f"severity_by_context.{context}")
    return out


def _choice(value: Any, allowed: tuple, where: str, key: str) -> str:
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise ValueError(f"host-event policy: {where}: key {key!r} must be one of {', '.join(allowed)}, "
                         f"got {value!r}")
    return value.strip().lower()


def _count(value: Any, where: str, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or value > 10**9:
        raise ValueError(f"host-event policy: {where}: key {key!r} must be an integer >= {minimum}, "
                         f"got {value!r}")
    return value


def _window(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"host-event policy: {where}: key 'window_s' must be a number of seconds, "
                         f"got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"host-event policy: {where}: key 'window_s' must be >= 0 (0 = whole log), "
                         f"got {value!r}")
    return seconds


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"host-event policy: {where}: key {key!r} must be a string, "
                         f"got {type(value).__name__}")
    return value
