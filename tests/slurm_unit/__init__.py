"""Unit tests of healthcheck.slurm (no Slurm daemons needed)."""
