"""Issue 17, item 6: the four fault drills on the real local Slurm cluster (slurmctld + 4 slurmd on
localhost), the hooks installed by the drill's own site (healthcheck.drill.site), each node's hardware a
recorded bundle. The bounds are generous (a loaded 2-core machine): what is asserted is the order of the
stages, that each came, and that nothing was lost; the figures themselves go to docs/commissioning.md."""
from __future__ import annotations

import json
import os

import pytest

from healthcheck.drill.cluster import Cluster
from healthcheck.drill.drills import run_drill
from healthcheck.drill.model import STAGES
from healthcheck.drill.site import Site
from healthcheck.history.rows import run_rows
from tests.slurm.test_scenarios import NODES, _live_processes, sources  # noqa: F401 - fixture

pytestmark = pytest.mark.slurm


def _site(tmp_path, slurm_cluster_factory, sources, **budgets):  # noqa: F811
    probe = slurm_cluster_factory()  # the session cluster, restarted fresh, to learn its conf path
    site = Site.prepare(str(tmp_path / "site"), str(probe.conf), list(NODES), str(sources["healthy"]),
                        str(sources["ecc-fault"]), budgets=budgets or None)
    cluster = slurm_cluster_factory(prolog=os.path.join(site.hooks, "prolog.sh"),
                                    epilog=os.path.join(site.hooks, "epilog.sh"))
    return site, Cluster(str(cluster.conf)), cluster


def _report(result) -> None:
    """The figures, for docs/commissioning.md (visible with pytest -s)."""
    print("DRILL", json.dumps(result.to_dict(), sort_keys=True))


def _recorded(site: Site, name: str) -> dict:
    records = [r for r in site.records() if r.get("kind") == "run" and r.get("context") == "drill"]
    assert records, "the drill wrote no record"
    record = records[-1]
    (finding,) = record["results"]
    assert finding["check"] == f"drill.{name}"
    rows = run_rows(record, ingested_at=None)  # the history accepts it as it is
    assert {m[2] for m in rows.metrics} >= {"detect_s", "drain_s", "resume_s"}
    return finding


def test_drill_failing_check_drains_before_the_job_starts_and_resumes(tmp_path, slurm_cluster_factory,
                                                                      sources):  # noqa: F811
    site, cluster, raw = _site(tmp_path, slurm_cluster_factory, sources)
    result = run_drill("failing-check", site, cluster, "node2", timeout=120)
    _report(result)
    assert result.ok, result.to_dict()
    s = result.stages
    assert 0 < s["detect_s"] <= s["drain_s"] <= s["requeue_s"] < 120, s
    assert 0 < s["resume_s"] < 120
    assert result.extra["detect_runs"] == 1  # the first prolog after the fault saw it
    assert result.reason.startswith("healthcheck: gpu.ecc.uncorrected"), result.reason
    assert not result.lost
    finding = _recorded(site, "failing-check")
    assert finding["status"] == "pass" and finding["metrics"]["detect_s"] == s["detect_s"]
    assert raw.node_state("node2")["State"] == "IDLE"


def test_drill_hung_gpu_keeps_the_prolog_budget_and_drains_for_the_hang(tmp_path, slurm_cluster_factory,
                                                                        sources):  # noqa: F811
    site, cluster, raw = _site(tmp_path, slurm_cluster_factory, sources, prolog_budget_s=2.0)
    result = run_drill("hung-gpu", site, cluster, "node4", timeout=120)
    _report(result)
    assert result.ok, result.to_dict()
    assert result.extra["budget_s"] == 2.0 and result.extra["hook_s"] <= 2.0 + 1.0
    assert "responsive" in (result.reason or ""), result.reason
    s = result.stages
    assert 0 < s["detect_s"] <= s["drain_s"] <= s["requeue_s"] and s["resume_s"] > 0, s
    assert site.hung == [] and "[class.hung]" not in open(site.config).read()  # repaired
    _recorded(site, "hung-gpu")
    raw.wait_for(lambda: not _live_processes("healthcheck.hook.run"), 15,
                 message=lambda: f"hook processes left: {_live_processes('healthcheck.hook.run')}")


def test_drill_node_death_requeues_the_job_and_the_node_comes_back(tmp_path, slurm_cluster_factory,
                                                                   sources):  # noqa: F811
    site, cluster, raw = _site(tmp_path, slurm_cluster_factory, sources)
    result = run_drill("node-death", site, cluster, None, timeout=120)
    _report(result)
    assert result.ok, result.to_dict()
    s = result.stages
    assert 0 < s["detect_s"] <= s["drain_s"] <= s["requeue_s"], s
    assert s["resume_s"] > 0
    assert result.node in NODES and not result.lost  # the job completed on its rerun
    assert all(raw.node_state(n)["State"] in ("IDLE",) for n in NODES), raw.diagnostics()
    _recorded(site, "node-death")


def test_drill_ctld_restart_lands_the_queued_drain_and_loses_nothing(tmp_path, slurm_cluster_factory,
                                                                     sources):  # noqa: F811
    site, cluster, raw = _site(tmp_path, slurm_cluster_factory, sources)
    before = len(site.records())
    result = run_drill("ctld-restart", site, cluster, "node1", timeout=120)
    _report(result)
    assert result.ok, result.to_dict()
    s = result.stages
    assert 0 < s["detect_s"] < s["drain_s"] and s["requeue_s"] is None and s["resume_s"] > 0, s
    assert result.extra["ctld_down_s"] > 0 and result.extra["drain_after_up_s"] >= 0
    assert result.reason.startswith("healthcheck: gpu.ecc.uncorrected")
    assert not os.path.exists(site.pending_file("node1")) or not open(site.pending_file("node1")).read().strip()
    assert len(site.records()) > before  # nothing removed from the spool, the drill's runs added
    finding = _recorded(site, "ctld-restart")
    assert "requeue_s" not in finding["metrics"] and set(STAGES) - {"requeue_s"} <= set(finding["metrics"])
