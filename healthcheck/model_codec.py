"""Plain dicts (``json.loads`` output) -> the dataclass trees of :mod:`healthcheck.model`.

Follows the type hints of the target class (resolved once per class, never ``eval`` of input):
``X | None`` unions, nested dataclasses, ``list[X]``, ``dict[str, X]`` and enums (``Status``).
Keys the class does not know (written by a newer version) are ignored; missing keys take the
field defaults (an older snapshot lacks the fields added since).
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

_HINTS: dict[type, dict[str, Any]] = {}


def from_dict(cls: type, data: dict[str, Any] | None) -> Any:
    """Rebuild a dataclass ``cls`` (and everything below it) from plain dicts; None stays None."""
    if data is None:
        return None
    hints = _HINTS.get(cls)
    if hints is None:  # resolving the hints is slow: once per class
        names = {f.name for f in dataclasses.fields(cls)}
        hints = _HINTS[cls] = {k: v for k, v in typing.get_type_hints(cls).items() if k in names}
    kwargs = {}
    for key, value in data.items():
        if key in hints:  # tolerate fields written by a newer version
            kwargs[key] = _convert(hints[key], value)
    return cls(**kwargs)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        return _convert(non_none[0], value) if len(non_none) == 1 else value
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if origin is list:
        return [_convert(args[0], v) for v in value] if args else list(value)
    if origin is dict:
        return {k: _convert(args[1], v) for k, v in value.items()} if args else dict(value)
    return value
