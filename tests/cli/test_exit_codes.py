"""One exit-code table (healthcheck.core.exitcodes) for every command: usage errors 2 everywhere, a
database that cannot be used 6 (not 2, which is usage), a schema newer than this tool 6, the sweep with
Slurm unreachable 6 with a sentence (not an argv fragment), an empty report window 1."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from healthcheck.core import exitcodes
from healthcheck.cli import cli


def invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env)


def test_codes_are_distinct_and_documented():
    codes = [code for code, _, _ in exitcodes.TABLE]
    assert codes == sorted(set(codes)) == list(range(len(codes)))
    assert all(meaning for _, _, meaning in exitcodes.TABLE)
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    for code, name, _ in exitcodes.TABLE:
        assert f"| {code} | {name} |" in readme, f"README's exit-status table lacks {code} {name}"


@pytest.mark.parametrize("args", [
    ["check", "--only", "no.such.check"],
    ["config", "validate", "/nonexistent/site.toml"],
    ["parse", "ibstat", "/nonexistent/out.txt"],
    ["fabric", "check", "--topology", "/nonexistent.toml", "--ibnetdiscover", "/nonexistent.txt"],
    ["report", "--since", "yesterday"],
    ["history", "show", "--since", "yesterday"],
])
def test_usage_errors_exit_2(args):
    result = invoke(*args)
    assert result.exit_code == exitcodes.USAGE, result.output


def test_a_database_that_cannot_be_opened_is_unavailable_not_usage(tmp_path):
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'h.sqlite'}"
    for args in (["db", "status", "--db", url], ["history", "show", "--db", url]):
        result = invoke(*args)
        assert result.exit_code == exitcodes.UNAVAILABLE, (args, result.output)
        assert "Traceback" not in result.output


def test_db_status_says_json_and_fails_when_empty(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    result = invoke("db", "status", "--db", url, "--format", "json")
    doc = json.loads(result.output)
    assert doc["schema_version"] == 1 and doc["state"] == "empty" and result.exit_code == exitcodes.FAIL
    assert invoke("db", "upgrade", "--db", url).exit_code == exitcodes.OK
    result = invoke("db", "status", "--db", url, "--format", "json")
    assert json.loads(result.output)["state"] == "current" and result.exit_code == exitcodes.OK


def test_the_sweep_with_slurm_unreachable_is_unavailable_with_a_sentence(tmp_path):
    config = tmp_path / "site.toml"
    config.write_text(f'[slurm]\nscontrol = "{tmp_path / "no-scontrol"}"\nstate_dir = "{tmp_path / "state"}"\n'
                      f'spool_dir = "{tmp_path / "spool"}"\n[sweep]\nresults_root = "{tmp_path / "sweeps"}"\n')
    result = invoke("sweep", "--dry-run", "--config", str(config), "--no-report")
    assert result.exit_code == exitcodes.UNAVAILABLE, result.output
    assert "Slurm could not be used" in result.output and "nothing was changed" in result.output


def test_json_everywhere_carries_a_schema_version(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('[class.a]\nnodes = "gpu[1-4]"\ngpu_count = 8\n')
    for args in (["checks", "--format", "json"], ["config", "validate", str(site), "--format", "json"],
                 ["config", "show", "--config", str(site), "--node", "gpu1", "--format", "json"]):
        result = invoke(*args)
        assert result.exit_code == exitcodes.OK, (args, result.output)
        assert json.loads(result.output)["schema_version"] == 1, args
    bad = tmp_path / "bad.toml"
    bad.write_text("[class.a\n")
    result = invoke("config", "validate", str(bad), "--format", "json")
    doc = json.loads(result.output)
    assert result.exit_code == exitcodes.USAGE and doc["valid"] is False and "bad.toml" in doc["error"]


def test_parse_takes_format_json_and_keeps_json_as_its_alias(tmp_path):
    out = tmp_path / "ibstat.txt"
    out.write_text("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
                   "\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n"
                   "\t\tLink layer: InfiniBand\n")
    a, b = invoke("parse", "ibstat", str(out), "--format", "json"), invoke("parse", "ibstat", str(out), "--json")
    assert a.exit_code == b.exit_code == 0 and json.loads(a.output) == json.loads(b.output)


def test_a_command_without_its_extra_names_the_pip_line(monkeypatch):
    """The node install has no pandas/SQLAlchemy: `healthcheck report` says which extra to install (exit 2)
    instead of an internal error; --help still works."""
    from healthcheck.core import extras

    monkeypatch.setattr(extras, "installed", lambda module: module not in {"pandas", "sqlalchemy"})
    result = invoke("report", "--since", "7d")
    assert result.exit_code == exitcodes.USAGE, result.output
    assert "healthcheck report needs the [history] extra" in result.output and "pip install" in result.output
    assert invoke("history", "show").exit_code == exitcodes.USAGE
    assert invoke("report", "--help").exit_code == exitcodes.OK
    assert invoke("checks", "--format", "json").exit_code == exitcodes.OK  # the node's commands need none


def test_every_json_document_is_an_object_with_a_schema_version(tmp_path):
    """`--format json` documents, lists included (parse, history show), are objects carrying schema_version."""
    smi = tmp_path / "smi.txt"
    smi.write_text("==============NVSMI LOG==============\n\nAttached GPUs : 1\nGPU 00000000:07:00.0\n"
                   "    Product Name : NVIDIA H100 80GB HBM3\n    GPU UUID : GPU-1\n")
    for args in (["parse", "nvidia-smi", str(smi), "--format", "json"],
                 ["parse", "kernel-log", str(smi), "--format", "json"]):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        doc = json.loads(result.output)
        assert isinstance(doc, dict) and doc["schema_version"] == 1, args
