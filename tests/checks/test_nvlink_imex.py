"""nvlink.imex (issue 33): nvidia-imex-ctl -q / -N -j parsed (pure), read through the subprocess seam,
recorded in bundles, and judged only where the node class declares an NVLink domain."""
from __future__ import annotations

import dataclasses
import json

import pytest

from healthcheck.bundles.archive import snapshot_from_bundle, write_bundle
from healthcheck.checks.nvlink_imex import nvlink_imex
from healthcheck.config import default_expectations
from healthcheck.core.expectations import NvlinkDomainExpect
from healthcheck.core.model import GpuInfo, ImexInfo, ImexPeer, ProbeError, Snapshot, Status
from healthcheck.parsers import ParseError
from healthcheck.parsers.imex import parse_imex_domain, parse_imex_query
from healthcheck.pipeline.judge import sources_needed
from healthcheck.probes.imex import DOMAIN, DOMAIN_FILE, QUERY, QUERY_FILE, read_imex
from healthcheck.safeio.subproc import Result

from tests.conftest import CORPUS

PASS, WARN, FAIL, SKIP, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP, Status.ERROR
NO_DOMAIN = default_expectations()
DOMAIN_EXP = dataclasses.replace(NO_DOMAIN, nvlink_domain=NvlinkDomainExpect(size=72, name="block"))


def domain_json(status="UP", peers=None) -> str:
    """A `nvidia-imex-ctl -N -j -H`-shaped answer: 3 nodes, all READY and connected unless changed."""
    peers = peers or {}
    nodes = {}
    for i in range(3):
        conns = {str(j): {"host": f"10.0.0.{j + 1}", "status": "CONNECTED", "changed": False} for j in range(3)}
        node = {"status": "READY", "host": f"10.0.0.{i + 1}", "hostName": f"gb{i + 1:03d}", "connections": conns,
                "changed": False, "version": "580.95.05"}
        for key, value in peers.get(i, {}).items():
            if key == "connections":
                for j, st in value.items():
                    conns[str(j)]["status"] = st
            else:
                node[key] = value
        nodes[str(i)] = node
    return json.dumps({"nodes": nodes, "timestamp": "9/4/2026 00:37:39.905", "status": status})


def _snap(info: ImexInfo | None, node: str = "gb001", **kw) -> Snapshot:
    return Snapshot(node=node, taken_at="2026-01-01T00:00:00Z", imex=info, **kw)


def _info(query="READY", domain=None) -> ImexInfo:
    status, peers = parse_imex_domain(domain or domain_json())
    return ImexInfo(daemon_status=query, domain_status=status, peers=peers)


def _one(snap: Snapshot, exp=DOMAIN_EXP):
    (found,) = nvlink_imex(snap, exp, {})
    return found


# ------------------------------------------------------------------------------------- parsers


def test_query_reads_the_daemon_state():
    assert parse_imex_query("READY\n") == "READY"
    assert parse_imex_query("  WAITING_FOR_PEERS  \n") == "WAITING_FOR_PEERS"
    for bad in ("", "Connection refused\n", "ready-ish\n"):
        with pytest.raises(ParseError):
            parse_imex_query(bad)


def test_domain_json_is_read():
    status, peers = parse_imex_domain(domain_json(peers={1: {"status": "UNAVAILABLE", "connections": {0: "DISCONNECTED"}}}))
    assert status == "UP"
    assert [(p.index, p.host, p.hostname, p.status) for p in peers] == [
        (0, "10.0.0.1", "gb001", "READY"), (1, "10.0.0.2", "gb002", "UNAVAILABLE"), (2, "10.0.0.3", "gb003", "READY")]
    assert peers[1].connections == {"0": "DISCONNECTED", "1": "CONNECTED", "2": "CONNECTED"}


@pytest.mark.parametrize("bad", ["{", "[]", '{"nodes": []}', '{"nodes": {"x": {}}}', "{}", "nothing here\n"])
def test_domain_refuses_what_it_cannot_read(bad):
    with pytest.raises(ParseError):
        parse_imex_domain(bad)


