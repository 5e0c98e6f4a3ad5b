"""The Commissioning section completed (issue 17 items 5 and 8): the RDMA pair heatmap of the latest phase,
the NVLink/P2P matrix per node of the latest `fabric node` run, the consistency table, and one readiness
verdict per node and for the cluster, from synthetic history rows stored through the real ingest and read
both ways (dbsummary.load_summary and load_frames + summarize_frames): equal sections, then rendered."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from healthcheck.burnin.allocation import pair_findings
from healthcheck.fabric.compare import CheckResult, Deviation, TierSummary
from healthcheck.fabric.runrecord import fabric_record, p2p_matrix_findings, topology_findings
from healthcheck.core.model import Finding, Status, Verdict
from healthcheck.parsers.nvbandwidth import NvbResult, NvbTest
from healthcheck.spool.entries import run_record
from tests.report.history import write_spool

pytest.importorskip("sqlalchemy")

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
SINCE = NOW - timedelta(days=7)
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _run(node: str, context: str, at: datetime, findings: list, run_id: str) -> dict:
    return run_record(Verdict.of(node, findings, _iso(at), 1.0, context), run_id, None, None)


def rdma_pairs(slow: float) -> list[dict]:
    """Every pair of NODES on two rails (Gb/s), gpu03's mlx5_1 pairs at ``slow``; one failed run."""
    out = []
    for rail, dev in enumerate(("mlx5_0", "mlx5_1")):
        for i, a in enumerate(NODES):
            for b in NODES[i + 1:]:
                value = slow if dev == "mlx5_1" and "gpu03" in (a, b) else 388.0
                out.append({"test": "ib_write_bw", "rail": rail, "device": dev, "server": a, "client": b,
                            "value": value, "error": None})
    out.append({"test": "ib_write_lat", "rail": 0, "device": "mlx5_0", "server": "gpu01", "client": "gpu02",
                "value": 1.6})  # latency: not a heatmap cell
    return out


def nvb_result() -> NvbResult:
    m = [[None, 370.0, 371.0, 369.5], [370.2, None, 372.0, 120.0], [371.0, 370.5, None, 368.0],
         [369.0, 119.5, 370.0, None]]
    return NvbResult(tests=[NvbTest("device_to_device_memcpy_read_ce", unit="GB/s", row_kind="GPU", column_kind="GPU",
                                    rows=[0, 1, 2, 3], columns=[0, 1, 2, 3], matrix=m),
                            NvbTest("host_to_device_memcpy_ce", unit="GB/s", row_kind="CPU", column_kind="GPU",
                                    rows=[0], columns=[0, 1, 2, 3], matrix=[[55.0, 55.1, 54.9, 55.0]])])


def history_records() -> list[dict]:
    swapped = CheckResult([Deviation("degraded_width", "gpu03 mlx5_1 port 1 trained at 2x, tier leaf is 4x", "leaf",
                                     "gpu03", "mlx5_1", 1, "leaf-b", 3),
                           Deviation("too_few_uplinks", "leaf-b has 3 of 4 uplinks", "spine", None, None, None,
                                     "leaf-b", None)],
                          [TierSummary("leaf", 1, expected=8, found=8, degraded=1)])
    slow_p2p = [Finding("fabric.node.p2p", Status.FAIL, "device_to_device_memcpy_read_ce: GPU1 <- GPU3 120.0 GB/s, "
                        "below the node's median", "GPU1-GPU3", {"gbyte_s": 120.0})]
    recs = [
        fabric_record(topology_findings(swapped), "admin1", _iso(NOW - timedelta(days=1)), 1.0, "fab-1"),
        fabric_record([Finding("fabric.consistency", Status.FAIL, "driver: 535.1 on gpu02 (majority 550.54.15 on "
                               "gpu[01,03-04])", "driver", {"odd_values": 1.0}),
                       Finding("fabric.consistency", Status.FAIL, "NCCL_IB_HCA: mlx5_0 on gpu[01-02]; (unset) on "
                               "gpu04 (expected mlx5_0,mlx5_1)", "NCCL_IB_HCA"),
                       Finding("fabric.consistency", Status.PASS, "cuda: 12.4 on gpu[01-04]", "cuda")],
                      "admin1", _iso(NOW - timedelta(hours=5)), 0.2, "cons-2"),
        # an older consistency run: not the one shown
        fabric_record([Finding("fabric.consistency", Status.FAIL, "kernel: 5.4 on gpu01 (majority 6.8 on gpu[02-04])",
                               "kernel")], "admin1", _iso(NOW - timedelta(days=2)), 0.2, "cons-1"),
        # the RDMA phase: an older run all fast, the latest with gpu03's rail-1 pairs low
        _run("gpu01", "burnin-job", NOW - timedelta(days=2), pair_findings(rdma_pairs(388.0), 360.0), "job-1"),
        _run("gpu01", "burnin-job", NOW - timedelta(hours=3), pair_findings(rdma_pairs(200.0), 360.0), "job-2"),
        # fabric node on gpu02: the p2p judgement and its matrix cell by cell
        fabric_record(slow_p2p + p2p_matrix_findings(nvb_result(), slow_p2p), "gpu02",
                      _iso(NOW - timedelta(hours=2)), 0.5, "node-gpu02"),
        _run("gpu04", "drill", NOW - timedelta(hours=4),
             [Finding("drill.node-death", Status.FAIL, "node-death: not requeued", None, {"detect_s": 18.0})], "dr-1"),
    ]
    recs += [_run(n, "prolog", NOW - timedelta(hours=1),
                  [Finding("gpu.ecc", Status.FAIL if n == "gpu01" else Status.PASS, "uncorrectable ECC" if n == "gpu01"
                           else "ok", "GPU0")], f"pro-{n}") for n in NODES]
    return [dict(r, record_id=f"rec-{r['run_id']}") for r in recs]


