#!/bin/bash
# healthcheck HealthCheckProgram for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/deploy/templates/healthcheck.sh): do not edit, re-install.
hook=slurm-check
@CLIENT@
