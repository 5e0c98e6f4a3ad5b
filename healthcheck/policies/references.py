"""Performance references as data (ReFrame style): per GPU SKU, ``value`` with relative ``lower`` /
``upper`` bounds and a ``unit``, from ``healthcheck/data/burnin_references.toml``, overridable key by key
from a site file. Pure apart from reading the two files.

A measurement is judged ``low`` below ``value * (1 + lower)``, ``high`` above ``value * (1 + upper)``
(the test probably did not do what it claims), else ``ok``; a missing bound never judges.

Three kinds of named sections: ``[sku.NAME]`` (a GPU model, found by ``match``), ``[fabric.NAME]``
(the network between nodes, chosen by ``[burnin] fabric``) and ``[link.NAME]`` (a type of link:
NVLink generation, PCIe generation, InfiniBand rate). A SKU or a fabric names its link type with
``link = "NAME"`` and inherits the link's entries it does not set itself: the per-collective
line-rate efficiency (``nccl_<collective>_efficiency_pct``), the alpha-beta references
(``nccl_alpha_us``, ``nccl_<collective>_alpha_us``, ``nccl_beta_efficiency_pct``) and, where the
section has none, ``line_rate_gbps``. ``Sku.get`` answers with the section's own entry first.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

_ENTRY_KEYS = {"value", "lower", "upper", "unit", "peak", "source"}
# Ranges (every number must also be finite): value and peak in (0, 1e12], lower in [-1, 0], upper in
# [0, 100] (a measurement 101 times its reference is no measurement), gpus_per_node in [1, 1024].
MAX_VALUE, MAX_UPPER, MAX_GPUS_PER_NODE = 1e12, 100.0, 1024
_SECTION_KEYS = {"match", "description", "gpus_per_node", "link"}
# every collective nccl-tests has a binary for, in the order reports list them
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")


class ReferencesError(ValueError):
    """A references file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Reference:
    value: float
    unit: str
    lower: float | None = None  # relative, e.g. -0.15
    upper: float | None = None  # relative, e.g. 0.25
    peak: float | None = None   # the datasheet figure, for efficiency
    source: str = ""

    @property
    def low_bound(self) -> float | None:
        return None if self.lower is None else self.value * (1.0 + self.lower)

    @property
    def high_bound(self) -> float | None:
        return None if self.upper is None else self.value * (1.0 + self.upper)

    def judge(self, measured: float | None) -> str:
        """"low" | "high" | "ok" | "unknown" (no measurement)."""
        if measured is None or not math.isfinite(measured):
            return "unknown"
        low, high = self.low_bound, self.high_bound
        if low is not None and measured < low:
            return "low"
        if high is not None and measured > high:
            return "high"
        return "ok"

    def describe(self) -> str:
        parts = [f"{self.value:g} {self.unit}"]
        if self.low_bound is not None:
            parts.append(f">= {self.low_bound:.4g}")
        if self.high_bound is not None:
            parts.append(f"<= {self.high_bound:.4g}")
        return " ".join(parts)


@dataclass
class Sku:
    name: str
    match: list[str]
    description: str = ""
    gpus_per_node: int | None = None
    refs: dict[str, Reference] = field(default_factory=dict)
    link: str = ""  # a [link.NAME] whose entries this section inherits
    inherited: dict[str, Reference] = field(default_factory=dict)  # the link's entries, resolved at load

    def get(self, key: str) -> Reference | None:
        """The section's own entry, else the one inherited from its link type."""
        own = self.refs.get(key)
        return own if own is not None else self.inherited.get(key)

    def matches(self, gpu_name: str) -> bool:
        """A ``match`` pattern found in ``gpu_name`` (case-insensitive) where a word starts: "B200"
        matches "NVIDIA B200" but not "NVIDIA GB200", "H200" not "NVIDIA GH200 120GB"."""
        lowered = gpu_name.lower()
        return any(_word_start_find(lowered, m.lower()) for m in self.match)