@pytest.fixture
def engine(tmp_path):
    from healthcheck.history import migrations
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.ingest import ingest

    eng = make_engine(resolve_url(f"sqlite:///{tmp_path / 'h.sqlite'}", env={}))
    migrations.require_current(eng, create=True)
    report = ingest([write_spool(tmp_path / "spool", history_records())], eng)
    assert report.skipped == []
    yield eng
    eng.dispose()


def both_reports(engine):
    from healthcheck.history.queries import load_frames
    from healthcheck.report.build import build_report
    from healthcheck.report.dbsummary import load_summary
    from healthcheck.report.summary import summarize_frames

    db = build_report(load_summary(engine, SINCE, NOW), SINCE, NOW)
    mem = build_report(summarize_frames(load_frames(engine, since=SINCE), SINCE, NOW), SINCE, NOW)
    return db, mem


def test_both_paths_give_the_same_heatmap_matrix_table_and_verdicts(engine):
    db, mem = both_reports(engine)
    assert db.commissioning == mem.commissioning
    c = db.commissioning
    # (a) the latest RDMA phase only, per rail, GB/s, low pairs marked; latency runs are no cells
    assert c.rdma.run_id == "job-2" and sorted(c.rdma.cells) == ["ib_write_bw mlx5_0", "ib_write_bw mlx5_1"]
    rail1 = c.rdma.cells["ib_write_bw mlx5_1"]
    assert len(rail1) == 6 and {(x["a"], x["b"]) for x in rail1 if x["low"]} == {
        ("gpu01", "gpu03"), ("gpu02", "gpu03"), ("gpu03", "gpu04")}
    assert {x["gbyte_s"] for x in rail1 if x["low"]} == {25.0} and not any(
        x["low"] for x in c.rdma.cells["ib_write_bw mlx5_0"])
    # the cells are drawn, not listed in the fabric table
    assert not any(f.check in ("fabric.rdma.pair", "fabric.node.p2p.pair") for f in c.fabric)
    # (b) gpu02's GPU x GPU matrix (the host-to-device test is no GPU x GPU matrix), the slow pair marked
    [p2p] = c.p2p
    assert p2p.node == "gpu02" and list(p2p.cells) == ["device_to_device_memcpy_read_ce"]
    cells = p2p.cells["device_to_device_memcpy_read_ce"]
    assert len(cells) == 12 and {(x["a"], x["b"]) for x in cells if x["low"]} == {("GPU1", "GPU3"), ("GPU3", "GPU1")}
    # (c) the latest consistency run: majority and odd nodes, folded as recorded
    items = {i.item: i for i in c.consistency}
    assert set(items) == {"driver", "NCCL_IB_HCA", "cuda"}  # not the older run's kernel
    assert items["driver"].majority == "550.54.15" and items["driver"].odd == [["535.1", "gpu02"]]
    assert items["NCCL_IB_HCA"].majority == "expected mlx5_0,mlx5_1"
    assert items["NCCL_IB_HCA"].odd == [["mlx5_0", "gpu[01-02]"], ["(unset)", "gpu04"]]
    assert items["cuda"].status == "pass" and items["cuda"].odd == []
    # (d) verdicts: every node is blocked here, each by what concerns it
    r = c.readiness
    verdict = {n.node: n for n in r.nodes}
    assert "check gpu.ecc [GPU0]" in verdict["gpu01"].blockers and "NCCL_IB_HCA mlx5_0" in verdict["gpu01"].blockers
    assert set(verdict["gpu02"].blockers) == {"driver 535.1", "NCCL_IB_HCA mlx5_0", "fabric.node.p2p: fail"}
    assert any(b.startswith("fabric.topology gpu03/mlx5_1/1: degraded_width") for b in verdict["gpu03"].blockers)
    assert set(verdict["gpu04"].blockers) == {"NCCL_IB_HCA (unset)", "drill node-death failed"}
    assert verdict["admin1"].ready  # the host that ran `fabric check`: its results are the fabric's, not its own
    assert not r.ready and r.cluster_blockers["blocked nodes"] == 4
    assert r.cluster_blockers["nodes with odd software"] == 3 and r.cluster_blockers["nodes with failing checks"] == 1
    assert r.cluster_blockers["nodes with fabric deviations"] == 2
    assert r.cluster_blockers["switch/tier deviations"] == 2  # leaf-b's uplinks, tier leaf
    assert r.cluster_blockers["low RDMA pairs"] == 3
    assert r.verdict.startswith("blocked: blocked nodes 4")


