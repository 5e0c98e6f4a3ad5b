"""Moved to :mod:`healthcheck.agent.main` (issue 31); kept for the systemd unit an earlier release
installed (``python -I -m healthcheck.slurm.agent``)."""
from ..agent.main import main  # noqa: F401

if __name__ == "__main__":
    raise SystemExit(main())
