"""The burn-in's RDMA pair phase on the real local Slurm cluster: `sbatch sbatch_templates/burnin.sbatch`
unedited, phases checks + rdma, with test doubles of `ib_write_bw` and `perfquery` put on the steps'
PATH by the launcher (`srun --overlap -N1 -n1 -w NODE /usr/bin/env PATH=...`). The nodes' HCAs come from
their bundles' IB ports (the checks phase); node3's mlx5_0 runs at 150 Gb/s against 385 elsewhere.

The slow HCA is named (node, HCA, rail) and node3 drained with our reason; the port counters were read on
every node before and after the rounds; the others pass.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from healthcheck.bundles.collect import collect_bundle
from tests.bundles.test_bundles import make_node

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
NODES = ("node1", "node2", "node3", "node4")
SLOW = ("node3", "mlx5_0")

PERFTEST = '''#!{python}
import os, sys
args = sys.argv[1:]
node = os.environ.get("SLURMD_NODENAME", "?")
dev = args[args.index("-d") + 1]
client = not args[-1].isdigit() and not args[-1].startswith("-")
peer = args[-1] if client else ""
slow = dev == {dev!r} and {node!r} in (node, peer)
gbps = 150.0 if client and slow else 385.0
with open({log!r}, "a") as fh:
    fh.write(f"{{node}} {{dev}} {{'client' if client else 'server'}} {{peer}}\\n")
rule = "-" * 87
print(rule + "\\n                    RDMA_Write BW Test\\n Device         : " + dev + "\\n" + rule)
print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
print(f" 1048576    5000             {{gbps:.2f}}            {{gbps:.2f}}                  0.04")
print(rule)
'''

PERFQUERY = '''#!{python}
import os, sys
args = sys.argv[1:]
port = args[args.index("-P") + 1]
with open({log!r}, "a") as fh:
    fh.write(os.environ.get("SLURMD_NODENAME", "?") + " " + args[args.index("-C") + 1] + "\\n")
print(f"# Port extended counters: Lid 7 port {{port}} (CapMask: 0x5A00)")
for name in ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
             "PortXmitDiscards"):
    print(f"{{name}}:" + "." * (33 - len(name)) + "0")
'''


@pytest.fixture
def site(tmp_path):
    node = make_node(tmp_path / "src")
    healthy, _ = collect_bundle(str(tmp_path / "healthy"), options=node)
    bundles = tmp_path / "bundles"
    for name in NODES:
        (bundles / name).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", healthy, str(bundles / name)], check=True)
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text, log in (("ib_write_bw", PERFTEST, "perftest.log"), ("perfquery", PERFQUERY, "perfquery.log")):
        exe = tools / name
        exe.write_text(text.format(python=sys.executable, dev=SLOW[1], node=SLOW[0], log=str(tmp_path / log)))
        exe.chmod(0o755)
    # env(1) sets PATH, then looks the tool up in it (srun resolves a bare name with its own PATH)
    launcher = ["srun", "--overlap", "-N1", "-n1", "-w", "{node}", "/usr/bin/env", f"PATH={tools}:/usr/bin:/bin"]
    config = tmp_path / "site.toml"
    config.write_text("\n".join([
        "[class.bundled]", 'nodes = "node[1-4]"', f'bundle = "{bundles}/{{node}}"',
        "[slurm]", f'state_dir = "{tmp_path / "state"}"', f'spool_dir = "{tmp_path / "spool"}"',
        "[burnin]", 'suite = "quick"', 'backend = "numpy"', 'phases = ["checks", "rdma"]',
        "[burnin.rdma]", 'latency_test = ""', "duration_s = 1", "max_rounds = 4", "server_start_s = 0.5",
        "connect_retries = 1", "timeout_s = 60.0", f"launcher = {json.dumps(launcher)}", ""]))
    return tmp_path, config


def test_burnin_rdma_phase_names_and_drains_the_slow_hca(site, slurm_cluster_factory):
    root, config = site
    cluster = slurm_cluster_factory()
    out = root / "burnin.out"
    results = root / "results"
    healthcheck = Path(sys.executable).parent / "healthcheck"
    job = cluster.sbatch("-N", "4", "-o", str(out), "--chdir", str(root),
                         f"--export=ALL,HEALTHCHECK={healthcheck},HEALTHCHECK_CONFIG={config},"
                         f"HEALTHCHECK_BURNIN_RESULTS_DIR={results}",
                         str(ROOT / "sbatch_templates" / "burnin.sbatch"))
    state = cluster.wait_job(job, "COMPLETED", timeout=400)
    log = out.read_text()
    assert state.get("ExitCode", "0:0") == "0:0", log

    summary = json.loads((results / f"summary-{job}.json").read_text())
    rdma = summary["rdma"]
    assert rdma is not None and rdma["nodes"] == list(NODES), log
    assert SLOW[1] in rdma["devices"] and rdma["pairs"], log
    assert summary["drain"] == [SLOW[0]], log
    named = [f for f in summary["per_node"][SLOW[0]]["findings"] if f["check"] == "burnin.rdma"]
    assert named and named[0]["status"] == "fail" and named[0]["component"] == "/".join(SLOW), named
    for node in set(NODES) - {SLOW[0]}:
        assert summary["per_node"][node]["status"] in ("pass", "warn"), summary["per_node"][node]
    # the counters: read on every node's every rail, twice (before and after the rounds), all clean
    reads = (root / "perfquery.log").read_text().split("\n")
    assert len([r for r in reads if r]) == 2 * len(NODES) * len(rdma["devices"]), reads
    assert rdma["counters"]["status"] == "pass" and len(rdma["counters"]["ports"]) == len(NODES) * len(rdma["devices"])
    # perftest ran on the nodes Slurm placed it on (SLURMD_NODENAME), both sides of each pair
    sides = {tuple(line.split()[:3]) for line in (root / "perftest.log").read_text().splitlines()}
    assert {n for n, _d, _s in sides} == set(NODES) and {s for _n, _d, s in sides} == {"client", "server"}

    reasons = cluster.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E"]).stdout
    drained = {line.split("|")[0]: line.split("|", 1)[1] for line in reasons.splitlines() if "|" in line}
    assert set(drained) == {SLOW[0]}, reasons
    assert drained[SLOW[0]].startswith("healthcheck: burnin.rdma"), drained
    cluster.run(["scontrol", "update", f"nodename={SLOW[0]}", "state=resume"])
