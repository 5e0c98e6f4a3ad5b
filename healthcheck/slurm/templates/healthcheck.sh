#!/bin/sh
# healthcheck slurm-check hook for slurm.conf. Template: `healthcheck slurm install-hooks` writes the
# installed copy with absolute paths (@PYTHON@, @CONFIG@, @ENV@ replaced); slurmd runs that copy as root.
@ENV@
# -c rather than -m: runpy alone costs ~5 ms, paid before every job
exec @PYTHON@ -I -c 'import sys; from healthcheck.slurm.hooks import guarded_main; sys.exit(guarded_main())' slurm-check --config @CONFIG@
