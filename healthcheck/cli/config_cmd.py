"""`healthcheck config generate|validate|show`: the expectations file."""
from __future__ import annotations

import click

from ..core import exitcodes
from .common import UsageFailure, emit_json, exit_with, expectations_for, format_option, load_config


_KNOWN_SERVICES = ("slurmd", "munged", "nvidia-persistenced", "nv-fabricmanager", "nv-hostengine",
                   "sshd", "opensm", "chronyd", "ntpd", "dcgm-exporter", "node_exporter")


@click.group()
def config():
    """Write, validate and show the expectations file.

    \b
    Example:
      healthcheck config generate --nodes 'gpu[001-128]' > /etc/healthcheck/healthcheck.toml
    """


def _every_problem(path: str, first) -> list:
    """Every problem of the file (config.problems), the first load's error first; that one alone when the
    file cannot be read as text (unreadable, untrusted, not UTF-8)."""
    from ..config.loading import MAX_CONFIG_BYTES
    from ..config.problems import all_problems
    from ..safeio.trust import NotARegularFile, read_regular

    try:  # as the load read it: a FIFO, a device or a huge file is refused, never waited on
        text = read_regular(path, "config", MAX_CONFIG_BYTES).decode("utf-8")
    except (NotARegularFile, OSError, UnicodeDecodeError, ValueError):
        return [first]
    found = all_problems(text, path)
    found = found if found and str(found[0]) == str(first) else [first, *found[1:]]
    return sorted(found, key=lambda p: (p.line is None, p.line or 0))  # in the file's order


@config.command("validate")
@click.argument("path", type=click.Path(dir_okay=False))
@format_option(help_text="json: {path, valid, classes, warnings, error, errors}; exit 2 when not valid either way.")
def config_validate(path, fmt):
    """Check an expectations file: every problem in one run, each with its file and line and, for a
    misspelt name, what it may have meant (exit 2).

    \b
    Example:
      healthcheck config validate /etc/healthcheck/healthcheck.toml
      healthcheck config validate site.toml --format json
    """
    from ..config import ConfigError, load

    try:
        cfg = load(path)
        cfg.expectations_for("__validate__")
    except ConfigError as exc:
        problems = _every_problem(path, exc)
        if fmt == "json":
            emit_json({"path": path, "valid": False, "classes": None, "warnings": [], "error": str(exc),
                       "errors": [str(p) for p in problems]})
            exit_with(exitcodes.USAGE)
        for problem in problems[:-1]:
            click.echo(f"error: {problem}", err=True)
        more = f" ({len(problems)} problems; the others above)" if len(problems) > 1 else ""
        raise UsageFailure(f"{problems[-1]}{more}") from exc
    from ..config import overlapping_classes
    from ..config.overlap import MAX_OVERLAPS

    overlaps = overlapping_classes(cfg)
    warnings = [f"classes {a!r} and {b!r} both match {sample} ({a!r} wins)" for a, b, sample in overlaps]
    if len(overlaps) >= MAX_OVERLAPS:
        warnings.append(f"the first {MAX_OVERLAPS} overlapping pairs of classes are listed; there may be more")
    if fmt == "json":
        emit_json({"path": path, "valid": True, "classes": sorted(c.name for c in cfg.classes), "warnings": warnings,
                   "error": None})
        return
    for warning in warnings:
        click.echo(f"warning: {path}: {warning}", err=True)
    click.echo(f"{path}: ok ({len(cfg.classes)} node classes)")


@config.command("show")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Expectations file (TOML).")
@click.option("--node", help="Node name (default: this host).")
@format_option(choices=("json",), default="json", help_text="JSON, the only form (the flag every command has).")
def config_show(config_path, node, fmt):
    """Print the effective expectations for a node (defaults merged with its class) as JSON.

    \b
    Example:
      healthcheck config show --config site.toml --node gpu017
    """
    import dataclasses
    import json

    from ..probes.live import short_hostname

    node = node or short_hostname()
    exp = expectations_for(load_config(config_path), node)
    data = dataclasses.asdict(exp)
    data["xid_policy"] = {"unknown_action": exp.xid_policy.unknown_action,
                          "rules": {str(k): dataclasses.asdict(v) for k, v in exp.xid_policy.rules.items()}}
    click.echo(json.dumps({"schema_version": 1, "node": node, **data}, indent=2, default=list))


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
    from ..config.generate import generate_toml
    from ..core.clock import utc_now_iso

    if bundle:
        from ..bundles.archive import BundleError, snapshot_from_bundle

        try:
            snap = snapshot_from_bundle(bundle, services=_KNOWN_SERVICES)
        except BundleError as exc:
            raise UsageFailure(str(exc)) from exc
    else:
        from ..probes.live import LiveOptions, snapshot_live

        snap = snapshot_live(LiveOptions(sysfs_root, proc_root, _KNOWN_SERVICES), utc_now_iso())
    click.echo(generate_toml(snap, class_name, nodes or snap.node), nl=False)
