"""The hook as slurmd runs it, fed what an unlucky admin or an attacker could leave it: a poisoned
pending-actions queue, a FIFO at the config path, a hung scontrol. The safe outcome each time: the
checks run, the hook ends within its budget, the verdict is in the spool."""
from __future__ import annotations

import json
import os
import time

from healthcheck.slurm.pending import REJECTED
from tests.slurm.test_hooks import bundles, hook, spool, write_config  # noqa: F401 - fixture

REASON = "healthcheck: gpu.ecc.uncorrected gpu3: uncorrected ECC errors [run 0123456789ab]"


def test_a_bad_queue_line_never_stops_the_checks(tmp_path, bundles):  # noqa: F811
    """Today: ValueError from the node-name check escaped before the checks: exit 0, a bad node passed,
    and every other queued action was lost."""
    state = tmp_path / "state" / "node1"
    state.mkdir(parents=True, mode=0o700)
    lines = [{"node": "node[1-64]", "action": "drain", "reason": REASON, "created_at": "2026-12-03T00:00:00+00:00"},
             {"node": "node1", "action": "drain", "reason": "healthcheck: gpu.xid gpu0: Xid 79",
              "created_at": "2026-12-03T00:00:01+00:00", "run_id": "r1"}]
    (state / "pending-actions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    fake = tmp_path / "scontrol"  # slurmctld down: the good item goes back to the queue
    fake.write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    fake.chmod(0o755)
    config = write_config(tmp_path, str(bundles / "faulty"), scontrol=str(fake))
    proc, _ = hook("prolog", config)
    assert proc.returncode == 1, proc.stderr  # the faulty node is judged and fails
    assert "set aside" in proc.stderr and "node[1-64]" in proc.stderr
    runs = [r for r in spool(tmp_path) if r["kind"] == "run"]
    assert runs and any(r["check"] == "gpu.ecc.uncorrected" and r["status"] == "fail" for r in runs[-1]["results"])
    queued = (state / "pending-actions.jsonl").read_text()
    assert "node[1-64]" not in queued and '"node1"' in queued
    assert "node[1-64]" in (state / REJECTED).read_text()


def test_a_fifo_at_the_config_path_cannot_hold_the_hook(tmp_path):
    fifo = tmp_path / "site.toml"
    os.mkfifo(fifo)
    proc, elapsed = hook("prolog", fifo)
    assert proc.returncode == 0 and "config not used" in proc.stderr
    assert elapsed < 5.0 + 10  # the default prolog budget; a loaded machine adds start-up time only


def test_a_hung_scontrol_cannot_stretch_the_hook_past_its_budget(tmp_path, bundles):  # noqa: F811
    """Today: three 5 s tries outside the budget (a 5 s prolog took 31.7 s). Now every Slurm call
    shares the budget; the drain is queued and the verdict recorded."""
    hung = tmp_path / "scontrol"
    hung.write_text("#!/bin/sh\nexec sleep 120\n")
    hung.chmod(0o755)
    config = write_config(tmp_path, str(bundles / "faulty"), scontrol=str(hung), slurm_check_budget_s=3.0)
    start = time.monotonic()
    proc, elapsed = hook("slurm-check", config)
    assert proc.returncode == 0, proc.stderr
    # 3 s budget + interpreter start-up; before the fix this took over 15 s
    assert elapsed < 3.0 + 4.0, elapsed
    runs = [r for r in spool(tmp_path) if r["kind"] == "run"]
    assert runs and runs[-1]["status"] == "fail" and runs[-1]["duration_s"] <= 3.0 + 0.3
    queued = (tmp_path / "state" / "node1" / "pending-actions.jsonl").read_text()
    assert "gpu.ecc.uncorrected" in queued
    assert time.monotonic() - start < 60


def test_health_checks_keep_the_gpu_samples_gpu_stalled_judges(tmp_path, bundles):  # noqa: F811
    """HealthCheckProgram keeps each GPU's earlier readings in the state folder (gpu.stalled needs
    consecutive runs); with them, gpu.stalled is judged rather than skipped."""
    config = write_config(tmp_path, str(bundles / "healthy"))
    for _ in range(3):  # gpu.stalled judges three consecutive readings
        proc, _ = hook("slurm-check", config, job=None)
        assert proc.returncode == 0, proc.stderr
    kept = json.loads((tmp_path / "state" / "node1" / "gpu-samples.json").read_text())
    assert kept, kept
    run = [r for r in spool(tmp_path) if r["kind"] == "run"][-1]
    stalled = [r for r in run["results"] if r["check"] == "gpu.stalled"]
    assert stalled and all(r["status"] != "skip" for r in stalled), stalled
