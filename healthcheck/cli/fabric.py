"""`healthcheck fabric generate|check` and `healthcheck parse ibnetdiscover`: the fabric's cabling
against its declared design. The I/O shell around the pure modules (parsers.ibnetdiscover,
fabric.design, fabric.compare); wired into `healthcheck` by the CLI.

Exit codes: 0 the fabric matches (or the command did its job), 1 deviations found, 2 bad input (an
unreadable or invalid topology file, an output that is not ibnetdiscover's, a bad option).
"""
from __future__ import annotations


import click

from ..core import exitcodes
from .common import emit_json, read_input, UsageFailure as FabricUsageError
from .fabric_spool import SPOOL, spool_result

MAX_INPUT = 128 * 1024 * 1024
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _read(path: str, what: str) -> bytes:
    return read_input(path, what, MAX_INPUT)


def _fabric(path: str):
    from ..parsers import ParseError
    from ..parsers.ibnetdiscover import parse_ibnetdiscover
    from ..parsers.iblinkinfo import parse_iblinkinfo

    data = _read(path, "ibnetdiscover or iblinkinfo output")
    parse = parse_iblinkinfo if _is_iblinkinfo(data) else parse_ibnetdiscover
    try:
        return parse(data)
    except ParseError as exc:
        raise FabricUsageError(f"{path}: {exc}") from None


def _is_iblinkinfo(data: bytes) -> bool:
    """iblinkinfo prints ``==( ... )==>`` on every port line and ``CA:``/``Switch:`` headings."""
    head = data[:65536]
    return b")==>" in head and (b"CA: " in head or b"Switch: " in head)


def _describe(fabric) -> str:
    lines = [f"{'iblinkinfo' if fabric.format == 'iblinkinfo' else f'ibnetdiscover ({fabric.format} format)'}: {len(fabric.switches())} switches, {len(fabric.hosts())} host CAs, "
             f"{sum(1 for d in fabric.devices.values() if d.aggregation)} SHARP aggregation nodes, "
             f"{len(fabric.links)} links, {len(fabric.unconnected)} unconnected ports"]
    names = {d.guid: d.description or f"0x{d.guid}" for d in fabric.devices.values()}
    for link in fabric.links:
        lines.append(f"{names.get(link.a.guid)} [{link.a.port}] <-> {names.get(link.b.guid)} [{link.b.port}] {link.rate}")
    for port in fabric.unconnected:
        lines.append(f"{names.get(port.end.guid)} [{port.end.port}] unconnected ({port.width} {port.speed})")
    lines += [f"warning: {w}" for w in fabric.warnings]
    return "\n".join(lines)


@click.command("ibnetdiscover", context_settings=_CONTEXT)
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def parse_ibnetdiscover(path, fmt):
    """`ibnetdiscover` or `ibnetdiscover -p` output -> switches, CAs, links (width, speed).

    \b
    Example:
      ibnetdiscover > fabric.txt; healthcheck parse ibnetdiscover fabric.txt --format json
    """
    fabric = _fabric(path)
    emit_json(fabric.to_dict()) if fmt == "json" else click.echo(_describe(fabric))


@click.command("iblinkinfo", context_settings=_CONTEXT)
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def parse_iblinkinfo(path, fmt):
    """`iblinkinfo` output -> switches, CAs, links (width, speed), the same graph as ibnetdiscover's.

    \b
    Example:
      iblinkinfo > links.txt; healthcheck parse iblinkinfo links.txt --format json
    """
    fabric = _fabric(path)
    emit_json(fabric.to_dict()) if fmt == "json" else click.echo(_describe(fabric))


@click.group(context_settings=_CONTEXT)
def fabric():
    """The fabric: InfiniBand cabling against its declared design (topology.toml), a node's inside
    (NVLink, P2P bandwidth, NUMA and HCA affinity) and software consistency across nodes.

    \b
    Example:
      ibnetdiscover > golden.txt; healthcheck fabric generate --ibnetdiscover golden.txt > topology.toml
      ibnetdiscover > now.txt; healthcheck fabric check --topology topology.toml --ibnetdiscover now.txt
    """