def test_domain_refuses_oversized_input():
    with pytest.raises(ParseError, match="over the limit"):
        parse_imex_domain("{" + " " * (5 * 1024 * 1024) + "}")


IMEX = CORPUS / "blackwell" / "imex"


def _corpus(fragment: str) -> str:
    files = sorted(IMEX.glob(f"*{fragment}*")) if IMEX.is_dir() else []
    if not files:
        pytest.skip("corpus blackwell/imex absent")
    return files[0].read_text(encoding="utf-8")


@pytest.mark.corpus
def test_corpus_two_nodes_all_connected_is_healthy():
    # SOURCES-blackwell: HEALTHY: -q READY; -N 2x2 all C, Domain State UP
    text = _corpus("gh200-2-node-domain-up-all-connected")
    assert parse_imex_query(text) == "READY"
    status, peers = parse_imex_domain(text)
    assert status == "UP" and [p.status for p in peers] == ["READY", "READY"]
    assert all(c == "CONNECTED" for p in peers for c in p.connections.values()) and len(peers[1].connections) == 2
    info = ImexInfo(daemon_status="READY", domain_status=status, peers=peers)
    assert _one(_snap(info, node="10.136.206.47")).status is PASS


@pytest.mark.corpus
def test_corpus_one_node_domain_up_reads_as_ready():
    # SOURCES-blackwell: EDGE: -q READY, -N single node C, Domain State UP, while CUDA's fabric-handle import
    # failed in the same repro: IMEX says nothing about that, so the check passes (the import is a job's)
    text = _corpus("gh200-1-node-domain-up-while-fabric-import-fails")
    status, peers = parse_imex_domain(text)
    assert (parse_imex_query(text), status, len(peers)) == ("READY", "UP", 1)
    assert _one(_snap(ImexInfo("READY", status, peers), node="10.136.206.48")).status is PASS


@pytest.mark.corpus
@pytest.mark.parametrize("fragment", ["daemon-log-570-startup", "daemon-log-570-tail", "dra-driver-pr1465"])
def test_corpus_daemon_logs_are_not_ctl_output(fragment):
    # the IMEX daemon's own logs are not nvidia-imex-ctl output: refused, never misread as a state
    files = sorted(IMEX.glob(f"*{fragment}*")) if IMEX.is_dir() else []
    if not files:
        pytest.skip("corpus blackwell/imex absent")
    with pytest.raises(ParseError):
        parse_imex_query(files[0].read_text(encoding="utf-8"))


def _sized(size: int, gpus_per_node: int | None = 4):
    return dataclasses.replace(NO_DOMAIN, gpu_count=gpus_per_node,
                               nvlink_domain=NvlinkDomainExpect(size=size, name="rack"))


@pytest.mark.corpus
def test_corpus_two_node_domain_against_the_declared_size():
    # GH200: one GPU per node. Declared 2 GPUs: the IMEX domain is the whole NVLink domain; declared 4:
    # half of it (WARN, a partial IMEX domain); declared 1: IMEX lists a node outside it (FAIL)
    text = _corpus("gh200-2-node-domain-up-all-connected")
    info = ImexInfo("READY", *parse_imex_domain(text))
    assert _one(_snap(info, node="10.136.206.47"), _sized(2, 1)).status is PASS
    half = _one(_snap(info, node="10.136.206.47"), _sized(4, 1))
    assert half.status is WARN
    assert "IMEX domain lists 2 of the class's NVLink domain of 4 GPUs = 4 nodes" in half.message
    over = _one(_snap(info, node="10.136.206.47"), _sized(1, 1))
    assert over.status is FAIL
    assert "lists 2 nodes, more than the class's NVLink domain of 1 GPUs = 1 nodes" in over.message


