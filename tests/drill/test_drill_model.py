"""The drill's pure parts and its CLI's input handling (no cluster needed): the result and its record,
the timeline, the site's files, waiting on an injected clock, bad input refused clearly."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from healthcheck import __version__
from healthcheck.cli.drill import drill
from healthcheck.drill.cluster import Cluster, DrillError, TimedOut, parse_job_line, read_slurm_conf
from healthcheck.drill.drills import DRILLS, run_drill
from healthcheck.drill.model import DrillResult, Timeline, render_text
from healthcheck.drill.site import Site
from healthcheck.history.rows import run_rows

pytestmark = pytest.mark.slurm

CONF = ("ClusterName=x\nSlurmdPidFile=/run/slurmd-%n.pid  # per node\nSlurmctldPidFile=/run/ctld.pid\n"
        "Epilog=/opt/e.sh\nNodeName=node1 Port=1\n")


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def _result(**kw):
    args = dict(name="failing-check", node="node2", started_at="2026-12-03T10:00:00+00:00", duration_s=12.0,
                job_id="7", stages={"detect_s": 0.8, "drain_s": 0.9, "requeue_s": 1.0, "resume_s": 0.7},
                extra={"detect_runs": 1}, expected=("detect_s", "drain_s", "requeue_s", "resume_s"))
    args.update(kw)
    return DrillResult(**args)


def test_drill_timeline_measures_between_marks_and_refuses_a_second_mark():
    clock = FakeClock()
    tl = Timeline(clock)
    tl.mark("fault")
    clock.now += 2.5
    tl.mark("detect")
    assert tl.since("fault", "detect") == 2.5 and tl.since("fault", "drain") is None
    with pytest.raises(ValueError, match="set twice"):
        tl.mark("fault")


def test_drill_result_record_is_what_the_history_ingests():
    result = _result()
    assert result.ok and result.status == "pass"
    record = result.to_record(run_id="ab" * 16)
    assert record["context"] == "drill" and record["results"][0]["check"] == "drill.failing-check"
    # the one record builder's shape (spool.entries.run_record): the package's version, no config
    assert record["kind"] == "run" and record["run_id"] == "ab" * 16 and record["tool_version"] == __version__
    assert record["status"] == record["results"][0]["status"] == "pass" and record["config_hash"] is None
    assert record["job_id"] == "7" and record["node"] == "node2" and record["duration_s"] == 12.0
    assert len(result.to_record()["run_id"]) == 32
    assert _result(lost=["job 7"]).to_record()["status"] == "fail"
    assert record["results"][0]["metrics"] == {"detect_s": 0.8, "drain_s": 0.9, "requeue_s": 1.0,
                                               "resume_s": 0.7, "detect_runs": 1.0, "lost_items": 0.0}
    rows = run_rows(dict(record, record_id="r1"), ingested_at=None)
    assert {(m[2], m[7], m[8]) for m in rows.metrics} >= {("detect_s", 0.8, "s"), ("resume_s", 0.7, "s")}
    assert json.loads(json.dumps(result.to_dict()))["stages"]["drain_s"] == 0.9


def test_drill_result_fails_on_a_missing_stage_a_loss_or_a_problem():
    missing = _result(stages={"detect_s": 0.8})
    assert missing.missing == ["drain_s", "requeue_s", "resume_s"] and missing.status == "fail"
    assert "never reached: drain, requeue, resume" in missing.message()
    assert "drain_s" not in missing.metrics()
    lost = _result(lost=["job 7 did not complete"])
    assert not lost.ok and lost.metrics()["lost_items"] == 1.0 and "lost: job 7" in lost.message()
    assert not _result(problems=["prolog over budget"]).ok
    text = render_text([missing, lost])
    assert "never reached: drain_s, requeue_s, resume_s" in text and "lost: job 7 did not complete" in text
    with pytest.raises(ValueError, match="unknown drill stage"):
        _result(stages={"detect_ms": 1})
    with pytest.raises(ValueError, match="unknown expected stage"):
        _result(expected=("boot_s",))


def test_drill_cluster_reads_slurm_conf_jobs_and_waits_on_its_clock(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    assert read_slurm_conf(str(conf))["slurmdpidfile"] == "/run/slurmd-%n.pid"
    assert "nodename" not in read_slurm_conf(str(conf))
    with pytest.raises(DrillError, match="cannot read slurm.conf"):
        read_slurm_conf(str(tmp_path / "absent.conf"))
    fields = parse_job_line("JobId=7 JobName=x JobState=PENDING Reason=launch_failed_requeued_held Restarts=1")
    assert fields["JobState"] == "PENDING" and fields["Restarts"] == "1"
    clock = FakeClock()
    cluster = Cluster(str(conf), clock=clock, sleep=clock.sleep, poll_s=1.0)
    seen = iter([False, False, True])
    assert cluster.wait_for(lambda: next(seen), 10, "x") == 102.0
    with pytest.raises(TimedOut, match="never: not within 3 s"):
        cluster.wait_for(lambda: False, 3, "never")
    with pytest.raises(DrillError, match="not a node name"):
        cluster.node("node1; rm -rf /")
    with pytest.raises(DrillError, match="not a job id"):
        cluster.job("7 --all")


def _site(tmp_path, **kw):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    for name in ("healthy", "fault"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "marker").write_text(name)
    return Site.prepare(str(tmp_path / "site"), str(conf), ["node1", "node2"], str(tmp_path / "healthy"),
                        str(tmp_path / "fault"), **kw)


def test_drill_site_writes_config_hooks_bundles_and_switches_faults(tmp_path):
    site = _site(tmp_path, budgets={"prolog_budget_s": 2.0})
    for hook in ("prolog.sh", "epilog.sh", "healthcheck.sh"):
        assert os.access(os.path.join(site.hooks, hook), os.X_OK)
    text = open(site.config).read()
    assert 'nodes = "node1,node2"' in text and "prolog_budget_s = 2.0" in text and "[class.hung]" not in text
    site.set_bundle("node2", fault=True)
    assert open(site.path("bundles", "node2", "marker")).read() == "fault"
    site.set_bundle("node2", fault=False)
    assert open(site.path("bundles", "node2", "marker")).read() == "healthy"
    assert not os.path.exists(site.path("bundles", "node2.old"))
    site.set_hung("node2", True)
    reopened = Site.open(site.root)
    assert reopened.hung == ["node2"] and '[class.hung]\nnodes = "node2"' in open(site.config).read()
    reopened.set_hung("node2", False)
    assert "[class.hung]" not in open(site.config).read()
    assert "Prolog=" in site.slurm_conf_lines() and "HealthCheckProgram=" in site.slurm_conf_lines()


def test_drill_site_refuses_bad_input(tmp_path):
    with pytest.raises(DrillError, match="not a bundle directory"):
        Site.prepare(str(tmp_path / "s"), str(tmp_path), ["node1"], str(tmp_path / "none"), str(tmp_path))
    with pytest.raises(DrillError, match="prolog_budget_s must be"):
        _site(tmp_path, budgets={"prolog_budget_s": 0})
    with pytest.raises(DrillError, match="unknown budget"):
        _site(tmp_path, budgets={"boot_budget_s": 3})
    with pytest.raises(DrillError, match="not a drill site"):
        Site.open(str(tmp_path))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "site.json").write_text("[1]")
    with pytest.raises(DrillError, match="not a JSON object"):
        Site.open(str(tmp_path / "bad"))
    site = _site(tmp_path)
    cluster = Cluster(site.slurm_conf)
    with pytest.raises(DrillError, match="no drill 'flood'"):
        run_drill("flood", site, cluster, "node1")
    with pytest.raises(DrillError, match="needs a node"):
        run_drill("failing-check", site, cluster, None)
    with pytest.raises(DrillError, match="node9 is not a node of this site"):
        run_drill("hung-gpu", site, cluster, "node9")
    with pytest.raises(DrillError, match="timeout must be"):
        run_drill("hung-gpu", site, cluster, "node1", timeout=0)
    with pytest.raises(DrillError, match="node9 is not a node of this site"):
        site.set_hung("node9", True)


def test_drill_cli_lists_prepares_and_refuses_bad_input(tmp_path):
    runner = CliRunner()
    out = runner.invoke(drill, ["list"])
    assert out.exit_code == 0 and all(name in out.output for name in DRILLS)
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    (tmp_path / "b").mkdir()
    site = tmp_path / "site"
    out = runner.invoke(drill, ["prepare", "--site", str(site), "--slurm-conf", str(conf), "--nodes", "node[1-3]",
                                "--bundle", str(tmp_path / "b"), "--fault-bundle", str(tmp_path / "b")])
    assert out.exit_code == 0, out.output
    assert f"Prolog={site}/hooks/prolog.sh" in out.output
    assert Site.open(str(site)).nodes == ["node1", "node2", "node3"]
    out = runner.invoke(drill, ["run", "flood", "--site", str(site)])
    assert out.exit_code == 2 and "no drill 'flood'" in out.output
    out = runner.invoke(drill, ["run", "hung-gpu", "--site", str(site)])
    assert out.exit_code == 2 and "needs a node" in out.output
    out = runner.invoke(drill, ["run", "hung-gpu", "--site", str(tmp_path), "--node", "node1"])
    assert out.exit_code == 2 and "not a drill site" in out.output
    out = runner.invoke(drill, ["prepare", "--site", str(site), "--slurm-conf", str(conf), "--nodes", "node[1-",
                                "--bundle", str(tmp_path / "b"), "--fault-bundle", str(tmp_path / "b")])
    assert out.exit_code == 2 and "--nodes" in out.output
