"""`healthcheck fabric consistency` (the click object, run with CliRunner): a directory of real
`healthcheck check --format json` outputs, a JSON-lines file of facts, a declared set; exit codes."""
from __future__ import annotations

import json

from click.testing import CliRunner

from healthcheck.checks.host import versions as versions_check
from healthcheck.cli.fabric_node import consistency
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import Snapshot, Verdict
from healthcheck.output.render import render

BASE = {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5", "kernel": "5.15.0-105-generic"}


def run(*args):
    return CliRunner().invoke(consistency, [str(a) for a in args])


def check_output(node: str, found: dict) -> str:
    snap = Snapshot(node=node, taken_at="2026-12-03T00:00:00Z", versions=found)
    return render(Verdict.of(node, versions_check(snap, Expectations(), {}), "2026-12-03T00:00:00Z", 0.1), "json")


def test_directory_of_check_outputs_odd_driver_exit_1(tmp_path):
    for i in range(1, 5):
        found = dict(BASE, driver="535.161.08") if i == 3 else BASE
        (tmp_path / f"gpu00{i}.json").write_text(check_output(f"gpu00{i}", found))
    (tmp_path / "notes.txt").write_text("not read")
    result = run(tmp_path)
    assert result.exit_code == 1, result.output
    assert "4 node(s) gpu[001-004]: 1 item(s) differ" in result.output
    assert "535.161.08 on gpu003" in result.output
    data = json.loads(run(tmp_path, "--format", "json").output)
    driver = next(i for i in data["items"] if i["item"] == "driver")
    assert driver["majority_nodes"] == "gpu[001-002,004]" and driver["odd"] == [
        {"value": "535.161.08", "nodes": "gpu003"}]


def test_jsonl_consistent_exit_0_and_declared_set(tmp_path):
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps({"node": f"n{i}", "facts": BASE, "env": {"NCCL_IB_HCA": "mlx5"}}) + "\n"
                             for i in range(3)))
    ok = run(facts)
    assert ok.exit_code == 0 and "all items consistent" in ok.output
    declared = tmp_path / "software.toml"
    declared.write_text('driver = "560.*"\nNCCL_IB_HCA = "mlx5"\n')
    off = run(facts, "--expect", declared)
    assert off.exit_code == 1 and "expected 560.*" in off.output and "550.54.15 on n[0-2]" in off.output
    section = tmp_path / "c.toml"
    section.write_text('[consistency]\nexpected = { driver = "550.*" }\nignore = ["kernel"]\n')
    assert run(facts, "--expect", section).exit_code == 0


def test_ignore_option(tmp_path):
    facts = tmp_path / "f.json"
    facts.write_text(json.dumps([{"node": "a", "versions": dict(BASE, kernel="6.8")}, {"node": "b", "versions": BASE},
                                 {"node": "c", "versions": BASE}]))
    assert run(facts).exit_code == 1
    assert run(facts, "--ignore", "kernel").exit_code == 0


def test_bad_inputs_are_usage_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(empty).exit_code == 2 and "no *.json" in run(empty).output
    assert run(tmp_path / "absent").exit_code == 2
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"node": "a"}\n{oops\n')
    result = run(broken)
    assert result.exit_code == 2 and "b.jsonl:2: not a JSON object" in result.output
    nameless = tmp_path / "n.json"
    nameless.write_text('{"versions": {"driver": "1"}}')
    assert run(nameless).exit_code == 2 and "needs a \"node\"" in run(nameless).output
    bad_expect = tmp_path / "x.toml"
    bad_expect.write_text("driver = [")
    ok = tmp_path / "ok.json"
    ok.write_text('{"node": "a", "versions": {"driver": "1"}}')
    assert run(ok, "--expect", bad_expect).exit_code == 2
