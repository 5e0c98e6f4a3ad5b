"""``@record``: plain data classes for the hot path, without importing ``dataclasses``.

``dataclasses`` pulls in ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``, ``enum``...) and
compiles an ``__init__`` per class: about 35 ms on a 2-core machine for the model alone, paid before
every job by the prolog. ``@record`` gives the same shape (``__init__``, ``__eq__``, ``__repr__``,
``__hash__`` when frozen, ``__slots__``) from the class's annotations and defaults, with methods shared
by all records and driven by a field table: nothing compiled, nothing else imported.

It stays a dataclass to everything else: the class answers ``__dataclass_fields__`` lazily (built with
``dataclasses`` on first use), so ``dataclasses.fields``, ``asdict``, ``replace`` and ``is_dataclass``
work unchanged wherever they are used off the hot path. ``field()`` takes the arguments of
``dataclasses.field`` that this code base uses (``default``, ``default_factory``, ``compare``,
``repr``, ``hash``).

Supported: ``@record``, ``@record(frozen=True)``, ``@record(slots=True)`` (then the defaults are not
class attributes, as with ``dataclass(slots=True)``); inheritance from another
record (its fields come first). Not supported (use ``dataclasses`` where needed): ``order``,
``kw_only``, ``InitVar``, ``__post_init__``.
"""
from __future__ import annotations

_MISSING = object()


class Field:
    __slots__ = ("default", "default_factory", "compare", "repr", "hash")

    def __init__(self, default=_MISSING, default_factory=_MISSING, compare=True, repr=True, hash=None):
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.default, self.default_factory = default, default_factory
        self.compare, self.repr, self.hash = compare, repr, hash


