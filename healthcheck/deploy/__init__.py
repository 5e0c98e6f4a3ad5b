"""Deployment on a node: ``install`` writes the Slurm hooks and the agent's systemd unit from
``templates/`` (``healthcheck slurm install-hooks``)."""
