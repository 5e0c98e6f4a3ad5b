"""The man page is generated from the click commands and the exit-code table: the committed
docs/healthcheck.1 is what the generator writes now (regenerate: python -m healthcheck.cli.manpage >
docs/healthcheck.1)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from healthcheck import __version__
from healthcheck.core import exitcodes
from healthcheck.cli import cli
from healthcheck.cli.manpage import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "healthcheck.1"


def test_the_committed_man_page_is_current():
    assert PAGE.read_text() == render(cli, __version__), "regenerate: python -m healthcheck.cli.manpage > docs/healthcheck.1"


def test_every_command_and_every_exit_code_is_in_it():
    text = render(cli, __version__)
    for name, command in cli.commands.items():
        assert f".SS healthcheck {name}\n" in text
    for code, name, _ in exitcodes.TABLE:
        assert f".B {code}\n{name}:" in text


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed")
def test_groff_renders_it_without_warnings():
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", str(PAGE)], capture_output=True, text=True, timeout=60)
    import re

    plain = re.sub(".\b", "", done.stdout)  # bold and underline are overstrikes
    assert done.returncode == 0 and "EXIT STATUS" in plain and "healthcheck fabric check" in plain
    assert not [line for line in done.stderr.splitlines() if "warning" in line], done.stderr[:2000]
