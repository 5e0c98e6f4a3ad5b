"""The fabric commands' results as spool run records: `fabric check|node|consistency --spool DIR`
(click objects through CliRunner), then `history ingest` into SQLite and the rows queried back."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from healthcheck.cli.fabric import fabric
from healthcheck.fabric.compare import CheckResult, Deviation, TierSummary
from healthcheck.fabric.runrecord import CONTEXT, consistency_findings, fabric_record, topology_findings
from healthcheck.core.model import Status
from healthcheck.spool.store import read_all
from tests.conftest import FIXTURES
from tests.fabric.topology_build import golden, render_plain, replace

TOPO = FIXTURES / "fabric" / "topology"
NODE = FIXTURES / "fabric" / "node"
BASE = {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5"}


def run(*args):
    return CliRunner().invoke(fabric, [str(a) for a in args])


def records(spool):
    recs, corrupt = read_all(spool)
    assert corrupt == []
    return recs


def test_topology_findings_name_each_deviation_and_count_each_tier():
    result = CheckResult([Deviation("wrong_rail", "gpu01 mlx5_0 port 1 goes to leaf-b port 3, declared leaf-a port 1",
                                    "leaf", "gpu01", "mlx5_0", 1, "leaf-a", 1),
                          Deviation("too_few_uplinks", "leaf-a has 1 uplink, declared 2", "spine", switch="leaf-a")],
                         [TierSummary("leaf", 1, expected=8, found=7, misplaced=1),
                          TierSummary("spine", 2, expected=4, found=4)])
    found = topology_findings(result)
    assert [(f.check, f.status, f.component) for f in found] == [
        ("fabric.topology", Status.FAIL, "gpu01/mlx5_0/1"), ("fabric.topology", Status.FAIL, "leaf-a"),
        ("fabric.topology.tier", Status.FAIL, "leaf"), ("fabric.topology.tier", Status.PASS, "spine")]
    assert found[0].message.startswith("wrong_rail: gpu01 mlx5_0")
    assert found[2].metrics["links_misplaced"] == 1.0 and found[3].metrics["links_found"] == 4.0
    clean = topology_findings(CheckResult([], [TierSummary("leaf", 1, expected=2, found=2)]))
    assert clean[0].status is Status.PASS and clean[0].metrics == {"deviations": 0.0}


def test_record_shape_and_bad_input():
    rec = fabric_record(topology_findings(CheckResult()), "admin1", "2026-12-03T10:00:00Z", 0.5, run_id="r1")
    assert rec["kind"] == "run" and rec["context"] == CONTEXT == "fabric" and rec["node"] == "admin1"
    assert rec["run_id"] == "r1" and rec["status"] == "pass" and rec["results"][0]["check"] == "fabric.topology"
    with pytest.raises(ValueError, match="at least one finding"):
        fabric_record([], "admin1", "2026-12-03T10:00:00Z", 0.1)
    with pytest.raises(ValueError, match="plain name"):
        fabric_record(topology_findings(CheckResult()), "../x", "2026-12-03T10:00:00Z", 0.1)


def test_check_with_spool_records_every_deviation(tmp_path):
    links = replace(golden(), ("gpu01 mlx5_0", 1), ("leaf-a", 2))
    links = replace(links, ("gpu02 mlx5_0", 1), ("leaf-a", 1))
    now = tmp_path / "now.txt"
    now.write_text(render_plain(links))
    spool = tmp_path / "spool"
    result = run("check", "--topology", TOPO / "topology.toml", "--ibnetdiscover", now, "--spool", spool)
    assert result.exit_code == 1 and "swapped" in result.output
    [rec] = records(spool)
    assert rec["context"] == "fabric" and rec["status"] == "fail"
    bad = [r for r in rec["results"] if r["check"] == "fabric.topology"]
    assert len(bad) == 1 and bad[0]["message"].startswith("swapped") and bad[0]["component"].startswith("gpu0")
    # the golden fabric: recorded as a pass, appended after the first record (nothing stored is lost)
    assert run("check", "--topology", TOPO / "topology.toml", "--ibnetdiscover", TOPO / "golden-plain.txt",
               "--spool", spool).exit_code == 0
    assert [r["status"] for r in records(spool)] == ["fail", "pass"]


def test_consistency_and_node_with_spool(tmp_path):
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps({"node": f"n{i}", "facts": dict(BASE, driver="535.1") if i == 2 else BASE})
                             + "\n" for i in range(4)))
    spool = tmp_path / "spool"
    assert run("consistency", facts, "--spool", spool).exit_code == 1
    assert run("node", "--topo", NODE / "topo-m-h100x8-nv18-8nic.txt", "--nvbandwidth",
               NODE / "nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt", "--node", "gpu07", "--spool", spool).exit_code == 1
    cons, node = records(spool)
    odd = [r for r in cons["results"] if r["status"] == "fail"]
    assert [(r["check"], r["component"]) for r in odd] == [("fabric.consistency", "driver")]
    assert "535.1 on n2" in odd[0]["message"] and "majority 550.54.15" in odd[0]["message"]
    assert node["node"] == "gpu07" and any(r["check"] == "fabric.node.p2p" and r["component"] == "GPU3-GPU5"
                                           and r["status"] == "fail" for r in node["results"])
    assert run("node", "--topo", NODE / "topo-m-h100x8-nv18-8nic.txt", "--nvbandwidth",
               NODE / "nvbandwidth-h100x8-slow-pair-gpu3-gpu5.txt", "--node", "../x", "--spool", spool).exit_code == 2
    assert len(records(spool)) == 2


def test_an_unwritable_spool_is_a_warning_and_the_result_stands(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run("check", "--topology", TOPO / "topology.toml", "--ibnetdiscover", TOPO / "golden-plain.txt",
                 "--spool", blocker / "spool")
    assert result.exit_code == 0 and "not recorded" in result.output


def test_consistency_findings_without_items_is_a_skip():
    from healthcheck.fabric.software import Report

    assert consistency_findings(Report("", 0, []))[0].status is Status.SKIP


def test_recorded_fabric_results_are_ingested_and_queried(tmp_path):
    pytest.importorskip("sqlalchemy")
    from healthcheck.history import migrations
    from healthcheck.history.db import make_engine, resolve_url
    from healthcheck.history.ingest import ingest
    from healthcheck.history.queries import load_frames

    links = replace(golden(), ("gpu03 mlx5_1", 1), rate="2xNDR")
    now = tmp_path / "now.txt"
    now.write_text(render_plain(links))
    spool = tmp_path / "spool"
    assert run("check", "--topology", TOPO / "topology.toml", "--ibnetdiscover", now, "--spool", spool).exit_code == 1
    engine = make_engine(resolve_url(f"sqlite:///{tmp_path / 'h.sqlite'}", env={}))
    migrations.upgrade(engine)
    try:
        report = ingest([spool], engine)
        assert report.runs == 1 and report.skipped == []
        assert ingest([spool], engine).runs == 0  # idempotent
        frames = load_frames(engine)
        assert list(frames["runs"]["context"]) == ["fabric"]
        res = frames["results"]
        width = res[(res["check"] == "fabric.topology") & (res["status"] == "fail")]
        assert len(width) == 1 and "degraded_width" in width.iloc[0]["message"]
        assert width.iloc[0]["component"] == "gpu03/mlx5_1/1"
        met = frames["metrics"]
        leaf = met[(met["check"] == "fabric.topology.tier") & (met["component"] == "leaf")]
        assert float(leaf[leaf["name"] == "links_degraded"]["value"].iloc[0]) == 1.0
    finally:
        engine.dispose()
    assert os.path.isdir(spool)
