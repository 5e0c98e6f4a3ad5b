#!/bin/sh
# healthcheck slurm-check hook for slurm.conf. Template: `healthcheck slurm install-hooks` writes the
# installed copy with absolute paths (@PYTHON@, @CONFIG@, @ENV@ replaced); slurmd runs that copy as root.
@ENV@
exec @PYTHON@ -I -m healthcheck.slurm.hooks slurm-check --config @CONFIG@