def _word_start_find(text: str, pattern: str) -> bool:
    start = text.find(pattern)
    while start >= 0:
        if start == 0 or not text[start - 1].isalnum():
            return True
        start = text.find(pattern, start + 1)
    return False


@dataclass
class References:
    skus: list[Sku]
    fabrics: dict[str, Sku]
    sources: list[str]  # files merged, in order
    storage: dict[str, Sku] = field(default_factory=dict)  # [storage.NAME]: read_gbps / write_gbps per path
    links: dict[str, Sku] = field(default_factory=dict)    # [link.NAME]: per link type (NVLink 4, IB NDR, ...)

    def sku_for(self, gpu_name: str | None) -> Sku | None:
        """The first SKU one of whose ``match`` patterns is in ``gpu_name`` (case-insensitive, at the
        start of a word: see Sku.matches)."""
        if not gpu_name:
            return None
        for sku in self.skus:
            if sku.matches(gpu_name):
                return sku
        return None

    def storage_for(self, path: str) -> Sku | None:
        """The [storage.NAME] whose ``match`` holds ``path`` exactly, else [storage.default]."""
        for sku in self.storage.values():
            if path in sku.match:
                return sku
        return self.storage.get("default")

    def by_name(self, name: str) -> Sku | None:
        return next((s for s in self.skus if s.name == name), None) or self.fabrics.get(name)


def _entry(data: Any, where: str) -> Reference:
    if not isinstance(data, dict):
        raise ReferencesError(f"{where}: must be a table {{ value = ..., unit = ... }}")
    unknown = set(data) - _ENTRY_KEYS
    if unknown:
        raise ReferencesError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                              f"(allowed: {', '.join(sorted(_ENTRY_KEYS))})")
    for key in ("value", "lower", "upper", "peak"):
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise ReferencesError(f"{where}.{key}: must be a finite number, got {v!r}")
    if "value" not in data:
        raise ReferencesError(f"{where}: missing 'value'")
    for key in ("value", "peak"):  # a rate, a bandwidth, a throughput: 0 would judge nothing (or divide by it)
        if data.get(key) is not None and not 0 < data[key] <= MAX_VALUE:
            problem = "must be > 0" if data[key] <= 0 else f"must be at most {MAX_VALUE:.0e}"
            raise ReferencesError(f"{where}.{key}: {problem}, got {data[key]}")
    if not isinstance(data.get("unit"), str) or not data["unit"]:
        raise ReferencesError(f"{where}: missing or empty 'unit'")
    lower, upper = data.get("lower"), data.get("upper")
    if lower is not None and not -1.0 <= lower <= 0.0:
        raise ReferencesError(f"{where}.lower: a relative bound between -1 and 0 (e.g. -0.15), got {lower}")
    if upper is not None and not 0.0 <= upper <= MAX_UPPER:
        raise ReferencesError(f"{where}.upper: a relative bound in [0, {MAX_UPPER:g}] (e.g. 0.25), got {upper}")
    return Reference(float(data["value"]), data["unit"], None if lower is None else float(lower),
                     None if upper is None else float(upper),
                     None if data.get("peak") is None else float(data["peak"]), str(data.get("source", "")))


def _merge_section(into: dict[str, Sku], table: Any, kind: str, origin: str) -> None:
    if not isinstance(table, dict):
        raise ReferencesError(f"{origin}: [{kind}] must be a table of named sections")
    for name, data in table.items():
        where = f"{origin}: {kind}.{name}"
        if not isinstance(data, dict):
            raise ReferencesError(f"{where}: must be a table")
        sku = into.get(name) or Sku(name, [])
        if "match" in data:
            match = data["match"]
            if not isinstance(match, list) or not all(isinstance(m, str) and m for m in match):
                raise ReferencesError(f"{where}.match: a list of non-empty strings")
            sku.match = list(match)
        if "description" in data:
            sku.description = str(data["description"])
        if "link" in data:
            if kind == "link" or not isinstance(data["link"], str) or not data["link"]:
                raise ReferencesError(f"{where}.link: " + ("a link type cannot name another" if kind == "link"
                                                           else "the name of a [link.NAME] section"))
            sku.link = data["link"]
        if "gpus_per_node" in data:
            gpn = data["gpus_per_node"]
            if isinstance(gpn, bool) or not isinstance(gpn, int) or not 1 <= gpn <= MAX_GPUS_PER_NODE:
                raise ReferencesError(f"{where}.gpus_per_node: an integer in [1, {MAX_GPUS_PER_NODE}]")
            sku.gpus_per_node = gpn
        for key, entry in data.items():
            if key not in _SECTION_KEYS:
                sku.refs[key] = _entry(entry, f"{where}.{key}")
        if kind == "sku" and not sku.match:
            raise ReferencesError(f"{where}: a new SKU needs 'match' (substrings of the GPU name)")
        into[name] = sku


