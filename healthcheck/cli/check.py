"""`healthcheck check`, `collect` and `checks`: judge a node (live or a bundle), record what the probes
read, list the checks. Heavy imports stay inside the commands."""
from __future__ import annotations

import os
import sys
import time

import click

from .common import OutputPath, UsageFailure, exit_with, expectations_for, load_config, use_color


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@click.option("--bundle", type=click.Path(exists=True), help="Judge a recorded bundle instead of this node.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "prometheus"]), default="text",
              show_default=True)
@click.option("--only", multiple=True, metavar="GLOB", help="Run only checks matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB",
              help="Do not run checks matching GLOB (repeatable). A GLOB that matches no check exits 2.")
@click.option("--context", type=click.Choice(["check", "prolog", "epilog", "slurm-check", "burnin"]),
              default="check", show_default=True, help="Which context's check list to run.")
@click.option("--node", help="Node name for class matching (default: this host / the bundle's host).")
@click.option("--sysfs-root", help="Read sysfs from here (live only; default: the config's sysfs_root or /sys).")
@click.option("--proc-root", help="Read procfs from here (live only; default: the config's proc_root or /proc).")
@click.option("-v", "--verbose", is_flag=True, help="Show every component, passes included.")
@click.option("--spool", "spool_dir", type=click.Path(file_okay=False),
              help="Also record the run in this spool directory (for `healthcheck history ingest`).")
@click.option("--strict", is_flag=True,
              help="Exit 6 when a check could not judge (ERROR: a probe, tool or driver failed) and none failed, "
                   "instead of 0: for scripts and pdsh loops (`healthcheck check --strict || alert`).")
def check(config_path, bundle, fmt, only, skip, context, node, sysfs_root, proc_root, verbose, spool_dir, strict):
    """Probe this node (or read a bundle) and judge it.

    Exit status: 0 healthy, 1 a check failed, 2 usage or config error, 3 internal error; with --strict, 6
    when a check could not judge and none failed.

    \b
    Example:
      healthcheck check --only 'gpu.*' --format json
      healthcheck check --skip 'host.load' --skip 'gpu.persistence'
      healthcheck check --bundle /tmp/gpu017.tar.gz --config /etc/healthcheck/healthcheck.toml
    """
    from ..checks.registry import index
    from ..output.render import exit_code, render
    from ..pipeline.judge import SelectionError, check_patterns, judge
    from ..core.clock import utc_now_iso

    started, t0 = utc_now_iso(), time.monotonic()
    try:  # before any probing: a pattern that matches nothing is a usage error, not a PASS of 0 checks
        check_patterns(list(index()), list(only), list(skip))
    except SelectionError as exc:
        raise UsageFailure(str(exc)) from exc
    config = load_config(config_path)
    if bundle:
        from ..bundles.archive import BundleError, snapshot_from_bundle

        try:
            snap = snapshot_from_bundle(
                bundle, services_for=lambda bundle_node: expectations_for(config, node or bundle_node).services)
        except BundleError as exc:
            raise UsageFailure(str(exc)) from exc
        node = node or snap.node
        exp = expectations_for(config, node)
        snap.node = node
    else:
        from ..pipeline.acquire import snapshot_for
        from ..bundles.archive import BundleError
        from ..probes.live import fabricmanager_log_for, short_hostname

        node = node or short_hostname()
        exp = expectations_for(config, node)
        from ..pipeline.judge import sources_needed

        try:  # only the sources the chosen checks need are probed (`--only 'host.*'` asks no BMC)
            snap = snapshot_for(node, exp, started, sysfs_root, proc_root,
                                sources=sources_needed(exp, context, list(only) or None, list(skip) or None),
                                fabricmanager_log=fabricmanager_log_for(context))
        except BundleError as exc:
            raise UsageFailure(f"bundle of {node} (from the config): {exc}") from exc
    try:
        verdict = judge(snap, exp, context, list(only) or None, started_at=started, started_monotonic=t0,
                        skip=list(skip) or None)
    except SelectionError as exc:
        raise UsageFailure(str(exc)) from exc
    if spool_dir:
        _spool_run(spool_dir, verdict, config_path)
    click.echo(render(verdict, fmt, color=fmt == "text" and use_color(), verbose=verbose, snapshot=snap), nl=False)
    exit_with(exit_code(verdict, strict=strict))


