"""Issue 33.5: `sbatch sbatch_templates/nvl-domain.sbatch` unedited (but for -N 2) as a real job on the local
Slurm cluster. No GPU here: a stand-in `nvidia-smi` on PATH prints our own `-q -x` fixture with each node's
fabric clique (node2's differs), so the template's steps all run: the fabric/IMEX checks on every tray
(SKIP here, said in the log), the trays against the declared [topology.nvlink] domain (node2 named odd),
the burn-in's nccl phase with the allocation step (skipped without nccl-tests), and the multi-node
nvbandwidth and dcgmi mndiag step (stand-ins printing our fixtures: the slow / failed GPU named by its tray)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
HEALTHCHECK = Path(sys.executable).parent / "healthcheck"
CLUSTER_UUID = "0a1b2c3d-0000-4000-8000-000000000001"
FAKE_SMI = """#!/bin/bash
clique=2
[ "${SLURMD_NODENAME:-}" = node2 ] && clique=3
cat <<XML
<?xml version="1.0" ?>
<nvidia_smi_log><driver_version>580.173.02</driver_version><cuda_version>13.0</cuda_version>
<attached_gpus>1</attached_gpus>
<gpu id="00000008:01:00.0"><product_name>NVIDIA GB200</product_name><uuid>GPU-${SLURMD_NODENAME:-x}-0</uuid>
<fabric><state>Completed</state><status>Success</status><cliqueId>${clique}</cliqueId>
<clusterUuid>%s</clusterUuid></fabric></gpu>
</nvidia_smi_log>
XML
""" % CLUSTER_UUID


# Stand-ins for the multi-node tools: nvbandwidth prints (from rank 0 only, as the real one) our multi-node
# fixture (tray t02's GPU1 slow); dcgmi prints our mndiag JSON fixture with that GPU failed, and exits 0.
FIXTURES = ROOT / "tests" / "fixtures"
FAKE_NVBANDWIDTH = """#!/bin/bash
[ "${SLURM_PROCID:-0}" = 0 ] && cat %s
exit 0
""" % (FIXTURES / "fabric" / "node" / "nvbandwidth-multinode-gb200-2trays-slow-rank5.txt")
FAKE_DCGMI = """#!/bin/bash
[ "$1" = mndiag ] && cat %s
exit 0
""" % (FIXTURES / "dcgmi" / "mndiag" / "mndiag-gb200-2trays-gpu-fail.json")


def test_nvl_domain_template_runs_every_step_and_names_the_odd_tray(tmp_path, slurm_cluster_factory):
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("nvidia-smi", FAKE_SMI), ("nvbandwidth", FAKE_NVBANDWIDTH), ("dcgmi", FAKE_DCGMI)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    config = tmp_path / "site.toml"
    config.write_text("\n".join(["[slurm]", f'state_dir = "{tmp_path / "state"}"', f'spool_dir = "{tmp_path / "spool"}"',
                                 "[topology.nvlink]", 'nvl01 = "node[1-2]"', ""]))
    cluster = slurm_cluster_factory()
    out, results = tmp_path / "nvl.out", tmp_path / "results"
    path = f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    job = cluster.sbatch("-N", "2", "-o", str(out), "--chdir", str(tmp_path),
                         f"--export=ALL,PATH={path},HEALTHCHECK={HEALTHCHECK},HEALTHCHECK_CONFIG={config},"
                         f"HEALTHCHECK_BURNIN_RESULTS_DIR={results},HEALTHCHECK_GPUS_PER_NODE=1",
                         str(ROOT / "sbatch_templates" / "nvl-domain.sbatch"))
    state = cluster.wait_job(job, "COMPLETED", timeout=300)
    log = out.read_text()
    assert state.get("ExitCode", "0:0") == "0:0", log
    assert sorted(p.name for p in (results / "nvidia-smi").glob("*.xml")) == ["node1.xml", "node2.xml"], log
    assert "check exit" in log and "nvlink.imex" in log, log  # step 1 ran on the trays (SKIP: no domain declared)
    assert "odd_member: node" in log and "nvlink-domains exit 1" in log, log  # step 2 named the odd tray
    assert "allocation step exit" in log, log  # step 3 reached its verdict
    # step 4: the slow GPU of the multi-node nvbandwidth and the GPU mndiag failed, each named by its tray
    assert "gb-r01-t02:GPU1 is in all 14 slow pairs" in log and "multi-node nvbandwidth exit 1" in log, log
    assert "[gb-r01-t02:GPU1] MNUBERGEMM" in log and "dcgmi mndiag exit 1" in log, log
    assert (results / "nvbandwidth-multinode.txt").is_file() and (results / "dcgmi-mndiag.json").is_file()
