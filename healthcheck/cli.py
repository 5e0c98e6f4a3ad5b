"""The `healthcheck` command: a thin shell over the library. Heavy imports stay inside the commands.

Exit codes: 0 healthy (pass/warn/skip/error), 1 a check failed, 2 usage or config error, 3 internal error.
"""
from __future__ import annotations

import os
import sys
import time

import click

EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 3
CONFIG_ENV = "HEALTHCHECK_CONFIG"
DEFAULT_CONFIG = "/etc/healthcheck/healthcheck.toml"


class UsageFailure(click.ClickException):
    exit_code = EXIT_USAGE


def _load_config(path: str | None):
    """The config named by --config, $HEALTHCHECK_CONFIG, or /etc/healthcheck/healthcheck.toml if present."""
    from .config import ConfigError, load

    path = path or os.environ.get(CONFIG_ENV) or (DEFAULT_CONFIG if os.path.exists(DEFAULT_CONFIG) else None)
    if path is None:
        return None
    try:
        return load(path)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc


def _expectations(config, node: str):
    from .config import ConfigError, default_expectations

    try:
        return config.expectations_for(node) if config else default_expectations()
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="healthcheck")
def cli():
    """Health checks, bundles and expectations for GPU nodes of a Slurm cluster.

    \b
    Example:
      healthcheck check                      # judge this node with live probes
      healthcheck check --bundle node7.tar.gz --format json
    """


@cli.command()
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
def check(config_path, bundle, fmt, only, skip, context, node, sysfs_root, proc_root, verbose, spool_dir):
    """Probe this node (or read a bundle) and judge it.

    Exit status: 0 healthy, 1 a check failed, 2 usage or config error, 3 internal error.

    \b
    Example:
      healthcheck check --only 'gpu.*' --format json
      healthcheck check --skip 'host.load' --skip 'gpu.persistence'
      healthcheck check --bundle /tmp/gpu017.tar.gz --config /etc/healthcheck/healthcheck.toml
    """
    from .checks.registry import index
    from .output import exit_code, render
    from .runner import SelectionError, check_patterns, judge, utc_now_iso

    started, t0 = utc_now_iso(), time.monotonic()
    try:  # before any probing: a pattern that matches nothing is a usage error, not a PASS of 0 checks
        check_patterns(list(index()), list(only), list(skip))
    except SelectionError as exc:
        raise UsageFailure(str(exc)) from exc
    config = _load_config(config_path)
    if bundle:
        from .bundle import BundleError, snapshot_from_bundle

        try:
            snap = snapshot_from_bundle(
                bundle, services_for=lambda bundle_node: _expectations(config, node or bundle_node).services)
        except BundleError as exc:
            raise UsageFailure(str(exc)) from exc
        node = node or snap.node
        exp = _expectations(config, node)
        snap.node = node
    else:
        from .acquire import snapshot_for
        from .bundle import BundleError
        from .probes.live import short_hostname

        node = node or short_hostname()
        exp = _expectations(config, node)
        from .runner import sources_needed

        try:  # only the sources the chosen checks need are probed (`--only 'host.*'` asks no BMC)
            snap = snapshot_for(node, exp, started, sysfs_root, proc_root,
                                sources=sources_needed(exp, context, list(only) or None, list(skip) or None))
        except BundleError as exc:
            raise UsageFailure(f"bundle of {node} (from the config): {exc}") from exc
    try:
        verdict = judge(snap, exp, context, list(only) or None, started_at=started, started_monotonic=t0,
                        skip=list(skip) or None)
    except SelectionError as exc:
        raise UsageFailure(str(exc)) from exc
    if spool_dir:
        _spool_run(spool_dir, verdict, config_path)
    click.echo(render(verdict, fmt, color=fmt == "text" and sys.stdout.isatty(), verbose=verbose), nl=False)
    _exit(exit_code(verdict))


def _spool_run(spool_dir: str, verdict, config_path: str | None) -> None:
    from .records import new_run_id, run_record
    from .spool import SpoolError, append

    try:
        append(spool_dir, run_record(verdict, new_run_id(), os.environ.get("SLURM_JOB_ID"), config_path))
    except (SpoolError, ValueError) as exc:
        click.echo(f"warning: run not recorded in {spool_dir}: {exc}", err=True)


@cli.command()
@click.option("--output", "-o", required=True, type=click.Path(),
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
    from .bundle import BundleError
    from .collect import collect_bundle

    config = _load_config(config_path)
    from .probes.live import short_hostname

    exp = _expectations(config, short_hostname())
    try:
        path, notes = collect_bundle(output, sysfs_root, proc_root, exp.services)
    except BundleError as exc:
        raise UsageFailure(str(exc)) from exc
    for note in notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"bundle written: {path}")


@cli.group()
def config():
    """Write, validate and show the expectations file.

    \b
    Example:
      healthcheck config generate --nodes 'gpu[001-128]' > /etc/healthcheck/healthcheck.toml
    """


