"""`healthcheck parse perfquery|ibqueryerrors|perftest OUT [--format json|text]`: the port-counter and
perftest parsers on a recorded output (click commands, wired into the ``parse`` group by the CLI).

Exit status: 0 parsed; 1 perftest output of a failed run (the reason is printed, JSON still complete);
2 unreadable file or an output the parser does not recognise (one line on stderr)."""
from __future__ import annotations


import click

from ..core import exitcodes
from .common import emit_json, read_text, UsageFailure

_FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
                       help="text: a summary; json: everything parsed.")


def _parse(path: str, parser):
    from ..parsers import ParseError

    text = read_text(path)
    try:
        return parser(text)
    except ParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from None


def _traffic(name: str) -> bool:
    """Volumes and congestion, not errors: PortXmitData, PortRcvPkts, PortUnicastXmitPkts, PortXmitWait."""
    return name.endswith(("Data", "Pkts")) or name == "PortXmitWait"


def _json(data: dict) -> None:
    emit_json(data, allow_nan=False)


@click.command("perfquery")
@click.argument("path", type=click.Path(dir_okay=False))
@_FORMAT
def parse_perfquery(path: str, fmt: str) -> None:
    """`perfquery`, `perfquery -x` or `perfquery -E` output -> counters per port.

    \b
    Example:
      perfquery -x -C mlx5_0 -P 1 > pq.txt; healthcheck parse perfquery pq.txt --format json
    """
    from ..parsers.perfquery import parse_perfquery as parser

    result = _parse(path, parser)
    if fmt == "json":
        _json(result.to_dict())
        return
    for line in _perfquery_summary(result):
        click.echo(line)


def _perfquery_summary(result):
    """The text summary: one line per port and kind of block (in the order first seen), whatever
    number of blocks (samples) of it the input holds: the last value of each counter, as
    ``merged()`` takes them; then, once per port, its plain counters at their maximum; then the lines
    saying a query failed. At most one line per distinct header plus one per port, each no longer
    than the counter lines it names: the output is linear in the input (never a port's list printed
    again for each of its blocks)."""
    ports: dict[tuple, list] = {}  # (lid, port, kind) -> [blocks, counters]
    for block in result.blocks:
        seen = ports.get((block.lid, block.port, block.kind))
        if seen is None:
            ports[(block.lid, block.port, block.kind)] = [1, dict(block.counters)]
        else:
            seen[0] += 1
            seen[1].update(block.counters)
    saturated = result.saturated()
    for (lid, port, kind), (blocks, counters) in ports.items():
        where = f"lid {lid} port {'ALL' if port is None else port}"
        errors = {k: v for k, v in counters.items() if v and not _traffic(k)}
        shown = ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "no non-zero error counter"
        samples = f", last values of {blocks} blocks" if blocks > 1 else ""
        yield f"{where} ({kind}, {len(counters)} counters{samples}): {shown}"
        if kind == "basic" and saturated.get((lid, port)):
            yield f"  at their maximum (growth unknown): {', '.join(saturated[(lid, port)])}"
    for line in result.errors:
        yield f"error: {line}"


@click.command("ibqueryerrors")
@click.argument("path", type=click.Path(dir_okay=False))
@_FORMAT
def parse_ibqueryerrors(path: str, fmt: str) -> None:
    """`ibqueryerrors [--details]` output -> the ports over threshold, with the far end of each link.

    \b
    Example:
      ibqueryerrors --details > qe.txt; healthcheck parse ibqueryerrors qe.txt --format json
    """
    from ..parsers.perfquery import parse_ibqueryerrors as parser

    result = _parse(path, parser)
    if fmt == "json":
        _json(result.to_dict())
        return
    for p in result.ports:
        far = f" -> {p.link.remote_desc or p.link.remote_guid} port {p.link.remote_port}" \
            if p.link and p.link.remote_port is not None else ""
        counters = ", ".join(f"{k} {v}" for k, v in p.counters.items())
        click.echo(f"{p.node_desc} port {'ALL' if p.port is None else p.port}{far}: {counters}")
    if result.ports_checked is not None:
        click.echo(f"{result.ports_checked} ports checked, {result.bad_ports} over threshold")
    for line in result.errors:
        click.echo(f"error: {line}")


@click.command("perftest")
@click.argument("path", type=click.Path(dir_okay=False))
@_FORMAT
def parse_perftest(path: str, fmt: str) -> None:
    """ib_write_bw / ib_read_bw / ib_send_bw / ib_*_lat output -> settings, table, result.

    A failed run ("Failed to modify QP to RTR", "Couldn't connect to ...") exits 1 with its reason.

    \b
    Example:
      ib_write_bw -d mlx5_0 --report_gbits host2 > bw.txt; healthcheck parse perftest bw.txt --format json
    """
    from ..parsers.perftest import parse_perftest as parser

    result = _parse(path, parser)
    if fmt == "json":
        _json(result.to_dict())
    else:
        side = "server" if result.server else "client"
        head = f"{result.test or 'perftest'} ({side}, {result.device or 'device ?'})"
        if result.kind == "bw" and result.rows:
            figure = f"{result.bw_avg_gbps():.2f} Gb/s average at {max(r['bytes'] for r in result.rows)} B"
        elif result.kind == "lat" and result.rows:
            figure = f"{result.latency_us():.2f} us typical at {min(r['bytes'] for r in result.rows)} B"
        else:
            figure = "no result"
        click.echo(f"{head}: {figure}" + (f"; error: {result.error}" if result.error else ""))
        for warning in result.warnings:
            click.echo(f"warning: {warning}")
    if result.error:
        raise SystemExit(exitcodes.FAIL)
