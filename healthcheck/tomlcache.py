"""Parsed TOML, cached as JSON for the hooks' hot path (tomllib and parsing cost ≈ 15 ms per run).

A cache entry is keyed by the file's real path, inode, size and mtime (ns) and the tool's version, so
an edited or replaced file is parsed afresh. Entries live in ``$HEALTHCHECK_CACHE_DIR``, else (as root)
``/var/cache/healthcheck``, in a 0700 directory, 0600 files; as root an entry is used only when it is
root's alone (see :mod:`healthcheck.safety`). Every failure is a cache miss, never an error.
"""
from __future__ import annotations

import json
import os
from typing import Any

CACHE_ENV = "HEALTHCHECK_CACHE_DIR"


def cache_dir() -> str | None:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return explicit
    return "/var/cache/healthcheck" if os.geteuid() == 0 else None


def _entry(path: str) -> tuple[str, list] | None:
    folder = cache_dir()
    if folder is None:
        return None
    from . import __version__

    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    name = real.replace("%", "%25").replace("/", "%2F")[-200:] + ".json"
    return os.path.join(folder, name), [real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, __version__]


def get(path: str) -> dict[str, Any] | None:
    """The cached data of ``path``, or None (no cache, stale, unreadable, untrusted)."""
    entry = _entry(path)
    if entry is None:
        return None
    cache_file, key = entry
    try:
        if os.geteuid() == 0:
            from .safety import check_trusted

            check_trusted(cache_file, "cache entry")
        with open(cache_file, encoding="utf-8") as fh:
            stored = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key or not isinstance(stored.get("data"), dict):
        return None
    return stored["data"]


def put(path: str, data: dict[str, Any]) -> None:
    """Cache ``data`` for ``path`` (best effort: data that is not JSON, e.g. TOML dates, is not cached)."""
    entry = _entry(path)
    if entry is None:
        return
    cache_file, key = entry
    try:
        text = json.dumps({"key": key, "data": data})
    except (TypeError, ValueError):
        return
    try:
        from .atomicio import atomic_write
        from .safety import make_private

        make_private(os.path.dirname(cache_file))
        atomic_write(cache_file, text, 0o600, private_dir=True)  # unique O_EXCL|O_NOFOLLOW temporary
    except OSError:
        pass