def test_the_section_is_rendered_as_svg_markdown_and_json(engine):
    from healthcheck.report.html import render_html
    from healthcheck.report.markdown import render_markdown

    db, _mem = both_reports(engine)
    page = render_html(db, plots=True)
    section = page[page.index('<h2 id="commissioning">'):page.index("<footer")]
    assert "Cluster: <strong class=\"fail\">blocked: blocked nodes 4" in section
    assert section.count("<svg") == 3  # two rails, one node's matrix
    assert "<title>gpu02 - gpu03: 25.0 GB/s (low)</title>" in section
    assert "<title>GPU1 - GPU3: 120.0 GB/s (low)</title>" in section
    assert "535.1 on gpu02" in section and "drill node-death failed" in section
    # no label runs off the plot's left edge or onto another (row labels one cell apart, numbers above)
    from healthcheck.report.plots import text_box

    for svg in re.findall(r"<svg.*?</svg>", section, re.S):
        rows = [(float(x), float(y), t) for x, y, t in re.findall(
            r'<text x="([\d.]+)" y="([\d.]+)" text-anchor="end">([^<]*)</text>', svg)]
        boxes = [text_box(x, y, t, anchor="end") for x, y, t in rows]
        assert boxes and all(b[0] >= 0 for b in boxes)
        assert all(a[3] <= b[1] for a, b in zip(boxes, boxes[1:]))
    assert "<svg" not in render_html(db, plots=False).split('<h2 id="commissioning">')[1]
    md = render_markdown(db)
    part = md[md.index("## Commissioning"):]
    assert "Cluster: **blocked: blocked nodes 4" in part and "| gpu04 | blocked |" in part
    assert "| driver | fail | 550.54.15 | 535.1 on gpu02 |" in part
    assert "gpu01-gpu03, gpu02-gpu03, gpu03-gpu04" in part
    data = db.to_dict()["commissioning"]
    assert data["readiness"]["cluster"]["ready"] is False
    assert data["readiness"]["cluster"]["blockers"]["low RDMA pairs"] == 3
    assert data["rdma"]["cells"]["ib_write_bw mlx5_1"][0]["gbyte_s"] == 48.5
    assert data["p2p"][0]["node"] == "gpu02" and data["drill_failures"] == {"gpu04": ["node-death"]}


def test_a_clean_commissioning_makes_every_node_and_the_cluster_ready():
    """From frames directly: a clean fabric, consistent software, fast pairs, passed drills -> ready."""
    import pandas as pd

    from healthcheck.report.commissioning import from_frames
    from healthcheck.report.readiness import assess

    at = pd.Timestamp(NOW - timedelta(hours=1))
    rows, mets = [], []
    for f in pair_findings(rdma_pairs(388.0), 360.0) + [Finding("fabric.consistency", Status.PASS,
                                                                "driver: 550 on gpu[01-04]", "driver"),
                                                        Finding("drill.failing-check", Status.PASS, "done")]:
        rows.append({"run_id": "r1", "node": "gpu01", "started_at": at, "check": f.check, "component": f.component,
                     "status": f.status.value, "message": f.message})
        mets += [{"run_id": "r1", "node": "gpu01", "started_at": at, "check": f.check, "component": f.component,
                  "name": k, "value": v} for k, v in f.metrics.items()]
    c = from_frames(pd.DataFrame(rows), pd.DataFrame(mets))
    r = assess(c, [], NODES)
    assert r.ready and r.verdict == "ready" and all(n.ready and n.blockers == [] for n in r.nodes)
    assert len(c.rdma.cells["ib_write_bw mlx5_0"]) == 6 and c.consistency[0].majority == "550"
