"""The RDMA pair phase: command lines, settings, a simulated 6-node x 2-rail phase with a bad HCA, a bad
node and a bad path planted and named, failed runs as clean findings, and the real subprocess runner
against a fake launcher that prints recorded outputs."""
from __future__ import annotations

import os
import stat

import pytest

from healthcheck.burnin.rdma import (PairCommand, PairOutput, RdmaSettings, RdmaSettingsError, SubprocPairRunner,
                                     defaults, pair_command, run_rdma_phase, validate)
from healthcheck.fabric.counters import PortKey, Sample
from healthcheck.core.model import Status
from tests.conftest import FIXTURES

PERF = FIXTURES / "fabric" / "perf"
NODES = [f"gpu0{i}" for i in range(1, 7)]
RAILS = ["mlx5_0", "mlx5_1"]
RULE = "-" * 87


def bw_output(device: str, gbps: float) -> str:
    return (f"{RULE}\n                    RDMA_Write BW Test\n Device         : {device}\n{RULE}\n"
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            f" 1048576    5000             {gbps:.2f}            {gbps:.2f}                  0.04\n{RULE}\n")


def lat_output(device: str, us: float) -> str:
    return (f"{RULE}\n                    RDMA_Write Latency Test\n Device         : {device}\n{RULE}\n"
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n"
            f" 2       1000          1.10           3.00         {us:.2f}               {us:.2f}\n{RULE}\n")


class Fleet:
    """A simulated fabric: a pair runs at the slowest of its two HCAs (and of its path)."""

    def __init__(self, slow_hcas=(), slow_nodes=(), slow_paths=(), fail_hcas=()):
        self.slow_hcas, self.slow_nodes = set(slow_hcas), set(slow_nodes)
        self.slow_paths = {frozenset(p) for p in slow_paths}
        self.fail_hcas = set(fail_hcas)
        self.commands: list[PairCommand] = []

    def __call__(self, cmd: PairCommand) -> PairOutput:
        self.commands.append(cmd)
        ends = [(cmd.server, cmd.device), (cmd.client, cmd.device)]
        if any(e in self.fail_hcas for e in ends):
            return PairOutput((PERF / "ib_read_bw-server-socket-init.txt").read_text(),
                              (PERF / "ib_write_bw-client-failed-rtr.txt").read_text())
        slow = any(e in self.slow_hcas for e in ends) or any(n in self.slow_nodes for n in (cmd.server, cmd.client)) \
            or frozenset((cmd.server, cmd.client)) in self.slow_paths
        if cmd.test.endswith("_lat"):
            text = lat_output(cmd.device, 8.0 if slow else 1.6)
        else:
            text = bw_output(cmd.device, 210.0 if slow else 385.0)
        return PairOutput(text, text)


def test_command_lines_server_first_then_client_with_the_servers_host():
    cmd = pair_command(1, "mlx5_1", "ib_write_bw", "gpu01", "gpu02", 18600, defaults())
    assert cmd.server_argv[:6] == ["srun", "--overlap", "-N1", "-n1", "-w", "gpu01"]
    assert cmd.server_argv[6:] == ["ib_write_bw", "-d", "mlx5_1", "-F", "-p", "18600", "--report_gbits", "-D", "10",
                                   "-s", "1048576", "-q", "4"]
    assert cmd.client_argv[5] == "gpu02" and cmd.client_argv[6:-1] == cmd.server_argv[6:]
    assert cmd.client_argv[-1] == "gpu01"
    lat = pair_command(0, "mlx5_0", "ib_write_lat", "a", "b", 18515, defaults())
    assert "--report_gbits" not in lat.server_argv and lat.server_argv[-4:] == ["-s", "2", "-n", "1000"]
    bidir = pair_command(0, "mlx5_0", "ib_write_bw", "a", "b", 18515, validate({"bidirectional": True}))
    assert "-b" in bidir.client_argv
    with pytest.raises(ValueError, match="out of range"):
        pair_command(0, "mlx5_0", "ib_write_bw", "a", "b", 70000, defaults())


