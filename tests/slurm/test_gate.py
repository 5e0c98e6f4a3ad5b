"""The prolog's fast path (prolog_mode = "fast"): a healthy HealthCheckProgram run writes the gate, the
prolog starts the job on its word after re-reading the live facts, and every doubt runs the full
prolog. Run as slurmd runs the hooks: subprocesses with Slurm's environment."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from healthcheck.history.rows import run_rows
from tests.slurm.test_hooks import bundles, spool, write_config  # noqa: F401,F811 - bundles is a fixture

HEAVY_FOR_FAST = ("healthcheck.pipeline.judge", "healthcheck.core.model", "healthcheck.config", "json", "dataclasses")


def run_hook(context: str, config: Path, cache: Path, job: str | None = "4242", node: str = "node1",
             modules: bool = False) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": node, "HEALTHCHECK_CACHE_DIR": str(cache)}
    if job:
        env.update(SLURM_JOB_ID=job, SLURM_JOB_USER="alice", SLURM_JOB_UID="1000")
    code = ("import sys\nfrom healthcheck.hook.run import guarded_main\nrc = guarded_main(sys.argv[1:])\n"
            "sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\nsys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-I", "-c", code, context, "--config", str(config)], capture_output=True,
                          text=True, env=env, timeout=120, cwd="/")
    mods = next((line.split()[1:] for line in proc.stderr.splitlines() if line.startswith("MODULES ")), [])
    return proc, mods


@pytest.fixture
def site(tmp_path, bundles):  # noqa: F811
    bundle = tmp_path / "bundle"
    shutil.copytree(bundles / "healthy", bundle)
    config = write_config(tmp_path, str(bundle), prolog_mode="fast")
    return tmp_path, bundle, config, tmp_path / "cache"


def gate_file(cache: Path, node: str = "node1") -> Path:
    return cache / f"prolog-gate-{node}"


def test_a_healthy_check_writes_the_gate_and_the_prolog_starts_the_job_on_it(site):
    root, bundle, config, cache = site
    proc, _ = run_hook("slurm-check", config, cache, job=None)
    assert proc.returncode == 0, proc.stderr
    text = gate_file(cache).read_text()
    assert text.startswith("healthcheck-gate 1\n") and "\nexists " in text and "\nequals " in text
    assert oct(gate_file(cache).stat().st_mode & 0o777) == "0o600"
    proc, mods = run_hook("prolog", config, cache)
    assert proc.returncode == 0, proc.stderr
    assert not set(HEAVY_FOR_FAST) & set(mods), sorted(set(HEAVY_FOR_FAST) & set(mods))
    run = [r for r in spool(root) if r["kind"] == "run"][-1]
    assert run["context"] == "prolog" and run["job_id"] == "4242" and run["status"] == "pass"
    assert run["results"][0]["check"] == "prolog.gate" and "vouched by the health check" in run["results"][0]["message"]
    run_rows(run, ingested_at=None)  # the hand-encoded record is one the history accepts
    baseline = json.loads((root / "state" / "node1" / "baselines" / "4242.json").read_text())
    assert baseline["job_id"] == "4242" and baseline["counters"] and baseline["source"].startswith("health check ")
    # the epilog uses that baseline and says where it came from
    proc, _ = run_hook("epilog", config, cache)
    assert proc.returncode == 0, proc.stderr
    epilog = [r for r in spool(root) if r["kind"] == "run"][-1]
    (growth,) = [r for r in epilog["results"] if r["check"] == "job.counter_growth"]
    assert growth["status"] == "pass"


def _full_prolog_ran(config, cache) -> bool:
    proc, mods = run_hook("prolog", config, cache)
    assert proc.returncode == 0, proc.stderr
    return "healthcheck.hook.watchdog" in mods  # the full prolog judges in a watchdog child; the fast one never forks


@pytest.mark.parametrize("change", ["config edited", "gpu gone from the bus", "ib port down", "pending action",
                                    "gate too old", "gate not root's alone", "no gate", "tool version"])
def test_every_doubt_runs_the_full_prolog(site, change):
    root, bundle, config, cache = site
    run_hook("slurm-check", config, cache, job=None)
    assert not _full_prolog_ran(config, cache)
    gate = gate_file(cache)
    lines = gate.read_text().splitlines()
    if change == "config edited":
        config.write_text(config.read_text() + "# edited\n")
    elif change == "gpu gone from the bus":
        path = next(line.split(" ", 1)[1] for line in lines if line.startswith("exists "))
        shutil.rmtree(path)
    elif change == "ib port down":
        path = next(line.split(" ", 1)[1].split("\t")[0] for line in lines if line.startswith("equals "))
        Path(path).write_text("1: DOWN\n")
    elif change == "pending action":
        (root / "state" / "node1").mkdir(parents=True, exist_ok=True)
        (root / "state" / "node1" / "pending-actions.jsonl").write_text("")
    elif change == "gate too old":
        gate.write_text("\n".join(f"written {time.time() - 10000:.3f}" if x.startswith("written ") else x
                                  for x in lines) + "\n")
    elif change == "gate not root's alone":
        if os.geteuid() != 0:
            pytest.skip("ownership is only enforced as root")
        os.chmod(gate, 0o644)
    elif change == "no gate":
        gate.unlink()
    elif change == "tool version":
        gate.write_text("\n".join("version 0.0.0" if x.startswith("version ") else x for x in lines) + "\n")
    assert _full_prolog_ran(config, cache)


def test_a_failing_check_removes_the_gate(site, bundles):  # noqa: F811
    root, bundle, config, cache = site
    run_hook("slurm-check", config, cache, job=None)
    assert gate_file(cache).exists()
    shutil.rmtree(bundle)
    shutil.copytree(bundles / "faulty", bundle)
    proc, _ = run_hook("slurm-check", config, cache, job=None)
    assert not gate_file(cache).exists()
    proc, mods = run_hook("prolog", config, cache)
    assert proc.returncode == 1 and "healthcheck.hook.watchdog" in mods  # the full prolog judged and failed it


def test_full_mode_never_writes_a_gate(tmp_path, bundles):  # noqa: F811
    config = write_config(tmp_path, str(bundles / "healthy"))
    run_hook("slurm-check", config, tmp_path / "cache", job=None)
    assert not gate_file(tmp_path / "cache").exists()
