"""Physical topology: which rack, chassis or power group a node sits in.

The config's ``[topology]`` table is ``{level: {group_name: nodeset}}``, one sub-table per level
(any name: rack, chassis, power, row, ...), e.g.::

    [topology.rack]
    r01 = "gpu[001-032]"
    r02 = "gpu[033-064]"
    [topology.power]
    pdu-a = "gpu[001-016],gpu[033-048]"

A nodeset is a ClusterShell pattern string (``gpu[001-032]``, comma-separated parts) or a list of
such strings (joined). Within one level a node belongs to at most one group; across levels the
groups overlap freely (a power group may span racks). Node groups (``@name``) are not accepted:
resolving them would read the site's group sources, and this module does no I/O. A group may name
at most ``MAX_GROUP_NODES`` nodes (a typo such as ``gpu[1-10000000]`` is an error, not a hang: the
size is bounded from the bracket ranges before ClusterShell, which builds every name, sees them;
:func:`nodeset_size_bound` is that bound, for every node set from a file or a command line).

Pure functions; ClusterShell is imported inside them. Complexity: validation expands every group
once (O(total nodes)); ``groups_of`` is one dictionary lookup per node and level after that.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_GROUP_NODES = 100_000


class TopologyError(ValueError):
    """The topology table is malformed; the message names the level and group."""


def _pattern(level: str, group: str, spec: Any) -> str:
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(p, str) for p in spec):
        spec = ",".join(p.strip() for p in spec)
    if not isinstance(spec, str):
        raise TopologyError(f"topology.{level}.{group}: expected a nodeset string such as "
                            f"\"gpu[001-032]\" (or a list of them), not {type(spec).__name__}")
    spec = spec.strip()
    if not spec:
        raise TopologyError(f"topology.{level}.{group}: empty nodeset")
    if "@" in spec:
        raise TopologyError(f"topology.{level}.{group}: node groups (@name) are not supported in "
                            f"{spec!r}: list the nodes")
    if any(c.isspace() for c in spec):
        raise TopologyError(f"topology.{level}.{group}: whitespace inside nodeset {spec!r}")
    return spec


_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"\s*(\d{1,18})\s*(?:-\s*(\d{1,18})\s*)?(?:/\s*(\d{1,18})\s*)?")
# A bracket (up to its closing one), a set operator or comma, or a run of anything else: one pass.
_TOKEN = re.compile(r"\[[^\]]*\]?|[,!&^]|[^,!&^\[]+")
_SEPARATORS = frozenset(",!&^")


def _terms(spec: str) -> list[str]:
    """``spec`` split on commas and set operators outside brackets, in one pass over it (a split with a
    look-ahead for the closing bracket was quadratic in a long comma list)."""
    terms, term = [], []
    for token in _TOKEN.findall(spec):
        if token in _SEPARATORS:
            terms.append("".join(term))
            term = []
        else:
            term.append(token)
    terms.append("".join(term))
    return terms


def nodeset_size_bound(spec: str, limit: int = MAX_GROUP_NODES) -> int:
    """An upper bound of the nodes the node set ``spec`` names, from its bracket ranges alone, in
    time linear in ``spec``: ClusterShell builds every name of a range, so a huge range
    (``node[1-99999999]``: gigabytes) must be refused before it is parsed. Terms at the top level
    (split on commas and set operators outside brackets) add; the bracket ranges of one term multiply.
    A range it cannot read counts as 1 (ClusterShell then rejects it), one with more than 18 digits
    as too large. Once one term's product passes ``limit`` that product is returned (a number over
    the limit, not the whole bound). Used wherever a node set from a file or a command line is
    expanded: the [topology] groups, the config's node classes, the drill's --nodes."""
    total = 0
    for term in _terms(spec):
        size = 1
        for body in _BRACKET.findall(term):
            count = 0
            for part in body.split(","):
                m = _RANGE.fullmatch(part)
                if m is None:
                    count += limit + 1 if re.search(r"\d{19}", part) else 1
                    continue
                lo, hi, step = int(m[1]), int(m[2] or m[1]), max(int(m[3] or 1), 1)
                count += (hi - lo) // step + 1 if hi >= lo else 1
            size *= max(count, 1)
            if size > limit:
                return size
        total += size
    return total


def _expand(level: str, group: str, spec: str) -> list[str]:
    from ClusterShell.NodeSet import NodeSet, NodeSetException, RESOLVER_NOGROUP
    from ClusterShell.RangeSet import RangeSetException

    bound = nodeset_size_bound(spec)
    if bound > MAX_GROUP_NODES:
        raise TopologyError(f"topology.{level}.{group}: nodeset {spec!r} names more than "
                            f"{MAX_GROUP_NODES} nodes (about {bound}): a typo?")
    try:
        nodes = list(NodeSet(spec, resolver=RESOLVER_NOGROUP))
    except (NodeSetException, RangeSetException, ValueError, TypeError, IndexError,
            OverflowError, AssertionError) as exc:
        raise TopologyError(f"topology.{level}.{group}: bad nodeset {spec!r}: {exc}") from None
    if not nodes:
        raise TopologyError(f"topology.{level}.{group}: nodeset {spec!r} names no node")
    return nodes


def _checked(table: Any) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """(normalised table, {level: {node: group}})."""
    if not isinstance(table, Mapping):
        raise TopologyError(f"[topology] must be a table of levels {{level: {{group: nodeset}}}}, "
                            f"not {type(table).__name__}")
    clean: dict[str, dict[str, str]] = {}
    where: dict[str, dict[str, str]] = {}
    for level, groups in table.items():
        if not isinstance(level, str) or not level.strip():
            raise TopologyError(f"topology: level names must be non-empty strings, not {level!r}")
        if not isinstance(groups, Mapping):
            raise TopologyError(f"topology.{level}: must be a table {{group: nodeset}}, "
                                f"not {type(groups).__name__}")
        clean[level], where[level] = {}, {}
        for group, spec in groups.items():
            if not isinstance(group, str) or not group.strip():
                raise TopologyError(f"topology.{level}: group names must be non-empty strings, "
                                    f"not {group!r}")
            pattern = _pattern(level, group, spec)
            for node in _expand(level, group, pattern):
                other = where[level].setdefault(node, group)
                if other != group:
                    raise TopologyError(f"topology.{level}: node {node} is in both group {other} "
                                        f"and group {group}")
            clean[level][group] = pattern
    return clean, where


def validate(table: Any) -> dict[str, dict[str, str]]:
    """A checked copy of the ``[topology]`` table (patterns stripped, lists joined with ",").

    Raises :class:`TopologyError` naming the level (and group) for: a table that is not a mapping, a
    level that is not a table, a pattern that is not a string, is empty, uses ``@groups``, does not
    parse as a ClusterShell nodeset or names too many nodes, and a node in two groups of the same
    level. An empty table is valid (no topology).
    """
    return _checked(table)[0]


def node_groups(table: Any) -> dict[str, dict[str, str]]:
    """``node -> {level: group}`` for every node the table names (sorted by node name)."""
    _, where = _checked(table)
    out: dict[str, dict[str, str]] = {}
    for level, by_node in where.items():
        for node, group in by_node.items():
            out.setdefault(node, {})[level] = group
    return dict(sorted(out.items()))


def groups_of(table: Any, nodes: Iterable[str]) -> dict[str, dict[str, str]]:
    """``node -> {level: group}`` for each of ``nodes``; a node in no group of a level lacks that
    level, and a node the table does not name maps to ``{}``."""
    if isinstance(nodes, str):
        nodes = [nodes]
    _, where = _checked(table)
    return {node: {level: by_node[node] for level, by_node in where.items() if node in by_node}
            for node in nodes}


def members(table: Any, level: str, group: str) -> list[str]:
    """The nodes of ``group`` at ``level``, in nodeset order (natural sort). Raises
    :class:`TopologyError` for an unknown level or group."""
    clean, _ = _checked(table)
    if level not in clean:
        raise TopologyError(f"topology: no level {level!r} (levels: {', '.join(clean) or 'none'})")
    if group not in clean[level]:
        raise TopologyError(f"topology.{level}: no group {group!r}")
    return _expand(level, group, clean[level][group])


def group_sizes(table: Any) -> dict[str, dict[str, int]]:
    """``{level: {group: number of nodes}}``."""
    _, where = _checked(table)
    sizes: dict[str, dict[str, int]] = {}
    for level, by_node in where.items():
        counts = sizes.setdefault(level, {})
        for group in by_node.values():
            counts[group] = counts.get(group, 0) + 1
    return sizes


NVLINK_LEVEL = "nvlink"  # the [topology] level of the NVLink domains unless [slurm] drain_cap_level names one


def nvlink_domains(table: Any, drain_cap_level: str = "") -> tuple[str, dict[str, str], dict[str, int]]:
    """The declared NVLink domains (issue 33): the level (``[slurm] drain_cap_level``, else ``nvlink``,
    as the drain cap and ``healthcheck fabric nvlink-domains`` read them), ``node -> domain`` and
    ``domain -> its node count``; empty maps where the table has no such level."""
    level = drain_cap_level or NVLINK_LEVEL
    if not table or level not in table:
        return level, {}, {}
    _, where = _checked(table)
    of = dict(where.get(level, {}))
    return level, of, group_sizes(table).get(level, {})
