"""mlxlink: the pure parser (the corpus's real output and hand-written fixtures), ib.mlxlink, and the probe
through a fake subprocess seam (deadline, failures, no tool)."""
from __future__ import annotations

import pytest

from healthcheck.checks.mlxlink import THRESHOLDS, ib_mlxlink
from healthcheck.core.expectations import Expectations
from healthcheck.core.model import MlxlinkPort, Snapshot, Status
from healthcheck.parsers import ParseError
from healthcheck.parsers.mlxlink import parse_mlxlink
from healthcheck.probes.mlxlink import argv, bundle_name, mlxlink_from_bundle, read_mlxlink
from healthcheck.safeio.subproc import Result
from tests.conftest import corpus_params
from tests.fixtures.sysfs_builder import build_sysfs


def _judge(*ports, **t):
    snap = Snapshot(node="n", taken_at="2026-12-01T00:00:00Z", mlxlink=list(ports))
    return {f.component: f for f in ib_mlxlink(snap, Expectations(), {**THRESHOLDS, **t})}


def _fixture(fixtures_dir, name):
    return (fixtures_dir / "mlxlink" / name).read_text()


@pytest.mark.parametrize("path", corpus_params("mlxlink", "*.txt"))
def test_corpus_outputs_parse_and_healthy_ones_pass(path):
    text = path.read_text(errors="replace")
    port = parse_mlxlink(text, "gpu7")
    assert port.state == "Active" and port.speed and port.fec
    assert port.recommendation and "no issue" in port.recommendation.lower()
    (f,) = _judge(port).values()
    healthy = "no-issue" in path.name or "healthy" in path.name
    assert (f.status is Status.PASS) == healthy, f.message


def test_parser_reads_counters_ber_and_module(fixtures_dir):
    port = parse_mlxlink(_fixture(fixtures_dir, "ndr-healthy.txt"), "mlx5_0")
    assert (port.state, port.speed, port.width) == ("Active", "IB-NDR", "4x")
    assert port.fec == "Standard_RS-FEC - (544,514)"
    assert port.effective_ber == 15e-255 and port.raw_ber == 3e-11 and port.effective_errors == 0
    assert port.raw_errors_per_lane == [5473, 11219, 2, 0] and port.link_down == 0
    assert (port.module_temperature_c, port.module_temp_low_c, port.module_temp_high_c) == (48.0, -5.0, 75.0)
    assert port.module_identifier == "OSFP" and port.module_part == "MMA4Z00-NS400"
    assert port.time_since_clear_min == 3573.6 and port.status_opcode == 0


@pytest.mark.parametrize("text", ["", "mlxlink: command not found\n", "-E- Failed to open device\n",
                                  "State : Active\nEffective Physical BER : lots\n"])
def test_parser_refuses_what_is_not_a_port_report(text):
    with pytest.raises(ParseError):
        parse_mlxlink(text, "mlx5_0")


def test_healthy_port_passes(fixtures_dir):
    (f,) = _judge(parse_mlxlink(_fixture(fixtures_dir, "ndr-healthy.txt"), "mlx5_0")).values()
    assert f.status is Status.PASS and "IB-NDR 4x" in f.message and f.metrics["module_temperature_c"] == 48.0


def test_high_ber_and_hot_module_fail(fixtures_dir):
    (f,) = _judge(parse_mlxlink(_fixture(fixtures_dir, "ndr-high-ber-hot-module.txt"), "mlx5_3")).values()
    assert f.status is Status.FAIL and f.component == "mlx5_3:1"
    assert "effective BER 4.0e-11 above 1e-12" in f.message
    assert "raw (pre-FEC) BER 2.0e-05" in f.message
    assert "module at 77 C, at or above its alarm bound 75 C" in f.message
    assert "Bad signal integrity" in f.message


def test_no_fec_at_ndr_fails_and_a_warm_module_warns(fixtures_dir):
    port = parse_mlxlink(_fixture(fixtures_dir, "ndr-no-fec-warm-module.txt"), "mlx5_1")
    (f,) = _judge(port).values()
    assert f.status is Status.FAIL and "without FEC" in f.message and "within 5 C" in f.message
    # the FEC rule is data: a site that runs NDR without FEC on purpose takes it out
    port.fec = "No FEC"
    (g,) = _judge(port, no_fec_fail_speeds=[]).values()
    assert g.status is Status.WARN


