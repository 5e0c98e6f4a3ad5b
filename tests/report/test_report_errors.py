"""ERROR results (the checker could not judge) are findings of the report, with what to do next
(issue 14, item 10)."""
from __future__ import annotations

import pandas as pd

from healthcheck.report import build_report
from tests.report.synth import NOW, SINCE, make_frames


def test_error_result_of_the_latest_run_is_a_finding_with_an_action():
    frames = make_frames()
    results = frames["results"]
    latest = results[results["node"] == "gpu01"].sort_values("started_at").iloc[-1]
    row = {"run_id": latest.run_id, "node": "gpu01", "started_at": latest.started_at, "check": "gpu.ecc.mode",
           "component": "gpu4", "status": "error",
           "message": "ecc_mode_current answered 'Unknown Error': the driver could not read it"}
    frames["results"] = pd.concat([results, pd.DataFrame([row])], ignore_index=True)
    found = [f for f in build_report(frames, SINCE, NOW).findings
             if (f.node, f.subject, f.component) == ("gpu01", "gpu.ecc.mode", "gpu4")]
    assert len(found) == 1 and found[0].status == "error"
    assert found[0].action.startswith("could not judge:") and "collect a bundle" in found[0].action
