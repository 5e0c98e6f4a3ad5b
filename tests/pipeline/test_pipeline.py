"""The whole flow without Slurm daemons: the hooks write the node-local spool, `healthcheck history
ingest` moves it into the database (twice: idempotent), and `healthcheck report` names the failing node
and the check, with the action an admin should take."""
from __future__ import annotations

import json
import subprocess
import sys

from healthcheck.bundles.collect import collect_bundle
from tests.bundles.test_bundles import make_node


def run(*argv: str, env: dict | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=180, env=env,
                          cwd=cwd)


def test_hooks_spool_ingest_report(tmp_path):
    bundles = tmp_path / "bundles"
    healthy = make_node(tmp_path / "src-ok")
    faulty = make_node(tmp_path / "src-bad")
    faulty.nvml.gpus[4].remapped_rows = (0, 3, 1, 0)  # uncorrectable remap pending on gpu4
    for node in ("gpu001", "gpu002", "gpu003"):
        collect_bundle(str(bundles / node), options=healthy)
    collect_bundle(str(bundles / "gpu004"), options=faulty)
    fake_scontrol = tmp_path / "scontrol"  # slurmctld away: drains are queued, runs still recorded
    fake_scontrol.write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    fake_scontrol.chmod(0o755)
    config = tmp_path / "site.toml"
    config.write_text(f'[defaults]\nbundle = "{bundles}/{{node}}"\n[slurm]\nstate_dir = "{tmp_path}/state"\n'
                      f'spool_dir = "{tmp_path}/spool"\nscontrol = "{fake_scontrol}"\n')
    for node in ("gpu001", "gpu002", "gpu003", "gpu004"):
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": node}
        proc = run("-I", "-m", "healthcheck.hook.run", "slurm-check", "--config", str(config), env=env, cwd="/")
        assert proc.returncode == 0, proc.stderr

    db = f"sqlite:///{tmp_path}/history.sqlite"
    first = run("-m", "healthcheck.cli", "history", "ingest", str(tmp_path / "spool"), "--db", db)
    assert first.returncode == 0, first.stderr
    again = run("-m", "healthcheck.cli", "history", "ingest", str(tmp_path / "spool"), "--db", db)
    assert again.returncode == 0, again.stderr
    shown = run("-m", "healthcheck.cli", "history", "show", "--db", db, "--format", "json")
    doc = json.loads(shown.stdout)
    assert doc["schema_version"] == 1 and len(doc["rows"]) == 4  # re-ingesting added nothing
    assert all(isinstance(r["duration_s"], float) for r in doc["rows"] if r.get("duration_s") is not None)

    report = run("-m", "healthcheck.cli", "report", "--db", db, "--format", "json", "--since", "1d")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert not data["empty"]
    failing = [c for c in data["checks"] if c.get("check") == "gpu.row_remap"]
    assert failing, data["checks"]
    assert "gpu004" in json.dumps(data["risks"][0])
    assert any("reset" in json.dumps(f).lower() for f in data["findings"] if "gpu.row_remap" in json.dumps(f))

    html = tmp_path / "report.html"
    proc = run("-m", "healthcheck.cli", "report", "--db", db, "--html", str(html), "--since", "1d")
    assert proc.returncode == 0, proc.stderr
    page = html.read_text()
    assert "gpu004" in page and "gpu.row_remap" in page and "<script" not in page
