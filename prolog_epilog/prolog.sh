#!/opt/healthcheck/.venv/bin/python -IS
# healthcheck prolog hook for slurm.conf; slurmd runs it as root. Written by `healthcheck slurm install-hooks`
# from the template shipped in the package (healthcheck/slurm/templates/prolog.sh): do not edit, re-install.
# A Python script (its interpreter on the first line, isolated mode): one process before every job, not
# a shell and then Python. With the node's agent listening on the socket (healthcheck-agent.service), a
# process forked from it runs the hook; else it runs here.
# -S: no site set-up (its .pth files and imports cost ~2.5 ms a run): the package is found where it was
# installed; the hook, when it runs here, does the usual set-up first.
import sys
sys.path.append("/opt/healthcheck/.venv/lib/python" + str(sys.version_info[0]) + "." + str(sys.version_info[1]) + "/site-packages")
try:
    from healthcheck.slurm.agentclient import run
except ImportError:  # the package is no longer there: the interpreter's usual set-up finds it
    import site
    site.main()
    from healthcheck.slurm.agentclient import run
run(["prolog", "--config", "/etc/healthcheck/healthcheck.toml", "--agent", "/run/healthcheck/agent.sock"])