def _spool_run(spool_dir: str, verdict, config_path: str | None) -> None:
    from ..spool.entries import new_run_id, run_record
    from ..spool.store import SpoolError, append

    try:
        append(spool_dir, run_record(verdict, new_run_id(), os.environ.get("SLURM_JOB_ID"), config_path))
    except (SpoolError, ValueError) as exc:
        click.echo(f"warning: run not recorded in {spool_dir}: {exc}", err=True)


@click.command()
@click.option("--output", "-o", required=True, type=OutputPath(folder_ok=True),
              help="Directory (new or empty) or a file name ending in .tar.gz.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@click.option("--sysfs-root", default="/sys", show_default=True)
@click.option("--proc-root", default="/proc", show_default=True)
def collect(output, config_path, sysfs_root, proc_root):
    """Record what the probes read into a bundle, for `check --bundle` anywhere.

    \b
    Example:
      healthcheck collect --output /tmp/$(hostname -s)-$(date +%F).tar.gz
    """
    from ..bundles.archive import BundleError
    from ..bundles.collect import collect_bundle

    config = load_config(config_path)
    from ..probes.live import short_hostname

    exp = expectations_for(config, short_hostname())
    try:
        path, notes = collect_bundle(output, sysfs_root, proc_root, exp.services)
    except BundleError as exc:
        raise UsageFailure(str(exc)) from exc
    for note in notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"bundle written: {path}")


@click.command("checks")
@click.option("--context", type=click.Choice(["check", "prolog", "epilog", "slurm-check", "burnin"]))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True,
              help="markdown: the full catalog as in docs/checks.md; json: one object per check.")
def checks_cmd(context, fmt):
    """List the checks: name, whether it can fail by default, contexts, default thresholds, what
    each judges and what makes it fail.

    \b
    FAILS BY DEFAULT: "yes" = it can FAIL (and drain) with no expectations file; "informational
    until configured" = it never FAILs until the setting under "fails on" is made (most are written
    by `healthcheck config generate`).

    \b
    Example:
      healthcheck checks --context prolog
      healthcheck checks --format markdown > docs/checks.md
      healthcheck checks --format json | jq '.checks[] | select(.fails_by_default | not) | .name'
    """
    from ..checks.catalog_doc import fail_mode
    from ..checks.registry import load_all

    if fmt == "markdown":
        from ..checks.catalog_doc import markdown

        click.echo(markdown(), nl=False)
        return

    specs = [s for s in load_all().values() if not context or context in s.contexts]
    if fmt == "json":
        from .common import emit_json

        checks = []
        for spec in specs:
            can, on_what = fail_mode(spec)
            checks.append({"name": spec.name, "contexts": sorted(spec.contexts), "description": spec.description,
                           "fails_by_default": bool(can), "fails_on": on_what, "needs": list(spec.needs),
                           "thresholds": dict(spec.thresholds)})
        emit_json({"context": context, "checks": checks})
        return
    width = max([len(s.name) for s in specs] + [5])
    click.echo(f"{'CHECK':<{width}}  {'FAILS BY DEFAULT':<30}  CONTEXTS")
    for spec in specs:
        can, on_what = fail_mode(spec)
        label = "yes" if can else "informational until configured"
        click.echo(f"{spec.name:<{width}}  {label:<30}  {', '.join(sorted(spec.contexts))}")
        click.echo(f"    {spec.description}")
        click.echo(f"    {'fails on' if can else 'fails only with'}: {on_what}")
        thresholds = ", ".join(f"{k}={v}" for k, v in spec.thresholds.items())
        if thresholds:
            click.echo(f"    thresholds: {thresholds}")
