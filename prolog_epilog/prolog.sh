#!/bin/sh
# healthcheck prolog hook for slurm.conf. Template: `healthcheck slurm install-hooks` writes the
# installed copy with absolute paths (@PYTHON@, @CONFIG@, @ENV@ replaced); slurmd runs that copy as root.
@ENV@
exec @PYTHON@ -I -m healthcheck.slurm.hooks prolog --config @CONFIG@
