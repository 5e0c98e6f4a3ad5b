"""Pure parsers of tool output (text in, model objects out). No I/O here.

Every parser raises only :class:`ParseError` on input it cannot understand; anything else escaping is a
bug (hypothesis fuzz tests enforce it).
"""


class ParseError(ValueError):
    """The input is not in a format this parser understands (message says what and where)."""
