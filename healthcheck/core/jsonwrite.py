"""``json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))`` without importing
``json``: the prolog writes its spool record and the job's baseline before every job, and ``json``
brings ``re``, ``enum``, ``functools`` and ``collections`` (~3 ms) for a few hundred bytes of output.

Same output as ``json.dumps`` with those arguments for the data the hooks write (dicts with string
keys, lists and tuples, strings, ints, finite floats, booleans, None; a test compares the two); the same
errors otherwise (TypeError for other objects and keys, ValueError for NaN and infinity and for a
container that contains itself). Strings are escaped by the C function ``json`` itself uses.
"""
from __future__ import annotations

from _json import encode_basestring_ascii as _quote

_INF = float("inf")
MAX_DEPTH = 500


def dumps(value, sort_keys: bool = False) -> str:
    parts: list[str] = []
    _encode(value, parts, sort_keys, 0, set())
    return "".join(parts)


def _encode(value, out: list[str], sort_keys: bool, depth: int, active: set) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, (list, tuple, dict)):
        if depth >= MAX_DEPTH:
            raise RecursionError("maximum recursion depth exceeded while encoding a JSON object")
        marker = id(value)
        if marker in active:
            raise ValueError("Circular reference detected")
        active.add(marker)
        if isinstance(value, dict):
            items = sorted(value.items()) if sort_keys else value.items()
            out.append("{")
            first = True
            for key, item in items:
                if not first:
                    out.append(",")
                first = False
                out.append(_quote(json_key(key)))
                out.append(":")
                _encode(item, out, sort_keys, depth + 1, active)
            out.append("}")
        else:
            out.append("[")
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                _encode(item, out, sort_keys, depth + 1, active)
            out.append("]")
        active.discard(marker)
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _float(value: float) -> str:
    if value != value or value == _INF or value == -_INF:
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return float.__repr__(value)


def json_key(key) -> str:
    """A dict key as ``json.dumps`` writes it (str, int, float, bool, None); TypeError/ValueError as json."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
