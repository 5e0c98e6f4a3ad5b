"""The fleet comparison of GEMM products through the history: the majority per fleet key
(analysis/digests.py), the fleet digests file the nodes read (burnin/fleetfile.py), the node run that
judges against it, `healthcheck burnin fleet-digests`, the sweep that hands the file to its jobs, and the
report's "sdc" finding; end to end with real NumPy burn-in runs ingested into a SQLite history."""
from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from healthcheck.analysis.digests import fleet_view
from healthcheck.burnin import fleetfile
from healthcheck.cli import cli
from healthcheck.history.digests import DigestRow

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
KEY = "NVIDIA H200|torch 2.5.1 cuda 12.4|bf16|n=8192|seed=1234"
GOOD, BAD = "a1" * 16, "b2" * 16


def row(node: str, gpu: int, digest: str = GOOD, key: str = KEY, hours: int = 0, run: str | None = None):
    return DigestRow(run or f"{node}-{hours}", node, f"gpu{gpu}", key, digest, T0 + timedelta(hours=hours))


def fleet(nodes: int = 2, gpus: int = 4, **digests) -> list[DigestRow]:
    """``nodes`` x ``gpus`` GPUs with GOOD, except ``digests={"n1_gpu2": BAD}``."""
    return [row(f"n{n}", g, digests.get(f"n{n}_gpu{g}", GOOD)) for n in range(nodes) for g in range(gpus)]


# ----------------------------------------------------------------------------------------- analysis

def test_the_majority_names_the_gpu_that_differs():
    view = fleet_view(fleet(n1_gpu2=BAD))
    assert view.majorities == {KEY: GOOD}
    assert view.keys[KEY].to_dict() == {"digest": GOOD, "gpus": 8, "votes": 7, "nodes": 2}
    (d,) = view.deviants
    assert (d.node, d.component, d.digest, d.majority) == ("n1", "gpu2", BAD, GOOD)
    assert d.message().startswith(f"gpu2: GEMM result {BAD[:12]} differs from the fleet's {GOOD[:12]} (7 of 8 GPUs)")


def test_a_whole_node_that_differs_is_named_when_the_fleet_is_larger():
    rows = fleet(nodes=3, n2_gpu0=BAD, n2_gpu1=BAD, n2_gpu2=BAD, n2_gpu3=BAD)
    view = fleet_view(rows)
    assert view.majorities == {KEY: GOOD} and {(d.node, d.component) for d in view.deviants} == {
        ("n2", f"gpu{g}") for g in range(4)}


@pytest.mark.parametrize("rows, why", [
    (fleet(nodes=1, gpus=8), "one node: its own GPUs are compared by the node itself"),
    (fleet(nodes=2, gpus=1), "two GPUs: fewer than min_gpus"),
    (fleet(nodes=2, gpus=2, n1_gpu0=BAD, n1_gpu1=BAD), "a 2:2 tie"),
    ([row("a", 0), row("b", 0), row("c", 0, BAD), row("d", 0, "c3" * 16)], "2 of 4 is not more than half"),
])
def test_no_majority_is_claimed_without_enough_agreement(rows, why):
    view = fleet_view(rows)
    assert view.majorities == {} and view.deviants == [], why
    assert view.keys[KEY].digest is None


def test_each_gpu_votes_once_with_its_latest_run():
    rows = fleet(nodes=2, gpus=4) + [row("n0", 1, BAD, hours=-5)]  # an older bad run, since repaired
    assert fleet_view(rows).deviants == []
    rows += [row("n0", 1, BAD, hours=5)]  # it went bad again: the latest run counts
    assert [(d.node, d.component) for d in fleet_view(rows).deviants] == [("n0", "gpu1")]
    # many runs of one GPU do not outvote the others
    rows = fleet(nodes=2, gpus=2) + [row("n0", 0, BAD, hours=h) for h in range(1, 20)]
    assert fleet_view(rows, min_gpus=4).majorities == {KEY: GOOD}


def test_keys_are_judged_apart():
    other = "NVIDIA H200|torch 2.6.0 cuda 12.6|bf16|n=8192|seed=1234"
    rows = fleet(nodes=2) + [row(f"m{n}", g, BAD, key=other) for n in range(2) for g in range(4)]
    view = fleet_view(rows)
    assert view.majorities == {KEY: GOOD, other: BAD} and view.deviants == []


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="share"):
        fleet_view([], share=0.3)
    with pytest.raises(ValueError, match="min_gpus"):
        fleet_view([], min_gpus=0)


# ---------------------------------------------------------------------------------------- the file

