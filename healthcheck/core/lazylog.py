"""A logger that imports :mod:`logging` (≈ 4 ms) only when there is something to say: the prolog
path usually has nothing to log."""
from __future__ import annotations


class LazyLog:
    def __init__(self, name: str):
        self.name = name

    def warning(self, *args) -> None:
        import logging

        logging.getLogger(self.name).warning(*args)
