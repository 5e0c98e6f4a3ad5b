#!/bin/sh
# healthcheck prolog hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/slurm/templates/prolog.sh): do not edit, re-install.

# -c rather than -m: runpy alone costs ~5 ms, paid before every job
exec /opt/healthcheck/.venv/bin/python -I -c 'from healthcheck.slurm.hooks import run; run()' prolog --config /etc/healthcheck/healthcheck.toml
