"""`healthcheck slurm ...`: installing the Slurm hooks. Registered into :mod:`healthcheck.cli`."""
from __future__ import annotations

import click


from .common import Unavailable, UsageFailure
from ..core.agentpaths import DEFAULT_SOCKET


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
@click.option("--enable-agent/--no-enable-agent", default=None,
              help="Install the agent's unit into /etc/systemd/system, enable and (re)start it. Default: done when "
                   "run as root on a machine systemd runs (as Debian starts a packaged service), else only written.")
def slurm_install_hooks(prefix, config_path, python, slurm_conf, agent_socket, no_agent, enable_agent):
    """Write prolog.sh, epilog.sh and healthcheck.sh with absolute paths, and the warm agent's systemd unit
    (healthcheck-agent.service); print the slurm.conf lines. As root on a machine systemd runs (or with
    --enable-agent), the unit is installed, enabled and (re)started too; --no-enable-agent only writes it
    (the hooks work without it, each in its own process, slower).

    \b
    Example:
      healthcheck slurm install-hooks --prefix /etc/healthcheck/hooks --config /etc/healthcheck/healthcheck.toml
    """
    from ..deploy import install

    from ..config import ConfigError, load

    if enable_agent and no_agent:
        raise UsageFailure("--enable-agent and --no-agent: choose one")
    enable_agent = (not no_agent and install.systemd_running()) if enable_agent is None else enable_agent

    try:
        load(config_path)  # a config that does not validate is not installed
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc
    try:
        written = install.install_hooks(prefix, config_path, python, slurm_conf, None if no_agent else agent_socket)
    except (ValueError, OSError) as exc:
        raise UsageFailure(str(exc)) from exc
    for path in written:
        click.echo(f"wrote {path}", err=True)
    if enable_agent:
        try:
            for line in install.enable_agent(prefix):
                click.echo(line, err=True)
        except install.AgentNotEnabled as exc:  # the hooks are written and work: say so, fail the command
            click.echo(install.slurm_conf_lines(prefix), nl=False)
            raise Unavailable(f"hooks written, agent not enabled: {exc}") from exc
    elif not no_agent:
        click.echo(install.agent_lines(prefix), err=True, nl=False)
    click.echo(install.slurm_conf_lines(prefix), nl=False)
