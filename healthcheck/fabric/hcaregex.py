"""How much work a fabric design's ``hca_regex`` may do on one node description (issue 30).

Node descriptions are set by whoever is root on a host (``/sys/class/infiniband/*/node_desc``), so the
pattern meets text an adversary writes. Python's ``re`` backtracks: a quantified group that holds a
quantifier (``(a+)+``) or an alternation (``(a|a)*``) takes time that doubles with each character; a
run of quantifiers over the same characters (``\\S*\\S*\\S*...``) takes time that grows as the length to
the power of their number. So, on top of the shared vetting (at most MAX_PATTERN characters, no nested
quantifier, no repeated group that holds an alternation: :func:`healthcheck.policies.regexvet.vet_regex`), a
pattern may hold at most MAX_CHOICES choice points (variable quantifiers ``* + ?
{m,n}`` and alternation bars ``|``); and only descriptions of at most MAX_DESCRIPTION characters are
matched (InfiniBand's NodeDescription is 64 bytes: no real one is longer).

Worst case on this CI VM, MAX_CHOICES quantifiers over the same characters against a hostile
description of MAX_DESCRIPTION characters: ~0.1 s (``.*`` five times, 64 characters); the default
pattern ``^(?P<node>\\S+)\\s+(?P<hca>\\S+)$`` is linear. Pure functions, no I/O.
"""
from __future__ import annotations

import re

from ..policies.regexvet import choice_points, vet_regex

MAX_PATTERN = 256      # characters of the pattern itself
MAX_DESCRIPTION = 64   # characters of a node description matched against it (IB NodeDescription: 64 bytes)
MAX_CHOICES = 5        # variable quantifiers plus alternation bars in the pattern


def hca_regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` may do too much work on a hostile node description, or None: what
    :func:`healthcheck.policies.regexvet.vet_regex` refuses, or more than MAX_CHOICES choice points (counted
    conservatively: a ``|`` inside a ``(?#comment)`` counts too)."""
    problem = vet_regex(pattern, MAX_PATTERN)
    if problem:
        return problem
    choices = choice_points(pattern)
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
