"""Every problem of an expectations file in one run (``healthcheck config validate``), not one round
trip per typo: the validator stops at the first error, so the file is validated again with the line at
fault left out (a table header with its body), until it is valid, the error names no line, or leaving a
line out broke the TOML itself (what follows would not be the user's error). At most ``limit``."""
from __future__ import annotations

import re

from .model import ConfigError

_HEADER = re.compile(r"^\s*\[")


def all_problems(text: str, path: str | None = None, limit: int = 50) -> list[ConfigError]:
    """The file's errors, in the order found ([] when it is valid)."""
    from .loading import loads

    lines = text.splitlines()
    found: list[ConfigError] = []
    tried: set[int] = set()
    while len(found) < limit:
        try:
            loads("\n".join(lines) + "\n", path).expectations_for("__validate__")
            return found
        except ConfigError as exc:
            if found and exc.message.startswith("TOML syntax error"):
                return found  # our leaving a line out broke the syntax: not the user's error
            found.append(exc)
            if exc.line is None or exc.line in tried or not 0 < exc.line <= len(lines):
                return found
            tried.add(exc.line)
            _leave_out(lines, exc.line - 1)
    return found


def _leave_out(lines: list[str], index: int) -> None:
    """Blank line ``index`` (numbers stay as in the file); a table header takes its body with it."""
    header = bool(_HEADER.match(lines[index]))
    lines[index] = ""
    if header:
        for i in range(index + 1, len(lines)):
            if _HEADER.match(lines[i]):
                break
            lines[i] = ""
