"""Admin commands at scale (issue 30, item 8): `healthcheck fabric check` on a synthetic fat tree of 16k
and 32k HCAs, and `healthcheck config validate` on a file of 4,000 node classes.

    .venv/bin/python benchmarks/bench_admin_scale.py [--hcas 16384 32768] [--classes 4000] [--runs 3]
    .venv/bin/python benchmarks/bench_admin_scale.py --quick      # 2k HCAs, 500 classes, 1 run, small hostile files

The fabric is a two-tier rail-optimised fat tree of 64-port switches: nodes of 8 HCAs, leaves of 32 HCA
ports and 32 uplinks, one uplink from each leaf to 32 spines. Its `ibnetdiscover` (plain format) text
is rendered here, its topology.toml generated from it (`fabric generate`, not timed); the figure is
what `fabric check` does after reading its two files: load the design, parse the fabric, compare.
Every leaf declares its uplinks (too_few_uplinks is judged per switch). A second figure plants faults
(two swapped cables, one unknown switch) so the deviation paths run too.

The config has 4,000 classes of 8 nodes each (``gpu[00001-00008]`` ...) and two overlapping classes at
the end; the figure is what `config validate` does: load, the expectations of one node, the overlap
check. Two hostile files follow, both at the file's bound of nodes: classes that all name the same
nodes (every pair overlaps), and classes that each leave out one node of a shared range (every set of
classes sharing nodes is distinct).

The design's ``hca_regex``: each hostile pattern of the issue is refused at load (the time to refuse
it), and the worst pattern still accepted (MAX_CHOICES ``.*`` over the same characters) is matched
against a hostile description of MAX_DESCRIPTION characters (the longest matched) and of four times
that (never matched). For contrast, what ``(a+)+`` cost before, unvetted, for a few lengths of text.

`drill prepare --nodes 'node[1-99999999]'`: the time and memory to refuse it.

Figures go to docs/performance.md. Not part of the test run.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from healthcheck.config import load, loads, overlapping_classes  # noqa: E402
from healthcheck.config.schema import MAX_CONFIG_NODES  # noqa: E402
from healthcheck.drill.cluster import DrillError  # noqa: E402
from healthcheck.drill.site import parse_nodes  # noqa: E402
from healthcheck.fabric.compare import compare  # noqa: E402
from healthcheck.fabric.design import DesignError, compile_hca_regex, generate_design, load_design  # noqa: E402
from healthcheck.fabric.hcaregex import MAX_CHOICES, MAX_DESCRIPTION, match_description  # noqa: E402
from healthcheck.parsers.ibnetdiscover import parse_ibnetdiscover  # noqa: E402

HCAS_PER_NODE = 8
DOWN = 32      # HCA ports per leaf
UP = 32        # uplinks per leaf: one to each of 32 spines per leaf group


def _switch_guid(n: int) -> str:
    return f"10{n:014x}"


def _ca_guid(node: int, hca: int) -> str:
    return f"20{node:010x}{hca:02x}00"


def fabric_text(hcas: int, faults: bool = False) -> str:
    """ibnetdiscover plain output of the fat tree (``faults``: two HCAs' cables swapped, one stray switch)."""
    leaves = hcas // DOWN
    groups = max(1, leaves // 64)             # leaves per spine port group: spine s has one port per group
    spines = UP * groups if leaves > 64 else UP
    leaf_ports: dict[int, list] = {leaf: [] for leaf in range(leaves)}
    spine_ports: dict[int, list] = {s: [] for s in range(spines)}
    ca_ports: dict[tuple, tuple] = {}
    for i in range(hcas):
        node, hca = divmod(i, HCAS_PER_NODE)
        leaf, port = divmod(i, DOWN)
        ca_ports[(node, hca)] = (leaf, port + 1)
    if faults:  # swap the cables of node 0's mlx5_0 and node 1's mlx5_0
        ca_ports[(0, 0)], ca_ports[(1, 0)] = ca_ports[(1, 0)], ca_ports[(0, 0)]
    lid = {}
    for (node, hca), (leaf, port) in ca_ports.items():
        leaf_ports[leaf].append((port, "H", (node, hca), 1))
    for leaf in range(leaves):
        for u in range(UP):
            spine = (leaf % groups) * UP + u if leaves > 64 else u
            sport = leaf // groups + 1 if leaves > 64 else leaf + 1
            leaf_ports[leaf].append((DOWN + u + 1, "S", ("spine", spine), sport))
            spine_ports[spine].append((sport, "S", ("leaf", leaf), DOWN + u + 1))

    def sguid(kind: str, n: int) -> str:
        return _switch_guid((0 if kind == "leaf" else 1 << 20) + n)

    def sdesc(kind: str, n: int) -> str:
        return f"ib-{kind}-{n:04d}"

    next_lid = 1
    for kind, count in (("leaf", leaves), ("spine", spines)):
        for n in range(count):
            lid[(kind, n)] = next_lid
            next_lid += 1
    out = ["#", "# Topology file: synthetic fat tree (bench_admin_scale)", "#", ""]
    blocks = [("leaf", n, leaf_ports[n]) for n in range(leaves)] + [("spine", n, spine_ports[n]) for n in range(spines)]
    if faults:
        blocks.append(("stray", 0, []))
        lid[("stray", 0)] = next_lid
    for kind, n, ports in blocks:
        guid = sguid(kind, n) if kind != "stray" else "1fffffffffffff00"
        out += ["vendid=0x2c9", "devid=0xd2f2", f"sysimgguid=0x{guid}", f"switchguid=0x{guid}({guid})",
                f'Switch\t65 "S-{guid}"\t\t# "{sdesc(kind, n)}" enhanced port 0 lid {lid[(kind, n)]} lmc 0']
        for port, pk, peer, peer_port in sorted(ports):
            if pk == "S":
                pkind, pn = peer
                out.append(f'[{port}]\t"S-{sguid(pkind, pn)}"[{peer_port}]\t\t# "{sdesc(pkind, pn)}" '
                           f'lid {lid[peer]} 4xNDR')
            else:
                node, hca = peer
                g = _ca_guid(node, hca)
                out.append(f'[{port}]\t"H-{g}"[1]({g[:-1]}1)\t\t# "gpu{node:05d} mlx5_{hca}" lid 1 4xNDR')
        out.append("")
    for (node, hca), (leaf, port) in ca_ports.items():
        g = _ca_guid(node, hca)
        out += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{g}", f"caguid=0x{g}",
                f'Ca\t1 "H-{g}"\t\t# "gpu{node:05d} mlx5_{hca}"',
                f'[1]({g[:-1]}1)\t"S-{sguid("leaf", leaf)}"[{port}]\t\t# lid 1 lmc 0 "{sdesc("leaf", leaf)}" '
                f'lid {lid[("leaf", leaf)]} 4xNDR', ""]
    return "\n".join(out) + "\n"


def _timed(fn, runs: int) -> tuple[float, float, object]:
    """(median seconds, peak MiB under tracemalloc in one extra run, the last result)."""
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20, result


def bench_fabric(hcas: int, runs: int) -> list[dict]:
    golden = fabric_text(hcas)
    design_text = generate_design(parse_ibnetdiscover(golden.encode()))
    rows = []
    for label, text in (("matches", golden), ("2 swapped + 1 stray switch", fabric_text(hcas, faults=True))):
        data = text.encode()

        def check():
            design = load_design(design_text, source="topology.toml")
            return compare(design, parse_ibnetdiscover(data))

        seconds, peak, result = _timed(check, runs)
        fabric = parse_ibnetdiscover(data)
        rows.append({"hcas": hcas, "case": label, "switches": len(fabric.switches()), "links": len(fabric.links),
                     "s": seconds, "peak_mib": peak, "deviations": len(result.deviations)})
    return rows


def config_text(classes: int) -> str:
    out = ["[defaults]", "gpu_count = 8", ""]
    for i in range(classes):
        out += [f"[class.c{i:05d}]", f'nodes = "gpu[{i * 8 + 1:06d}-{i * 8 + 8:06d}]"', "gpu_count = 8", ""]
    # two overlapping classes at the end: the check must still see them
    out += ["[class.overlap_a]", 'nodes = "gpu[000001-000004]"', "", "[class.overlap_b]", 'nodes = "gpu[000003-000010]"', ""]
    return "\n".join(out)


def bench_config(classes: int, runs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "site.toml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(config_text(classes))

        def validate():
            cfg = load(path)
            cfg.expectations_for("__validate__")
            return overlapping_classes(cfg)

        seconds, peak, overlaps = _timed(validate, runs)
    return {"classes": classes + 2, "s": seconds, "peak_mib": peak, "overlaps": len(overlaps)}


def hostile_config(kind: str, nodes: int) -> str:
    """A file at ``nodes`` nodes in all: "same", 10 classes naming the same range (45 overlapping
    pairs); "minus", sqrt(nodes) classes each naming a shared range but one node of it (every pair
    overlaps, and every set of classes sharing a node is distinct)."""
    out = []
    if kind == "same":
        for i in range(10):
            out += [f"[class.c{i}]", f'nodes = "gpu[1-{nodes // 10}]"']
    else:
        k = int(nodes ** 0.5)
        for i in range(k):
            out += [f"[class.c{i}]", f'nodes = "gpu[1-{k + 1}]!gpu{i + 1}"']
    return "\n".join(out) + "\n"


def bench_hostile_config(nodes: int, runs: int) -> list[dict]:
    rows = []
    for kind, label in (("same", "10 classes naming the same nodes"),
                        ("minus", "classes each leaving out one node of a shared range")):
        text = hostile_config(kind, nodes)
        cfg = loads(text, "hostile.toml")
        seconds, peak, found = _timed(lambda: overlapping_classes(cfg), runs)
        rows.append({"case": label, "classes": len(cfg.classes),
                     "s": seconds, "peak_mib": peak, "overlaps": len(found)})
    return rows


REFUSED = [r"^(?P<node>(a+)+)\s(?P<hca>\S+)$", r"^(?P<node>(a|aa)+)\s(?P<hca>\S+)$",
           r"^(?P<node>\S*\S*\S*\S*\S*\S*)!(?P<hca>x)"]


def _match_seconds(pattern: re.Pattern, text: str, runs: int, bounded: bool) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        match_description(pattern, text) if bounded else pattern.match(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_regex(runs: int, before_lengths: list[int]) -> list[tuple[str, str]]:
    rows = []
    for regex in REFUSED:
        t0 = time.perf_counter()
        try:
            compile_hca_regex(regex, "topology.toml:fabric.hca_regex")
            outcome = "accepted (!)"
        except DesignError as exc:
            outcome = f"refused in {(time.perf_counter() - t0) * 1e6:.0f} µs: {str(exc).split(': ', 1)[1][:60]}…"
        rows.append((f"`{regex}`", outcome))
    worst = compile_hca_regex("^(?P<node>" + ".*" * MAX_CHOICES + ")!(?P<hca>x)", "worst")
    for length in (MAX_DESCRIPTION, 4 * MAX_DESCRIPTION):
        seconds = _match_seconds(worst, "a" * length, runs, bounded=True)
        rows.append((f"worst accepted (`.*` x {MAX_CHOICES}) on a hostile description of {length} characters",
                     f"{seconds * 1000:.1f} ms" + ("" if length <= MAX_DESCRIPTION else " (not matched: too long)")))
    default = compile_hca_regex(r"^(?P<node>\S+)\s+(?P<hca>\S+)$", "default")
    seconds = _match_seconds(default, "a" * MAX_DESCRIPTION, runs, bounded=True)
    rows.append((f"the default pattern on a hostile description of {MAX_DESCRIPTION} characters", f"{seconds * 1e6:.0f} µs"))
    nested = re.compile(REFUSED[0])  # what an unvetted pattern cost before
    for length in before_lengths:
        seconds = _match_seconds(nested, "a" * length, 1, bounded=False)
        rows.append((f"before: `(a+)+` unvetted, a description of {length} characters", f"{seconds:.2f} s"))
    return rows


def bench_drill(runs: int) -> dict:
    def refuse():
        try:
            parse_nodes("node[1-99999999]")
        except DrillError as exc:
            return str(exc)
        return "accepted (!)"

    seconds, peak, message = _timed(refuse, runs)
    return {"s": seconds, "peak_mib": peak, "message": message}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hcas", type=int, nargs="+", default=[16384, 32768])
    ap.add_argument("--classes", type=int, default=4000)
    ap.add_argument("--hostile-nodes", type=int, default=MAX_CONFIG_NODES,
                    help="nodes in all of each hostile config (default: the file's bound)")
    ap.add_argument("--before-lengths", type=int, nargs="*", default=[20, 22, 24],
                    help="description lengths `(a+)+` is timed on, unvetted (each 2 characters: x4)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2,048 HCAs, 500 classes, 10,000-node hostile files, one run")
    args = ap.parse_args()
    if args.quick:
        args.hcas, args.classes, args.hostile_nodes, args.runs, args.before_lengths = [2048], 500, 10_000, 1, [18]
    print("| `fabric check` | HCAs | switches | links | seconds (median) | peak MiB (tracemalloc) | deviations |")
    print("|---|---|---|---|---|---|---|")
    for hcas in args.hcas:
        for r in bench_fabric(hcas, args.runs):
            print(f"| {r['case']} | {r['hcas']:,} | {r['switches']:,} | {r['links']:,} | {r['s']:.2f} "
                  f"| {r['peak_mib']:.0f} | {r['deviations']} |", flush=True)
    print()
    print("| `config validate` | classes | seconds (median) | peak MiB (tracemalloc) | overlaps reported |")
    print("|---|---|---|---|---|")
    r = bench_config(args.classes, args.runs)
    print(f"| {r['classes']:,} classes of 8 nodes, 2 overlapping | {r['classes']:,} | {r['s']:.2f} "
          f"| {r['peak_mib']:.0f} | {r['overlaps']} |", flush=True)
    for r in bench_hostile_config(args.hostile_nodes, args.runs):
        print(f"| overlap check only: {r['case']}, {args.hostile_nodes:,} nodes in all | {r['classes']:,} "
              f"| {r['s']:.2f} | {r['peak_mib']:.0f} | {r['overlaps']} |", flush=True)
    print()
    print("| `hca_regex` | outcome |")
    print("|---|---|")
    for case, outcome in bench_regex(args.runs, args.before_lengths):
        case, outcome = (text.replace("|", "\\|") for text in (case, outcome))  # a table cell
        print(f"| {case} | {outcome} |", flush=True)
    print()
    r = bench_drill(args.runs)
    print(f"`drill prepare --nodes 'node[1-99999999]'`: refused in {r['s'] * 1e6:.0f} µs, peak "
          f"{r['peak_mib']:.2f} MiB (tracemalloc): {r['message']}")


if __name__ == "__main__":
    main()
