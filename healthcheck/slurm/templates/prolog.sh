#!@PYTHON@ -I
# healthcheck prolog hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/slurm/templates/prolog.sh): do not edit, re-install.
# A Python script (its interpreter on the first line, isolated mode): one process before every job, not
# a shell and then Python. With the node's agent listening on the socket (healthcheck-agent.service), a
# process forked from it runs the hook; else it runs here.
@ENV@from healthcheck.slurm.agentclient import run
run(["prolog", "--config", "@CONFIG@"@AGENT@])
