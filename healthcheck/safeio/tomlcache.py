"""Parsed TOML, cached for the hooks' hot path (tomllib and parsing cost ≈ 15 ms per run).

A cache entry is keyed by the file's real path, inode, size and mtime (ns) and the tool's version, so
an edited or replaced file is parsed afresh. Entries live in ``$HEALTHCHECK_CACHE_DIR``, else (as root)
``/var/cache/healthcheck``, in a 0700 directory, 0600 files; as root an entry is used only when it is
root's alone (see :mod:`healthcheck.safeio.trust`) and read only when it is a regular file of at most
MAX_ENTRY_BYTES. Every failure is a cache miss, never an error.

Entries are in ``marshal`` format: built into the interpreter, so reading one imports nothing (``json``
brought ``re``, ``enum``, ``functools`` and ``collections`` onto the prolog's path, ~3 ms). ``marshal``
is not meant for data others could craft: an entry is read only from the cache folder of the user
running (as root: only when root's alone), and its Python version is part of the key.
"""
from __future__ import annotations

import marshal
import os
import sys
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401

CACHE_ENV = "HEALTHCHECK_CACHE_DIR"
MAX_ENTRY_BYTES = 16 << 20  # the entry of a file of at most safety.MAX_TRUSTED_FILE_BYTES (4 MiB) of TOML


def cache_dir() -> str | None:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return explicit
    return "/var/cache/healthcheck" if os.geteuid() == 0 else None


def _entry(path: str) -> tuple[str, list] | None:
    folder = cache_dir()
    if folder is None:
        return None
    from .. import __version__

    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    name = real.replace("%", "%25").replace("/", "%2F")[-200:] + ".marshal"
    return os.path.join(folder, name), [real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, __version__,
                                        list(sys.version_info[:2])]


def get(path: str) -> dict[str, Any] | None:
    """The cached data of ``path``, or None (no cache, stale, unreadable, untrusted)."""
    entry = _entry(path)
    if entry is None:
        return None
    cache_file, key = entry
    from .trust import MAX_TRUSTED_FILE_BYTES, read_regular

    if key[3] > MAX_TRUSTED_FILE_BYTES:  # a file too big to be read is never served from the cache
        return None
    try:
        if os.geteuid() == 0:
            from .trust import check_trusted

            check_trusted(cache_file, "cache entry")
        stored = marshal.loads(read_regular(cache_file, "cache entry", MAX_ENTRY_BYTES))
    except (OSError, ValueError, EOFError, TypeError, RecursionError):  # a FIFO, a huge or cut entry: a miss
        return None
    if not isinstance(stored, dict) or stored.get("key") != key or not isinstance(stored.get("data"), dict):
        return None
    return stored["data"]


def put(path: str, data: dict[str, Any]) -> None:
    """Cache ``data`` for ``path`` (best effort: data marshal cannot write, e.g. TOML dates, is not cached)."""
    entry = _entry(path)
    if entry is None:
        return
    cache_file, key = entry
    try:
        text = marshal.dumps({"key": key, "data": data})
    except (TypeError, ValueError):
        return
    try:
        from .atomic import atomic_write
        from .trust import make_private

        make_private(os.path.dirname(cache_file))
        atomic_write(cache_file, text, 0o600, private_dir=True)  # unique O_EXCL|O_NOFOLLOW temporary
    except OSError:
        pass
