"""The ``healthcheck`` command line: one module per command group, sharing :mod:`.common` (the usage
error, the exit codes of :mod:`healthcheck.core.exitcodes`, the option bundles). The CLI depends on the library,
never the reverse: no module outside this package imports click (tests/test_import_graph.py).

``healthcheck = "healthcheck.cli:main"`` (pyproject.toml) is the console entry point.
"""
from .main import cli, main

__all__ = ["cli", "main"]
