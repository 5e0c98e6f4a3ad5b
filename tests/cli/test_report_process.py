"""`healthcheck report` sets its own process up for a large read before its work: transparent huge pages off
(core/hugepages.py) and the imported modules' objects frozen out of the cyclic collector's passes."""
from __future__ import annotations

import gc

from click.testing import CliRunner

from healthcheck.cli import cli
from healthcheck.core import hugepages


def test_the_report_command_sets_its_process_up_before_its_work(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(hugepages, "disable_thp", lambda: calls.append("thp") or True)
    real_freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    db = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert CliRunner().invoke(cli, ["db", "upgrade", "--db", db]).exit_code == 0
    try:
        result = CliRunner().invoke(cli, ["report", "--db", db, "--since", "7d"])
    finally:
        monkeypatch.setattr(gc, "freeze", real_freeze)
    # an empty history: the report says so, exit 1 (the setup changed nothing of that); by then the huge pages
    # were asked off first, then the collector's view frozen after the imports
    assert result.exit_code == 1, result.output
    assert calls[:2] == ["thp", "freeze"], calls
