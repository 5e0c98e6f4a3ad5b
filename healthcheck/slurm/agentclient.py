"""Moved to :mod:`healthcheck.hook.client` (issue 31). Hooks installed by an earlier release import ``run``
from here: a hook that cannot import exits non-zero and slurmd drains the node, so this path stays."""
from ..hook.client import run  # noqa: F401
