"""CLI contract: every command documents itself with an example; usage/config errors exit 2 without a
traceback; `healthcheck check` stays lean (no pandas, sqlalchemy, numpy, rich)."""
from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from healthcheck.cli import cli

HEAVY = ("pandas", "sqlalchemy", "numpy", "rich")


def _commands(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))


@pytest.mark.parametrize("path", [p for p, _ in _commands(cli)], ids=lambda p: " ".join(p))
def test_every_command_has_help_with_an_example(path):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output
    assert "healthcheck " + " ".join(path[:1]) in result.output


def test_top_level_help_lists_the_commands():
    result = CliRunner().invoke(cli, ["--help"])
    for name in ("check", "collect", "parse", "config", "checks"):
        assert name in result.output


def test_bad_config_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "site.toml"
    bad.write_text('[class.a]\nnodes = "gpu[1-2]"\ngpu_count = "x"\n')
    result = CliRunner().invoke(cli, ["config", "validate", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:3:" in result.output and "Traceback" not in result.output


def test_parse_rejects_garbage_with_exit_2(tmp_path):
    junk = tmp_path / "x.txt"
    junk.write_text("hello world\n")
    result = CliRunner().invoke(cli, ["parse", "nvidia-smi", str(junk)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def _run_check_and_list_modules(args):
    code = (
        "import sys, json\n"
        "from healthcheck.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "print('\\nMODULES=' + json.dumps(sorted(sys.modules)))\n"
        "print('EXIT=' + str(code))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "MODULES=" in proc.stdout, proc.stderr
    mods = json.loads(proc.stdout.split("MODULES=")[1].splitlines()[0])
    return proc, mods


def test_check_imports_nothing_heavy(tmp_path):
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc").mkdir()
    proc, mods = _run_check_and_list_modules(
        ["check", "--format", "json", "--sysfs-root", str(tmp_path / "sys"),
         "--proc-root", str(tmp_path / "proc"), "--node", "n1"])
    report = json.loads(proc.stdout.split("\nMODULES=")[0])
    assert report["node"] == "n1" and report["results"]
    loaded = [m for m in mods if m.split(".")[0] in HEAVY]
    assert loaded == [], f"heavy modules imported by `healthcheck check`: {loaded}"
    # no GPU on the (empty) bus: pynvml is not even imported
    assert "pynvml" not in mods


def test_internal_error_exits_3_without_traceback(monkeypatch, capsys):
    import healthcheck.pipeline.judge
    from healthcheck.cli import main

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(healthcheck.pipeline.judge, "judge", broken)
    monkeypatch.delenv("HEALTHCHECK_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["check", "--bundle", str(Path(__file__).parent), "--format", "json"])
    assert info.value.code == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: boom" in err and "Traceback" not in err


def test_parse_commands_print_facts(tmp_path):
    from tests.conftest import FIXTURES

    xml = FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml"
    result = CliRunner().invoke(cli, ["parse", "nvidia-smi", str(xml), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["gpus"]) == 8 and data["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    result = CliRunner().invoke(cli, ["parse", "nvidia-smi", str(xml)])
    assert result.output.startswith("nvidia-smi xml: 8 GPUs")
    log = tmp_path / "kern.log"
    log.write_text("[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    result = CliRunner().invoke(cli, ["parse", "kernel-log", str(log)])
    assert result.exit_code == 0 and "Xid 79" in result.output and "0000:3b:00.0" in result.output


def test_check_records_the_run_in_a_spool(tmp_path):
    from healthcheck.spool.store import read_all
    from tests.conftest import FIXTURES

    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "nvidia-smi-q-x.xml").write_text(
        (FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml").read_text())
    result = CliRunner().invoke(cli, ["check", "--bundle", str(bundle), "--format", "json",
                                      "--spool", str(tmp_path / "spool")])
    assert result.exit_code == 0, result.output
    records, corrupt = read_all(str(tmp_path / "spool"))
    assert not corrupt and len(records) == 1
    run = records[0]
    assert run["kind"] == "run" and run["node"] == "b" and run["context"] == "check"
    assert len(run["run_id"]) == 32 and run["results"]


# ------------------------------------------------------------------ honest CLI (issue 14, item 10)


def _bundle(tmp_path):
    from tests.conftest import FIXTURES

    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "nvidia-smi-q-x.xml").write_text(
        (FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml").read_text())
    return bundle


@pytest.mark.parametrize("args, named", [
    (["--only", "nosuch.*"], ["--only 'nosuch.*' matches no check", "closest:"]),
    (["--only", "gpu.ecc.mod"], ["--only 'gpu.ecc.mod'", "gpu.ecc.mode"]),
    (["--skip", "hst.load"], ["--skip 'hst.load'", "host.load"]),
    (["--only", "gpu.*", "--skip", "gpu.*"], ["leaves no check to run"]),
])
def test_check_patterns_that_select_nothing_exit_2_with_closest_names(tmp_path, args, named):
    result = CliRunner().invoke(cli, ["check", "--bundle", str(_bundle(tmp_path)), "--format", "json", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and '"status"' not in result.output  # no PASS of 0 checks
    for words in named:
        assert words in result.output


def test_check_skip_removes_the_checks_it_names(tmp_path):
    result = CliRunner().invoke(cli, ["check", "--bundle", str(_bundle(tmp_path)), "--format", "json",
                                      "--only", "gpu.*", "--skip", "gpu.ecc.*"])
    assert result.exit_code == 0, result.output
    checks = {r["check"] for r in json.loads(result.output)["results"]}
    assert "gpu.count" in checks and not {c for c in checks if c.startswith("gpu.ecc.")}


def test_json_output_carries_schema_version(tmp_path):
    from healthcheck.output.render import SCHEMA_VERSION

    result = CliRunner().invoke(cli, ["check", "--bundle", str(_bundle(tmp_path)), "--format", "json"])
    data = json.loads(result.output)
    assert data["schema_version"] == SCHEMA_VERSION == 1
    assert list(data)[0] == "schema_version" and data["results"]


def test_error_results_show_in_text_with_what_to_do_next(tmp_path):
    bundle = _bundle(tmp_path)
    xml = bundle / "nvidia-smi-q-x.xml"
    text = xml.read_text()
    assert "<current_ecc>Enabled</current_ecc>" in text
    xml.write_text(text.replace("<current_ecc>Enabled</current_ecc>", "<current_ecc>Unknown Error</current_ecc>", 1))
    result = CliRunner().invoke(cli, ["check", "--bundle", str(bundle), "--only", "gpu.ecc.mode"])
    assert result.exit_code == 0, result.output  # ERROR: could not judge, exit 0 (only FAIL exits 1)
    lines = result.output.splitlines()
    assert any(line.strip().startswith("ERROR gpu.ecc.mode") and "Unknown Error" in line for line in lines)
    assert "next: 1 ERROR result" in result.output
    assert "collect a bundle" in result.output
