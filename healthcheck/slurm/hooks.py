"""Moved to :mod:`healthcheck.hook.run` (issue 31); kept for what an earlier release installed
(``python -m healthcheck.slurm.hooks CONTEXT``): a hook that cannot import drains the node."""
from ..hook.run import guarded_main, main, run  # noqa: F401

if __name__ == "__main__":
    run()
