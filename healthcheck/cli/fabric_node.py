"""Commands for the inside of a node and for software consistency (wired by :mod:`healthcheck.cli`):

- ``parse_nvbandwidth``  -> ``healthcheck parse nvbandwidth OUT [--format json|text]``
- ``parse_topo``         -> ``healthcheck parse nvidia-smi-topo OUT [--format json|text]``
- ``parse_nvlink_status``-> ``healthcheck parse nvlink-status OUT [--format json|text]``
- ``node``               -> ``healthcheck fabric node --topo OUT [--nvbandwidth OUT] ...``
- ``consistency``        -> ``healthcheck fabric consistency PATH [--expect FILE] [--format json|text]``

A thin shell over the pure modules (parsers, :mod:`healthcheck.fabric.nodetopo`,
:mod:`healthcheck.fabric.p2p`, :mod:`healthcheck.fabric.software`): files are read here, library
errors become one clean message (exit 2). ``node`` and ``consistency`` exit 1 when anything deviates.
"""
from __future__ import annotations

import json
import os
import time

import click

from ..core import exitcodes
from .common import emit_json, read_text, UsageFailure
from .fabric_spool import SPOOL, spool_result

MAX_FILES = 100_000
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
_FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                       show_default=True, help="Output format.")


def _read(path: str, what: str = "file") -> str:
    return read_text(path, what)


def _emit(fmt: str, data: dict, text: str) -> None:
    emit_json(data, allow_nan=False) if fmt == "json" else click.echo(text)


def _parse(parser, path: str):
    from ..parsers import ParseError

    try:
        return parser(_read(path))
    except ParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from None


# ------------------------------------------------------------------------------------------- parse


@click.command("nvbandwidth", context_settings=_CONTEXT)
@click.argument("path", type=click.Path(dir_okay=False))
@_FORMAT
def parse_nvbandwidth(path, fmt):
    """`nvbandwidth` output (text or --json) -> one matrix per test case.

    \b
    Example:
      nvbandwidth > nvb.txt; healthcheck parse nvbandwidth nvb.txt --format json
    """
    from ..parsers.nvbandwidth import pairs, parse_nvbandwidth, to_dict

    result = _parse(parse_nvbandwidth, path)
    lines = []
    if result.devices:
        lines.append(f"{len(result.devices)} device(s): " + "; ".join(
            f"{k}: {v}" for k, v in sorted(result.devices.items())))
    for test in result.tests:
        values = [v for _, _, v in pairs(test)]
        if values:
            lines.append(f"{test.name}: {test.status}, {len(test.rows)}x{len(test.columns)} matrix, "
                         f"{len(values)} pairs, min {min(values):.2f} max {max(values):.2f} {test.unit or ''}")
        else:
            lines.append(f"{test.name}: {test.status}" + (f" ({test.message})" if test.message else ""))
    _emit(fmt, to_dict(result), "\n".join(lines))


@click.command("nvidia-smi-topo", context_settings=_CONTEXT)
@click.argument("path", type=click.Path(dir_okay=False))
@_FORMAT
def parse_topo(path, fmt):
    """`nvidia-smi topo -m` or `nvidia-smi topo -p2p r` (detected) -> the node topology.

    \b
    Example:
      nvidia-smi topo -m > topo.txt; healthcheck parse nvidia-smi-topo topo.txt --format json
    """
    from ..fabric.nodetopo import build_topology
    from ..fabric.nodetopo import to_dict as topo_dict
    from ..parsers.nvidia_smi_topo import parse_topo as parser
    from ..parsers.nvidia_smi_topo import to_dict

    matrix = _parse(parser, path)
    if matrix.kind == "p2p":
        node = build_topology(None, p2p=matrix)
    else:
        node = build_topology(matrix)
    data = {"matrix": to_dict(matrix), "topology": topo_dict(node)}
    lines = [f"{matrix.kind} matrix: {len(matrix.gpus())} GPU(s), {len(matrix.nics())} NIC(s)"]
    for gpu, place in sorted(node.gpus.items()):
        if matrix.kind == "topo":
            lines.append(f"GPU{gpu}: NUMA {place.numa or 'N/A'}, CPUs {place.cpu_affinity or '-'}, nearest HCA "
                         f"{', '.join(place.nearest_hcas) or '-'} ({place.hca_relation or '-'})")
    words = node.pairs if matrix.kind == "topo" else node.p2p
    kinds: dict[str, int] = {}
    for word in words.values():
        kinds[word] = kinds.get(word, 0) + 1
    lines.append("GPU pairs: " + (", ".join(f"{n} x {w}" for w, n in sorted(kinds.items())) or "none"))
    _emit(fmt, data, "\n".join(lines))


