"""Issue 35 in the real headless Chromium: the report of the simulated 1,000-node fleet (four planted faults,
the last 30 days, five hours into today, no [topology]) shows the planted faults on its first screen and
nothing else as a finding there; the risk table keeps every node name on one line.

Measured as tests/report/test_fleet_browser.py does: a copy of the page without its CSP and with one
measuring script of ours, whose findings come back through ``--dump-dom``."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from healthcheck.report.files import write_html
from tests.report.test_browser import chromium, measured_dom  # noqa: F401 - a fixture
from tests.report.test_report_truth import sim, today  # noqa: F401 - the fixtures

pytestmark = pytest.mark.browser
SCREEN = (1400, 1000)

FIRST_SCREEN = r"""
<script>
(function () {
  const h = window.innerHeight, out = {findings: [], cut: false, risk_lines: [], h: h};
  const table = document.querySelector("#findings ~ table");
  table.querySelectorAll("tbody tr").forEach(tr => {
    const r = tr.getBoundingClientRect();
    if (r.top < h) { out.findings.push(tr.innerText); if (r.bottom > h) out.cut = true; }
  });
  out.findings_top = table.getBoundingClientRect().top;
  document.querySelectorAll("#risk ~ table td.node, #risk ~ table td.nw").forEach(td => {
    const line = parseFloat(getComputedStyle(td).lineHeight) || 18;
    const first = td.firstChild && td.firstChild.nodeType === 3 ? td.firstChild : null;
    if (!first) return;
    const range = document.createRange(); range.selectNodeContents(first);
    out.risk_lines.push([first.textContent, range.getClientRects().length]);
  });
  const pre = document.createElement("pre"); pre.id = "hc-measure"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def first_screen(chromium_path: str, page: Path, tmp: Path) -> dict:
    return measured_dom(chromium_path, page, tmp, FIRST_SCREEN, f"--window-size={SCREEN[0]},{SCREEN[1]}")


def test_the_first_screen_shows_the_planted_faults_and_nothing_else(chromium, sim, today, tmp_path):
    path = tmp_path / "readiness.html"
    write_html(today, str(path))
    got = first_screen(chromium, path, tmp_path)
    rows = got["findings"]  # the rows of the findings table that start on the first screen: all of them, whole
    from healthcheck.report.groups import finding_groups

    assert len(rows) == len(finding_groups(today)) and not got["cut"], (got["h"], got["findings_top"], rows)
    planted = sim.planted
    disk = {f.node for f in today.findings if f.subject == "host.disk"}
    for row in rows:  # every finding shown names planted nodes only (or the real, persistent full disks)
        named = set(re.findall(r"gpu\d{5}", row)) | {
            f"gpu{i:05d}" for a, b in re.findall(r"(\d{5})-(\d{5})", row) for i in range(int(a), int(b) + 1)}
        assert named and (named <= planted or named <= disk), row
    shown = " ".join(rows)
    for fault in ("heating", "gemm_drop", "flapping_ib"):
        assert sim.truth[fault][0] in shown, fault
    assert "gpu.pcie.link (pcie_width)" in shown and "32: gpu[00064-00095]" in shown  # the whole rack, one row
    # the risk table: no node name, no "4 of 5" wraps
    assert got["risk_lines"] and all(lines == 1 for _, lines in got["risk_lines"]), got["risk_lines"][:5]
