"""The NVIDIA Xid policy as data: which Xids fail / warn / are ignored, over which window, from how many.

The packaged default is ``healthcheck/data/xid_policy.toml`` (one ``[[xid]]`` entry per Xid, with the
NVIDIA document and resolution bucket it follows). A site changes single entries through its config::

    [xid]
    13 = { action = "fail", min_count = 1 }
    79 = { window_s = 86400 }

:func:`load_xid_policy` validates everything and raises only :class:`ValueError`, naming the Xid and the
key at fault.
"""
from __future__ import annotations

import math
import os
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401

from ..core.expectations import XidPolicy, XidRule
from .loader import once, packaged, parse

ACTIONS = ("fail", "warn", "ignore")
_ENTRY_KEYS = {"number", "name", "action", "window_s", "min_count", "bucket", "source", "note", "fatal_action",
               "nonfatal_action"}
_TOP_KEYS = {"unknown_action", "unknown_window_s", "xid", "sxid_fatal_action", "sxid_nonfatal_action", "sxid_source"}
_OVERRIDE_KEYS = {"action", "window_s", "min_count", "name"}
_MAX_XID = 65535


DEFAULT_POLICY_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "xid_policy.toml")


def default_policy_text() -> str:
    """The packaged default policy (TOML text)."""
    return open(DEFAULT_POLICY_FILE, encoding="utf-8").read()


@once
def _default_data() -> dict[str, Any]:
    """The packaged policy, parsed once per process (and cached across runs: every run judges it)."""
    return packaged(DEFAULT_POLICY_FILE, "Xid policy", _read)[0]


def load_xid_policy(text: str | None = None, overrides: dict | None = None) -> XidPolicy:
    """Parse and validate a policy (the packaged default when ``text`` is None), then apply overrides.

    ``overrides``: ``{xid (int or digit string): {"action", "window_s", "min_count", "name"}}``; an Xid
    the policy lacks is added (then ``action`` is required); the key ``"unknown"`` sets
    ``unknown_action`` / ``unknown_window_s`` from its ``action`` / ``window_s``.
    """
    data = _default_data() if text is None else _read(text)
    rules = {number: rule for number, (rule, _meta) in _entries(data).items()}
    unknown_action = _action(data.get("unknown_action", "warn"), "unknown_action")
    unknown_window = _window(data.get("unknown_window_s", 0), "unknown_window_s")
    sxid_fatal = _action(data.get("sxid_fatal_action", "fail"), "sxid_fatal_action")
    sxid_nonfatal = _action(data.get("sxid_nonfatal_action", "warn"), "sxid_nonfatal_action")
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise ValueError(f"xid policy overrides must be a table, got {type(overrides).__name__}")
        for key, change in overrides.items():
            if isinstance(key, str) and key.strip().lower() == "unknown":
                unknown_action, unknown_window = _unknown_override(change, unknown_action, unknown_window)
                continue
            number = _xid_key(key)
            rules[number] = _override(number, rules.get(number), change)
    return XidPolicy(rules=rules, unknown_action=unknown_action, unknown_window_s=unknown_window,
                     sxid_fatal_action=sxid_fatal, sxid_nonfatal_action=sxid_nonfatal)


def describe(policy: XidPolicy) -> list[dict[str, Any]]:
    """One row per listed Xid (sorted) plus a last row for unlisted Xids (``xid`` None), for docs.

    Rows carry the NVIDIA bucket / source / note of the packaged default; a rule that differs from the
    default is marked ``source = "site override"``.
    """
    defaults = _entries(_read(default_policy_text()))
    rows = []
    for number in sorted(policy.rules):
        rule = policy.rules[number]
        default_rule, meta = defaults.get(number, (None, {}))
        overridden = default_rule is None or default_rule != rule
        rows.append({
            "xid": number,
            "name": rule.name,
            "action": rule.action,
            "window_s": rule.window_s,
            "min_count": rule.min_count,
            "bucket": meta.get("bucket", ""),
            "source": "site override" if overridden else meta.get("source", ""),
            "note": meta.get("note", ""),
        })
    rows.append({"xid": None, "name": "unlisted Xid", "action": policy.unknown_action,
                 "window_s": policy.unknown_window_s, "min_count": 1, "bucket": "",
                 "source": "unknown_action", "note": ""})
    return rows


# ------------------------------------------------------------------------------------- validation


def _read(text: str) -> dict[str, Any]:
    return parse(text, "xid policy", _TOP_KEYS)


