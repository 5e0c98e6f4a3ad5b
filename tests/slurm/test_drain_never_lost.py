"""A queued drain is never lost, and an Xid is acknowledged only when a drain for it really ended: the
sequence a reviewer reproduced with a fake scontrol, walked on the real local Slurm cluster.

The hooks are installed with `healthcheck slurm install-hooks` and call a wrapper scontrol that, by a
control file, hangs past the hook's deadline, answers "Protocol authentication error" (munge broken:
a non-transient SlurmError) or runs the real scontrol. Before the fix: the hung run wrote the ledger
"drained by us" for a drain that was only queued; the next run dropped the queued drain (held by the
drain cap, or refused once); the run after saw the node in service, took it for an admin's resume and
acknowledged the Xid for good: the node was never drained for it. The same steps with a fake backend:
tests/slurm/test_drain_queue.py."""
from __future__ import annotations

import json
import shutil

from tests.slurm.test_scenarios import Site, sources  # noqa: F401 - fixture
from tests.slurm.test_verdict_actions import add_source, xid_result, xid_source  # noqa: F401 - fixture

OTHER = "healthcheck: gpu.xid gpu0: Xid 79 (GPU has fallen off the bus) x1 on 0000:18:00.0 [run {node}]"


def wrapper(tmp_path):
    """A scontrol that does what the control file says: hang, auth, or (anything else) the real one."""
    real = shutil.which("scontrol")
    control = tmp_path / "scontrol.mode"
    script = tmp_path / "scontrol"
    script.write_text("#!/bin/sh\n"
                      f'mode=$(cat "{control}" 2>/dev/null)\n'
                      'case "$mode" in\n'
                      "  hang) exec /bin/sleep 60 ;;\n"
                      "  auth) echo 'slurm_load_node error: Protocol authentication error' >&2; exit 1 ;;\n"
                      "esac\n"
                      f'exec "{real}" "$@"\n')
    script.chmod(0o755)
    return script, control


def test_a_queued_drain_survives_holds_and_errors_and_the_xid_is_acknowledged_only_after_the_drain(
        tmp_path, slurm_cluster, sources, xid_source):  # noqa: F811
    cluster = slurm_cluster
    cluster.reset()
    scontrol, control = wrapper(tmp_path)
    site = Site(tmp_path, cluster, sources, scontrol=str(scontrol), drain_cap_nodes=2, drain_cap_fraction=0.1)
    add_source(site, "xid", xid_source)
    site.set_bundle("node1", "xid")
    state = tmp_path / "state" / "node1"
    queue, ledger, acks = state / "pending-actions.jsonl", state / "drained-by-us.json", state / "events-acknowledged.json"

    def queued() -> list[dict]:
        return [json.loads(line) for line in queue.read_text().splitlines()] if queue.exists() else []

    # 1. an Xid while scontrol hangs: the drain is queued with the Xid's event, and no ledger is written
    control.write_text("hang")
    proc = site.health_check("node1")
    assert proc.returncode == 0, proc.stderr
    assert not site.drained("node1")
    assert not ledger.exists(), "the ledger says 'drained by us' for a drain Slurm never took"
    [item] = queued()
    assert item["action"] == "drain" and item["reason"].startswith("healthcheck: gpu.xid")
    assert len(item["events"]) == 1 and item["events"][0].endswith("|0000:18:00.0|xid|79")
    first = (item["created_at"], item["run_id"])

    # 2. munge broken: every call refused (not transient): the drain stays queued, nothing acknowledged
    control.write_text("auth")
    proc = site.health_check("node1")
    assert "Protocol authentication error" in proc.stderr and "kept in the queue" in proc.stderr, proc.stderr
    assert [(q["created_at"], q["run_id"]) for q in queued()] == [first]
    assert not site.drained("node1") and not ledger.exists() and not acks.exists()

    # 3. Slurm answers, but the drain cap is reached for gpu.xid: held back, still queued, still failing
    control.write_text("ok")
    for other in ("node2", "node3"):
        cluster.run(["scontrol", "update", f"NodeName={other}", "State=DRAIN", f"Reason={OTHER.format(node=other)}"])
    proc = site.health_check("node1")
    assert "held back by the drain cap" in proc.stderr and "kept in the queue" in proc.stderr, proc.stderr
    assert [(q["created_at"], q["run_id"]) for q in queued()] == [first]
    assert not site.drained("node1") and not ledger.exists() and not acks.exists()
    assert xid_result(site, "node1")["status"] == "fail"  # the Xid is not passed over

    # 4. the cap frees up: the queued drain is applied, the ledger records it with the Xid's event
    for other in ("node2", "node3"):
        cluster.run(["scontrol", "update", f"NodeName={other}", "State=RESUME"])
    cluster.wait_for(lambda: not site.drained("node2") and not site.drained("node3"), 15)
    site.health_check("node1")
    assert site.drained("node1") and site.reason("node1") == item["reason"]
    entry = json.loads(ledger.read_text())
    assert entry["events"] == item["events"] and entry["reason"] == item["reason"]
    assert not queue.exists() and not acks.exists()
    applied = [a for a in site.records("action") if a["node"] == "node1" and a["why"].startswith("applied from the queue")]
    assert [a["run_id"] for a in applied] == [first[1]]

    # 5. the admin resumes the node: only now, seen by the next run, is the Xid acknowledged
    cluster.run(["scontrol", "update", "NodeName=node1", "State=RESUME"])
    cluster.wait_for(lambda: not site.drained("node1"), 15)
    assert not acks.exists()
    assert site.health_check("node1").returncode == 0
    assert json.loads(acks.read_text())["keys"] == item["events"] and not ledger.exists()
    assert not site.drained("node1")
    result = xid_result(site, "node1")
    assert result["status"] == "pass" and "already acted on" in result["message"]