def test_module_without_its_own_range_uses_the_default_limit():
    port = MlxlinkPort("mlx5_0", state="Active", speed="IB-HDR", fec="RS-FEC", module_temperature_c=76.0)
    assert _judge(port)["mlx5_0:1"].status is Status.FAIL
    assert _judge(port, module_temp_fail_c=90.0)["mlx5_0:1"].status is Status.PASS


def test_failed_read_is_an_error_and_a_down_port_is_left_to_port_state():
    out = _judge(MlxlinkPort("mlx5_0", error="mlxlink -d mlx5_0 -m -c -e: no answer within the deadline"),
                 MlxlinkPort("mlx5_1", state="Disable", effective_ber=1e-3))
    assert out["mlx5_0:1"].status is Status.ERROR and out["mlx5_1:1"].status is Status.SKIP


# ---------------------------------------------------------------------------------- the probe


def test_probe_asks_every_port_under_one_deadline(tmp_path, fixtures_dir):
    build_sysfs(tmp_path, gpus=0, hcas=3, nvswitches=0)
    healthy = _fixture(fixtures_dir, "ndr-healthy.txt")
    calls = []

    def run(args, timeout, deadline=None, max_output=None):
        calls.append(args)
        assert timeout > 0 and deadline is not None
        dev = args[2]
        if dev == "mlx5_1":
            return Result(args, None, "", "", 5.0, timed_out=True)
        if dev == "mlx5_2":
            return Result(args, 1, "", "-E- Failed to identify the device\n", 0.1)
        return Result(args, 0, healthy, "", 0.5)

    ports, raw = read_mlxlink(str(tmp_path), 5.0, run=run, which=lambda tool: "/usr/bin/" + tool)
    by = {p.component: p for p in ports}
    assert sorted(c[2] for c in calls) == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert calls[0][-3:] == ["-m", "-c", "-e"]
    assert by["mlx5_0:1"].error is None and by["mlx5_0:1"].speed == "IB-NDR"
    assert "no answer" in by["mlx5_1:1"].error
    assert "Failed to identify" in by["mlx5_2:1"].error
    assert raw == {"mlxlink-mlx5_0.txt": healthy}


def test_probe_without_mlxlink_is_absent(tmp_path):
    build_sysfs(tmp_path, gpus=0, hcas=1, nvswitches=0)
    assert read_mlxlink(str(tmp_path), 5.0, run=None, which=lambda tool: None) == (None, {})


def test_bundle_names_round_trip(fixtures_dir):
    healthy = _fixture(fixtures_dir, "ndr-healthy.txt")
    files = {bundle_name("mlx5_0", 1): healthy, bundle_name("mlx5_4", 2): healthy, "mlxlink-mlx5_9.txt": "junk"}
    assert argv("mlx5_4", 2) == ["mlxlink", "-d", "mlx5_4", "-p", "2", "-m", "-c", "-e"]
    ports = {p.component: p for p in mlxlink_from_bundle(list(files), files.get)}
    assert set(ports) == {"mlx5_0:1", "mlx5_4:2", "mlx5_9:1"}
    assert ports["mlx5_4:2"].error is None and "not an mlxlink port report" in ports["mlx5_9:1"].error
    assert mlxlink_from_bundle(["dmesg.txt"], files.get) is None


def test_a_device_name_that_looks_like_an_option_is_never_passed_to_mlxlink(tmp_path):
    build_sysfs(tmp_path, gpus=0, hcas=1, nvswitches=0)
    evil = tmp_path / "class" / "infiniband" / "--port_state=dn" / "ports" / "1"
    evil.mkdir(parents=True)
    (evil / "state").write_text("4: ACTIVE\n")
    calls = []

    def run(args, timeout, deadline=None, max_output=None):
        calls.append(args)
        return Result(args, 1, "", "", 0.1)

    ports, _ = read_mlxlink(str(tmp_path), 5.0, run=run, which=lambda tool: "/usr/bin/" + tool)
    assert [c[2] for c in calls] == ["mlx5_0"] and [p.device for p in ports] == ["mlx5_0"]