@click.command("nvlink-status", context_settings=_CONTEXT)
@click.argument("path", type=click.Path(dir_okay=False))
@_FORMAT
def parse_nvlink_status(path, fmt):
    """`nvidia-smi nvlink -s` (or `-e`, detected) -> links per GPU.

    \b
    Example:
      nvidia-smi nvlink -s > nvlink.txt; healthcheck parse nvlink-status nvlink.txt --format json
    """
    import dataclasses

    from ..parsers import ParseError
    from ..parsers.nvlink import parse_nvlink_errors, parse_nvlink_status

    text = _read(path)
    try:
        try:
            links, kind = parse_nvlink_status(text), "status"
        except ParseError as first:
            if "nvlink -e" not in str(first):
                raise
            links, kind = parse_nvlink_errors(text), "errors"
    except ParseError as exc:
        raise UsageFailure(f"{path}: {exc}") from None
    data = {"kind": kind, "gpus": [{"index": key.index, "uuid": key.uuid, "name": key.name,
                                    "links": [dataclasses.asdict(link) for link in value]}
                                   for key, value in links.items()]}
    lines = []
    for key, value in links.items():
        active = sum(1 for link in value if link.active)
        speeds = sorted({link.speed_gbps for link in value if link.speed_gbps})
        lines.append(f"GPU{key.index} {key.name or ''}: {len(value)} link(s)"
                     + (f", {active} active" if kind == "status" else "")
                     + (f", {'/'.join(f'{s:g}' for s in speeds)} GB/s" if speeds else ""))
    _emit(fmt, data, "\n".join(lines) or "no GPU with NVLink information")


# ------------------------------------------------------------------------------------------- fabric


def _toml_or_json(path: str, what: str) -> dict:
    text = _read(path, what)
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageFailure(f"{path}: not valid JSON ({exc})") from None
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageFailure(f"{path}: not valid TOML ({exc})") from None
    if not isinstance(data, dict):
        raise UsageFailure(f"{path}: expected a table of {what}")
    return data


def render_findings(findings) -> str:
    """One line per finding: STATUS check [component] message (fabric node, fabric mndiag)."""
    return "\n".join(f"{f.status.value.upper():5} {f.check} [{f.component or '-'}] {f.message}" for f in findings)


@click.command("node", context_settings=_CONTEXT)
@click.option("--topo", "topo_path", type=click.Path(dir_okay=False), help="`nvidia-smi topo -m` output.")
@click.option("--p2p", "p2p_path", type=click.Path(dir_okay=False), help="`nvidia-smi topo -p2p r` output.")
@click.option("--nvlink-status", "nvlink_path", type=click.Path(dir_okay=False),
              help="`nvidia-smi nvlink -s` output.")
@click.option("--nvbandwidth", "nvb_path", type=click.Path(dir_okay=False), help="`nvbandwidth` output.")
@click.option("--expect", "expect_path", type=click.Path(dir_okay=False),
              help="Node topology expectations (TOML: gpus, nvlink, pairs, numa, hca, ...).")
@click.option("--generate", is_flag=True, help="Print the expectations this node meets (TOML) and exit.")
@click.option("--sku", help="Reference SKU for nvbandwidth (default: from the GPU name it printed).")
@click.option("--references", "refs_path", type=click.Path(dir_okay=False),
              help="Site nvbandwidth references (same shape as the packaged p2p_references.toml).")
@click.option("--median-tolerance", type=click.FloatRange(0.01, 0.9), default=0.15, show_default=True,
              help="A pair this far below the node's median fails.")
