"""Pure parsers of tool output (text in, model objects out). No I/O here.

Every parser raises only :class:`ParseError` on input it cannot understand; anything else escaping is a
bug (hypothesis fuzz tests enforce it).

Bounds (inputs come from untrusted bundles and job outputs): every entry point refuses, with its
ParseError, input over a documented size before parsing it (:func:`check_size`: characters, and lines
for the line-oriented formats; each module names its limits in ``MAX_*`` constants), and its regular
expressions have no nested or adjacent overlapping quantifiers, so parsing time is linear in the input
(tests/safety/test_parser_bounds.py feeds each parser adversarial inputs against a wall clock).
"""
from __future__ import annotations

from ..core.lazyre import Pattern
if False:  # annotations only (typing is not imported on the hot path)
    from typing import Callable  # noqa: F401


class ParseError(ValueError):
    """The input is not in a format this parser understands (message says what and where)."""


# What ``str.splitlines()`` breaks on ("\r\n" counts once); parsers splitting on "\n" only are
# bounded more strictly than they need, never less.
_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def line_count(text: str) -> int:
    """Lines of ``text`` as ``str.splitlines()`` would count them, without building the list."""
    breaks = sum(text.count(c) for c in _LINE_BREAKS) - text.count("\r\n")
    return breaks + (0 if not text or text.endswith(_LINE_BREAKS) else 1)


def check_size(text: str | bytes | bytearray, what: str, max_chars: int, max_lines: int | None = None,
               error: type[ParseError] = ParseError) -> None:
    """Raise ``error`` when ``text`` is over ``max_chars`` characters (bytes for bytes input: checked
    before decoding) or over ``max_lines`` lines. Cheap: a few linear scans, no copies."""
    if len(text) > max_chars:
        unit = "bytes" if isinstance(text, (bytes, bytearray)) else "characters"
        raise error(f"{what}: {len(text)} {unit}, over the limit of {max_chars} for this format "
                    "(not a real tool output; refusing to parse it)")
    if max_lines is not None and isinstance(text, str):
        lines = line_count(text)
        if lines > max_lines:
            raise error(f"{what}: {lines} lines, over the limit of {max_lines} for this format "
                        "(not a real tool output; refusing to parse it)")


def as_text(text: object, what: str, max_chars: int, max_lines: int | None = None,
            error: type[ParseError] = ParseError) -> str:
    """``text`` as a str within the limits: bytes are size-checked, then decoded as UTF-8 (bad bytes
    replaced: tool output carries stray binary); anything else that is not text raises ``error``."""
    if isinstance(text, (bytes, bytearray)):
        check_size(text, what, max_chars, error=error)
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise error(f"{what} must be text, got {type(text).__name__}")
    check_size(text, what, max_chars, max_lines, error)
    return text


MAX_DIGITS = 20  # 2**64 - 1 has 20 decimal digits: no counter, id or size a tool prints has more


def bounded_int(digits: str, what: str, max_digits: int = MAX_DIGITS,
                error: type[ParseError] = ParseError) -> int:
    """``int(digits)`` for a run of decimal digits (an optional sign) matched in untrusted input, or
    ``error`` naming ``what`` (say which line) when the run is longer than ``max_digits``. Python's
    ``int()`` refuses over 4,300 digits with a plain ValueError and is quadratic below that: a parser
    converting an unbounded ``(\\d+)`` group would crash or stall on a crafted number."""
    if len(digits.lstrip("+-")) > max_digits:
        raise error(f"{what}: a {len(digits)}-digit number, over the {max_digits} digits a real tool output "
                    f"holds: {digits[:24]}...")
    try:
        return int(digits)
    except ValueError:
        raise error(f"{what}: not a whole number: {digits[:40]!r}") from None


MAX_JSON_CONTAINERS = 200_000  # "{" + "[" in a JSON input (a real dcgmi or fio document has < 1,000)
_JSON_START = Pattern(r"(?m)^[ \t]*\{")


def json_objects(text: str, wanted: Callable[[object], bool], what: str,
                 error: type[ParseError] = ParseError) -> tuple[list[dict], str]:
    """The JSON objects starting a line (after blanks) that ``wanted`` accepts, in order, and the text
    outside them (joined by newlines). Objects inside an accepted one are not looked at again.

    Linear time: a decoding attempt that yields no wanted object is charged what it scanned (up to
    the JSONDecodeError position; the rest of the text for a RecursionError or an unterminated
    string) against a budget of twice
    the input; once spent, the search stops (otherwise each of n line-start braces of a cut document
    would rescan the rest: quadratic). Input with more than MAX_JSON_CONTAINERS braces and brackets
    is refused with ``error`` (decoded objects cost ~50 times their text)."""
    containers = text.count("{") + text.count("[")
    if containers > MAX_JSON_CONTAINERS:
        raise error(f"{what}: {containers} JSON objects/arrays, over the limit of {MAX_JSON_CONTAINERS} "
                    "(not a real tool output; refusing to parse it)")
    import json  # on use: the probes import this package for ParseError, the prolog never needs json

    decoder, docs, other, done = json.JSONDecoder(), [], [], 0
    budget = 2 * len(text) + 65536
    for start in _JSON_START.finditer(text):
        brace = start.end() - 1
        if brace < done:
            continue
        if budget <= 0:
            break
        try:
            obj, stop = decoder.raw_decode(text, brace)
        except json.JSONDecodeError as exc:
            # Its position is where scanning stopped, except for an unterminated string (its start).
            cut = exc.msg.startswith("Unterminated string")
            budget -= (len(text) if cut else exc.pos) - brace + 1
            continue
        except (ValueError, RecursionError):
            budget -= len(text) - brace
            continue
        if wanted(obj):
            docs.append(obj)
            other.append(text[done:brace])
            done = stop
        else:
            budget -= stop - brace
    return docs, "\n".join(other + [text[done:]])