def test_fleet_file_round_trip_keeps_decided_keys_only(tmp_path):
    path = str(tmp_path / "fleet.json")
    n = fleetfile.write(path, {KEY: {"digest": GOOD, "gpus": 8, "votes": 8, "nodes": 2},
                               "undecided": {"digest": None, "gpus": 1, "votes": 1, "nodes": 1}},
                        "2026-12-01T00:00:00+00:00", None)
    assert n == 1 and fleetfile.read(path) == {KEY: GOOD}
    assert oct((tmp_path / "fleet.json").stat().st_mode & 0o777) == "0o644"  # the jobs' users read it


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    (b"\xff\xfe", "not JSON"),
    (b"{not json", "not JSON"),
    (b'{"schema": 2, "digests": {}}', "not a fleet digests file of schema 1"),
    (b'[1, 2]', "not a fleet digests file"),
    (json.dumps({"schema": 1, "digests": {KEY: {"digest": "xyz"}}}).encode(), "has no hex digest"),
    (json.dumps({"schema": 1, "digests": {KEY: "a1a1"}}).encode(), "has no hex digest"),
])
def test_unusable_fleet_files_say_why(tmp_path, content, message):
    path = tmp_path / "fleet.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(fleetfile.FleetFileError, match=message):
        fleetfile.read(str(path))


def test_oversized_fleet_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(fleetfile, "MAX_BYTES", 64)
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"schema": 1, "digests": {KEY: {"digest": GOOD}}}))
    with pytest.raises(fleetfile.FleetFileError, match="over the limit"):
        fleetfile.read(str(path))


def test_a_fifo_at_the_fleet_file_is_refused_not_waited_on(tmp_path):
    path = tmp_path / "fleet.json"
    os.mkfifo(path)
    with pytest.raises(fleetfile.FleetFileError, match="a FIFO"):
        fleetfile.read(str(path))


# ------------------------------------------------------------------------------- end to end (SQLite)

def _burnin(tmp_path, node: str, extra_env: dict | None = None) -> dict:
    config = tmp_path / "site.toml"
    if not config.exists():
        config.write_text('[burnin]\nbackend = "numpy"\nphases = ["gemm"]\ngemm_duration_s = 0.2\ngemm_n = 64\n')
    env = {"SLURM_JOB_ID": "", "SLURM_JOB_NODELIST": "", "SLURM_NODELIST": "", **(extra_env or {})}
    result = CliRunner().invoke(cli, ["burnin", "run", "--config", str(config), "--node", node,
                                      "--spool", str(tmp_path / "spools" / node),
                                      "--results-dir", str(tmp_path / "res"), "--format", "json"], env=env)
    return json.loads(result.stdout[result.stdout.index("{"):])


def _ingest(tmp_path, db: str) -> None:
    result = CliRunner().invoke(cli, ["history", "ingest", str(tmp_path / "spools"), "--db", db])
    assert result.exit_code == 0, result.output


def _corrupt_spool(tmp_path, node: str, source: dict) -> None:
    """A spooled run of ``node`` whose GEMM product differs (what a GPU with SDC would record)."""
    from healthcheck.spool import store as spool

    rec = json.loads(json.dumps(source))
    rec.update(node=node, run_id="ff" * 16, record_id="fe" * 16)
    (component, (key, digest)), = rec["burnin"]["gemm_digests"].items()
    rec["burnin"]["gemm_digests"] = {component: [key, ("0" if digest[0] != "0" else "1") + digest[1:]]}
    spool.append(tmp_path / "spools" / node, rec)


