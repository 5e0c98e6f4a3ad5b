"""Which node classes of a config name the same nodes (``healthcheck config validate`` warns: the
first class in the file wins). Pure; ClusterShell is imported inside.

Cost (issue 30: intersecting every pair of classes took 44 s for 4,000 classes): one pass over the
nodes the classes name (bounded by the schema: MAX_CLASS_NODES a class, MAX_CONFIG_NODES a file) to
find, per node, the classes naming it; then, class by class in file order, the later classes sharing
a node with it, from the distinct sets of classes sharing nodes. It stops after ``limit`` pairs, so a
file of many identical classes (every pair overlaps: a quadratic answer) costs at most ``limit`` + 1
classes' partners and ``limit`` intersections, not one per pair; a sample folds at most MAX_SAMPLE
nodes.
"""
from __future__ import annotations

MAX_OVERLAPS = 100  # pairs reported; past it `config validate` says the list stops there
MAX_SAMPLE = 1_000  # nodes of a pair's intersection folded into its sample; past it, "(and N more)"


def overlapping(named: list[tuple[str, str]], limit: int = MAX_OVERLAPS) -> list[tuple[str, str, str]]:
    """(a, b, sample) for the first ``limit`` pairs of (name, node-set pattern) entries that name a node
    in common, ordered by a then b in the order given; sample is the folded node set both name (its
    first MAX_SAMPLE nodes and a count past that). The patterns are valid (the schema checked them)."""
    from ClusterShell.NodeSet import NodeSet  # lazy: only `config validate` asks

    members = [list(NodeSet(nodes)) for _, nodes in named]  # each class's nodes, sorted once
    first: dict[str, int] = {}          # node -> the first entry naming it
    shared: dict[str, list[int]] = {}   # node -> every entry naming it, for a node named twice or more
    for i, nodes in enumerate(members):
        for node in nodes:
            j = first.setdefault(node, i)
            if j != i:
                owners = shared.get(node)
                if owners is None:
                    shared[node] = [j, i]
                elif owners[-1] != i:  # a pattern naming a node twice is one owner
                    owners.append(i)
    del first
    groups = dict.fromkeys(tuple(owners) for owners in shared.values())  # distinct sets of owners
    del shared
    later: dict[int, list[tuple[tuple[int, ...], int]]] = {}  # entry -> (group, its place in it)
    for group in groups:
        for place, i in enumerate(group[:-1]):
            later.setdefault(i, []).append((group, place))
    out: list[tuple[str, str, str]] = []
    lookup: dict[int, set[str]] = {}  # entry -> its nodes as a set, for the entries of the pairs reported
    for a in sorted(later):
        partners: set[int] = set()
        for group, place in later[a]:
            partners.update(group[place + 1:])
        for b in sorted(partners):
            if len(out) >= limit:
                return out
            if b not in lookup:
                lookup[b] = set(members[b])
            both = [node for node in members[a] if node in lookup[b]]
            out.append((named[a][0], named[b][0], _sample(both, named[a][1], named[b][1])))
    return out


def _sample(both: list[str], one: str, two: str) -> str:
    """The nodes ``both`` (those patterns ``one`` and ``two`` share) folded; past MAX_SAMPLE nodes, the
    first MAX_SAMPLE folded and how many more (folding a list costs ~10 µs a node: 100 pairs of
    100,000-node classes would take minutes). A small intersection is folded from the two patterns'
    node sets (ClusterShell intersects their ranges: ~20 times faster than folding the list)."""
    from ClusterShell.NodeSet import NodeSet

    if len(both) <= MAX_SAMPLE:
        return str(NodeSet(one) & NodeSet(two))
    return f"{NodeSet.fromlist(both[:MAX_SAMPLE])} (and {len(both) - MAX_SAMPLE:,} more)"
