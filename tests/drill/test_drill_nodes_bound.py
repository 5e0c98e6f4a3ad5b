"""`drill prepare --nodes` on admin inputs (issue 30, item 8b): a node set naming more than a drill
site's limit is refused from its bracket ranges, before ClusterShell builds one name (exit 2, a clear
message); the bound itself reads the text once. No cluster, no wall-clock assertion."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import ClusterShell.NodeSet as clustershell
from healthcheck.cli.drill import drill
from healthcheck.drill.cluster import DrillError
from healthcheck.drill.site import MAX_NODES, Site, parse_nodes
from healthcheck.config.topology import nodeset_size_bound

CONF = "ClusterName=x\nSlurmctldPidFile=/run/ctld.pid\nNodeName=node1 Port=1\n"


@pytest.fixture
def built(monkeypatch):
    """The node sets ClusterShell was asked to build."""
    calls = []
    real = clustershell.NodeSet
    monkeypatch.setattr(clustershell, "NodeSet", lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def _prepare(tmp_path, nodes: str):
    conf = tmp_path / "slurm.conf"
    conf.write_text(CONF)
    (tmp_path / "b").mkdir(exist_ok=True)
    return CliRunner().invoke(drill, ["prepare", "--site", str(tmp_path / "site"), "--slurm-conf", str(conf),
                                      "--nodes", nodes, "--bundle", str(tmp_path / "b"),
                                      "--fault-bundle", str(tmp_path / "b")])


@pytest.mark.parametrize("nodes, count", [
    ("node[1-99999999]", "99,999,999"),
    ("node[1-50000],gpu[1-50001]", "100,001"),
    ("r[1-1000]n[1-1000]", "1,000,000"),
    ("node[1-9999999999999999999999]", None),  # more digits than any range: too large
])
def test_prepare_refuses_a_huge_node_set_with_exit_2(tmp_path, built, nodes, count):
    out = _prepare(tmp_path, nodes)
    assert out.exit_code == 2, out.output
    assert "--nodes:" in out.output and f"over the limit of {MAX_NODES:,} for a drill site" in out.output
    if count:
        assert f"names {count} nodes" in out.output
    assert built == []  # refused from the text: no name was built
    assert not (tmp_path / "site").exists()


def test_prepare_still_takes_an_ordinary_node_set(tmp_path):
    out = _prepare(tmp_path, "node[1-3],gpu7")
    assert out.exit_code == 0, out.output
    assert Site.open(str(tmp_path / "site")).nodes == ["gpu7", "node1", "node2", "node3"]


def test_parse_nodes_at_and_past_the_limit():
    assert len(parse_nodes(f"n[1-{MAX_NODES}]")) == MAX_NODES
    with pytest.raises(DrillError, match=f"names {MAX_NODES + 1:,} nodes"):
        parse_nodes(f"n[1-{MAX_NODES + 1}]")
    with pytest.raises(DrillError):
        parse_nodes("node[1-")
    assert parse_nodes("a,b") == ["a", "b"]


def test_a_site_file_naming_too_many_nodes_is_refused(tmp_path):
    with pytest.raises(DrillError, match=f"over the limit of {MAX_NODES:,} for a drill site"):
        Site(str(tmp_path), str(tmp_path / "slurm.conf"), ["n1"] * (MAX_NODES + 1), str(tmp_path), str(tmp_path))


@pytest.mark.parametrize("spec, bound", [
    ("node1", 1),
    ("node[1-4]", 4),
    ("node[1-4],gpu[01-10/2]", 9),
    ("r[1-2]n[1-3]", 6),
    ("node[1-4]!node2", 5),            # an upper bound: terms add
    ("node[1,3,5-6]", 4),
    ("node[1-4", 1),                   # unreadable: ClusterShell rejects it after
])
def test_the_bound_from_the_text(spec, bound):
    assert nodeset_size_bound(spec) == bound


def test_the_bound_stops_at_the_limit_and_reads_long_text_once():
    assert nodeset_size_bound("n[1-1000]m[1-1000]k[1-1000]", limit=10) == 1000  # the first term's product past it
    long = ",".join(f"n{i}" for i in range(200_000))
    assert nodeset_size_bound(long) == 200_000
    assert nodeset_size_bound("[" * 100_000) == 1
