"""Issue 35.6: `config validate` reports every problem of the file in one run, each at its line, and
suggests the name a misspelt key, section or check was meant to be."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from healthcheck.cli.main import cli
from healthcheck.config import ConfigError, loads
from healthcheck.config.problems import all_problems

FOUR_TYPOS = """\
[defaults]
gpus = 8
mem_total_gib = "x"

[slurmm]
foo = 1

[defaults.thresholds."gpu.temprature"]
fail = true

[slurm]
state_dri = "/x"
"""


def test_every_problem_in_one_run_each_at_its_line():
    found = all_problems(FOUR_TYPOS, "site.toml")
    assert sorted(p.line for p in found) == [2, 3, 5, 8, 12]
    assert all(str(p).startswith(f"site.toml:{p.line}: ") for p in found)
    assert all_problems("[defaults]\ngpu_count = 8\n", "ok.toml") == []


@pytest.mark.parametrize("text, meant", [
    ("[slurm]\nstate_dri = '/x'\n", "did you mean 'state_dir'?"),
    ("[slurmm]\nx = 1\n", "did you mean 'slurm'?"),
    ("[defaults.thresholds.\"gpu.temprature\"]\nfail = true\n", "did you mean 'gpu.temperature'?"),
    ("[defaults]\ngpus = 8\n", "did you mean 'gpu_count' or 'gpu_model' or 'gpu_models'?"),
    ("[defaults]\nib = { port = 8 }\n", "did you mean 'ports'?"),
])
def test_a_misspelt_name_gets_a_suggestion(text, meant):
    with pytest.raises(ConfigError) as err:
        loads(text, "t.toml")
    assert str(err.value).endswith(meant), str(err.value)


def test_no_suggestion_when_nothing_is_close():
    with pytest.raises(ConfigError) as err:
        loads("[defaults]\nzzz = 1\n", "t.toml")
    assert "did you mean" not in str(err.value)


def test_leaving_out_a_line_that_breaks_the_syntax_stops_without_inventing_errors():
    text = '[defaults]\nbogus = [\n  1,\n  2,\n]\ngpu_count = "eight"\n'
    found = all_problems(text, "t.toml")
    assert [p.line for p in found] == [2]  # the rest of the broken array is not reported as errors


def test_config_validate_prints_every_problem_and_exits_2(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(FOUR_TYPOS)
    result = CliRunner().invoke(cli, ["config", "validate", str(path)])
    assert result.exit_code == 2
    assert "(5 problems; the others above)" in result.output
    for line in (2, 3, 5, 8, 12):
        assert f"site.toml:{line}:" in result.output
    data = json.loads(CliRunner().invoke(cli, ["config", "validate", str(path), "--format", "json"]).output)
    assert data["valid"] is False and len(data["errors"]) == 5 and data["error"] in data["errors"]
    assert [int(e.split(":")[1]) for e in data["errors"]] == [2, 3, 5, 8, 12]
