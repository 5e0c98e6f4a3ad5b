"""HTML / Markdown / JSON renderers: sections present, numbers shown, hostile data escaped, no data handled."""
from __future__ import annotations

import html
import re

import pytest

from healthcheck.report import build_report, render_html, render_markdown
from healthcheck.report.markdown import md
from healthcheck.report.plots import label
from tests.report.synth import HOSTILE, HOSTILE_MSG, NOW, SINCE, make_frames

SECTIONS = ["fleet-days", "fleet", "findings", "checks", "risk", "perf", "growth", "drains"]


@pytest.fixture(scope="module")
def report():
    return build_report(make_frames(), SINCE, NOW)


@pytest.fixture(scope="module")
def page(report):
    return render_html(report)


def test_html_has_every_section_and_plot(page):
    for section in SECTIONS:
        assert f'<h2 id="{section}">' in page
    assert page.count("<svg") == 4  # fleet state per day, distributions, growth, drain timeline
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert 'class="n">6</div><div class="l">ready' in page
    assert "reset the GPU (nvidia-smi -r -i &lt;gpu&gt;) or reboot" in page


def test_html_is_self_contained(page):
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:|//)', page)
    assert "@import" not in page and not re.search(r"url\((?!#)", page)  # only in-page refs (SVG clip paths)
    assert "default-src 'none'" in page  # CSP: even a missed escape could not load or run anything


def test_html_escapes_hostile_node_names_and_messages(page, report):
    assert HOSTILE not in page and HOSTILE_MSG not in page
    assert "<img" not in page
    assert html.escape(HOSTILE, quote=True) in page
    assert html.escape("</td><img src=x onerror=alert(1)>", quote=True) in page
    # the risk table's evidence (from analysis.risk.rank_nodes) carries the hostile message, escaped
    risk = page[page.index('<h2 id="risk">'):]
    risk = risk[:risk.index("<h2", 4)]
    assert html.escape(HOSTILE, quote=True) in risk and "<img" not in risk
    # the fleet ranking (the default since issue 16) shows each node's heaviest evidence row; every row,
    # the hostile message included, is in the "why" CSV, as data
    from healthcheck.report.tables import csv_tables

    assert "FAIL host.mounts [/scratch] in 1 of the last 5 runs, now too: </td><img src=x" in \
        csv_tables(report)["why"]
    # in the SVG labels too: plots.label() keeps it printable, then it is escaped
    assert "&lt;script&gt;" in page


def test_plot_labels_are_sanitised():
    assert label("a\x1b[31mb\u202e" + "x" * 100, 20) == "a?[31mb?xxxxxxxxx..."


def test_html_without_plots(report):
    page = render_html(report, plots=False)
    assert "<svg" not in page and '<h2 id="perf">' in page


def test_markdown_sections_and_escaping(report):
    text = render_markdown(report)
    for title in ["## Fleet summary", "## Findings and recommended actions (6)", "## Failing checks, ranked",
                  "## Nodes ranked by risk", "## Performance distributions", "## Error counter growth", "## Drains"]:
        assert title in text
    body = "\n".join(line.removeprefix("> ") for line in text.splitlines())  # our own blockquotes aside
    assert HOSTILE not in text and not re.search(r"(?<!\\)[<>]", body)  # every < > backslash-escaped
    for line in text.splitlines():  # a hostile "|" never adds a column
        if line.startswith("| ") and HOSTILE[:8] not in line:
            continue
        if line.startswith("| "):
            assert len(re.findall(r"(?<!\\)\|", line)) in (4, 6, 8, 9, 10)
    # grouped as the HTML (status, kind, check, nodes, which, ...); a cell escapes only what it needs
    assert "| fail | check | gpu.row_remap | 1 | gpu03 | gpu1 | gpu03 [gpu1]: row remap pending" in text


def test_md_escape():
    assert md("a|b\n<c>") == "a\\|b \\<c\\>"
    assert md(None) == ""


def test_empty_history_html_and_markdown_say_no_data():
    rep = build_report({}, SINCE, NOW)
    page = render_html(rep)
    assert 'class="nodata">No data' in page and "<svg" not in page
    assert '<h2 id="fleet">' in page and '<h2 id="findings">' not in page
    assert "No data" in render_markdown(rep)


def test_healthy_fleet_sections_say_nothing_to_do():
    frames = make_frames()
    for name in ("results", "actions"):
        frames[name] = frames[name].iloc[0:0]
    frames["runs"] = frames["runs"].assign(status="pass")
    m = frames["metrics"]
    frames["metrics"] = m[m["name"] == "temperature_c"].assign(value=60.0)
    page = render_html(build_report(frames, SINCE, NOW))
    assert "Nothing to act on." in page and "No check failed or warned" in page
    assert "No drain recorded" in page and "No error counter grew" in page
