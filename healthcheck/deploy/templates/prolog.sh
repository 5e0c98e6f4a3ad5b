#!/bin/bash
# healthcheck prolog hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/deploy/templates/prolog.sh): do not edit, re-install.
hook=prolog
@CLIENT@
