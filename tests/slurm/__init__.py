"""Tests that run against a real Slurm cluster on localhost (scripts/local-slurm-cluster)."""
