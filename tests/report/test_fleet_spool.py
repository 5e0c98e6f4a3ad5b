"""Issue 35, point 4: a simulated fleet anyone can report on without writing Python.

``benchmarks/fleet_sim.py --spool DIR`` writes the nodes' spools; ``healthcheck history ingest DIR`` stores
them; ``healthcheck report`` (with the ``--topology`` file as its config) finds the planted faults, here at
256 nodes x 40 days (docs/fleet-scale.md gives the commands at 1,000 and 10,000 nodes)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.report.test_fleet_default_db import BENCH, _module


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleetspool")
    out = subprocess.run([sys.executable, str(BENCH / "fleet_sim.py"), "--nodes", "256", "--days", "40",
                          "--spool", str(base / "spool"), "--topology", str(base / "healthcheck.toml")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "wrote 256 spools under" in out.stdout and "history ingest" in out.stdout
    return base


def test_the_spools_ingest_and_report_the_planted_faults(fleet):
    from healthcheck.cli.main import cli

    sim = _module("fleet_sim").simulate(nodes=256, days=40)
    db = f"sqlite:///{fleet / 'h.sqlite'}"
    res = CliRunner().invoke(cli, ["history", "ingest", str(fleet / "spool"), "--db", db], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "0 already stored; 0 skipped" in res.output and "stored 11,645 run" in res.output.replace("11645", "11,645")
    res = CliRunner().invoke(cli, ["report", "--db", db, "--config", str(fleet / "healthcheck.toml"),
                                   "--until", "2026-06-01T00:00:00Z", "--since", "30d", "--format", "json"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    assert rep["fleet"]["total"] == 256 and rep["until"] == "2026-06-01T00:00:00Z"
    top = {r["node"] for r in rep["risks"][:len(sim.planted)]}
    assert top == sim.planted
    rack = next(c for c in rep["shared_causes"] if c["group"] == "r002")
    assert set(rack["nodes"]) == set(sim.truth["pcie_rack"])
    pcie = [g for g in rep["finding_groups"] if "pcie" in g["subject"]]  # one cause, one row: the check and the
    assert len(pcie) == 1 and pcie[0]["kind"] == "check+floor"  # floor of nodes whose latest run had no check
    from healthcheck.report.fold import fold

    assert pcie[0]["nodes"] == fold(sim.truth["pcie_rack"]) and pcie[0]["subject"] == "gpu.pcie.link (pcie_width)"
    kinds = {(g["kind"], g["nodes"]) for g in rep["finding_groups"]}
    assert ("growth", sim.truth["flapping_ib"][0]) in kinds and ("flapping", sim.truth["flapping_ib"][0]) in kinds
    assert sim.truth["heating"][0] in {n for _, n in kinds}


def test_bad_spool_arguments_are_clear_errors(fleet, tmp_path):
    sim_mod = _module("fleet_sim")
    sim = sim_mod.simulate(nodes=256, days=40)
    with pytest.raises(FileExistsError, match="already holds spools"):
        sim_mod.write_spools(sim, fleet / "spool")
    with pytest.raises(ValueError, match="--spool-days must be >= 1"):
        sim_mod.write_spools(sim, tmp_path / "new", days=0)
    out = subprocess.run([sys.executable, str(BENCH / "fleet_sim.py"), "--nodes", "256", "--days", "40", "--end",
                          "yesterday"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "--end 'yesterday': expected 'now' or an ISO-8601 time" in out.stderr


def test_the_fleet_ingest_benchmark_compares_the_same_rows(fleet, tmp_path):
    """benchmarks/bench_ingest_fleet.py (docs/performance.md): the bare executemany and the real ingest
    store the same rows of the same spools, and it states their ratio."""
    import re
    import sqlite3

    db = tmp_path / "bench.sqlite"
    out = subprocess.run([sys.executable, str(BENCH / "bench_ingest_fleet.py"), str(fleet / "spool"), "--db",
                          f"sqlite:///{db}", "--side", "bare"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    bare_rows = int(re.search(r"s on the clock, ([\d,]+) rows", out.stdout).group(1).replace(",", ""))
    with sqlite3.connect(db) as conn:
        stored = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("runs", "results", "metrics", "actions", "gemm_digests"))
    assert stored == bare_rows > 100_000
    again = [sys.executable, str(BENCH / "bench_ingest_fleet.py"), str(fleet / "spool"), "--db", f"sqlite:///{db}"]
    out = subprocess.run(again, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "already holds a history" in out.stderr  # never a database by mistake
    out = subprocess.run(again + ["--replace"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "stored 11645 run(s)" in out.stdout and re.search(r"ratio bare/ingest: \d+\.\d\d", out.stdout)
    with sqlite3.connect(db) as conn:  # the ingest's database replaced the bare one: the same rows
        assert sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                   for t in ("runs", "results", "metrics", "actions", "gemm_digests")) == bare_rows
