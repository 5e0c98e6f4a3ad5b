"""`healthcheck slurm ...`: installing the Slurm hooks. Registered into :mod:`healthcheck.cli`."""
from __future__ import annotations

import click


from .common import UsageFailure
from ..slurm.agentclient import DEFAULT_SOCKET


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def slurm():
    """Slurm integration: install the prolog / epilog / HealthCheckProgram hooks.

    \b
    Example:
      healthcheck slurm install-hooks --prefix /etc/healthcheck/hooks --config /etc/healthcheck/healthcheck.toml
    """


@slurm.command("install-hooks")
@click.option("--prefix", required=True, type=click.Path(file_okay=False), help="Directory for the hooks.")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Expectations file the hooks read (validated now).")
@click.option("--python", "python", type=click.Path(dir_okay=False, exists=True),
              help="Interpreter of the venv healthcheck is installed in (default: this one).")
@click.option("--slurm-conf", type=click.Path(dir_okay=False, exists=True),
              help="slurm.conf outside the default place (exported as SLURM_CONF for scontrol).")
@click.option("--agent-socket", default=DEFAULT_SOCKET, show_default=True,
              help="Socket of the warm agent the hooks try first (its systemd unit is written beside them).")
@click.option("--no-agent", is_flag=True, help="Hooks that always run in their own process; no unit written.")
def slurm_install_hooks(prefix, config_path, python, slurm_conf, agent_socket, no_agent):
    """Write prolog.sh, epilog.sh and healthcheck.sh with absolute paths, and the warm agent's systemd unit
    (healthcheck-agent.service); print the slurm.conf lines.

    \b
    Example:
      healthcheck slurm install-hooks --prefix /etc/healthcheck/hooks --config /etc/healthcheck/healthcheck.toml
    """
    from ..slurm.install import agent_lines, install_hooks, slurm_conf_lines

    from ..config import ConfigError, load

    try:
        load(config_path)  # a config that does not validate is not installed
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc
    try:
        written = install_hooks(prefix, config_path, python, slurm_conf, None if no_agent else agent_socket)
    except (ValueError, OSError) as exc:
        raise UsageFailure(str(exc)) from exc
    for path in written:
        click.echo(f"wrote {path}", err=True)
    if not no_agent:
        click.echo(agent_lines(prefix), err=True, nl=False)
    click.echo(slurm_conf_lines(prefix), nl=False)
