#!/opt/healthcheck/.venv/bin/python -I
# healthcheck healthcheck hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/slurm/templates/healthcheck.sh): do not edit, re-install.
# A Python script (its interpreter on the first line, isolated mode): one process before every job, not
# a shell and then Python. With the node's agent listening on the socket (healthcheck-agent.service), a
# process forked from it runs the hook; else it runs here.
from healthcheck.slurm.agentclient import run
run(["slurm-check", "--config", "/etc/healthcheck/healthcheck.toml", "--agent", "/run/healthcheck/agent.sock"])
