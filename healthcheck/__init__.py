"""healthcheck: node health checks, burn-in and history for Slurm GPU clusters."""

__version__ = "0.1.0"