def merge(base: References | None, text: str, origin: str) -> References:
    """``base`` updated with the TOML ``text`` (entries replace base entries key by key)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReferencesError(f"{origin}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ReferencesError(f"{origin}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ReferencesError(f"{origin}: not valid TOML: {exc}") from None
    unknown = set(data) - {"sku", "fabric", "storage", "link"}
    if unknown:
        raise ReferencesError(f"{origin}: unknown top-level table(s) {', '.join(sorted(unknown))} "
                              "(allowed: sku, fabric, storage, link)")
    skus = {s.name: _copy(s) for s in (base.skus if base else [])}
    fabrics = {n: _copy(s) for n, s in (base.fabrics.items() if base else [])}
    _merge_section(skus, data.get("sku", {}), "sku", origin)
    _merge_section(fabrics, data.get("fabric", {}), "fabric", origin)
    storage = {n: _copy(s) for n, s in (base.storage.items() if base else [])}
    _merge_section(storage, data.get("storage", {}), "storage", origin)
    links = {n: _copy(s) for n, s in (base.links.items() if base else [])}
    _merge_section(links, data.get("link", {}), "link", origin)
    # site SKUs are matched before the defaults so that a site can refine one (e.g. "H100 80GB HBM3 PCIe")
    order = [n for n in data.get("sku", {}) if n not in {s.name for s in (base.skus if base else [])}]
    ordered = [skus[n] for n in order] + [skus[s.name] for s in (base.skus if base else [])]
    _resolve_links(links, [*(("sku", s) for s in ordered), *(("fabric", f) for f in fabrics.values())], origin)
    return References(ordered, fabrics, [*(base.sources if base else []), origin], storage, links)


def _resolve_links(links: dict[str, Sku], sections: list[tuple[str, Sku]], origin: str) -> None:
    """Each section's ``inherited`` entries from its link type; an unknown link name is an error (a
    typo must not switch the efficiency and latency judgements off)."""
    for kind, section in sections:
        if not section.link:
            section.inherited = {}
            continue
        link = links.get(section.link)
        if link is None:
            raise ReferencesError(f"{origin}: {kind}.{section.name}.link: no [link.{section.link}] (known: "
                                  f"{', '.join(sorted(links)) or 'none'})")
        section.inherited = dict(link.refs)


def _copy(sku: Sku) -> Sku:
    return Sku(sku.name, list(sku.match), sku.description, sku.gpus_per_node, dict(sku.refs), sku.link)


def default_text() -> str:
    return resources.files("healthcheck").joinpath("data/burnin_references.toml").read_text(encoding="utf-8")


def load(site_path: str | None = None) -> References:
    """The defaults, then the site file when given. Reading the site file is the caller's trust
    decision (as root it must pass safety.check_trusted first; `healthcheck burnin run` does that)."""
    refs = merge(None, default_text(), "built-in references")
    if site_path:
        from ..safeio.trust import NotARegularFile, read_regular

        try:
            text = read_regular(site_path, "references file").decode("utf-8")
        except NotARegularFile as exc:
            raise ReferencesError(f"{site_path}: {exc}") from None
        except OSError as exc:
            raise ReferencesError(f"{site_path}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ReferencesError(f"{site_path}: not UTF-8 text (byte {exc.start})") from None
        refs = merge(refs, text, site_path)
    return refs
