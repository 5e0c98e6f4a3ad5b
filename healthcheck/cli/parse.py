"""`healthcheck parse KIND FILE`: the parsers on a recorded tool output, as a summary or JSON (for
scripts and for triage of outputs from elsewhere). Registered into :mod:`healthcheck.cli`."""
from __future__ import annotations


import click

from .common import emit_json, read_text, UsageFailure


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def parse():
    """Parse a recorded tool output and print the facts found.

    \b
    Example:
      nvidia-smi -q -x > smi.xml; healthcheck parse nvidia-smi smi.xml --format json
      healthcheck parse nccl-tests all_reduce.log --format json
      healthcheck parse ibnetdiscover fabric.txt --format json
    """


def _json_format(fn):
    """``--format text|json``, the flag every command that prints data has, and ``--json``, its alias
    (kept for scripts written before)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, fmt, as_json, **kwargs):
        return fn(*args, as_json=as_json or fmt == "json", **kwargs)

    wrapper = click.option("--json", "as_json", is_flag=True, help="The same as --format json.")(wrapper)
    return click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                        show_default=True, help="Print a summary or the parsed facts as JSON.")(wrapper)


def _emit(data: dict, as_json: bool, text: str) -> None:
    emit_json(data, allow_nan=False) if as_json else click.echo(text)


def _plain(value):
    import dataclasses

    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _node_facts(kind: str, path: str, as_json: bool) -> None:
    from ..parsers import ParseError
    from ..parsers.describe import describe

    text = read_text(path)
    try:
        if kind == "nvidia-smi":
            from ..parsers.nvidia_smi import parse_nvidia_smi as parser
        elif kind == "kernel-log":
            from ..parsers.host_events import parse_host_events
            from ..parsers.kernel_log import parse_kernel_log

            def parser(text):  # NVIDIA driver events, then host events: one list, each with its kind
                return parse_kernel_log(text) + parse_host_events(text)
        else:
            from ..parsers.ibstat import parse_ibstat as parser
        result = parser(text)
    except ParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from exc
    if as_json:
        emit_json(_plain(result))
    elif kind == "kernel-log":
        click.echo(describe(kind, result) + "\n" + _host_events_text(result))
    else:
        click.echo(describe(kind, result))


def _host_events_text(events) -> str:
    """The host events with their class and policy severity, then what ``host.events`` makes of them."""
    from ..parsers.describe import when

    host = [e for e in events if e.kind == "host"]
    if not host:
        return "no host events"
    from ..checks.host_events import host_events
    from ..core.expectations import Expectations
    from ..core.model import Snapshot
    from ..policies.host_events import load_host_event_policy

    policy = load_host_event_policy()
    lines = [f"{len(host)} host events (class, policy severity)"]
    for e in host:
        rule = policy.rule(e.event_class or "")
        lines.append(f"{when(e)} {e.device or e.pci_bus_id or 'node'} {e.event_class} "
                     f"({rule.severity if rule is not None else '?'}): {e.message}")
    snap = Snapshot(node="-", taken_at="", source="parse", kernel_events=list(events))
    lines.append("host.events, as of the log's newest line (no node class, no device readings):")
    for f in host_events(snap, Expectations(), {}):
        lines.append(f"  {f.status.value.upper()} {f.component or 'node'}: {f.message}")
    return "\n".join(lines)


@parse.command("nvidia-smi")
@click.argument("path", type=click.Path(dir_okay=False))
@_json_format
def parse_nvidia_smi(path, as_json):
    """`nvidia-smi -q -x` (XML) or `nvidia-smi -q` (text), detected -> per-GPU facts.

    \b
    Example:
      nvidia-smi -q -x > smi.xml; healthcheck parse nvidia-smi smi.xml --json
    """
    _node_facts("nvidia-smi", path, as_json)


@parse.command("kernel-log")
@click.argument("path", type=click.Path(dir_okay=False))
@_json_format
def parse_kernel_log(path, as_json):
    """A kernel log (dmesg in any time format, journalctl -k, syslog, kern.log, a console capture) ->
    NVIDIA Xid and driver events, and the host events (machine checks, memory, PCIe, storage, HCA/NIC,
    links) with the class each line became, its severity in the host-event policy and what `host.events`
    makes of them (judged as of the log's newest line, without the node's class or devices). JSON: one
    list of events; host events have "kind": "host" and their "event_class".

    \b
    Example:
      healthcheck parse kernel-log /var/log/kern.log
      journalctl -k -b -o short-iso > k.log; healthcheck parse kernel-log k.log --format json
    """
    _node_facts("kernel-log", path, as_json)


@parse.command("ibstat")
@click.argument("path", type=click.Path(dir_okay=False))
@_json_format
def parse_ibstat(path, as_json):
    """`ibstat` output -> InfiniBand/RoCE ports, states, rates, firmware.

    \b
    Example:
      ibstat > ibstat.txt; healthcheck parse ibstat ibstat.txt
    """
    _node_facts("ibstat", path, as_json)


@parse.command("nccl-tests")
@click.argument("path", type=click.Path(dir_okay=False))
@_json_format
def parse_nccl(path, as_json):
    """An nccl-tests output (any *_perf binary, any version) -> rows, ranks, errors, α-β fit.

    \b
    Example:
      all_reduce_perf -b 8 -e 8G -f 2 -g 8 > ar.log; healthcheck parse nccl-tests ar.log --json
    """
    from ..burnin.alphabeta import fit
    from ..parsers.nccl_tests import NcclParseError, parse as parse_text

    try:
        result = parse_text(read_text(path))
    except NcclParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from None
    ab = fit(result.rows) if result.rows else None
    if as_json:  # the document (several dicts a row: ~1 KB and ~35 µs each) only when it is printed
        data = result.to_dict()
        data["alpha_beta"] = None if ab is None else {"alpha_us": ab.alpha_us, "beta_gbps": ab.beta_gbps,
                                                      "r2": ab.r2, "points": ab.points}
        emit_json(data, allow_nan=False)
        return
    click.echo(f"{len(result.rows)} sizes, {len(result.ranks)} ranks, avg busbw {result.avg_busbw_gbps}, "
               f"wrong {result.wrong_total}, out of bounds {result.out_of_bounds}, errors {len(result.errors)}"
               + (f", α {ab.alpha_us:.2f} µs β {ab.beta_gbps:.2f} GB/s" if ab else ""))


@parse.command("dcgmi")
@click.argument("path", type=click.Path(dir_okay=False))
@_json_format
def parse_dcgmi(path, as_json):
    """A `dcgmi diag` output (text table or -j JSON) -> tests, per-GPU status, overall verdict.

    \b
    Example:
      dcgmi diag -r 2 -j > diag.json; healthcheck parse dcgmi diag.json --json
    """
    from ..parsers.dcgmi import DcgmiParseError, parse_diag

    try:
        diag = parse_diag(read_text(path))
    except DcgmiParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from None
    text = f"overall {diag.overall}: " + ", ".join(f"{t.name}={t.status}" for t in diag.tests)
    _emit(diag.to_dict(), as_json, text)


@parse.command("fio")
@click.argument("path", type=click.Path(dir_okay=False))
@_json_format
def parse_fio(path, as_json):
    """An fio --output-format=json output -> per-job bandwidth, IOPS, p99 latency.

    \b
    Example:
      fio job.fio --output-format=json > fio.json; healthcheck parse fio fio.json
    """
    from ..parsers.fio import FioParseError, parse as parse_text

    try:
        result = parse_text(read_text(path))
    except FioParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from None
    text = "; ".join(f"{j.name}: read {j.read_bw_bytes} B/s, write {j.write_bw_bytes} B/s" for j in result.jobs)
    _emit(result.to_dict(), as_json, text)


def _register() -> None:
    """The fabric tools' parsers live with their fabric commands; all answer ``healthcheck parse KIND``."""
    from .fabric import parse_iblinkinfo, parse_ibnetdiscover
    from .fabric_counters import parse_ibqueryerrors, parse_perfquery, parse_perftest
    from .fabric_node import parse_nvbandwidth, parse_nvlink_status, parse_topo

    for command in (parse_ibnetdiscover, parse_iblinkinfo, parse_perfquery, parse_ibqueryerrors, parse_perftest, parse_nvbandwidth,
                    parse_topo, parse_nvlink_status):
        parse.add_command(command)


_register()
