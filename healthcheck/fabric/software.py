"""Software and environment consistency across nodes: driver, CUDA, NCCL, OFED / rdma-core, HCA
firmware, GPU VBIOS, kernel, container image digest and the ``NCCL_*`` / ``UCX_*`` environment a job
gets are the same on every node of an allocation (or of the fleet), or match a declared set.

Input: one record per node (a list of dicts; :func:`records_from_text` reads JSON lines, a JSON array
or one JSON object). Each record names its ``node`` and carries its facts in one of these shapes:

- the facts format (write this one)::

      {"node": "gpu001", "facts": {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5",
       "container_image": "sha256:..."}, "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "UCX_TLS": "rc"}}

  (``versions`` is read like ``facts``: a snapshot's JSON has it; ``container_image`` may stand at
  the top level too);
- a burn-in node result or spool run record: ``{"node": ..., "burnin": {"versions": {...}}}``;
- ``healthcheck check --format json`` output (and history run records): the ``sw.versions`` results,
  either one finding per item (``component`` = item, message ``"driver 550.54.15"`` or
  ``"driver 535.1 (expected 550.54.15)"``) or the informational listing
  ``"cuda 12.4, driver 550.54.15, ... (informational: ...)"``.

Item names are the probe's (:mod:`healthcheck.probes.versions`: kernel, driver, cuda, vbios, nccl,
rdma_core, ofed, hca_firmware, mlx5_core) plus ``container_image`` and the environment variables by
name. Only variables whose name starts with one of ``env_prefixes`` (``NCCL_``, ``UCX_``) are kept:
other variables never enter a report. A value that lists one entry per GPU or HCA ("96.00.1,96.00.2")
is compared as the set of its entries.

Method, per item: every node's value (``(not reported)`` when a node lacks a version item others
report, ``(unset)`` for an environment variable it lacks) is one vote; the majority is the value more
than half of the nodes hold. Without a declared value the odd nodes are those off the majority (all
values listed when there is none); with one (``expected``: exact, or a prefix ending in ``*``;
``"(unset)"`` for a variable that must be absent) the odd nodes are those that do not match it. Node
lists are folded with ClusterShell (``gpu[001-003]``). Several records of one node: the latest
(``started_at``/``taken_at``, else the last read) counts. Pure functions; O(nodes x items).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

VERSION_ITEMS = ("driver", "cuda", "nccl", "ofed", "rdma_core", "hca_firmware", "vbios", "kernel",
                 "mlx5_core", "container_image")
DEFAULT_ENV_PREFIXES = ("NCCL_", "UCX_")
NOT_REPORTED = "(not reported)"
UNSET = "(unset)"
MAX_NODES = 100_000
MAX_ITEMS = 1000  # distinct items across all nodes
MAX_VALUE_CHARS = 4096
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_ITEM = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
_SETTINGS_KEYS = ("expected", "ignore", "env_prefixes")


class ConsistencyError(ValueError):
    """A record or the settings are malformed (the message says which and where)."""


@dataclass(frozen=True)
class Settings:
    expected: dict = field(default_factory=dict)  # item -> spec
    ignore: tuple = ()
    env_prefixes: tuple = DEFAULT_ENV_PREFIXES


@dataclass
class NodeFacts:
    node: str
    facts: dict[str, str]  # item -> value (versions, container_image, environment variables)
    when: str | None = None  # started_at / taken_at of the record


@dataclass
class ItemReport:
    item: str
    majority: str | None  # the value more than half the nodes hold (None: no majority)
    majority_nodes: str  # folded node set holding it ("" when no majority)
    n_nodes: int
    odd: list[tuple[str, str]]  # (value, folded nodes) off the majority / not matching the expectation
    expected: str | None = None

    @property
    def consistent(self) -> bool:
        return not self.odd


@dataclass
class Report:
    nodes: str  # folded
    n_nodes: int
    items: list[ItemReport]
    notes: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return all(item.consistent for item in self.items)


# ----------------------------------------------------------------------------------------- settings


def validate(section: dict) -> Settings:
    """The ``[fabric.consistency]`` section: ``expected = {item = "spec"}``, ``ignore = [items]``,
    ``env_prefixes = ["NCCL_", "UCX_"]``."""
    if not isinstance(section, dict):
        raise ConsistencyError(f"consistency settings: expected a table, not {type(section).__name__}")
    unknown = sorted(set(section) - set(_SETTINGS_KEYS))
    if unknown:
        raise ConsistencyError(f"consistency settings: unknown key(s) {', '.join(unknown)} "
                               f"(known: {', '.join(_SETTINGS_KEYS)})")
    expected = section.get("expected", {})
    if not isinstance(expected, dict):
        raise ConsistencyError("consistency settings: expected must be a table {item = \"version\"}")
    for item, spec in expected.items():
        if not _ITEM.match(str(item)):
            raise ConsistencyError(f"consistency settings: expected.{item}: not an item name")
        if not isinstance(spec, str) or not spec.strip() or spec.strip() == "*":
            raise ConsistencyError(f"consistency settings: expected.{item} must be a version, a prefix "
                                   f"ending in \"*\" or \"{UNSET}\", not {spec!r}")
    ignore = section.get("ignore", [])
    prefixes = section.get("env_prefixes", list(DEFAULT_ENV_PREFIXES))
    for key, value in (("ignore", ignore), ("env_prefixes", prefixes)):
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise ConsistencyError(f"consistency settings: {key} must be a list of names")
    return Settings({str(k): v.strip() for k, v in expected.items()}, tuple(ignore), tuple(prefixes))


# ---------------------------------------------------------------------------------------- records


def records_from_text(text: str, where: str) -> list[dict]:
    """The records of one file: a JSON object, a JSON array of objects, or JSON lines (blank lines
    and ``#`` comments skipped). ConsistencyError names the file and line of anything else."""
    stripped = text.strip()
    if not stripped:
        return []
    if stripped[0] in "[{":
        try:
            doc = json.loads(stripped)
        except (ValueError, RecursionError):
            doc = None  # JSON lines start with "{" too
        if isinstance(doc, dict):
            return [doc]
        if isinstance(doc, list):
            if not all(isinstance(d, dict) for d in doc):
                raise ConsistencyError(f"{where}: a JSON array of node records must hold only objects")
            return doc
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ConsistencyError(f"{where}:{number}: not a JSON object ({str(exc)[:80]})") from None
        if not isinstance(doc, dict):
            raise ConsistencyError(f"{where}:{number}: a JSON line must be an object with a \"node\"")
        out.append(doc)
    return out


def _value(where: str, item: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConsistencyError(f"{where}: {item} must be a string, not {type(value).__name__}")
    text = str(value).strip()
    if len(text) > MAX_VALUE_CHARS:
        raise ConsistencyError(f"{where}: {item} is {len(text)} characters long (over {MAX_VALUE_CHARS})")
    return text


def _versions_from_check(results: list, where: str) -> dict[str, str]:
    """Versions from the ``sw.versions`` findings of ``healthcheck check --format json``."""
    out = {}
    for result in results:
        if not isinstance(result, dict) or result.get("check") != "sw.versions":
            continue
        message = result.get("message")
        if not isinstance(message, str):
            continue
        component = result.get("component")
        if component:
            item, _, rest = message.partition(" ")
            if item != component or rest.startswith("not found"):
                continue
            value = rest.split(" (expected ", 1)[0]
            out[item] = _value(where, item, value)
            continue
        listing = message.split(" (informational", 1)[0]
        if listing.startswith("no versions found"):
            continue
        for part in listing.split(", "):
            item, _, value = part.strip().partition(" ")
            if item and value and _ITEM.match(item):
                out[item] = _value(where, item, value)
    return out


def node_facts(record: dict, where: str, env_prefixes=DEFAULT_ENV_PREFIXES) -> NodeFacts:
    """One node's facts from a record of any accepted shape (see the module notes)."""
    if not isinstance(record, dict):
        raise ConsistencyError(f"{where}: a node record must be a JSON object")
    node = record.get("node")
    if not isinstance(node, str) or not _NODE.match(node):
        raise ConsistencyError(f"{where}: the record needs a \"node\" name (letters, digits, . _ -), "
                               f"got {node!r}")
    facts: dict[str, str] = {}
    burnin = record.get("burnin")
    sources = [record.get("versions"), record.get("facts"),
               burnin.get("versions") if isinstance(burnin, dict) else None]
    if isinstance(record.get("results"), list):
        facts.update(_versions_from_check(record["results"], f"{where} ({node})"))
    for source in sources:
        if source is None:
            continue
        if not isinstance(source, dict):
            raise ConsistencyError(f"{where} ({node}): versions/facts must be an object {{item: value}}")
        for item, value in source.items():
            if not _ITEM.match(str(item)):
                raise ConsistencyError(f"{where} ({node}): {item!r} is not an item name")
            if value is not None:
                facts[str(item)] = _value(f"{where} ({node})", str(item), value)
    if record.get("container_image") is not None:
        facts["container_image"] = _value(f"{where} ({node})", "container_image", record["container_image"])
    env = record.get("env")
    if env is not None:
        if not isinstance(env, dict):
            raise ConsistencyError(f"{where} ({node}): env must be an object {{NAME: value}}")
        for name, value in env.items():
            if isinstance(name, str) and name.startswith(tuple(env_prefixes)) and value is not None:
                facts[name] = _value(f"{where} ({node})", name, value)
    when = record.get("started_at") or record.get("taken_at")
    return NodeFacts(node, facts, when if isinstance(when, str) else None)


def latest_per_node(facts: list[NodeFacts]) -> tuple[list[NodeFacts], list[str]]:
    """One NodeFacts per node (the latest; see the module notes) and a note per node seen twice."""
    chosen: dict[str, NodeFacts] = {}
    seen: dict[str, int] = {}
    for item in facts:
        seen[item.node] = seen.get(item.node, 0) + 1
        old = chosen.get(item.node)
        if old is None or (item.when or "") >= (old.when or ""):
            chosen[item.node] = item
    notes = [f"{node}: {count} records, the latest used" for node, count in sorted(seen.items()) if count > 1]
    return list(chosen.values()), notes


# -------------------------------------------------------------------------------------- judging


def fold(nodes) -> str:
    """``gpu[001-003]`` (ClusterShell); plain sorted names when they do not fold."""
    names = sorted(set(nodes))
    try:
        from ClusterShell.NodeSet import NodeSet

        return str(NodeSet.fromlist(names))
    except Exception:  # a name ClusterShell cannot read: list them unfolded
        return ",".join(names)


def _normal(item: str, value: str, env_prefixes) -> str:
    if item.startswith(tuple(env_prefixes)):
        return value
    parts = sorted({p.strip() for p in value.split(",") if p.strip()})
    return ",".join(parts)


def matches(value: str, spec: str) -> bool:
    """Exact, or prefix when ``spec`` ends in ``*``; a comma list matches when every entry does."""
    if spec == UNSET or value in (UNSET, NOT_REPORTED):
        return value == spec
    entries = [v.strip() for v in value.split(",")] or [value]
    if spec.endswith("*"):
        return all(e.startswith(spec[:-1]) for e in entries)
    return all(e == spec for e in entries) or value == spec


def check_consistency(nodes: list[NodeFacts], settings: Settings | None = None) -> Report:
    """The consistency report of these nodes (see the module notes). ConsistencyError on no nodes,
    too many nodes or items."""
    settings = settings or Settings()
    nodes, notes = latest_per_node(nodes)
    if not nodes:
        raise ConsistencyError("no node records given")
    if len(nodes) > MAX_NODES:
        raise ConsistencyError(f"{len(nodes)} nodes, over the limit of {MAX_NODES}")
    items = sorted({i for n in nodes for i in n.facts} | set(settings.expected))
    items = [i for i in items if i not in settings.ignore]
    if len(items) > MAX_ITEMS:
        raise ConsistencyError(f"{len(items)} distinct items, over the limit of {MAX_ITEMS}")
    order = {name: k for k, name in enumerate(VERSION_ITEMS)}
    items.sort(key=lambda i: (i.startswith(tuple(settings.env_prefixes)), order.get(i, len(order)), i))
    reports = []
    for item in items:
        absent = UNSET if item.startswith(tuple(settings.env_prefixes)) else NOT_REPORTED
        groups: dict[str, list[str]] = {}
        for n in nodes:
            value = n.facts.get(item)
            value = _normal(item, value, settings.env_prefixes) if value is not None else absent
            groups.setdefault(value, []).append(n.node)
        ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        top_value, top_nodes = ranked[0]
        majority = top_value if len(top_nodes) * 2 > len(nodes) else None
        spec = settings.expected.get(item)
        if spec is not None:
            odd = [(v, fold(ns)) for v, ns in ranked if not matches(v, spec)]
        else:
            odd = [(v, fold(ns)) for v, ns in ranked if v != majority] if len(ranked) > 1 else []
        reports.append(ItemReport(item, majority, fold(top_nodes) if majority is not None else "",
                                  len(nodes), odd, spec))
    return Report(fold(n.node for n in nodes), len(nodes), reports, notes)


def to_dict(report: Report) -> dict:
    return {"nodes": report.nodes, "n_nodes": report.n_nodes, "consistent": report.consistent,
            "items": [{"item": i.item, "consistent": i.consistent, "majority": i.majority,
                       "majority_nodes": i.majority_nodes, "expected": i.expected,
                       "odd": [{"value": v, "nodes": ns} for v, ns in i.odd]} for i in report.items],
            "notes": report.notes}


def render_text(report: Report) -> str:
    """A table: one line per item, the odd nodes per item under it."""
    lines = [f"software consistency of {report.n_nodes} node(s) {report.nodes}: "
             + ("all items consistent" if report.consistent
                else f"{sum(not i.consistent for i in report.items)} item(s) differ")]
    width = max((len(i.item) for i in report.items), default=4)
    for item in report.items:
        mark = "ok  " if item.consistent else "DIFF"
        if item.expected is not None:
            head = f"expected {item.expected}"
        elif item.majority is not None:
            head = f"{item.majority} on {item.majority_nodes}"
        else:
            head = "no majority"
        lines.append(f"  {mark} {item.item:<{width}}  {head}")
        for value, nodes in item.odd:
            lines.append(f"       {'':<{width}}  {value} on {nodes}")
    lines.extend(f"  note: {note}" for note in report.notes)
    return "\n".join(lines)
