#!/bin/sh
# healthcheck epilog hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/slurm/templates/epilog.sh): do not edit, re-install.
@ENV@
# -c rather than -m: runpy alone costs ~5 ms, paid before every job
exec @PYTHON@ -I -c 'import sys; from healthcheck.slurm.hooks import guarded_main; sys.exit(guarded_main())' epilog --config @CONFIG@