@click.option("--node", "node_name", help="The node these outputs are from, for --spool (default: this host).")
@SPOOL
@_FORMAT
def node(topo_path, p2p_path, nvlink_path, nvb_path, expect_path, generate, sku, refs_path,
         median_tolerance, node_name, spool_dir, fmt):
    """Check one node's inside: topology against expectations, nvbandwidth pairs against the SKU
    reference and the node's median. Exit 0 when all match, 1 on any deviation, 2 on bad input.

    \b
    Example:
      healthcheck fabric node --topo topo.txt --nvlink-status nvl.txt --nvbandwidth nvb.txt \\
          --expect node-topology.toml
      healthcheck fabric node --topo topo.txt --nvlink-status nvl.txt --generate > node-topology.toml
    """
    from ..fabric import nodetopo, p2p
    from ..core.model import Status, worst
    from ..parsers.nvbandwidth import parse_nvbandwidth
    from ..parsers.nvidia_smi_topo import parse_topo_m, parse_topo_p2p
    from ..parsers.nvlink import parse_nvlink_status
    from ..core.clock import utc_now_iso

    started, t0 = utc_now_iso(), time.monotonic()
    if node_name is not None and (not node_name or "/" in node_name or node_name.startswith((".", "-"))):
        raise UsageFailure(f"--node {node_name!r} is not a plain node name")
    if not (topo_path or p2p_path or nvlink_path or nvb_path):
        raise UsageFailure("give at least one of --topo, --p2p, --nvlink-status, --nvbandwidth")
    topo = _parse(parse_topo_m, topo_path) if topo_path else None
    p2p_matrix = _parse(parse_topo_p2p, p2p_path) if p2p_path else None
    links = _parse(parse_nvlink_status, nvlink_path) if nvlink_path else None
    topology = nodetopo.build_topology(topo, p2p_matrix, links)
    if generate:
        click.echo(_toml(nodetopo.expectations_from(topology)), nl=False)
        return
    findings = []
    if expect_path:
        try:
            expect = nodetopo.validate(_toml_or_json(expect_path, "node topology expectations"))
        except nodetopo.TopologyExpectError as exc:
            raise UsageFailure(f"{expect_path}: {exc}") from None
        findings.extend(nodetopo.check_topology(topology, expect))
    if nvb_path:
        result = _parse(parse_nvbandwidth, nvb_path)
        try:
            refs = p2p.load_references(override=_read(refs_path) if refs_path else None,
                                       where=refs_path or "p2p references")
            findings.extend(p2p.judge(result, refs, sku=sku, topology=topology if topology.gpus else None,
                                      median_tolerance=median_tolerance))
        except p2p.P2pReferencesError as exc:
            raise UsageFailure(str(exc)) from None
    if not findings:
        raise UsageFailure("nothing to judge: give --expect (topology) and/or --nvbandwidth")
    status = worst(f.status for f in findings)
    data = {"status": status.value, "topology": nodetopo.to_dict(topology),
            "results": [f.to_dict() for f in findings]}
    _emit(fmt, data, render_findings(findings))
    if spool_dir and nvb_path:  # the matrices cell by cell, for the report (not in the output above)
        from ..fabric.runrecord import p2p_matrix_findings

        findings = findings + p2p_matrix_findings(result, findings)
    spool_result(spool_dir, findings, node_name, started, t0)
    if status in (Status.FAIL, Status.ERROR, Status.WARN):
        raise SystemExit(exitcodes.FAIL)


def _toml(table: dict) -> str:
    """A flat table of strings, numbers, lists and one level of sub-tables as TOML text."""
    def value(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)
    return "".join(f"{k} = {value(v)}\n" for k, v in table.items())


def _record_files(path: str) -> list[str]:
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith((".json", ".jsonl")) and not n.startswith("."))
        if len(names) > MAX_FILES:
            raise UsageFailure(f"{path}: more than {MAX_FILES} record files")
        if not names:
            raise UsageFailure(f"{path}: no *.json or *.jsonl files in this directory")
        return [os.path.join(path, n) for n in names]
    if not os.path.exists(path):
        raise UsageFailure(f"{path}: no such file or directory")
    return [path]


@click.command("consistency", context_settings=_CONTEXT)
@click.argument("path", type=click.Path())
@click.option("--expect", "expect_path", type=click.Path(dir_okay=False),
              help="Declared set (TOML or JSON): items and their versions, or a [consistency] table "
                   "with expected/ignore/env_prefixes.")
@click.option("--ignore", multiple=True, help="Item to leave out (repeatable), e.g. kernel.")
@SPOOL
@_FORMAT
def consistency(path, expect_path, ignore, spool_dir, fmt):
    """Software and environment consistency across nodes: driver, CUDA, NCCL, OFED/rdma-core, HCA
    firmware, VBIOS, kernel, container image and NCCL_*/UCX_* variables; the odd nodes per item.

    PATH is a directory of per-node JSON files (`healthcheck check --format json` outputs, burn-in
    node results, facts records) or one JSON-lines file of them. Exit 0 when every item agrees
    (or matches --expect), 1 when any differs, 2 on bad input.

    \b
    Example:
      for n in gpu001 gpu002; do ssh $n healthcheck check --format json > facts/$n.json; done
      healthcheck fabric consistency facts/ --expect software.toml
    """
    from ..fabric import software
    from ..core.clock import utc_now_iso

    started, t0 = utc_now_iso(), time.monotonic()
    settings_table: dict = {}
    if expect_path:
        data = _toml_or_json(expect_path, "declared software set")
        if "consistency" in data and isinstance(data["consistency"], dict):
            settings_table = dict(data["consistency"])
        else:
            settings_table = {"expected": data}
    if ignore:
        settings_table["ignore"] = list(settings_table.get("ignore", [])) + list(ignore)
    try:
        settings = software.validate(settings_table)
        facts = []
        for file in _record_files(path):
            records = software.records_from_text(_read(file, "node record file"), file)
            facts.extend(software.node_facts(r, f"{file} record {k + 1}", settings.env_prefixes)
                         for k, r in enumerate(records))
        report = software.check_consistency(facts, settings)
    except software.ConsistencyError as exc:
        raise UsageFailure(str(exc)) from None
    _emit(fmt, software.to_dict(report), software.render_text(report))
    if spool_dir:
        from ..fabric.runrecord import consistency_findings

        spool_result(spool_dir, consistency_findings(report), None, started, t0)
    if not report.consistent:
        raise SystemExit(exitcodes.FAIL)