@fabric.command(context_settings=_CONTEXT)
@click.option("--ibnetdiscover", "--iblinkinfo", "source", required=True, type=click.Path(dir_okay=False),
              help="ibnetdiscover (or -p) or iblinkinfo output of a known-good fabric (detected).")
@click.option("--hca-regex", default=None,
              help="How a node description names node and HCA (named groups node, hca). "
                   "Default: '^(?P<node>\\S+)\\s+(?P<hca>\\S+)$' (\"gpu017 mlx5_3\").")
def generate(source, hca_regex):
    """Write the declared design (topology.toml) of a known-good fabric to stdout.

    Switches are named by node description (GUID when not unique), tiers inferred (leaf: has host
    CAs; spine: above the leaves; core: above the spines), rails declared when every leaf carries one
    HCA name. Edit the file by hand, then check fabrics against it.

    \b
    Example:
      ibnetdiscover > golden.txt; healthcheck fabric generate --ibnetdiscover golden.txt > topology.toml
    """
    from ..fabric.design import DEFAULT_HCA_REGEX, DesignError, generate_design

    try:
        click.echo(generate_design(_fabric(source), hca_regex or DEFAULT_HCA_REGEX), nl=False)
    except DesignError as exc:
        raise FabricUsageError(str(exc)) from None


