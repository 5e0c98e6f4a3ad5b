"""The parse tree both ``nvidia-smi`` formats become: :class:`Node`, :class:`RawGpu`, :func:`norm_key`.

:mod:`nvidia_smi_text` (``nvidia-smi -q``) and :mod:`nvidia_smi_xml` (``nvidia-smi -q -x``) build it;
:mod:`nvidia_smi` reads the facts from it with one path table. This module imports nothing of theirs,
so the three depend on it one way: tree <- text, xml <- nvidia_smi.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Node:
    """One label (text) or element (XML): normalised key, raw value (None for a section), children."""

    key: str
    value: str | None = None
    children: list[Node] = field(default_factory=list)

    def child(self, *keys: str) -> Node | None:
        node: Node | None = self
        for key in keys:
            node = next((c for c in node.children if c.key == key), None) if node else None
        return node

    def get(self, *keys: str) -> str | None:
        node = self.child(*keys)
        return node.value if node is not None else None

    def walk(self) -> list[Node]:
        """All descendants, depth first (iterative: fuzzed input may nest deeply)."""
        out: list[Node] = []
        todo = list(reversed(self.children))
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(reversed(node.children))
        return out


@dataclass
class RawGpu:
    """One GPU as found in the output: its bus id, its tree (None for an error-only line), an error."""

    bus_id: str | None
    tree: Node | None
    error: str | None = None


_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def norm_key(label: str) -> str:
    """'ECC Errors' / 'ecc_errors' -> 'eccerrors'; 'SRAM Uncorrectable SEC-DED' -> 'sramuncorrectablesecded'."""
    return _NOT_ALNUM.sub("", label.lower())
