"""The report read at fleet scale, in the real headless Chromium (issue 16, "Reading at fleet scale"):
page height bounded at 1,000 and 10,000 nodes, no two labels of a plot overlapping (bounding boxes of the
rendered text elements), every in-page anchor resolving, every plot mark with a hover title, and the
10,000-node page rendering without a console message.

How it measures: the page forbids scripts (its CSP), so the test renders a COPY of it with the CSP meta
removed and one measuring script appended (ours, fixed text below); the script writes its findings as
JSON into the DOM, and ``--dump-dom`` returns it. The page under test is otherwise byte for byte the
report's.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from healthcheck.report import build_report
from healthcheck.report.files import write_html
from healthcheck.report.tables import NAMES
from tests.report.fleet_synth import SINCE as FLEET_SINCE
from tests.report.fleet_synth import make_fleet
from tests.report.synth import NOW, SINCE, make_frames
from tests.report.test_browser import chromium, console_messages, measured_dom, run_chromium  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser
MAX_HEIGHT_PX = 6000  # issue 16: ~16,000 px before at 1,000 nodes
WINDOW = "--window-size=1400,1000"

MEASURE = r"""
<script>
(function () {
  const out = {height: document.documentElement.scrollHeight, overlaps: [], texts: 0, svgs: 0,
               untitled: [], anchors: [], missing: []};
  const area = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
                         Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
  document.querySelectorAll("svg").forEach((svg, i) => {
    out.svgs += 1;
    const texts = Array.from(svg.querySelectorAll("text")).map(t => [t.getBoundingClientRect(), t.textContent]);
    out.texts += texts.length;
    for (let a = 0; a < texts.length; a++)
      for (let b = a + 1; b < texts.length; b++)
        if (area(texts[a][0], texts[b][0]) > 0.5) out.overlaps.push([i, texts[a][1], texts[b][1]]);
    svg.querySelectorAll("circle, rect, path").forEach(m => {
      const own = m.querySelector(":scope > title");
      const group = m.parentElement && m.parentElement.closest("g");
      if (!own && !(group && group.querySelector(":scope > title"))) out.untitled.push([i, m.tagName]);
    });
  });
  const ids = new Set(Array.from(document.querySelectorAll("[id]")).map(e => e.id));
  out.anchors = Array.from(document.querySelectorAll('a[href^="#"]')).map(a => a.getAttribute("href").slice(1));
  out.missing = out.anchors.filter(a => !ids.has(a));
  const pre = document.createElement("pre");
  pre.id = "hc-measure";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def measure(chromium_path: str, page: Path, tmp: Path) -> dict:
    return measured_dom(chromium_path, page, tmp, MEASURE, WINDOW)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("small") / "report.html"
    write_html(build_report(make_frames(), SINCE, NOW), str(path))
    return path


@pytest.fixture(scope="module")
def fleet1k(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fleet1k") / "readiness.html"
    write_html(build_report(make_fleet(1_000), FLEET_SINCE, NOW), str(path))
    return path


def test_the_measuring_script_sees_overlaps_and_missing_anchors(chromium, tmp_path):
    """Negative control: two texts drawn on each other, an untitled mark and a dangling anchor are seen."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="x"></head>'
                    '<body><a href="#nowhere">x</a><svg width="200" height="50"><text x="10" y="20">overlapping'
                    '</text><text x="14" y="22">labels</text><circle cx="5" cy="5" r="2"/></svg></body></html>')
    got = measure(chromium, page, tmp_path)
    assert got["overlaps"] == [[0, "overlapping", "labels"]]
    assert got["missing"] == ["nowhere"] and got["untitled"] == [[0, "circle"]]


def _assert_readable(got: dict, svgs: int) -> None:
    assert got["svgs"] == svgs and got["texts"] > 20
    assert got["overlaps"] == [], got["overlaps"][:10]
    assert got["untitled"] == [], got["untitled"][:10]
    assert got["missing"] == [] and {"fleet-days", "findings", "about"} <= set(got["anchors"])


def test_small_report_labels_do_not_overlap_and_anchors_resolve(chromium, small, tmp_path):
    _assert_readable(measure(chromium, small, tmp_path), 4)


def test_1000_nodes_fit_in_a_few_screens(chromium, fleet1k, tmp_path):
    got = measure(chromium, fleet1k, tmp_path)
    _assert_readable(got, 4)
    assert got["height"] < MAX_HEIGHT_PX, got["height"]


def test_10000_nodes_render_bounded(chromium, tmp_path):
    """The 10,000-node page: it renders (no console message, every section), its height stays bounded
    like the 1,000-node page's, and its CSVs hold every row the page leaves out."""
    path = tmp_path / "fleet.html"
    rep = build_report(make_fleet(10_000), FLEET_SINCE, NOW)
    written = write_html(rep, str(path))
    assert rep.fleet.total == 10_000 and len(written) == len(NAMES) + 1  # every CSV and the page
    proc = run_chromium(chromium, tmp_path, "--enable-logging=stderr", "--v=0", WINDOW, "--dump-dom", path.as_uri())
    assert console_messages(proc.stderr) == []
    for section in ("fleet-days", "fleet", "findings", "checks", "risk", "perf", "growth", "drains"):
        assert f'<h2 id="{section}">' in proc.stdout
    got = measure(chromium, path, tmp_path)
    _assert_readable(got, 4)
    assert got["height"] < MAX_HEIGHT_PX, got["height"]
    risk_csv = (tmp_path / "fleet.risk.csv").read_text().splitlines()
    assert len(risk_csv) == len(rep.risks) + 1 and len(rep.risks) > 50