@pytest.mark.corpus
def test_corpus_one_node_domain_of_a_two_node_class_warns():
    text = _corpus("gh200-1-node-domain-up-while-fabric-import-fails")
    found = _one(_snap(ImexInfo("READY", *parse_imex_domain(text)), node="10.136.206.48"), _sized(2, 1))
    assert found.status is WARN and "lists 1 of" in found.message and found.metrics["imex_nodes_expected"] == 2


# ------------------------------------------------------------------------------------------ probe


def _fake_run(answers: dict):
    calls = []

    def run(argv, timeout, deadline=None, max_output=None):
        calls.append(list(argv))
        out = answers[tuple(argv)]
        if isinstance(out, Exception):
            raise out
        return out
    return run, calls


def _res(argv, stdout="", rc=0, stderr="", timed_out=False):
    return Result(list(argv), rc, stdout, stderr, 0.01, timed_out=timed_out)


def test_probe_absent_tool_is_no_source():
    assert read_imex(which=lambda tool: None) == (None, {})


def test_probe_reads_both_commands_through_the_seam():
    run, calls = _fake_run({tuple(QUERY): _res(QUERY, "READY\n"), tuple(DOMAIN): _res(DOMAIN, domain_json())})
    info, raw = read_imex(run=run, which=lambda tool: "/usr/bin/" + tool)
    assert calls == [QUERY, DOMAIN] == [["nvidia-imex-ctl", "-q"], ["nvidia-imex-ctl", "-N", "-j"]]
    assert (info.daemon_status, info.domain_status, len(info.peers), info.error) == ("READY", "UP", 3, None)
    assert set(raw) == {QUERY_FILE, DOMAIN_FILE} == {"nvidia-imex-ctl-q.txt", "nvidia-imex-ctl-N.json"}


def test_probe_daemon_not_answering_is_recorded():
    run, _ = _fake_run({tuple(QUERY): _res(QUERY, "", rc=1, stderr="connect: Connection refused"),
                        tuple(DOMAIN): _res(DOMAIN, "", timed_out=True, rc=None)})
    info, raw = read_imex(run=run, which=lambda tool: tool)
    assert raw == {} and info.daemon_status is None
    assert "Connection refused" in info.error and "no answer" in info.error
    assert _one(_snap(info)).status is FAIL


# ------------------------------------------------------------------------------------------ check


def test_skips_without_an_nvlink_domain_even_when_imex_is_down():
    found = _one(_snap(ImexInfo(daemon_status="UNAVAILABLE", domain_status="DOWN")), NO_DOMAIN)
    assert found.status is SKIP and "no NVLink domain" in found.message


def test_healthy_domain_passes():
    found = _one(_snap(_info()))
    assert found.status is PASS and found.metrics["imex_peers_ready"] == 3


@pytest.mark.parametrize("query,status", [("WAITING_FOR_PEERS", FAIL), ("UNAVAILABLE", FAIL), ("INITIALIZING", WARN),
                                          ("SOMETHING_NEW", FAIL)])
def test_daemon_states(query, status):
    assert _one(_snap(_info(query=query))).status is status


@pytest.mark.parametrize("domain,status", [("DOWN", FAIL), ("DEGRADED", WARN)])
def test_domain_states(domain, status):
    assert _one(_snap(_info(domain=domain_json(status=domain)))).status is status


def test_this_node_not_connected_fails_naming_the_peer():
    info = _info(domain=domain_json(peers={2: {"connections": {0: "DISCONNECTED"}}}))
    found = _one(_snap(info, node="gb001.cluster.local"))
    assert found.status is FAIL and "#2 (gb003)" in found.message


def test_another_peer_down_warns_here_and_fails_there():
    info = _info(domain=domain_json(peers={1: {"status": "UNAVAILABLE", "connections": {0: "NEVER_CONNECTED",
                                                                                         2: "NEVER_CONNECTED"}}}))
    here = _one(_snap(info, node="gb003"))
    assert here.status is FAIL  # gb002 does not reach gb003 either: this node's column
    info = _info(domain=domain_json(peers={1: {"status": "WAITING_FOR_PEERS"}}))
    assert _one(_snap(info, node="gb003")).status is WARN
    assert _one(_snap(info, node="gb002")).status is FAIL


