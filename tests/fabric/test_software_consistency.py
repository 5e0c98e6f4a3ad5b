"""Software consistency across nodes: the majority per item and the odd nodes (folded), a declared
set, the record shapes accepted (facts, burn-in results, real `healthcheck check --format json`
output made by the real check and renderer), and bad input named."""
from __future__ import annotations

import json

import pytest

from healthcheck.checks.host import versions as versions_check
from healthcheck.core.expectations import Expectations
from healthcheck.fabric import software
from healthcheck.fabric.software import NodeFacts, Settings, check_consistency, node_facts
from healthcheck.core.model import Snapshot, Verdict
from healthcheck.output.render import render

BASE = {"driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5", "ofed": "24.04-0.7.0.0",
        "hca_firmware": "28.39.1002", "vbios": "96.00.89.00.01", "kernel": "5.15.0-105-generic"}


def fleet(n: int = 4, **odd) -> list[NodeFacts]:
    """n nodes gpu001.. with BASE facts; odd = {node: {item: value}} overrides."""
    out = []
    for i in range(1, n + 1):
        name = f"gpu{i:03d}"
        facts = dict(BASE, **odd.get(name, {}))
        out.append(NodeFacts(name, {k: v for k, v in facts.items() if v is not None}))
    return out


def item(report, name):
    return next(i for i in report.items if i.item == name)


def test_all_same_is_consistent():
    report = check_consistency(fleet())
    assert report.consistent and report.nodes == "gpu[001-004]"
    assert item(report, "driver").majority_nodes == "gpu[001-004]"
    assert software.render_text(report).splitlines()[0].endswith("all items consistent")


def test_node_with_odd_driver_named_and_others_folded():
    report = check_consistency(fleet(gpu003={"driver": "535.161.08"}))
    assert not report.consistent
    driver = item(report, "driver")
    assert (driver.majority, driver.majority_nodes, driver.odd) == (
        "550.54.15", "gpu[001-002,004]", [("535.161.08", "gpu003")])
    assert [i.item for i in report.items if not i.consistent] == ["driver"]
    text = software.render_text(report)
    assert "DIFF driver" in text and "535.161.08 on gpu003" in text


def test_missing_item_is_odd_and_no_majority_lists_every_value():
    report = check_consistency(fleet(gpu002={"ofed": None}))
    assert item(report, "ofed").odd == [(software.NOT_REPORTED, "gpu002")]
    split = check_consistency(fleet(2, gpu002={"nccl": "2.19.3"}))
    nccl = item(split, "nccl")
    assert nccl.majority is None and sorted(nccl.odd) == [("2.19.3", "gpu002"), ("2.21.5", "gpu001")]


def test_per_gpu_lists_compared_as_sets():
    report = check_consistency(fleet(3, gpu001={"vbios": "96.00.1,96.00.2"}, gpu002={"vbios": "96.00.2,96.00.1"},
                                     gpu003={"vbios": "96.00.2,96.00.1,96.00.2"}))
    assert item(report, "vbios").consistent


def test_declared_set_overrides_the_majority():
    nodes = fleet(gpu004={"driver": "560.35.03"})
    declared = {"expected": {"driver": "560.*", "kernel": "5.15.0-105-generic"}}
    report = check_consistency(nodes, software.validate(declared))
    driver = item(report, "driver")
    assert driver.expected == "560.*" and driver.odd == [("550.54.15", "gpu[001-003]")]
    assert item(report, "kernel").consistent
    assert item(report, "nccl").consistent  # not declared: the majority decides


def test_environment_only_nccl_and_ucx_kept_and_unset_counts():
    records = [{"node": f"gpu00{i}", "versions": BASE,
                "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "UCX_TLS": "rc", "AWS_SECRET_ACCESS_KEY": "x",
                        **({"NCCL_DEBUG": "INFO"} if i == 2 else {})}} for i in (1, 2, 3)]
    facts = [node_facts(r, "test") for r in records]
    assert all("AWS_SECRET_ACCESS_KEY" not in f.facts for f in facts)
    report = check_consistency(facts)
    assert item(report, "NCCL_DEBUG").odd == [("INFO", "gpu002")]
    assert item(report, "NCCL_DEBUG").majority == software.UNSET
    assert item(report, "NCCL_IB_HCA").consistent
    assert report.items[-1].item.startswith(("NCCL_", "UCX_"))  # versions first, environment after
    must_unset = check_consistency(facts, software.validate({"expected": {"NCCL_DEBUG": software.UNSET}}))
    assert item(must_unset, "NCCL_DEBUG").odd == [("INFO", "gpu002")]


