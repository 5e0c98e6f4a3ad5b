"""Pure checks, one module per area. See :mod:`healthcheck.checks.registry`."""
from .registry import CONTEXTS, CheckSpec, check, load_all, select  # noqa: F401
