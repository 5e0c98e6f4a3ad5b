"""The HTML report in a real browser: Debian's headless Chromium renders it with no console message, the
plots (inline SVG) and tables are in the rendered DOM, and a screenshot is saved.

Chromium is installed through scripts/lib.sh's apt_install when missing; when it still cannot run, the
test FAILS (CI must not pass without the browser). HEALTHCHECK_SKIP_BROWSER=1 skips it deliberately.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from healthcheck.report import build_report, render_html
from tests.conftest import ROOT
from tests.report.synth import HOSTILE, NOW, SINCE, make_frames

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\]\s*(.*)")


@pytest.fixture(scope="module")
def chromium() -> str:
    if os.environ.get("HEALTHCHECK_SKIP_BROWSER") == "1":
        pytest.skip("HEALTHCHECK_SKIP_BROWSER=1")
    if not os.access(CHROMIUM, os.X_OK):
        proc = subprocess.run(["bash", "-c", 'source "$1/scripts/lib.sh" && apt_install chromium', "_", str(ROOT)],
                              capture_output=True, text=True, timeout=900)
        if not os.access(CHROMIUM, os.X_OK):
            pytest.fail(f"Debian's chromium is missing and could not be installed: {proc.stderr.strip()[-500:]}")
    return CHROMIUM


def run_chromium(chromium: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["HOME"] = str(tmp)
    proc = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120, env=env, start_new_session=True)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def measured_dom(chromium: str, page: Path, tmp: Path, script: str, *flags: str) -> dict:
    """What ``script`` (appended to a copy of ``page`` whose CSP is removed so it may run) measured in the
    page as headless Chromium lays it out: the JSON it writes into ``<pre id="hc-measure">``."""
    import html
    import json

    text, n = re.subn(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text(encoding="utf-8"))
    assert n == 1
    copy = tmp / "measured.html"
    copy.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
    proc = run_chromium(chromium, tmp, *flags, "--dump-dom", copy.as_uri())
    found = re.search(r'<pre id="hc-measure">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


def console_messages(stderr: str) -> list[str]:
    return [m.group(1) for m in map(CONSOLE.search, stderr.splitlines()) if m]


class _Counter(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: dict[str, int] = {}
        self.h2: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self._in_h2 = tag == "h2"

    def handle_endtag(self, tag):
        self._in_h2 = self._in_h2 and tag != "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(build_report(make_frames(), SINCE, NOW)), encoding="utf-8")
    return path


def test_console_messages_are_caught(chromium, tmp_path):
    """Negative control: the log parsing sees a page's console output and errors."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); nosuchfn();</script></body></html>')
    proc = run_chromium(chromium, tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", bad.as_uri())
    messages = console_messages(proc.stderr)
    assert any("boom" in m for m in messages) and any("nosuchfn" in m for m in messages), proc.stderr[-2000:]


def test_report_renders_without_console_messages(chromium, page, tmp_path):
    proc = run_chromium(chromium, tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    assert console_messages(proc.stderr) == []
    dom = _Counter()
    dom.feed(proc.stdout)
    assert dom.tags.get("svg") == 4, dom.tags  # fleet state per day, distributions, counter growth, drain timeline
    # 7 tables, the Training readiness figures (issue 34: shown, with "not measured", without a training run),
    # and one per fleet table with rows (report/fleetsection.py: regressions, MTBF, ...)
    trends = sum(1 for rows in build_report(make_frames(), SINCE, NOW).fleet_tables.values() if rows)
    assert trends >= 2 and dom.tags.get("table", 0) == 8 + trends and dom.tags.get("tr", 0) > 20
    assert dom.tags.get("script", 0) == 0 and dom.tags.get("img", 0) == 0  # the hostile message stayed text
    for title in ("Fleet summary", "Nodes ranked by risk", "Performance distributions", "Drain timeline"):
        assert any(title in h for h in dom.h2), dom.h2
    assert "&lt;script&gt;alert" in proc.stdout  # the hostile node name, rendered as text
    assert HOSTILE not in proc.stdout


def test_screenshot(chromium, page, tmp_path):
    shot = tmp_path / "report.png"
    run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1400,3000", "--hide-scrollbars",
                 page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    keep = os.environ.get("HEALTHCHECK_REPORT_SCREENSHOT")
    if keep:  # to look at it: HEALTHCHECK_REPORT_SCREENSHOT=/tmp/report.png pytest -m browser
        shutil.copyfile(shot, keep)
