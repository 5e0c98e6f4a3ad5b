"""Reading the expectations file: the trust rules, the size and depth limits, the TOML parse with its
errors at file:line, and the Slurm hooks' cache of the validated file (:mod:`healthcheck.safeio.tomlcache`).

The file must be a regular file (a FIFO or device at the path is refused unread, never waited on) of
at most MAX_CONFIG_BYTES (4 MiB; real ones are a few KiB), nesting at most MAX_CONFIG_DEPTH (32) tables
and arrays. As root, the file and the directories above it must be root's alone
(:mod:`healthcheck.safeio.trust`): a refused config judges nothing, drains nothing.

The hooks' cache (``load(path, use_cache=True)``) holds the file as validated (CACHE_FORMAT: node
classes, defaults, [xid], the [slurm] values and the raw tables of the other sections), written only
after a validation passed and keyed by the file's identity and the tool's version: a cached load
builds the Config without importing or running the schema.
"""
from __future__ import annotations

import os
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Any  # noqa: F401

from ..safeio import tomlcache
from ..core.struct import fields
from ..safeio.trust import NotARegularFile, UntrustedFile, check_trusted, read_regular, running_as_root
from .slurm_settings import SlurmSettings
from .model import Config, ConfigError, NodeClass

MAX_CONFIG_BYTES = 4 << 20  # = safety.MAX_TRUSTED_FILE_BYTES; a bigger config is refused before it is read
MAX_CONFIG_DEPTH = 32       # tables and arrays nest about 4 deep in a real config
SITE_CONFIG = "/etc/healthcheck/healthcheck.toml"
CACHE_FORMAT = "healthcheck.config/validated-1"  # a cache entry of another shape is a miss


def load(path: str, use_cache: bool = False) -> Config:
    """Read and validate the expectations file. ``use_cache``: the hooks' hot path: the validated file
    from the cache when it is there; and only the sections the hooks read (``Section.hot``) validated
    now, the others when asked for (:meth:`Config.section`)."""
    if running_as_root():
        try:
            check_trusted(path, "config")
        except UntrustedFile as exc:
            raise ConfigError(str(exc), path) from exc
        except OSError as exc:
            raise ConfigError(f"cannot read config: {exc.strerror or exc}", path) from exc
    if use_cache:
        config = _from_cache(path)
        if config is not None:
            return config
    try:
        raw = read_regular(path, "config", MAX_CONFIG_BYTES)
    except NotARegularFile as exc:
        raise ConfigError(str(exc), path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror or exc}", path) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", path) from exc
    data = _parse(text, path)
    from .schema import Validator  # lazy: a cached load (the hooks, before every job) needs no schema

    config = Validator(text, path, defer=use_cache).config(data)
    if use_cache:
        tomlcache.put(path, _cache_entry(config))
    return config


def loads(text: str, path: str | None = None) -> Config:
    """Validate the text of an expectations file (``path`` names it in errors)."""
    from .schema import Validator  # lazy: this module is on the hooks' path, the schema is not

    return Validator(text, path).config(_parse(text, path))


def _cache_entry(config: Config) -> dict[str, Any]:
    """What the cache keeps of a validated config (plain data: marshal writes it)."""
    return {"format": CACHE_FORMAT, "defaults": config.defaults,
            "classes": [[c.name, c.nodes, c.settings] for c in config.classes], "xid": config.xid,
            "slurm": {f.name: getattr(config.slurm, f.name) for f in fields(config.slurm)},
            "deferred": config.deferred}


def _from_cache(path: str) -> Config | None:
    """The config of a cache entry written by :func:`load` (None: no entry, or not of this format)."""
    data = tomlcache.get(path)
    if data is None or data.get("format") != CACHE_FORMAT:
        return None
    try:
        return Config(path, data["defaults"], [NodeClass(*c) for c in data["classes"]], data["xid"],
                      SlurmSettings(**data["slurm"]), {}, data["deferred"])
    except (KeyError, TypeError, ValueError):  # not what _cache_entry writes: read the file
        return None


def _parse(text: str, path: str | None) -> dict[str, Any]:
    import tomllib  # lazy: the hooks' cached load never parses TOML (tomllib costs them milliseconds)

    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{len(text)} characters, over the limit of {MAX_CONFIG_BYTES} "
                          f"({MAX_CONFIG_BYTES >> 20} MiB) for a config: refusing to parse it", path)
    try:
        data = tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per level of nested arrays and inline tables
        raise ConfigError(f"nested too deeply (a config nests at most {MAX_CONFIG_DEPTH} levels)", path,
                          _deep_line(text)) from None
    except tomllib.TOMLDecodeError as exc:
        import re  # a parse error: not the hot path

        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = int(match.group(1)) if match else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ConfigError(f"TOML syntax error: {msg}", path, line) from exc
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ConfigError(f"TOML syntax error: {exc}", path) from None
    if _depth(data) > MAX_CONFIG_DEPTH:
        raise ConfigError(f"nested too deeply (a config nests at most {MAX_CONFIG_DEPTH} levels)", path,
                          _deep_line(text))
    return data


def _depth(data: Any) -> int:
    """How deeply ``data`` nests tables and arrays (iterative: deep data must not recurse here)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > MAX_CONFIG_DEPTH:
                break
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((v, level + 1) for v in children if isinstance(v, (dict, list)))
    return deepest


def _deep_line(text: str) -> int | None:
    """The first line that opens more than MAX_CONFIG_DEPTH brackets or braces (best effort)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.count("[") + line.count("{") > MAX_CONFIG_DEPTH:
            return number
    return None


def site_db_url(config_path: str | None = None) -> str | None:
    """The history database URL of the site config (``[history] db_url``): the file named, else
    $HEALTHCHECK_CONFIG, else /etc/healthcheck/healthcheck.toml when it exists; None without one."""
    path = config_path or os.environ.get("HEALTHCHECK_CONFIG")
    if path is None and os.path.exists(SITE_CONFIG):
        path = SITE_CONFIG
    return load(path).history_db_url if path else None
