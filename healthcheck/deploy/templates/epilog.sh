#!/bin/bash
# healthcheck epilog hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/deploy/templates/epilog.sh): do not edit, re-install.
hook=epilog
@CLIENT@
