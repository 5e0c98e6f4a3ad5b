"""A strict reader of the Prometheus text exposition format (0.0.4) for the tests, and the rules
promtool's linter does not enforce but docs/prometheus.md promises: one HELP and one TYPE per family
before its samples, families contiguous, no series twice, base units, counters and only counters
ending in ``_total``, no ``_count``/``_sum``/``_bucket`` on gauges, no word twice in a name.

``promtool()`` finds promtool: absent, the test skips, unless the environment variable CI is set
(the CI image installs Debian's ``prometheus`` package, so a missing promtool there is a failure)."""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

import pytest

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
# Words that are not base units (promtool's abbreviations and the units our checks measure in).
NOT_BASE_UNITS = {"c", "w", "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib",
                  "pct", "percent", "fraction", "gbps", "milliseconds", "minutes", "hours", "days",
                  "kilobytes", "megabytes", "gigabytes", "fahrenheit", "kelvin"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing on CI (install Debian's prometheus package)")
        pytest.skip("promtool not installed (Debian: apt-get install prometheus)")
    return path


def promtool_check_metrics(text: str) -> None:
    """promtool check metrics passes on ``text``: it parses and its linter has nothing to say."""
    proc = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), \
        proc.stdout + proc.stderr


class Family:
    def __init__(self, name: str):
        self.name, self.help, self.type = name, None, None
        self.samples: list[tuple[dict[str, str], float]] = []


def parse(text: str) -> dict[str, Family]:
    """name -> Family; raises AssertionError on anything the format or our rules forbid."""
    assert text.endswith("\n") and "\r" not in text
    families: dict[str, Family] = {}
    current: Family | None = None
    closed: set[str] = set()
    series: set[tuple] = set()
    for number, line in enumerate(text.splitlines(), 1):
        where = f"line {number}: {line!r}"
        assert line, f"{where}: empty line"
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) ([^ ]+) (.*)", line)
            assert m, where
            kind, name, rest = m.groups()
            assert NAME.fullmatch(name) and name not in closed, where
            if current is None or current.name != name:
                if current is not None:
                    closed.add(current.name)
                assert name not in families, f"{where}: family {name} split"
                current = families[name] = Family(name)
            assert not current.samples, f"{where}: metadata after samples"
            if kind == "HELP":
                assert current.help is None and rest.strip(), where
                current.help = rest
            else:
                assert current.type is None and rest in ("gauge", "counter"), where
                current.type = rest
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, where
        name, body, value = m.groups()
        assert current is not None and current.name == name, f"{where}: sample outside its family"
        assert current.help and current.type, f"{where}: no HELP or TYPE before the samples"
        labels: dict[str, str] = {}
        if body:
            pos = 0
            while pos < len(body):
                lm = LABEL.match(body, pos)
                assert lm, f"{where}: bad label at {pos}"
                assert lm.group(1) not in labels, f"{where}: label twice"
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
                if pos < len(body):
                    assert body[pos] == ",", where
                    pos += 1
        number_value = float(value)  # NaN, +Inf accepted by float() as by Prometheus
        key = (name, tuple(sorted(labels.items())))
        assert key not in series, f"{where}: series twice"
        series.add(key)
        current.samples.append((labels, number_value))
    return families


def lint_names(families: dict[str, Family]) -> None:
    """The naming rules of docs/prometheus.md on every family."""
    for name, fam in families.items():
        words = name.split("_")
        assert name.startswith("healthcheck_") and name == name.lower(), name
        assert not NOT_BASE_UNITS & set(words), f"{name}: not in base units"
        assert len(words) == len(set(words)), f"{name}: a word twice"
        assert not {"gauge", "counter", "histogram", "summary"} & set(words), f"{name}: a type in the name"
        if fam.type == "counter":
            assert name.endswith("_total"), name
            assert all(v >= 0 or math.isnan(v) for _, v in fam.samples), name
        else:
            assert words[-1] not in ("total", "count", "sum", "bucket"), name
        for labels, _ in fam.samples:
            assert labels.get("node"), f"{name}: no node label"