def test_six_nodes_two_rails_one_bad_hca_is_named_with_its_switch_port():
    fleet = Fleet(slow_hcas={("gpu04", "mlx5_1")})
    result = run_rdma_phase(NODES, RAILS, runner=fleet, peers={("gpu04", "mlx5_1"): "leaf-rail1 port 4"})
    assert result.status == "fail"
    bw = [a for a in result.attributions if "bandwidth" in a.message]
    assert [(a.kind, a.nodes, a.devices) for a in bw] == [("hca", ["gpu04"], ["mlx5_1"])]
    assert "gpu04 mlx5_1 (rail 1, -> leaf-rail1 port 4)" in bw[0].message
    assert any("210.0 Gb/s < 360.0" in line for line in bw[0].evidence)
    rail0 = result.rails[0].bandwidth["ib_write_bw"]
    assert rail0.bad == [] and rail0.good == NODES  # rail 0 of gpu04 is fine
    assert result.rails[1].bandwidth["ib_write_bw"].bad == ["gpu04"]
    # every node was in the first (pair) round of every rail, the pairs of a round ran at once on distinct ports
    first = [c for c in fleet.commands if c.test == "ib_write_bw"]
    for rail, device in enumerate(RAILS):
        round1 = result.rails[rail].bandwidth["ib_write_bw"].rounds[0]
        assert sorted(n for g in round1.groups for n in g) == NODES
        ports = [c.port for c in first[:] if c.device == device][:3]
        assert len(set(ports)) == 3
    failing = [f for f in result.findings() if f.status is Status.FAIL]
    assert {f.component for f in failing} == {"gpu04/mlx5_1"}
    assert result.to_dict()["threshold_gbps"] == pytest.approx(360.0)


def test_a_node_low_on_every_rail_is_the_node_not_a_link():
    result = run_rdma_phase(NODES, RAILS, runner=Fleet(slow_nodes={"gpu02"}), seed=3)
    kinds = {(a.kind, tuple(a.nodes)) for a in result.attributions if "bandwidth" in a.message}
    assert kinds == {("node", ("gpu02",))}
    assert "on every rail (mlx5_0, mlx5_1)" in result.attributions[0].message


def test_a_slow_route_between_two_good_nodes_is_the_path():
    fleet = Fleet()
    probe = run_rdma_phase(NODES, RAILS[:1], RdmaSettings(latency_test=""), runner=fleet)
    first_pair = probe.rails[0].bandwidth["ib_write_bw"].rounds[0].groups[0]
    result = run_rdma_phase(NODES, RAILS[:1], RdmaSettings(latency_test=""), runner=Fleet(slow_paths=[first_pair]))
    (path,) = result.attributions
    assert path.kind == "path" and sorted(path.nodes) == sorted(first_pair) and path.status == "warn"
    assert result.rails[0].bandwidth["ib_write_bw"].bad == []


def test_failed_runs_are_findings_with_their_reason_never_exceptions():
    result = run_rdma_phase(NODES, RAILS, runner=Fleet(fail_hcas={("gpu05", "mlx5_0")}))
    (hca,) = [a for a in result.attributions if "bandwidth" in a.message]
    assert (hca.nodes, hca.devices) == (["gpu05"], ["mlx5_0"])
    assert any("Failed to modify QP 420 to RTR" in line for line in hca.evidence)
    failed = [p for p in result.pairs if p.error]
    assert failed and all(p.value is None for p in failed)


def test_a_runner_that_raises_is_a_failed_pair():
    def broken(cmd):
        raise OSError("launcher exploded")

    result = run_rdma_phase(NODES[:2], RAILS[:1], RdmaSettings(latency_test="", max_rounds=1), runner=broken)
    assert all("runner failed: OSError: launcher exploded" in p.error for p in result.pairs)
    assert result.status in ("fail", "warn") and result.rails[0].bandwidth["ib_write_bw"].good == []


