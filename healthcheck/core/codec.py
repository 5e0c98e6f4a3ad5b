"""Plain dicts (``json.loads`` output) -> the dataclass trees of :mod:`healthcheck.core.model`.

Follows the type hints of the target class (resolved once per class, never ``eval`` of input):
``X | None`` unions, nested dataclasses, ``list[X]``, ``dict[str, X]``, enums and ``Status`` (an
enum-like class: one instance per value, looked up by calling the class).
Keys the class does not know (written by a newer version) are ignored; missing keys take the
field defaults (an older snapshot lacks the fields added since).
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, Callable

_FIELDS: dict[type, dict[str, Callable[[Any], Any]]] = {}


def from_dict(cls: type, data: dict[str, Any] | None) -> Any:
    """Rebuild a dataclass ``cls`` (and everything below it) from plain dicts; None stays None."""
    if data is None:
        return None
    fields = _FIELDS.get(cls)
    if fields is None:  # resolving the hints is slow: once per class, into one converter per field
        names = {f.name for f in dataclasses.fields(cls)}
        # model.py imports typing only for annotations (strings): resolve Any here
        hints = typing.get_type_hints(cls, localns={"Any": Any})
        fields = _FIELDS[cls] = {k: _converter(v) for k, v in hints.items() if k in names}
    return cls(**{key: fields[key](value) for key, value in data.items() if key in fields})


def _identity(value: Any) -> Any:
    return value


def _converter(hint: Any) -> Callable[[Any], Any]:
    """A function turning a JSON value into the type ``hint`` describes (None passes through)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        return _converter(non_none[0]) if len(non_none) == 1 else _identity
    if dataclasses.is_dataclass(hint):
        return lambda value: from_dict(hint, value)
    # Status is enum-like without enum (model.py): one instance per value, looked up by calling the class
    if isinstance(hint, type) and (issubclass(hint, enum.Enum) or isinstance(getattr(hint, "_by_value", None), dict)):
        return lambda value: None if value is None else hint(value)
    if origin is list:
        item = _converter(args[0]) if args else _identity
        if item is _identity:
            return lambda value: None if value is None else list(value)
        return lambda value: None if value is None else [item(v) for v in value]
    if origin is dict:
        item = _converter(args[1]) if len(args) == 2 else _identity
        if item is _identity:
            return lambda value: None if value is None else dict(value)
        return lambda value: None if value is None else {k: item(v) for k, v in value.items()}
    return _identity
