"""`drill run` when the site's spool cannot take the result (issue 31, item 4): the drill ran, so its
result is printed (text or JSON) all the same, then the error on stderr, and the exit status is 6
(unavailable, core/exitcodes.py), not 1 (a failed drill). No cluster: the drill itself is a stand-in."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from healthcheck.cli.drill import drill
from healthcheck.core import exitcodes
from healthcheck.drill import drills
from healthcheck.drill.model import DrillResult
from healthcheck.drill.site import Site
from healthcheck.spool.store import read_all

CONF = "ClusterName=x\nSlurmctldPidFile=/run/ctld.pid\nNodeName=node1 Port=1\n"


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A prepared drill site whose failing-check drill returns a passed result at once."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    for name in ("healthy", "fault"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "marker").write_text(name)
    prepared = Site.prepare(str(tmp_path / "site"), str(conf), ["node1", "node2"], str(tmp_path / "healthy"),
                            str(tmp_path / "fault"))

    def stand_in(site, cluster, node, timeout):
        return DrillResult("failing-check", node, "2026-12-03T10:00:00+00:00", 3.0, job_id="7",
                           stages={"detect_s": 0.8, "drain_s": 0.9}, expected=("detect_s", "drain_s"))

    _func, wants, text = drills.DRILLS["failing-check"]
    monkeypatch.setitem(drills.DRILLS, "failing-check", (stand_in, wants, text))
    return prepared


def _run(site, *extra):
    return CliRunner().invoke(drill,  # click 8.2+: stdout and stderr apart
                              ["run", "failing-check", "--site", site.root, "--node", "node2", *extra])


def _break_spool(site):
    """The spool directory's name taken by a plain file: no append can succeed (as root too)."""
    with open(site.spool_dir, "w") as fh:
        fh.write("not a folder\n")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_spool_that_cannot_record_is_exit_6_after_the_result_was_printed(site, fmt):
    _break_spool(site)
    out = _run(site, "--format", fmt)
    assert out.exit_code == exitcodes.UNAVAILABLE == 6, (out.stdout, out.stderr)
    if fmt == "json":
        doc = json.loads(out.stdout)
        assert doc["drill"] == "failing-check" and doc["status"] == "pass"
    else:
        assert "failing-check" in out.stdout and "nothing lost" in out.stdout
    assert "not recorded" in out.stderr and "not recorded" not in out.stdout


def test_a_spool_error_raised_by_the_append_is_exit_6_too(site, monkeypatch):
    from healthcheck.spool.append import SpoolError

    def refuse(spool_dir, record, *a, **k):
        raise SpoolError(f"spool {spool_dir}: lock busy for 2.0 s")

    monkeypatch.setattr(drills.spool, "append", refuse)
    out = _run(site)
    assert out.exit_code == 6 and "failing-check" in out.stdout and "lock busy" in out.stderr


def test_recorded_when_the_spool_works_and_no_record_leaves_it_alone(site):
    out = _run(site, "--no-record")
    assert out.exit_code == exitcodes.OK, (out.stdout, out.stderr)
    records, _ = read_all(site.spool_dir)
    assert not [r for r in records if r.get("context") == "drill"]
    _break_spool(site)
    assert _run(site, "--no-record").exit_code == exitcodes.OK  # a broken spool is not asked
    os.unlink(site.spool_dir)
    out = _run(site)
    assert out.exit_code == exitcodes.OK and out.stderr == ""
    [rec] = [r for r in read_all(site.spool_dir)[0] if r.get("context") == "drill"]
    assert rec["results"][0]["check"] == "drill.failing-check" and rec["node"] == "node2"