def test_burnin_record_and_container_image():
    record = {"node": "gpu009", "kind": "run", "started_at": "2026-12-01T00:00:00Z",
              "burnin": {"versions": {"driver": "550.54.15"}}, "container_image": "sha256:abc"}
    facts = node_facts(record, "r")
    assert facts.facts == {"driver": "550.54.15", "container_image": "sha256:abc"}


def _check_json(node: str, found: dict, expected: dict | None = None) -> str:
    """What `healthcheck check --format json` prints for these versions (the real check and renderer)."""
    snap = Snapshot(node=node, taken_at="2026-12-03T00:00:00Z", versions=found)
    findings = versions_check(snap, Expectations(versions=expected or {}), {})
    return render(Verdict.of(node, findings, "2026-12-03T00:00:00Z", 0.1), "json")


def test_check_json_output_informational_and_per_item_forms():
    informational = json.loads(_check_json("gpu001", dict(BASE, vbios="96.00.1,96.00.2")))
    assert node_facts(informational, "f").facts == dict(BASE, vbios="96.00.1,96.00.2")
    judged = json.loads(_check_json("gpu002", dict(BASE, driver="535.161.08"),
                                    {"driver": "550.54.15", "kernel": "5.15.0-105-generic", "ofed": "24.04*",
                                     "nccl": "2.21.5"}))
    facts = node_facts(judged, "f").facts
    assert facts["driver"] == "535.161.08" and facts["kernel"] == "5.15.0-105-generic"
    assert "cuda" not in facts  # not in the expected set: the per-item form only lists those


def test_records_from_text_shapes_and_latest_record_wins():
    lines = "\n".join(json.dumps({"node": "gpu001", "started_at": t, "versions": {"driver": d}})
                      for t, d in (("2026-12-02T00:00:00Z", "550.54.15"), ("2026-12-01T00:00:00Z", "535.1")))
    records = software.records_from_text("# comment\n" + lines + "\n\n", "f.jsonl")
    assert len(records) == 2
    facts, notes = software.latest_per_node([node_facts(r, "f") for r in records])
    assert facts[0].facts["driver"] == "550.54.15" and notes == ["gpu001: 2 records, the latest used"]
    assert len(software.records_from_text(json.dumps([{"node": "a"}, {"node": "b"}]), "f")) == 2
    assert software.records_from_text(json.dumps({"node": "a"}), "f") == [{"node": "a"}]


@pytest.mark.parametrize("text, words", [
    ('{"node": "a"}\nnot json\n', "f:2: not a JSON object"),
    ('[1, 2]', "only objects"),
    ('{"node": "a"}\n[1]\n', "f:2: a JSON line must be an object"),
])
def test_bad_files_named_with_line(text, words):
    with pytest.raises(software.ConsistencyError, match=words):
        software.records_from_text(text, "f")


@pytest.mark.parametrize("record, words", [
    ({"versions": {}}, "needs a \"node\""),
    ({"node": "a b"}, "needs a \"node\""),
    ({"node": "a", "versions": ["x"]}, "must be an object"),
    ({"node": "a", "versions": {"driver": {"x": 1}}}, "must be a string"),
    ({"node": "a", "env": "NCCL_DEBUG=INFO"}, "env must be an object"),
    ({"node": "a", "versions": {"driver": "x" * 5000}}, "characters long"),
])
def test_bad_records_named(record, words):
    with pytest.raises(software.ConsistencyError, match=words):
        node_facts(record, "f")


@pytest.mark.parametrize("section, words", [
    ({"expected": {"driver": ""}}, "expected.driver"),
    ({"expected": {"driver": "*"}}, "expected.driver"),
    ({"expected": "550"}, "must be a table"),
    ({"ignore": "kernel"}, "ignore must be a list"),
    ({"colour": 1}, "unknown key"),
])
def test_bad_settings_named(section, words):
    with pytest.raises(software.ConsistencyError, match=words):
        software.validate(section)


def test_no_nodes_is_an_error_and_ignore_drops_items():
    with pytest.raises(software.ConsistencyError, match="no node records"):
        check_consistency([])
    report = check_consistency(fleet(gpu001={"kernel": "6.8.0"}), Settings(ignore=("kernel",)))
    assert report.consistent and "kernel" not in {i.item for i in report.items}


def test_to_dict_is_json():
    data = json.loads(json.dumps(software.to_dict(check_consistency(fleet(gpu004={"nccl": "2.19.3"})))))
    assert data["consistent"] is False
    nccl = next(i for i in data["items"] if i["item"] == "nccl")
    assert nccl["odd"] == [{"value": "2.19.3", "nodes": "gpu004"}]
