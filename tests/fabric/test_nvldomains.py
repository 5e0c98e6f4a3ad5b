"""Issue 33.6: the declared NVLink domains against the cluster UUID and clique each node's GPUs report."""
from __future__ import annotations

from healthcheck.core.model import GpuInfo
from healthcheck.fabric.nvldomains import compare

A = "8a2b0c5e-0000-4000-8000-00000000000a"
B = "8a2b0c5e-0000-4000-8000-00000000000b"


def gpus(uuid: str | None, clique: int | None, n: int = 4) -> list[GpuInfo]:
    return [GpuInfo(index=i, fabric_cluster_uuid=uuid, fabric_clique_id=clique) for i in range(n)]


def rack(prefix: str, first: int, count: int = 18) -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(first, first + count)]


def test_two_healthy_racks_match_their_declaration():
    declared = {"nvl01": rack("gb", 1), "nvl02": rack("gb", 19)}
    seen = {n: gpus(A, 1) for n in declared["nvl01"]} | {n: gpus(B, 1) for n in declared["nvl02"]}
    report = compare(declared, seen)
    assert report.ok, report.deviations
    assert report.domains["nvl01"] == {"nodes": 18, "identity": [A, 1], "agree": 18}


def test_every_deviation_is_named():
    declared = {"nvl01": rack("gb", 1), "nvl02": rack("gb", 19), "nvl03": rack("gb", 37)}
    seen = {n: gpus(A, 1) for n in declared["nvl01"]}
    seen |= {n: gpus(B, 1) for n in declared["nvl02"]}
    seen |= {n: gpus(B, 1) for n in declared["nvl03"]}  # two racks that NVML calls one domain
    seen["gb005"] = gpus(A, 2)  # a tray in another clique
    seen["gb006"] = gpus("00000000-0000-0000-0000-000000000000", 0)  # not taken into the fabric
    seen["gb007"] = gpus(A, 1, 2) + gpus(B, 1, 2)  # its GPUs disagree
    del seen["gb008"]  # no reading
    seen["gb100"] = gpus(A, 1)  # in nvl01's domain, declared in none
    kinds = {(d.kind, tuple(d.nodes), d.domain) for d in compare(declared, seen).deviations}
    assert kinds == {
        ("odd_member", ("gb005",), "nvl01"),
        ("no_domain", ("gb006",), "nvl01"),
        ("split_node", ("gb007",), None),
        ("no_reading", ("gb008",), "nvl01"),
        ("domains_merged", (), "nvl02, nvl03"),
        ("undeclared_member", ("gb100",), "nvl01"),
    }
    messages = " | ".join(d.message for d in compare(declared, seen).deviations)
    assert "gb005 (nvl01): cluster " + A + " clique 2, the domain's other 14 nodes" in messages


def test_a_b200_node_without_a_domain_and_not_declared_is_no_deviation():
    assert compare({}, {"hgx01": gpus(None, None, 8)}).ok


GB200 = "blackwell/nvidia-smi/k8s-test-infra__nvidia-smi-q-x-gb200-4gpu-580.173.02-fabric-completed-clique-2-healthy.txt"
GB300 = "blackwell/nvidia-smi/k8s-test-infra__nvidia-smi-q-x-gb300-4gpu-580.173.02-fabric-completed-clique-32766-healthy.txt"


def test_the_command_reads_real_gb200_and_gb300_outputs_and_names_the_odd_tray(tmp_path):
    """Real `nvidia-smi -q -x` of a GB200 tray (clique 2) and a GB300 tray (clique 32766), read in place and
    written under node names: declared one domain, the GB300 tray is the odd one out."""
    import json

    import pytest
    from click.testing import CliRunner

    from healthcheck.cli.main import cli
    from tests.conftest import CORPUS

    if not (CORPUS / GB200).is_file() or not (CORPUS / GB300).is_file():
        pytest.skip("corpus absent")
    smi = tmp_path / "smi"
    smi.mkdir()
    for node in ("gb01", "gb02", "gb03"):
        (smi / f"{node}.xml").write_text((CORPUS / GB200).read_text())
    (smi / "gb04.xml").write_text((CORPUS / GB300).read_text())
    site = tmp_path / "site.toml"
    site.write_text('[topology.nvlink]\nnvl01 = "gb[01-04]"\n')
    files = sorted(str(p) for p in smi.iterdir())
    result = CliRunner().invoke(cli, ["fabric", "nvlink-domains", "--config", str(site), *files])
    assert result.exit_code == 1, result.output
    assert "odd_member: gb04 (nvl01): cluster" in result.output and "clique 32766" in result.output
    doc = json.loads(CliRunner().invoke(cli, ["fabric", "nvlink-domains", "--config", str(site), "--format",
                                              "json", *files]).output)
    assert doc["domains"]["nvl01"]["agree"] == 3 and [d["kind"] for d in doc["deviations"]] == ["odd_member"]
    ok = CliRunner().invoke(cli, ["fabric", "nvlink-domains", "--config", str(site), *files[:3]])
    assert ok.exit_code == 1 and "no_reading: gb04" in ok.output  # declared, no output given
    site.write_text('[topology.rack]\nr1 = "gb[01-04]"\n')
    bad = CliRunner().invoke(cli, ["fabric", "nvlink-domains", "--config", str(site), *files])
    assert bad.exit_code == 2 and "no [topology.nvlink] table" in bad.output
