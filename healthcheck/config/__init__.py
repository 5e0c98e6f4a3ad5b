"""The expectations file ("commissioning as code"): one TOML file, node classes matched by node-set
patterns, per class what the hardware must look like, thresholds and per-context check lists, and one
section per subsystem that the file configures.

Modules, each depending only on those before it:

- :mod:`.sections` -- the registry of sections: name -> the subsystem's ``validate(table) -> Settings``
  (named by module and function, imported only when used); imports nothing.
- :mod:`.model` -- :class:`Config`, :class:`NodeClass`, :class:`ConfigError`, the expectations of a node.
- :mod:`.schema` -- :class:`~.schema.Validator`: every key, type and range of the file, each section
  through its registered validator, every error at file:line.
- :mod:`.loading` -- reading the file (trust rules, size and depth limits, TOML errors with their line)
  and the hooks' parsed-file cache.

A section's settings: ``config.section(name)``, e.g. ``cfg.section("fabric.counters")`` ->
``CounterSettings``, ``cfg.section("fleet")`` -> ``FleetSettings``; a file without the section gives
its defaults. ``cfg.slurm``, ``cfg.history_db_url``, ``cfg.burnin``, ``cfg.sweep`` and ``cfg.topology``
answer the same as ``section("slurm")``, ``section("history")``, ... Adding a section: one line in
:mod:`.sections`.

Everything callers use is here: ``from healthcheck.config import load, ConfigError``; the registry
and one section's validation on its own (``healthcheck.config.sections.SECTIONS``,
``healthcheck.config.schema.validate_section``) from their modules. The Slurm hooks import this
package before every job: it imports only the loading and the model, and their cached load builds the
Config without the schema (validated once, when the cache entry was written).
"""
from __future__ import annotations

from .loading import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, load, loads, site_db_url
from .model import Config, ConfigError, NodeClass, build_expectations, default_expectations, overlapping_classes

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "Config", "ConfigError", "NodeClass", "build_expectations",
           "default_expectations", "load", "loads", "overlapping_classes", "site_db_url"]
