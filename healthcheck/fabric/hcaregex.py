"""How much work a fabric design's ``hca_regex`` may do on one node description (issue 30).

Node descriptions are set by whoever is root on a host (``/sys/class/infiniband/*/node_desc``), so the
pattern meets text an adversary writes. Python's ``re`` backtracks: a quantified group that holds a
quantifier (``(a+)+``) or an alternation (``(a|a)*``) takes time that doubles with each character; a
run of quantifiers over the same characters (``\\S*\\S*\\S*...``) takes time that grows as the length to
the power of their number. So, on top of the shared vetting (at most MAX_PATTERN characters, no nested
quantifier: :func:`healthcheck.host_event_policy.vet_regex`), a pattern may not repeat a group that
holds an alternation, and may hold at most MAX_CHOICES choice points (variable quantifiers ``* + ?
{m,n}`` and alternation bars ``|``); and only descriptions of at most MAX_DESCRIPTION characters are
matched (InfiniBand's NodeDescription is 64 bytes: no real one is longer).

Worst case on this CI VM, MAX_CHOICES quantifiers over the same characters against a hostile
description of MAX_DESCRIPTION characters: ~0.1 s (``.*`` five times, 64 characters); the default
pattern ``^(?P<node>\\S+)\\s+(?P<hca>\\S+)$`` is linear. Pure functions, no I/O.
"""
from __future__ import annotations

import re

MAX_PATTERN = 256      # characters of the pattern itself
MAX_DESCRIPTION = 64   # characters of a node description matched against it (IB NodeDescription: 64 bytes)
MAX_CHOICES = 5        # variable quantifiers plus alternation bars in the pattern

_BRACES = re.compile(r"\{(\d*)(,?)(\d*)\}")


def _quantifier(pattern: str, i: int) -> tuple[int, bool, bool]:
    """The quantifier starting at ``i``: (its length with a lazy/possessive suffix, whether it repeats a
    variable number of times, whether it may repeat more than once); length 0 when there is none."""
    c = pattern[i:i + 1]
    if c in ("*", "+"):
        length, variable, many = 1, True, True
    elif c == "?":
        length, variable, many = 1, True, False
    elif c == "{":
        m = _BRACES.match(pattern, i)
        if m is None or not (m[1] or m[3]):  # not a quantifier: a literal brace
            return 0, False, False
        lo = int(m[1] or 0)
        hi = None if m[2] and not m[3] else int(m[3] or m[1])
        length, variable, many = len(m[0]), hi is None or hi != lo, hi is None or hi > 1
    else:
        return 0, False, False
    if pattern[i + length:i + length + 1] in ("?", "+"):  # lazy or possessive: the same repetition
        length += 1
    return length, variable, many


def hca_regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` may do too much work on a hostile node description, or None: a repeated group
    holding an alternation, or more than MAX_CHOICES choice points. One pass over the pattern; escapes
    and character classes are skipped (a group's ``(?`` opener is not a quantifier). Counts
    conservatively (a ``|`` inside a ``(?#comment)`` counts too)."""
    choices = 0
    stack: list[tuple[int, bool]] = []  # per open group: (start, holds an alternation)
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
        elif c == "(":
            stack.append((i, False))
            i += 2 if pattern[i + 1:i + 2] == "?" else 1
            continue
        elif c == ")" and stack:
            start, alternation = stack.pop()
            length, _variable, many = _quantifier(pattern, i + 1)
            if alternation and many:
                return (f"repeated group with an alternation {pattern[start:i + 1 + length]!r} (matching time can "
                        f"double with each repetition; a character class such as [ab]+ does not)")
            if alternation and stack:
                stack[-1] = (stack[-1][0], True)
            i += 1
        elif c == "|":
            choices += 1
            if stack:
                stack[-1] = (stack[-1][0], True)
            i += 1
        else:
            i += 1
        length, variable, _many = _quantifier(pattern, i)
        if length:
            choices += variable
            i += length
    if choices > MAX_CHOICES:
        return (f"{choices} choice points (quantifiers * + ? {{m,n}} and alternations |), over the limit of "
                f"{MAX_CHOICES} (matching time grows as a node description's length to their power)")
    return None


def match_description(pattern: re.Pattern, description: str) -> re.Match | None:
    """``pattern`` matched at the start of ``description``; None for a description over MAX_DESCRIPTION
    characters (never matched: no real one is that long, and a hostile one costs time)."""
    if not description or len(description) > MAX_DESCRIPTION:
        return None
    return pattern.match(description)