def _entries(data: dict[str, Any]) -> dict[int, tuple[XidRule, dict[str, str]]]:
    """Validated ``[[xid]]`` entries: number -> (rule, {"bucket", "source", "note"})."""
    entries = data.get("xid", [])
    if not isinstance(entries, list):
        raise ValueError("xid policy: 'xid' must be an array of tables ([[xid]] entries)")
    out: dict[int, tuple[XidRule, dict[str, str]]] = {}
    for position, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ValueError(f"xid policy: [[xid]] entry #{position} is not a table")
        if "number" not in entry:
            raise ValueError(f"xid policy: [[xid]] entry #{position} has no 'number'")
        number = _xid_number(entry["number"], f"[[xid]] entry #{position} 'number'")
        where = f"Xid {number}"
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            raise ValueError(f"xid policy: {where}: unknown key(s) {', '.join(map(repr, unknown))} "
                             f"(allowed: {', '.join(sorted(_ENTRY_KEYS))})")
        if number in out:
            raise ValueError(f"xid policy: {where}: listed twice")
        if "action" not in entry:
            raise ValueError(f"xid policy: {where}: missing key 'action'")
        meta = {key: _text(entry.get(key, ""), f"{where}: key {key!r}")
                for key in ("bucket", "source", "note")}
        rule = XidRule(
            xid=number,
            action=_action(entry["action"], f"{where}: key 'action'"),
            name=_text(entry.get("name", ""), f"{where}: key 'name'"),
            window_s=_window(entry.get("window_s", 0), f"{where}: key 'window_s'"),
            min_count=_min_count(entry.get("min_count", 1), f"{where}: key 'min_count'"),
            fatal_action=(_action(entry["fatal_action"], f"{where}: key 'fatal_action'")
                          if "fatal_action" in entry else None),
            nonfatal_action=(_action(entry["nonfatal_action"], f"{where}: key 'nonfatal_action'")
                             if "nonfatal_action" in entry else None),
        )
        out[number] = (rule, meta)
    return out


def _override(number: int, base: XidRule | None, change: Any) -> XidRule:
    where = f"Xid {number}"
    if not isinstance(change, dict):
        raise ValueError(f"xid policy override: {where}: expected a table of "
                         f"{', '.join(sorted(_OVERRIDE_KEYS))}, got {type(change).__name__}")
    unknown = sorted(set(map(str, change)) - _OVERRIDE_KEYS)
    if unknown:
        raise ValueError(f"xid policy override: {where}: unknown key(s) {', '.join(map(repr, unknown))} "
                         f"(allowed: {', '.join(sorted(_OVERRIDE_KEYS))})")
    if base is None:
        if "action" not in change:
            raise ValueError(f"xid policy override: {where} is not in the policy; key 'action' is required")
        base = XidRule(number, "warn", "site rule")
    return XidRule(
        xid=number,
        action=_action(change.get("action", base.action), f"override {where}: key 'action'"),
        name=_text(change.get("name", base.name), f"override {where}: key 'name'"),
        window_s=_window(change.get("window_s", base.window_s), f"override {where}: key 'window_s'"),
        min_count=_min_count(change.get("min_count", base.min_count), f"override {where}: key 'min_count'"),
        # an override of the action decides every event of the Xid; otherwise the split stays
        fatal_action=None if "action" in change else base.fatal_action,
        nonfatal_action=None if "action" in change else base.nonfatal_action,
    )


def _unknown_override(change: Any, action: str, window: float) -> tuple[str, float]:
    if not isinstance(change, dict):
        raise ValueError("xid policy override: 'unknown' must be a table of action, window_s")
    unknown = sorted(set(map(str, change)) - {"action", "window_s"})
    if unknown:
        raise ValueError(f"xid policy override: 'unknown': unknown key(s) {', '.join(map(repr, unknown))}")
    return (_action(change.get("action", action), "override unknown: key 'action'"),
            _window(change.get("window_s", window), "override unknown: key 'window_s'"))


def _xid_key(key: Any) -> int:
    if isinstance(key, str):
        stripped = key.strip()
        if not stripped.isdigit() or not stripped.isascii() or len(stripped) > 6:
            raise ValueError(f"xid policy override: key {key!r} is not an Xid number")
        return _xid_number(int(stripped), f"override key {key!r}")
    return _xid_number(key, f"override key {key!r}")


def _xid_number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_XID:
        raise ValueError(f"xid policy: {where}: an Xid is an integer 1..{_MAX_XID}, got {value!r}")
    return value


def _action(value: Any, where: str) -> str:
    if not isinstance(value, str) or value.strip().lower() not in ACTIONS:
        raise ValueError(f"xid policy: {where}: must be one of {', '.join(ACTIONS)}, got {value!r}")
    return value.strip().lower()


def _window(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"xid policy: {where}: must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError as exc:
        raise ValueError(f"xid policy: {where}: too large") from exc
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"xid policy: {where}: must be >= 0 seconds (0 = whole log), got {value!r}")
    return seconds


def _min_count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"xid policy: {where}: must be an integer >= 1, got {value!r}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"xid policy: {where}: must be a string, got {type(value).__name__}")
    return value