@config.command("validate")
@click.argument("path", type=click.Path(dir_okay=False))
def config_validate(path):
    """Check an expectations file; errors name the file and line (exit 2).

    \b
    Example:
      healthcheck config validate /etc/healthcheck/healthcheck.toml
    """
    from .config import ConfigError, load

    try:
        cfg = load(path)
        cfg.expectations_for("__validate__")
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from exc
    from .config import overlapping_classes

    for a, b, sample in overlapping_classes(cfg):
        click.echo(f"warning: {path}: classes {a!r} and {b!r} both match {sample} ({a!r} wins)", err=True)
    click.echo(f"{path}: ok ({len(cfg.classes)} node classes)")


@config.command("show")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@click.option("--node", help="Node name (default: this host).")
def config_show(config_path, node):
    """Print the effective expectations for a node (defaults merged with its class) as JSON.

    \b
    Example:
      healthcheck config show --config site.toml --node gpu017
    """
    import dataclasses
    import json

    from .probes.live import short_hostname

    node = node or short_hostname()
    exp = _expectations(_load_config(config_path), node)
    data = dataclasses.asdict(exp)
    data["xid_policy"] = {"unknown_action": exp.xid_policy.unknown_action,
                          "rules": {str(k): dataclasses.asdict(v) for k, v in exp.xid_policy.rules.items()}}
    click.echo(json.dumps({"node": node, **data}, indent=2, default=list))


@config.command("generate")
@click.option("--bundle", type=click.Path(exists=True), help="Generate from a bundle instead of this node.")
@click.option("--nodes", help="Node-set pattern for the class (default: the node's name).")
@click.option("--class-name", default="generated", show_default=True)
@click.option("--sysfs-root", default="/sys", show_default=True)
@click.option("--proc-root", default="/proc", show_default=True)
def config_generate(bundle, nodes, class_name, sysfs_root, proc_root):
    """Write the expectations of a known-good node (or bundle) as TOML on stdout.

    Every HCA port (CA type, firmware, rate, link layer, active) and every GPU model group is
    recorded on its own, so the node passes its own file and a node that differs in any recorded
    fact fails; the file ends with the checks that stay informational (see `healthcheck checks`).

    \b
    Example:
      healthcheck config generate --nodes 'gpu[001-128]' --class-name h100 > healthcheck.toml
    """
    from .generate import generate_toml
    from .runner import utc_now_iso

    if bundle:
        from .bundle import BundleError, snapshot_from_bundle

        try:
            snap = snapshot_from_bundle(bundle, services=_KNOWN_SERVICES)
        except BundleError as exc:
            raise UsageFailure(str(exc)) from exc
    else:
        from .probes.live import LiveOptions, snapshot_live

        snap = snapshot_live(LiveOptions(sysfs_root, proc_root, _KNOWN_SERVICES), utc_now_iso())
    click.echo(generate_toml(snap, class_name, nodes or snap.node), nl=False)


_KNOWN_SERVICES = ("slurmd", "munged", "nvidia-persistenced", "nv-fabricmanager", "nv-hostengine",
                   "sshd", "opensm", "chronyd", "ntpd", "dcgm-exporter", "node_exporter")


@cli.command("checks")
@click.option("--context", type=click.Choice(["check", "prolog", "epilog", "slurm-check", "burnin"]))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
              help="markdown: the full catalog as in docs/checks.md.")
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
    """
    from .catalog_doc import fail_mode
    from .checks.registry import load_all

    if fmt == "markdown":
        from .catalog_doc import markdown

        click.echo(markdown(), nl=False)
        return

    specs = [s for s in load_all().values() if not context or context in s.contexts]
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


def _register() -> None:
    """The history, database, report and slurm commands live in their own modules (imported here:
    they import only click at module level; pandas and SQLAlchemy load inside the commands)."""
    from .cli_history import db, history
    from .cli_report import report
    from .cli_slurm import slurm
    from .cli_burnin import burnin
    from . import cli_burnin_jobs  # noqa: F401 - registers burnin report/submit/fleet-digests
    from .cli_parse import parse
    from .cli_sweep import sweep

    cli.add_command(history)
    cli.add_command(db)
    cli.add_command(report)
    cli.add_command(slurm)
    cli.add_command(burnin)
    cli.add_command(parse)
    cli.add_command(sweep)


_register()


def _exit(code: int) -> None:
    sys.stdout.flush()
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """The console entry point (``argv`` None: the real command line; tests pass a list)."""
    real = argv is None
    try:
        cli.main(args=argv, prog_name="healthcheck", standalone_mode=True)
    except SystemExit as done:
        if real:
            _leave(done.code)
        raise
    except Exception as exc:  # a bug of ours: say so, exit 3, no traceback unless asked
        if os.environ.get("HEALTHCHECK_DEBUG"):
            raise
        click.echo(f"healthcheck: internal error: {type(exc).__name__}: {exc} "
                   "(set HEALTHCHECK_DEBUG=1 for the traceback)", err=True)
        if real:
            _leave(EXIT_INTERNAL)
        sys.exit(EXIT_INTERNAL)


def _leave(code) -> None:
    """A probe thread still stuck in the GPU driver must not hold the process at interpreter
    shutdown: leave at once. Only from the real command line: inside a test runner it would end the
    runner itself."""
    import threading

    if any(t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


if __name__ == "__main__":
    main()
