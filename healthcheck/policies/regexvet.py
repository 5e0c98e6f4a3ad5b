"""How much work a regular expression may do on text someone else writes (a kernel message, an
InfiniBand node description): the one vetting of such patterns, for the host-event policy and a fabric
design's ``hca_regex`` (issue 30).

Python's ``re`` backtracks. A quantified group that holds a quantifier (``(a+)+``) or a repeated group
that holds an alternation (``(a|a)*``) takes time that doubles with each character of the text; both are
refused by :func:`vet_regex`. A run of many quantifiers over the same characters (``\\S*\\S*\\S*...``)
grows as the text's length to the power of their number: :func:`choice_points` counts them for a caller
that also bounds the text (``fabric/hcaregex.py``).

One pass over the pattern (:func:`_scan`); escapes and character classes are skipped, and a group's
``(?`` opener is not a quantifier. Pure functions, no imports: the policy's loader may run in a hook.
"""
from __future__ import annotations


def _quantifier(pattern: str, i: int) -> tuple[int, bool, bool]:
    """The quantifier starting at ``i``: (its length with a lazy/possessive suffix, whether it repeats a
    variable number of times, whether it may repeat more than once); length 0 when there is none."""
    c = pattern[i:i + 1]
    if c in ("*", "+"):
        length, variable, many = 1, True, True
    elif c == "?":
        length, variable, many = 1, True, False
    elif c == "{":
        j = pattern.find("}", i)
        body = pattern[i + 1:j] if j > 0 else ""
        lo, comma, hi = body.partition(",")
        digits = all(part == "" or (part.isascii() and part.isdigit()) for part in (lo, hi))
        if j < 0 or not digits or not (lo or comma):  # x{} and x{ 2} are literal braces; x{,} is x*
            return 0, False, False
        low = int(lo or 0)
        high = None if comma and not hi else int(hi or lo)
        length, variable, many = len(body) + 2, high is None or high != low, high is None or high > 1
    else:
        return 0, False, False
    if pattern[i + length:i + length + 1] in ("?", "+"):  # lazy or possessive: the same repetition
        length += 1
    return length, variable, many


def _scan(pattern: str) -> tuple[str | None, str | None, int]:
    """(the first repeated group holding a quantifier, the first repeated group holding an alternation,
    the number of choice points: variable quantifiers and alternation bars), in one pass."""
    nested = alternated = None
    choices = 0
    stack: list[list] = []  # per open group: [start, holds a quantifier, holds an alternation]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":  # an escaped character (its quantifier is checked below)
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
            stack.append([i, False, False])
            i += 2 if pattern[i + 1:i + 2] == "?" else 1
            continue
        elif c == ")" and stack:
            start, holds_quantifier, holds_bar = stack.pop()
            length, variable, many = _quantifier(pattern, i + 1)
            text = pattern[start:i + 1 + length]
            if length and many and holds_quantifier and nested is None:
                nested = text
            if many and holds_bar and alternated is None:
                alternated = text
            if stack:
                stack[-1][1] = stack[-1][1] or holds_quantifier or bool(length)
                stack[-1][2] = stack[-1][2] or holds_bar
            i += 1
            choices += variable
            i += length
            continue
        elif c == "|":
            choices += 1
            if stack:
                stack[-1][2] = True
            i += 1
            continue
        else:
            i += 1
        length, variable, _many = _quantifier(pattern, i)
        if length:
            choices += variable
            if stack:
                stack[-1][1] = True
            i += length
    return nested, alternated, choices


def nested_quantifier(pattern: str) -> str | None:
    """The text of a repeated group that holds a quantifier itself (``(a+)+``), or None."""
    return _scan(pattern)[0]


def repeated_alternation(pattern: str) -> str | None:
    """The text of a repeated group that holds an alternation (``(a|b)*``), or None."""
    return _scan(pattern)[1]


def choice_points(pattern: str) -> int:
    """Variable quantifiers (``* + ? {m,n}``) plus alternation bars outside character classes."""
    return _scan(pattern)[2]


def vet_regex(value, max_chars: int) -> str | None:
    """Why ``value`` may not be a pattern matched against others' text, or None when it may: not a
    non-empty string of at most ``max_chars`` characters, a repeated group holding a quantifier, or a
    repeated group holding an alternation (a character class such as ``[ab]+`` does the same linearly).
    Compiling it (and checking its groups) is the caller's."""
    if not isinstance(value, str) or not value or len(value) > max_chars:
        return f"must be a non-empty string of at most {max_chars} characters"
    nested, alternated, _choices = _scan(value)
    if nested:
        return f"nested quantifier {nested!r} (matching must stay linear in the text)"
    if alternated:
        return (f"repeated group with an alternation {alternated!r} (matching time can double with each "
                f"repetition; a character class such as [ab]+ does not)")
    return None
