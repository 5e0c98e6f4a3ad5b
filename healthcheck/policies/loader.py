"""The packaged policy files (``data/xid_policy.toml``, ``data/host_events.toml``): parsed as TOML with
one error shape, and, for the packaged copy, refused as root unless root's alone, then read back from
the parse cache (:mod:`healthcheck.safeio.tomlcache`) by every later run. Both policies are judged by every
hook run, so neither may cost a TOML parse each time."""
from __future__ import annotations

if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any, Callable  # noqa: F401


def parse(text: str, what: str, top_keys: set[str]) -> dict[str, Any]:
    """TOML ``text`` -> its table; ValueError naming ``what`` for anything else (not text, not TOML,
    nested too deeply, a top-level key not in ``top_keys``)."""
    import tomllib

    if not isinstance(text, str):
        raise ValueError(f"{what} must be TOML text, got {type(text).__name__}")
    try:
        data = tomllib.loads(text)
    except RecursionError as exc:  # absurdly nested arrays
        raise ValueError(f"{what}: TOML nested too deeply") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{what}: invalid TOML: {exc}") from exc
    unknown = sorted(set(data) - top_keys)
    if unknown:
        raise ValueError(f"{what}: unknown top-level key(s) {', '.join(map(repr, unknown))} "
                         f"(allowed: {', '.join(sorted(top_keys))})")
    return data


def packaged(path: str, what: str, read: Callable[[str], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """The packaged policy at ``path`` as data, and whether it came from the parse cache (written only
    after ``read`` accepted the file). As root the file must be root's alone: ValueError otherwise."""
    from ..safeio import tomlcache
    from ..safeio.trust import UntrustedFile, check_trusted, running_as_root

    if running_as_root():  # the policy decides what drains: as root it must be root's alone
        try:
            check_trusted(str(path), what)
        except (UntrustedFile, OSError) as exc:
            raise ValueError(str(exc)) from exc
    data = tomlcache.get(str(path))
    if data is not None:
        return data, True
    with open(path, encoding="utf-8") as fh:
        data = read(fh.read())
    tomlcache.put(str(path), data)
    return data, False


def once(fn):
    """``functools.lru_cache(maxsize=1)`` for a function of no arguments (with its ``cache_clear()``),
    without importing functools: with collections it cost the prolog ~2 ms. A call that raises is not
    remembered, as with lru_cache."""
    missing = object()
    box = [missing]

    def cached():
        if box[0] is missing:
            box[0] = fn()
        return box[0]

    def cache_clear() -> None:
        box[0] = missing

    cached.cache_clear = cache_clear
    cached.__name__, cached.__qualname__, cached.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    cached.__wrapped__ = fn
    return cached
