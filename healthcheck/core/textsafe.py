"""Text that is safe to print: every non-printable character escaped.

Its own module so that every renderer (:mod:`output`, :mod:`prometheus`, the sweep and burn-in
summaries, the hooks' log line) shares one rule without importing another renderer: ``output``
imports ``prometheus`` on use, and ``prometheus`` imports only this.
"""
from __future__ import annotations


def clean(value: object) -> str:
    """``value`` as text with every non-printable character escaped (``\\x1b``, ``\\n``, ``\\u202e``):
    node names and messages come from bundles, tool output and the kernel log, and must not move the
    cursor, clear the screen or forge extra lines on an admin's terminal or in a log."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