def test_counters_sampled_around_the_rounds_name_a_port_that_grew():
    reads = iter([[Sample(PortKey("gpu03", "mlx5_0", 1), 0.0, {"LinkDownedCounter": 0})],
                  [Sample(PortKey("gpu03", "mlx5_0", 1), 900.0, {"LinkDownedCounter": 2})]])
    result = run_rdma_phase(NODES, RAILS, runner=Fleet(), counter_sampler=lambda: next(reads),
                            peers={("gpu03", "mlx5_0"): "leaf-rail0 port 3"})
    assert not result.attributions and result.status == "fail"
    counter = [f for f in result.findings() if f.check == "fabric.counters"]
    assert counter[0].status is Status.FAIL and "leaf-rail0 port 3" in counter[0].message


def test_one_node_is_skipped_and_bad_arguments_are_clear_errors():
    assert run_rdma_phase(["gpu01"], RAILS, runner=Fleet()).findings()[0].status is Status.SKIP
    with pytest.raises(ValueError, match="distinct HCA"):
        run_rdma_phase(NODES, ["mlx5_0", "mlx5_0"], runner=Fleet())
    with pytest.raises(ValueError, match="must not start with '-'"):
        run_rdma_phase(["-x", "gpu01"], RAILS, runner=Fleet())


@pytest.mark.parametrize("section, match", [
    ({"efficiency": 1.5}, "efficiency"), ({"bw_tests": ["ib_write_lat"]}, "bw_tests"),
    ({"launcher": ["srun"]}, "{node}"), ({"latency_test": "ping"}, "latency_test"),
    ({"qps": 2.5}, "integer"), ({"bogus": 1}, "unknown key"), ({"bidirectional": "yes"}, "true or false"),
])
def test_bad_settings_are_clear_errors(section, match):
    with pytest.raises(RdmaSettingsError, match=match):
        validate(section)


def test_packaged_defaults_are_the_documented_ones():
    s = defaults()
    assert (s.efficiency, s.line_rate_gbps, s.latency_us, s.bw_tests) == (0.90, 400.0, 5.0, ("ib_write_bw",))
    assert validate({"line_rate_gbps": 200}).threshold_gbps == pytest.approx(180.0)


def test_subprocess_runner_through_a_fake_launcher(tmp_path):
    """The real seam: server then client, each through subproc.run with the launcher; the client is
    retried once while the fake server 'is not listening yet'."""
    client = tmp_path / "client.txt"
    client.write_text(bw_output("mlx5_0", 390.0))
    server = tmp_path / "server.txt"
    server.write_text(bw_output("mlx5_0", 390.0))
    refused = tmp_path / "refused"
    script = tmp_path / "launch"
    script.write_text(f"""#!/bin/sh
node="$1"; shift
for a in "$@"; do last="$a"; done
if [ "$last" = "gpu01" ]; then
  if [ ! -e {refused} ]; then : > {refused}; echo "Couldn't connect to gpu01:18515"; exit 1; fi
  cat {client}
else
  cat {server}
fi
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    s = validate({"launcher": [str(script), "{node}"], "latency_test": "", "max_rounds": 1})
    naps: list[float] = []
    runner = SubprocPairRunner(server_start_s=0.01, connect_retries=2, env={"PATH": os.defpath},
                               sleep=naps.append)
    result = run_rdma_phase(["gpu01", "gpu02"], ["mlx5_0"], s, runner=runner)
    (pair,) = result.pairs
    assert pair.value == pytest.approx(390.0) and pair.error is None, pair.to_dict()
    assert len(naps) == 2  # after starting the server, and before the one retry
    assert result.status == "pass"


def test_subprocess_runner_missing_tool_is_a_failed_pair(tmp_path):
    s = validate({"launcher": [str(tmp_path / "nope"), "{node}"], "latency_test": "", "max_rounds": 1})
    runner = SubprocPairRunner(server_start_s=0.0, connect_retries=0, env={})
    result = run_rdma_phase(["gpu01", "gpu02"], ["mlx5_0"], s, runner=runner)
    (pair,) = result.pairs
    assert pair.value is None and "not found" in pair.error
