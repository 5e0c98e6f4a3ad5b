"""Regular expressions compiled on first use, and ``re`` imported on first use.

The hooks import modules (probes, the kernel-log parser, the Slurm reasons) whose patterns a healthy
node mostly never needs: compiling them at import cost the prolog milliseconds before every job
(issue 15). A :class:`Pattern` is declared where ``re.compile`` was and answers the same calls;
flags are written inline (``(?i)``) so the declaring module needs no ``re`` at import.
"""
from __future__ import annotations


class Pattern:
    """``re.compile(source)`` on the first call of one of its methods; the same answers after."""

    __slots__ = ("source", "_compiled")

    def __init__(self, source: str):
        self.source = source
        self._compiled = None

    def compiled(self):
        found = self._compiled
        if found is None:
            import re

            found = self._compiled = re.compile(self.source)
        return found

    @property
    def pattern(self) -> str:
        return self.source

    def search(self, string, *args):
        return self.compiled().search(string, *args)

    def match(self, string, *args):
        return self.compiled().match(string, *args)

    def fullmatch(self, string, *args):
        return self.compiled().fullmatch(string, *args)

    def sub(self, repl, string, count=0):
        return self.compiled().sub(repl, string, count)

    def split(self, string, maxsplit=0):
        return self.compiled().split(string, maxsplit)

    def finditer(self, string, *args):
        return self.compiled().finditer(string, *args)

    def findall(self, string, *args):
        return self.compiled().findall(string, *args)

    def __repr__(self) -> str:
        return f"lazyre.Pattern({self.source!r})"
