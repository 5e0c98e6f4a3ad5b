"""A node the hooks held back under the drain cap is named in the readiness report, with what to do
(issue 14, item 9)."""
from __future__ import annotations

import pandas as pd

from healthcheck.report import build_report
from tests.report.synth import NOW, SINCE, make_frames


def test_a_held_back_node_is_a_finding_that_says_so():
    frames = make_frames()
    results = frames["results"]
    latest = results[results["node"] == "gpu02"].sort_values("started_at").iloc[-1]
    row = {"run_id": latest.run_id, "node": "gpu02", "started_at": latest.started_at, "check": "slurm.drain_cap",
           "component": None, "status": "warn",
           "message": "held back by the drain cap, not drained: gpu.count (already drained by us on 2 of 8 "
                      "nodes, cap 2: gpu01, gpu03)"}
    frames["results"] = pd.concat([results, pd.DataFrame([row])], ignore_index=True)
    found = [f for f in build_report(frames, SINCE, NOW).findings
             if (f.node, f.subject) == ("gpu02", "slurm.drain_cap")]
    assert len(found) == 1 and "held back by the drain cap" in found[0].detail
    assert "fix the expectation" in found[0].action
