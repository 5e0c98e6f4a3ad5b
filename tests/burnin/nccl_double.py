"""A test double of the nccl-tests binaries: it replays a real recorded nccl-tests output, scaled per
node, so that a burn-in on the local Slurm cluster (no GPUs) sees realistic tables with one slow node.

``install(directory, recording, factors, gpus)`` writes ``<collective>_perf`` executables plus their
``double.json``. At run time the double works out which nodes it spans:
- launched by srun as a multi-node step (SLURM_STEP_NODELIST in its environment): those nodes; only
  rank 0 (SLURM_PROCID 0) prints, as real nccl-tests built with MPI do;
- run directly on one node (``-g N``): SLURMD_NODENAME.
Bandwidths are multiplied, and times divided, by the smallest factor among those nodes (a collective
runs at the pace of its slowest member); the rank lines are rewritten to name the nodes.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
_ROW = re.compile(r"^(\s*)(\d+)(\s+)(\d+)(\s+)(\S+)(\s+)(\S+)(\s+)(-?\d+)(.*)$")
_NUM = re.compile(r"\S+")


def install(directory: Path, recording: Path, factors: dict[str, float], gpus: int = 8) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "double.json").write_text(json.dumps({"recording": str(recording), "factors": factors,
                                                       "gpus": gpus}))
    for coll in COLLECTIVES:
        exe = directory / f"{coll}_perf"
        exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                       "from tests.burnin.nccl_double import main\nmain(__file__)\n")
        exe.chmod(0o755)
    return directory


def _nodes() -> list[str]:
    step = os.environ.get("SLURM_STEP_NODELIST")
    if step:
        from ClusterShell.NodeSet import NodeSet

        return list(NodeSet(step))
    return [os.environ.get("SLURMD_NODENAME") or "localhost"]


def _scale_row(line: str, factor: float) -> str:
    """Scale the time (÷), algbw and busbw (×) of both column groups of one result row."""
    m = _ROW.match(line)
    if not m:
        return line
    head = "".join(m.groups()[:10])
    tokens = m.group(11).split()
    # out-of-place: time algbw busbw #wrong ; in-place: time algbw busbw #wrong
    for base in (0, 4):
        if len(tokens) >= base + 3:
            for i, op in ((base, "div"), (base + 1, "mul"), (base + 2, "mul")):
                try:
                    value = float(tokens[i])
                except ValueError:
                    continue
                tokens[i] = f"{(value / factor if op == 'div' else value * factor):.2f}"
    return head + "  " + "  ".join(f"{t:>8}" for t in tokens)


def render(text: str, factor: float, nodes: list[str], gpus: int) -> str:
    out, ranks_done = [], False
    for line in text.splitlines():
        if re.match(r"^#\s+Rank\s+\d+", line):
            if not ranks_done:
                per = gpus if len(nodes) == 1 else 1
                rank = 0
                for node in nodes:
                    for dev in range(per):
                        out.append(f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on {node:>10} device {dev:2d} "
                                   f"[0x{0x18 + dev:02x}] NVIDIA A100-SXM4-80GB")
                        rank += 1
                ranks_done = True
            continue
        avg = re.match(r"^(# Avg bus bandwidth\s*:\s*)(\S+)(.*)$", line)
        if avg:
            out.append(f"{avg.group(1)}{float(avg.group(2)) * factor:.4f}{avg.group(3)}")
            continue
        out.append(_scale_row(line, factor) if not line.lstrip().startswith("#") else line)
    return "\n".join(out) + "\n"


def main(exe_path: str) -> None:
    conf = json.loads((Path(exe_path).parent / "double.json").read_text())
    if os.environ.get("SLURM_STEP_NODELIST") and os.environ.get("SLURM_PROCID", "0") != "0":
        return  # only rank 0 prints
    nodes = _nodes()
    factor = min(float(conf["factors"].get(n, 1.0)) for n in nodes)
    text = Path(conf["recording"]).read_text(encoding="utf-8", errors="replace")
    sys.stdout.write(render(text, factor, nodes, int(conf["gpus"])))