def field(*, default=_MISSING, default_factory=_MISSING, compare=True, repr=True, hash=None) -> Field:
    return Field(default, default_factory, compare, repr, hash)


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record (as ``dataclasses.FrozenInstanceError``)."""


class _Spec:
    __slots__ = ("name", "type", "default", "factory", "compare", "repr", "hash")

    def __init__(self, name, type_, default, factory, compare, repr_, hash_):
        self.name, self.type, self.default, self.factory = name, type_, default, factory
        self.compare, self.repr, self.hash = compare, repr_, hash_


class _DataclassFields:
    """``__dataclass_fields__`` built on first access, with ``dataclasses`` imported only then."""

    def __get__(self, obj, owner):
        import dataclasses

        out = {}
        for spec in owner.__record_fields__:
            if spec.factory is not _MISSING:
                f = dataclasses.field(default_factory=spec.factory, compare=spec.compare, repr=spec.repr,
                                      hash=spec.hash)
            elif spec.default is not _MISSING:
                f = dataclasses.field(default=spec.default, compare=spec.compare, repr=spec.repr, hash=spec.hash)
            else:
                f = dataclasses.field(compare=spec.compare, repr=spec.repr, hash=spec.hash)
            f.name, f.type, f._field_type = spec.name, spec.type, dataclasses._FIELD
            out[spec.name] = f
        type.__setattr__(owner, "__dataclass_fields__", out)  # this class only: subclasses build theirs
        return out


class _DataclassParams:
    def __init__(self, frozen: bool):
        self.init, self.repr, self.eq, self.order, self.unsafe_hash, self.frozen = True, True, True, False, False, frozen


def record(cls=None, /, *, frozen: bool = False, slots: bool = False):
    def wrap(c):
        return _process(c, frozen, slots)
    return wrap if cls is None else wrap(cls)


def _process(cls, frozen: bool, slots: bool):
    specs: dict[str, _Spec] = {}
    for base in reversed(cls.__mro__[1:]):
        for spec in base.__dict__.get("__record_fields__", ()):
            specs[spec.name] = spec
    own = []
    for name, type_ in cls.__dict__.get("__annotations__", {}).items():
        if isinstance(type_, str) and type_.replace("typing.", "").startswith("ClassVar"):
            continue
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, Field):
            spec = _Spec(name, type_, value.default, value.default_factory, value.compare, value.repr, value.hash)
        else:
            if isinstance(value, (list, dict, set)):
                raise ValueError(f"mutable default {type(value).__name__} for field {name} is not allowed: "
                                 "use default_factory")
            spec = _Spec(name, type_, value, _MISSING, True, True, None)
        specs[name] = spec
        own.append(name)
    fields = tuple(specs.values())
    seen_default = False
    for spec in fields:
        has_default = spec.default is not _MISSING or spec.factory is not _MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {spec.name!r} follows default argument")
        seen_default = seen_default or has_default

    body_dict = dict(cls.__dict__)
    body_dict.update(__init__=_init, __eq__=_eq, __repr__=_repr,
                     __hash__=_hash if frozen else None)
    if frozen:
        body_dict["__setattr__"] = _frozen_setattr
        body_dict["__delattr__"] = _frozen_delattr
    body_dict["__record_fields__"] = fields
    body_dict["__record_compare__"] = tuple(s.name for s in fields if s.compare)
    body_dict["__record_hash__"] = tuple(s.name for s in fields if (s.hash if s.hash is not None else s.compare))
    body_dict["__dataclass_fields__"] = _DataclassFields()
    body_dict["__dataclass_params__"] = _DataclassParams(frozen)
    if slots:
        body_dict["__getstate__"], body_dict["__setstate__"] = _getstate, _setstate
    if not slots:
        for name in own:
            spec = specs[name]
            if spec.default is not _MISSING:
                body_dict[name] = spec.default
            else:
                body_dict.pop(name, None)
        new = type(cls)(cls.__name__, cls.__bases__, body_dict)
    else:
        for name in own:
            body_dict.pop(name, None)
        body_dict.pop("__dict__", None)
        body_dict.pop("__weakref__", None)
        inherited = {n for base in cls.__mro__[1:] for n in base.__dict__.get("__slots__", ())}
        body_dict["__slots__"] = tuple(n for n in own if n not in inherited)
        new = type(cls)(cls.__name__, cls.__bases__, body_dict)
    return new


# The methods are shared by every record and driven by its field table: no code is generated per class,
# so defining a 60-field class costs what ``type()`` costs (a generated __init__ would be compiled at
# every start, in every prolog).
_set = object.__setattr__


def _init(self, *args, **kwargs):
    specs = self.__record_fields__
    if len(args) > len(specs):
        raise TypeError(f"{type(self).__qualname__}() takes {len(specs)} positional arguments but "
                        f"{len(args)} were given")
    for i, spec in enumerate(specs):
        name = spec.name
        if i < len(args):
            if name in kwargs:
                raise TypeError(f"{type(self).__qualname__}() got multiple values for argument {name!r}")
            value = args[i]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif spec.factory is not _MISSING:
            value = spec.factory()
        elif spec.default is not _MISSING:
            value = spec.default
        else:
            raise TypeError(f"{type(self).__qualname__}() missing required argument: {name!r}")
        _set(self, name, value)
    if len(args) < len(specs) and kwargs:
        raise TypeError(f"{type(self).__qualname__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
    if len(args) >= len(specs) and kwargs:
        raise TypeError(f"{type(self).__qualname__}() got an unexpected keyword argument {next(iter(kwargs))!r}")


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(getattr(self, n) == getattr(other, n) for n in self.__record_compare__)


def _repr(self):
    shown = ", ".join(f"{s.name}={getattr(self, s.name)!r}" for s in self.__record_fields__ if s.repr)
    return f"{type(self).__qualname__}({shown})"


def _hash(self):
    return hash(tuple(getattr(self, n) for n in self.__record_hash__))


def _getstate(self):
    return tuple(getattr(self, s.name) for s in self.__record_fields__)


def _setstate(self, state):
    for spec, value in zip(self.__record_fields__, state):
        _set(self, spec.name, value)


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def replace(obj, **changes):
    """``dataclasses.replace`` for records, without importing dataclasses."""
    for spec in type(obj).__record_fields__:
        if spec.name not in changes:
            changes[spec.name] = getattr(obj, spec.name)
    return type(obj)(**changes)


def asdict(obj):
    """``dataclasses.asdict`` for records (recursing into records, lists, tuples and dicts)."""
    if hasattr(type(obj), "__record_fields__"):
        return {spec.name: asdict(getattr(obj, spec.name)) for spec in type(obj).__record_fields__}
    if isinstance(obj, list):
        return [asdict(v) for v in obj]
    if isinstance(obj, tuple):
        return type(obj)(asdict(v) for v in obj) if not hasattr(obj, "_fields") else type(obj)(*[asdict(v) for v in obj])
    if isinstance(obj, dict):
        return {asdict(k): asdict(v) for k, v in obj.items()}
    if hasattr(type(obj), "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    return obj


def fields(class_or_instance):
    """The field specs (``.name``, ``.default``, ``.type``) of a record, as ``dataclasses.fields``."""
    return tuple(getattr(class_or_instance, "__record_fields__"))


MISSING = _MISSING