def test_burnin_history_fleet_file_and_report_end_to_end(tmp_path):
    db = str(tmp_path / "history.db")
    records = [_burnin(tmp_path, f"n{i}") for i in range(1, 5)]
    (key, digest), = {tuple(v) for r in records for v in r["burnin"]["gemm_digests"].values()}
    assert "|numpy " in key and key.endswith("|fp32|n=64|seed=1234")  # the same product on every node
    _corrupt_spool(tmp_path, "n5", records[0])
    _ingest(tmp_path, db)

    out = tmp_path / "fleet.json"
    result = CliRunner().invoke(cli, ["burnin", "fleet-digests", "--db", db, "--since", "30d", "-o", str(out)])
    assert result.exit_code == 1, result.output  # a GPU differs
    assert f"{key}: majority {digest[:12]} (4 of 5 GPUs on 5 nodes)" in result.output
    assert "DIFFERS n5 cpu0: GEMM result" in result.output
    assert fleetfile.read(str(out)) == {key: digest}
    as_json = CliRunner().invoke(cli, ["burnin", "fleet-digests", "--db", db, "--format", "json"])
    assert [d["node"] for d in json.loads(as_json.stdout)["deviants"]] == ["n5"]

    # a node that agrees with the fleet passes; against a fleet file of another product, it fails
    ok = _burnin(tmp_path, "n6", {"HEALTHCHECK_BURNIN_FLEET_DIGESTS": str(out)})
    (verify,) = [r for r in ok["results"] if r["check"] == "burnin.gemm.verify"]
    assert verify["status"] == "pass" and verify["message"].endswith("same result as the fleet")
    fleetfile.write(str(out), {key: {"digest": "0" * 32}}, "2026-12-01T00:00:00+00:00", None)
    bad = _burnin(tmp_path, "n7", {"HEALTHCHECK_BURNIN_FLEET_DIGESTS": str(out)})
    (verify,) = [r for r in bad["results"] if r["check"] == "burnin.gemm.verify"]
    assert verify["status"] == "fail" and "differs from the fleet" in verify["message"]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    warned = _burnin(tmp_path, "n8", {"HEALTHCHECK_BURNIN_FLEET_DIGESTS": str(broken)})
    flagged = [r for r in warned["results"] if r["check"] == "burnin.gemm.verify" and r["status"] == "warn"]
    assert len(flagged) == 1 and "fleet digests not compared" in flagged[0]["message"]

    # the readiness report names the GPU too (finding kind "sdc")
    report = CliRunner().invoke(cli, ["report", "--db", db, "--since", "3650d", "--format", "json"])
    assert report.exit_code == 0, report.output
    sdc = [f for f in json.loads(report.stdout)["findings"] if f["kind"] == "sdc"]
    assert [(f["node"], f["component"], f["status"]) for f in sdc] == [("n5", "cpu0", "fail")]


def test_fleet_digests_of_an_unmigrated_or_empty_history(tmp_path):
    db = str(tmp_path / "empty.db")
    result = CliRunner().invoke(cli, ["burnin", "fleet-digests", "--db", db])
    assert result.exit_code == 6 and "db upgrade" in result.output  # the history: unavailable until upgraded
    assert CliRunner().invoke(cli, ["db", "upgrade", "--db", db]).exit_code == 0
    result = CliRunner().invoke(cli, ["burnin", "fleet-digests", "--db", db])
    assert result.exit_code == 0 and "no GEMM digests in the history" in result.output


# ---------------------------------------------------------------------------------------- the sweep

def test_the_sweep_hands_the_fleet_file_to_its_jobs_unless_the_site_names_one(tmp_path, monkeypatch):
    from healthcheck.config import Config
    from healthcheck.sweep.run import Sweeper
    from healthcheck.sweep.settings import resolve

    monkeypatch.delenv("HEALTHCHECK_BURNIN_FLEET_DIGESTS", raising=False)
    sweeper = Sweeper(Config(None), resolve({}), backend=None)
    assert sweeper.job_env("/res", "/res/fleet-digests.json")["HEALTHCHECK_BURNIN_FLEET_DIGESTS"] == \
        "/res/fleet-digests.json"
    assert "HEALTHCHECK_BURNIN_FLEET_DIGESTS" not in sweeper.job_env("/res", None)
    site = Config(None)
    site.burnin = {"fleet_digests": "/shared/fleet.json"}
    assert "HEALTHCHECK_BURNIN_FLEET_DIGESTS" not in Sweeper(site, resolve({}), backend=None).job_env("/res", "/x")
    monkeypatch.setenv("HEALTHCHECK_BURNIN_FLEET_DIGESTS", "/mine.json")
    assert sweeper.job_env("/res", "/x")["HEALTHCHECK_BURNIN_FLEET_DIGESTS"] == "/mine.json"


def test_write_fleet_digests_is_best_effort(tmp_path):
    from healthcheck.sweep.finish import write_fleet_digests

    said: list[str] = []
    db = str(tmp_path / "h.db")
    assert write_fleet_digests(str(tmp_path), db, None, said.append) is None  # not migrated: said, not raised
    assert "fleet GEMM digests not written" in said[-1] and "each node is compared within itself" in said[-1]
    assert CliRunner().invoke(cli, ["db", "upgrade", "--db", db]).exit_code == 0
    path = write_fleet_digests(str(tmp_path), db, None, said.append)
    assert path == str(tmp_path / "fleet-digests.json") and fleetfile.read(path) == {}
    assert said[-1].startswith("fleet GEMM digests: 0 decided key(s)")
