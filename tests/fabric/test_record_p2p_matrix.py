"""`fabric node --nvbandwidth --spool`: the record carries the GPU x GPU matrices cell by cell
(``fabric.node.p2p.pair``, metric ``gbyte_s``), the judged slow pair FAIL, for the report's P2P matrix;
the printed output is unchanged (the cells only go to the spool)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from healthcheck.cli.fabric import fabric
from healthcheck.fabric.runrecord import MAX_P2P_CELLS, P2P_PAIR, p2p_matrix_findings
from healthcheck.core.model import Finding, Status
from healthcheck.parsers.nvbandwidth import NvbResult, NvbTest
from healthcheck.spool.store import read_all
from tests.conftest import FIXTURES

NODE = FIXTURES / "fabric" / "node"


def test_the_spooled_node_record_holds_every_cell_and_marks_the_slow_pair(tmp_path):
    spool = tmp_path / "spool"
    args = ["node", "--nvbandwidth", str(NODE / "nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt"), "--node", "gpu07",
            "--format", "json"]
    res = CliRunner().invoke(fabric, args + ["--spool", str(spool)])
    assert res.exit_code == 1
    assert not any(r["check"] == P2P_PAIR for r in json.loads(res.output)["results"])  # output as before
    [rec], corrupt = read_all(spool)
    assert corrupt == []
    cells = [r for r in rec["results"] if r["check"] == P2P_PAIR]
    tests = {r["component"].rsplit("/", 1)[0] for r in cells}
    assert cells and len(cells) == 8 * 7 * len(tests)  # 8 GPUs, the diagonal left out
    slow = {r["component"].rsplit("/", 1)[1] for r in cells if r["status"] == "fail"}
    assert slow and slow <= {"GPU3>GPU5", "GPU5>GPU3"}
    assert all(r["metrics"]["gbyte_s"] > 0 for r in cells)


def test_only_gpu_by_gpu_matrices_in_gb_s_and_the_cap():
    t = NvbTest("d2d", unit="GB/s", row_kind="GPU", column_kind="GPU", rows=[0, 1], columns=[0, 1],
                matrix=[[0.0, 10.0], [None, 0.0]])
    lat = NvbTest("lat", unit="us", row_kind="GPU", column_kind="GPU", rows=[0, 1], columns=[0, 1],
                  matrix=[[0.0, 2.0], [2.0, 0.0]])
    h2d = NvbTest("h2d", unit="GB/s", row_kind="CPU", column_kind="GPU", rows=[0], columns=[0, 1], matrix=[[5.0, 5.0]])
    [cell] = p2p_matrix_findings(NvbResult(tests=[t, lat, h2d]), [])
    assert cell.component == "d2d/GPU0>GPU1" and cell.status is Status.PASS and cell.metrics == {"gbyte_s": 10.0}
    judged = [Finding("fabric.node.p2p", Status.FAIL, "d2d: GPU0 -> GPU1 10.0 GB/s, below", "GPU0-GPU1")]
    assert p2p_matrix_findings(NvbResult(tests=[t]), judged)[0].status is Status.FAIL
    n = 50
    big = NvbTest("big", unit="GB/s", row_kind="GPU", column_kind="GPU", rows=list(range(n)), columns=list(range(n)),
                  matrix=[[1.0] * n for _ in range(n)])
    out = p2p_matrix_findings(NvbResult(tests=[big]), [])
    assert len(out) == MAX_P2P_CELLS + 1 and out[-1].status is Status.SKIP
    assert f"{n * (n - 1) - MAX_P2P_CELLS} more" in out[-1].message
