"""`healthcheck drill`: fault drills on a running Slurm cluster with our hooks (docs/commissioning.md).

    healthcheck drill list
    healthcheck drill prepare --site DIR --slurm-conf CONF --nodes node[1-4] --bundle B --fault-bundle F
    healthcheck drill run NAME --site DIR [--node NODE] [--timeout S] [--format text|json] [--no-record]

Exit codes of `run`: 0 the drill passed (every stage came, nothing lost), 1 it failed (the output says
which stage never came or what was lost), 2 bad input or a cluster the drill cannot use, 6 the drill ran
and its result was printed, but the site's spool could not record it (the error on stderr; --no-record
skips the spool)."""
from __future__ import annotations


import click

from ..core import exitcodes

from .common import emit_json, Unavailable, UsageFailure

FORMATS = ("text", "json")


def _nodes(text: str) -> list[str]:
    """--nodes as a list; a set that does not parse, or names more than the site's limit (refused
    before it is expanded), is a usage error (exit 2)."""
    from ..drill.cluster import DrillError
    from ..drill.site import parse_nodes

    try:
        return parse_nodes(text)
    except DrillError as exc:
        raise click.UsageError(f"--nodes: {exc}") from None


@click.group("drill")
def drill() -> None:
    """Fault drills: inject a fault on the cluster and time detection, drain, requeue and resume.

    \b
    Example:
      healthcheck drill list
      healthcheck drill run failing-check --site /var/lib/healthcheck/drill --node gpu017
    """


@drill.command("list")
def list_drills() -> None:
    """The drills and what each injects.

    \b
    Example:
      healthcheck drill list
    """
    from ..drill.drills import DRILLS

    for name, (_func, node, text) in DRILLS.items():
        click.echo(f"{name:<14} node {node:<8} {text}")


@drill.command("prepare")
@click.option("--site", "site_dir", required=True, type=click.Path(file_okay=False),
              help="the drill's workspace (config, hooks, bundles, spool, state)")
@click.option("--slurm-conf", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--nodes", required=True, help="the cluster's nodes (a node set: node[1-4])")
@click.option("--bundle", "healthy", required=True, type=click.Path(exists=True, file_okay=False),
              help="a healthy node's bundle (every node starts with a copy)")
@click.option("--fault-bundle", required=True, type=click.Path(exists=True, file_okay=False),
              help="a faulty node's bundle (the failing-check and ctld-restart drills' fault)")
@click.option("--prolog-budget", type=float, default=None, help="prolog budget in seconds (default 3)")
def prepare(site_dir: str, slurm_conf: str, nodes: str, healthy: str, fault_bundle: str,
            prolog_budget: float | None) -> None:
    """Write the workspace and the hooks; print the slurm.conf lines to start the cluster with.

    \b
    Example:
      healthcheck drill prepare --site /var/lib/healthcheck/drill --slurm-conf /etc/slurm/slurm.conf \\
          --nodes 'gpu[001-004]' --bundle good.tar.gz --fault-bundle bad.tar.gz
    """
    from ..drill.cluster import DrillError
    from ..drill.site import Site

    budgets = {"prolog_budget_s": prolog_budget} if prolog_budget is not None else None
    try:
        site = Site.prepare(site_dir, slurm_conf, _nodes(nodes), healthy, fault_bundle, budgets)
    except (DrillError, OSError) as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(site.slurm_conf_lines(), nl=False)


@drill.command("run")
@click.argument("name")
@click.option("--site", "site_dir", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--node", default=None, help="the node to fault (node-death: optional, pins its job)")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="seconds allowed per stage")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--record/--no-record", default=True, show_default=True,
              help="append the result to the site's spool (history: check drill.NAME)")
def run(name: str, site_dir: str, node: str | None, timeout: float, fmt: str, record: bool) -> None:
    """Run drill NAME (see `drill list`); exit 0 when it passed, 1 when it failed, 6 when its result
    (printed) could not be recorded in the site's spool.

    \b
    Example:
      healthcheck drill run hung-gpu --site /var/lib/healthcheck/drill --node gpu017 --format json
    """
    from ..drill.cluster import Cluster, DrillError
    from ..drill.drills import DRILLS, record_result, run_drill
    from ..drill.model import render_text
    from ..drill.site import Site
    from ..spool.append import SpoolError

    if name not in DRILLS:
        raise click.BadParameter(f"no drill {name!r} (known: {', '.join(DRILLS)})", param_hint="NAME")
    try:
        site = Site.open(site_dir)
        result = run_drill(name, site, Cluster(site.slurm_conf), node, timeout=timeout, record=False)
    except DrillError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"drill {name} could not run: {exc}") from None
    if fmt == "json":
        emit_json(result.to_dict())
    else:
        click.echo(render_text([result]), nl=False)
    if record:
        try:
            record_result(site, result)
        except (OSError, SpoolError) as exc:  # the drill ran and its result stands (printed above)
            raise Unavailable(f"the drill's result was not recorded: {exc}") from None
    raise SystemExit(exitcodes.OK if result.ok else exitcodes.FAIL)
