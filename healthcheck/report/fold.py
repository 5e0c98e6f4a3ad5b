"""Node lists folded for reading: ``gpu001, gpu002, …, gpu017, gpu033`` -> ``gpu[001-002,017,033]``.

ClusterShell's ``NodeSet`` folds (the syntax Slurm and admins use: the text pastes into ``scontrol``,
``sinfo -n`` or ``clush -w``). A name ``NodeSet`` would read as syntax or refuse (brackets, commas,
markup from a hostile record, spaces) is never fed to it: such names are listed after the folded part,
as they are, so no name is lost or changed. The renderers escape the result like any other data.
"""
from __future__ import annotations

import re
from typing import Iterable

# what NodeSet folds faithfully: letters, digits and a few separators, no range/list/set syntax
_PLAIN = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def fold(nodes: Iterable[str]) -> str:
    """The folded text of ``nodes`` (duplicates dropped, order not kept); "" for none."""
    names = sorted({str(n) for n in nodes})
    plain = [n for n in names if _PLAIN.match(n)]
    other = [n for n in names if not _PLAIN.match(n)]
    parts = []
    if plain:
        from ClusterShell.NodeSet import NodeSet, NodeSetException

        try:
            parts.append(str(NodeSet.fromlist(plain)))
        except NodeSetException:  # a name it still cannot take: keep them all, unfolded
            parts.extend(plain)
    return ",".join(parts + other)


def fold_limited(nodes: Iterable[str], limit: int = 240) -> tuple[str, bool]:
    """(text, cut): the folded text cut at a range boundary to at most ``limit`` characters, with
    ``,…`` appended when cut (the full list goes to the CSV beside the report)."""
    text = fold(nodes)
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    # never leave a range or a bracket half-written: back off to the last comma outside brackets, or
    # (one long bracket) to the last comma inside it, and close the bracket there
    depth, last, inner = 0, -1, -1
    for i, ch in enumerate(cut):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            last = i
        elif ch == ",":
            inner = i
    if last > 0:
        return cut[:last] + ",…", True
    if inner > 0:
        return cut[:inner] + "],…", True
    return cut + "…", True


def count_text(nodes: Iterable[str], limit: int = 240) -> str:
    """``"3: gpu[001-003]"``: how many nodes, then their folded text (cut as :func:`fold_limited`)."""
    names = {str(n) for n in nodes}
    text, _ = fold_limited(names, limit)
    return f"{len(names)}: {text}" if names else "0"