def test_unidentified_node_warns_on_any_broken_pair():
    info = _info(domain=domain_json(peers={1: {"connections": {2: "RECOVERING"}}}))
    found = _one(_snap(info, node="elsewhere"))
    assert found.status is WARN and "1->2" in found.message


def test_imex_domain_size_against_the_nvlink_domain():
    # 3 IMEX nodes (domain_json) against nvlink_domain.size / gpu_count
    exact = _one(_snap(_info()), _sized(12))
    assert exact.status is PASS and exact.metrics["imex_nodes_expected"] == 3
    fewer = _one(_snap(_info()), _sized(72))  # an NVL72 rack of 4-GPU trays is 18 nodes
    assert fewer.status is WARN
    assert "IMEX domain lists 3 of the class's NVLink domain of 72 GPUs = 18 nodes" in fewer.message
    more = _one(_snap(_info()), _sized(8))
    assert more.status is FAIL
    assert "lists 3 nodes, more than the class's NVLink domain of 8 GPUs = 2 nodes" in more.message
    assert "nodes_config.cfg names nodes outside this NVLink domain" in more.message


def test_imex_domain_size_needs_gpus_per_node():
    unknown = _one(_snap(_info()), _sized(72, None))  # no gpu_count, no GPUs in the snapshot: not judged
    assert unknown.status is PASS and "imex_nodes_expected" not in unknown.metrics
    gpus = [GpuInfo(i) for i in range(4)]  # the snapshot's GPUs stand in for the class's count
    assert _one(_snap(_info(), gpus=gpus), _sized(72, None)).metrics["imex_nodes_expected"] == 18
    assert "imex_nodes_expected" not in _one(_snap(_info()), _sized(70)).metrics  # 70 / 4: not a node count
    assert _one(_snap(_info()), DOMAIN_EXP).status is PASS  # size 72, gpu_count unset: as before


def test_a_broken_pair_of_other_peers_warns_here():
    info = _info(domain=domain_json(peers={1: {"connections": {2: "RECOVERING"}}}))
    found = _one(_snap(info, node="gb001"), _sized(12))
    assert found.status is WARN and "IMEX connections down between other peers: 1->2" in found.message
    assert _one(_snap(info, node="gb002"), _sized(12)).status is FAIL  # its own connection


def test_missing_source_with_a_domain():
    assert _one(_snap(None)).status is FAIL  # live: not installed
    assert _one(_snap(None, source="bundle:/x")).status is SKIP
    errored = _snap(None, probe_errors={"imex": ProbeError("timeout", "no answer in 10 s")})
    assert _one(errored).status is FAIL


def test_the_prolog_and_epilog_never_probe_imex():
    for context in ("prolog", "epilog"):
        assert "imex" not in sources_needed(DOMAIN_EXP, context)
    assert "imex" in sources_needed(DOMAIN_EXP, "slurm-check")


# ----------------------------------------------------------------------------------------- bundles


def test_bundle_records_and_reads_back_imex(tmp_path):
    snap = _snap(_info())
    path = write_bundle(snap, tmp_path / "b", {QUERY_FILE: "READY\n", DOMAIN_FILE: domain_json(status="DEGRADED")},
                        sysfs_root=str(tmp_path / "nosys"), proc_root=str(tmp_path / "noproc"))
    assert (path / "nvidia-imex-ctl-q.txt").read_text() == "READY\n"
    back = snapshot_from_bundle(path)
    assert (back.imex.daemon_status, back.imex.domain_status, len(back.imex.peers)) == ("READY", "DEGRADED", 3)
    older = write_bundle(snap, tmp_path / "old", {}, sysfs_root=str(tmp_path / "nosys"),
                         proc_root=str(tmp_path / "noproc"))
    assert snapshot_from_bundle(older).imex is None
