"""Version drift outside the sweep: `healthcheck report` reads each node's latest sw.versions results back
from the history and shows the fleet's versions and the node that differs (issue 16)."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from click.testing import CliRunner

from healthcheck.analysis.versions import parse_message, versions_from_results
from healthcheck.cli import cli


def _run(node: str, when: datetime, message: str, component=None) -> dict:
    return {"kind": "run", "schema_version": 1, "record_id": f"rec-{node}-{when:%H%M%S}",
            "run_id": f"run-{node}-{when:%H%M%S}", "node": node, "context": "slurm-check", "job_id": None,
            "started_at": when.isoformat(), "duration_s": 0.1, "status": "pass", "config_hash": None,
            "tool_version": "0.1.0",
            "results": [{"check": "sw.versions", "status": "pass", "message": message, "component": component,
                         "metrics": {}},
                        {"check": "host.load", "status": "pass", "message": "load 0.1", "component": None,
                         "metrics": {"load": 0.1}}]}


def test_the_report_shows_versions_and_the_odd_node_from_the_history(tmp_path):
    now = datetime.now(timezone.utc).replace(microsecond=0)
    spool = tmp_path / "spool"
    spool.mkdir()
    good = "driver 550.54.14, cuda 12.4, hca_firmware 28.39.1002,28.39.2048, kernel 6.1.0 (informational: ...)"
    odd = "driver 535.104.05, cuda 12.2, hca_firmware 28.39.1002, kernel 6.1.0 (informational: ...)"
    records = [_run(f"gpu{i:02d}", now - timedelta(hours=2), odd) for i in range(1, 6)]  # older: all odd
    records += [_run(f"gpu{i:02d}", now - timedelta(hours=1), good) for i in range(1, 5)]
    records.append(_run("gpu05", now - timedelta(hours=1), odd))
    (spool / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    db = f"sqlite:///{tmp_path / 'h.sqlite'}"
    ingest = CliRunner().invoke(cli, ["history", "ingest", str(spool), "--db", db])
    assert ingest.exit_code == 0, ingest.output
    result = CliRunner().invoke(cli, ["report", "--db", db, "--since", "1d", "--format", "json"])
    assert result.exit_code == 0, result.output
    tables = json.loads(result.output)["fleet_tables"]
    drivers = {r["value"]: r["nodes"] for r in tables["versions"] if r["item"] == "driver"}
    assert drivers == {"550.54.14": 4, "535.104.05": 1}  # each node's latest run only
    drift = [(r["node"], r["item"]) for r in tables["drift"]]
    assert ("gpu05", "driver") in drift and ("gpu05", "cuda") in drift
    assert not any(node != "gpu05" for node, _ in drift)


def test_both_message_forms_are_read():
    assert parse_message(None, "driver 550.54.14, hca_firmware 28.39.1002,28.39.2048, kernel 6.1 "
                               "(informational: no [class.NAME.versions] expected)") == [
        ("driver", "550.54.14"), ("hca_firmware", "28.39.1002,28.39.2048"), ("kernel", "6.1")]
    assert parse_message("driver", "driver 535.1 (expected 550.*)") == [("driver", "535.1")]
    assert parse_message("driver", "driver 550.54.14") == [("driver", "550.54.14")]
    assert parse_message("cuda", "cuda not found (expected 12.4)") == []
    assert parse_message(None, "no versions found (informational: ...)") == []
    assert versions_from_results(None).empty