@fabric.command(context_settings=_CONTEXT)
@click.option("--topology", required=True, type=click.Path(dir_okay=False), help="The declared design (TOML).")
@click.option("--ibnetdiscover", "--iblinkinfo", "source", required=True, type=click.Path(dir_okay=False),
              help="ibnetdiscover (or -p) or iblinkinfo output of the fabric now (detected).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@SPOOL
def check(topology, source, fmt, spool_dir):
    """Compare the fabric with its design: exit 0 when it matches, 1 with every deviation named.

    Deviations: missing_link, missing_switch, swapped, wrong_port, wrong_rail, wrong_switch,
    degraded_width, degraded_speed, unexpected_device, unexpected_link, too_few_uplinks; and per tier:
    links expected / found / misplaced / missing / degraded.

    \b
    Example:
      ibnetdiscover > now.txt; healthcheck fabric check --topology topology.toml --ibnetdiscover now.txt
    """
    import time

    from ..fabric.compare import compare
    from ..fabric.design import DesignError, load_design
    from ..core.clock import utc_now_iso

    started, t0 = utc_now_iso(), time.monotonic()
    try:
        design = load_design(_read(topology, "topology file"), source=topology)
    except DesignError as exc:
        raise FabricUsageError(str(exc)) from None
    result = compare(design, _fabric(source))
    emit_json(result.to_dict()) if fmt == "json" else click.echo(result.to_text())
    if spool_dir:
        from ..fabric.runrecord import topology_findings

        spool_result(spool_dir, topology_findings(result), None, started, t0)
    raise SystemExit(exitcodes.OK if result.ok else exitcodes.FAIL)


@fabric.command("nvlink-domains", context_settings=_CONTEXT)
@click.argument("outputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="The site config whose [topology.LEVEL] groups declare the NVLink domains.")
@click.option("--level", help="The [topology] level of the domains (default: [slurm] drain_cap_level, else nvlink).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def nvlink_domains(outputs, config_path, level, fmt):
    """The declared NVLink domains against what each node's GPUs report (cluster UUID and clique id):
    every deviation named (a tray outside its rack's domain or in none, two racks that are one domain,
    a node in a domain but declared in none). Exit 1 when any.

    OUTPUTS: one `nvidia-smi -q -x` (or `-q`) output per node, named NODE.xml or NODE.txt.

    \b
    Example:
      srun -N 72 --ntasks-per-node=1 bash -c 'nvidia-smi -q -x > /shared/smi/$(hostname -s).xml'
      healthcheck fabric nvlink-domains --config /etc/healthcheck/healthcheck.toml /shared/smi/*.xml
    """
    import os

    from ..config import ConfigError, load
    from ..config.topology import TopologyError, members
    from ..fabric.nvldomains import compare
    from ..parsers import ParseError
    from ..parsers.nvidia_smi import parse_nvidia_smi

    try:
        config = load(config_path)
        table = config.section("topology")
    except ConfigError as exc:
        raise FabricUsageError(str(exc)) from None
    level = level or config.slurm.drain_cap_level or "nvlink"
    if level not in table:
        raise FabricUsageError(f"{config_path}: no [topology.{level}] table declares the NVLink domains "
                               f"(levels: {', '.join(table) or 'none'})")
    try:
        declared = {group: members(table, level, group) for group in table[level]}
    except TopologyError as exc:
        raise FabricUsageError(str(exc)) from None
    seen = {}
    for path in outputs:
        node = os.path.basename(path).rsplit(".", 1)[0]
        if node in seen:
            raise FabricUsageError(f"{path}: a second output of node {node!r}")
        try:
            seen[node] = parse_nvidia_smi(_read(path, "nvidia-smi output").decode("utf-8", "replace")).gpus
        except ParseError as exc:
            raise FabricUsageError(f"{path}: {exc}") from None
    report = compare(declared, seen)
    if fmt == "json":
        emit_json({"level": level, **report.to_dict()})
    else:
        agree = sum(d["agree"] for d in report.domains.values())
        click.echo(f"{len(report.domains)} NVLink domains declared ([topology.{level}]), {len(seen)} nodes read, "
                   f"{agree} in their domain's majority: {'ok' if report.ok else f'{len(report.deviations)} deviations'}")
        for deviation in report.deviations:
            click.echo(f"  {deviation.kind}: {deviation.message}")
    raise SystemExit(exitcodes.OK if report.ok else exitcodes.FAIL)


@fabric.command("mndiag")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--node", "node_name", help="The node to record the run under, for --spool (default: this host).")
@SPOOL
def mndiag(path, fmt, node_name, spool_dir):
    """A `dcgmi mndiag` output (DCGM 4.3+, text or -j) judged: every failed host or GPU named with DCGM's
    message; the run not completing is an ERROR. Exit 1 on any FAIL, WARN or ERROR (dcgmi itself exits 0
    whether the diagnostic passed or not).

    \b
    Example:
      dcgmi mndiag --hostList "$(scontrol show hostnames | paste -sd';')" -j > mndiag.json
      healthcheck fabric mndiag mndiag.json
    """
    import time

    from ..core.clock import utc_now_iso
    from ..core.model import Status, worst
    from ..fabric.mndiag import judge
    from ..parsers.dcgmi_mndiag import MndiagParseError, parse_mndiag

    started, t0 = utc_now_iso(), time.monotonic()
    try:
        diag = parse_mndiag(_read(path, "dcgmi mndiag output"))
    except MndiagParseError as exc:
        raise FabricUsageError(f"{path}: {exc}") from None
    findings = judge(diag)
    status = worst(f.status for f in findings)
    if fmt == "json":
        emit_json({"status": status.value, "mndiag": diag.to_dict(), "results": [f.to_dict() for f in findings]})
    else:
        from .fabric_node import render_findings

        click.echo(render_findings(findings))
    spool_result(spool_dir, findings, node_name, started, t0)
    if status in (Status.FAIL, Status.ERROR, Status.WARN):
        raise SystemExit(exitcodes.FAIL)


def _register() -> None:
    """Inside a node (topology, NVLink, P2P bandwidth) and across the fleet (software consistency)."""
    from .fabric_node import consistency, node

    fabric.add_command(consistency)
    fabric.add_command(node)


_register()
