#!/bin/sh
# healthcheck slurm-check hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/slurm/templates/healthcheck.sh): do not edit, re-install.
@ENV@
# -c rather than -m: runpy alone costs ~5 ms, paid before every job. With the node's agent listening on the
# socket (healthcheck-agent.service), a process forked from it runs the hook; else it runs here.
exec @PYTHON@ -I -c 'from healthcheck.slurm.agentclient import run; run()' slurm-check --config @CONFIG@@AGENT@
