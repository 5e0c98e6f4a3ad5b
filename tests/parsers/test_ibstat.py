"""ibstat parser: real corpus, own fixtures (8x CX-7 NDR node), error lines, fuzz."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.core.model import IbPort
from healthcheck.parsers import ParseError
from healthcheck.parsers.ibstat import IbstatResult, parse_ibstat
from tests.conftest import CORPUS, FIXTURES, corpus_files, corpus_params
from tests.fuzzing import mutated as fuzz_mutated

FIX = FIXTURES / "ibstat"


def _corpus(name: str) -> IbstatResult:
    path = CORPUS / "infiniband" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return parse_ibstat(path.read_text())


def _fixture(name: str) -> IbstatResult:
    return parse_ibstat((FIX / name).read_text())


# ------------------------------------------------------------------------------------ real corpus


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("infiniband", "ibstat-*"))
def test_every_corpus_ibstat_parses(path: Path):
    result = parse_ibstat(path.read_text())
    assert isinstance(result, list) and result
    for port in result:
        assert isinstance(port, IbPort)
        assert port.state in {"ACTIVE", "DOWN", "INIT", "ARMED"}
        assert port.rate_gbps and port.rate_gbps > 0
        assert port.firmware and port.hca_type


@pytest.mark.corpus
def test_corpus_h100_eight_ndr_ib_ports_active_three_ethernet_down():
    result = _corpus("ibstat-h100-cx7-some-ports-down.txt")
    assert result.errors == []
    ib = [p for p in result if p.link_layer == "InfiniBand"]
    eth = [p for p in result if p.link_layer == "Ethernet"]
    assert len(ib) == 8 and len(eth) == 4
    assert all((p.state, p.phys_state, p.rate_gbps) == ("ACTIVE", "LinkUp", 400.0) for p in ib)
    assert all((p.hca_type, p.firmware) == ("MT4129", "28.39.1002") for p in ib)
    down = sorted(p.device for p in eth if p.state == "DOWN")
    assert down == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert all(p.phys_state == "Disabled" and p.rate_gbps == 40.0 for p in eth if p.state == "DOWN")
    assert {(p.hca_type, p.firmware) for p in eth} == {("MT4125", "22.38.1002")}
    assert [p.device for p in result][:3] == ["mlx5_0", "mlx5_1", "mlx5_10"]  # order as printed


@pytest.mark.corpus
def test_corpus_a100_space_indented_with_ibpanic():
    result = _corpus("ibstat-a100-cx6-ibpanic-missing-device.txt")
    assert [p.device for p in result] == [f"mlx5_{i}" for i in range(8)]
    assert all((p.port, p.state, p.phys_state, p.rate_gbps, p.link_layer) ==
               (1, "ACTIVE", "LinkUp", 200.0, "InfiniBand") for p in result)
    assert {(p.hca_type, p.firmware) for p in result} == {("MT4124", "20.41.1000")}
    assert result.errors == [
        "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"]


@pytest.mark.corpus
def test_corpus_archwiki_port2_down_polling():
    result = _corpus("ibstat-connectx-mt25418-ddr-port1-active-port2-down-polling-archwiki.txt")
    assert [(p.device, p.port, p.state, p.phys_state, p.rate_gbps) for p in result] == [
        ("mlx4_0", 1, "ACTIVE", "LinkUp", 20.0), ("mlx4_0", 2, "DOWN", "Polling", 10.0)]
    assert {p.hca_type for p in result} == {"MT25418"}
    assert {p.firmware for p in result} == {"2.9.1000"}


@pytest.mark.corpus
def test_corpus_cx5_single_port():
    (port,) = _corpus("ibstat-cx5-edr-single-port-active.txt")
    assert (port.device, port.state, port.rate_gbps, port.firmware, port.hca_type) == (
        "mlx5_0", "ACTIVE", 100.0, "16.32.1010", "MT4119")


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("infiniband", "ibv_devinfo*") + corpus_params(
    "infiniband", "perfquery*"))
def test_other_infiniband_tools_are_not_ibstat(path: Path):
    with pytest.raises(ParseError):
        parse_ibstat(path.read_text())


# ---------------------------------------------------------------------------------- own fixtures


def test_fixture_healthy_cx7_ndr_node():
    result = _fixture("ibstat-8x-cx7-ndr-healthy.txt")
    assert [p.component for p in result] == [f"mlx5_{i}:1" for i in range(8)]
    for port in result:
        assert (port.state, port.phys_state, port.rate_gbps, port.link_layer) == (
            "ACTIVE", "LinkUp", 400.0, "InfiniBand")
        assert (port.hca_type, port.firmware, port.pci_bus_id) == ("MT4129", "28.39.1002", None)
    assert result.errors == []


def test_fixture_space_indented_one_down_polling_one_initializing():
    result = _fixture("ibstat-8x-cx7-ndr-port3-down-polling-port6-init-spaces.txt")
    states = {p.device: (p.state, p.phys_state, p.rate_gbps) for p in result}
    assert len(states) == 8
    assert states["mlx5_3"] == ("DOWN", "Polling", 10.0)
    assert states["mlx5_6"] == ("INIT", "LinkUp", 400.0)
    assert sum(1 for s in states.values() if s == ("ACTIVE", "LinkUp", 400.0)) == 6


def test_fixture_old_ibstat_without_link_layer_and_prompt():
    result = _fixture("ibstat-cx3-fdr-old-no-link-layer.txt")
    assert [(p.port, p.state, p.phys_state, p.rate_gbps, p.link_layer) for p in result] == [
        (1, "ACTIVE", "LinkUp", 56.0, None), (2, "DOWN", "Disabled", 10.0, None)]
    assert {p.hca_type for p in result} == {"MT4099"}


def test_fixture_ibwarn_and_ibpanic_are_both_captured():
    result = _fixture("ibstat-cx6-hdr-ibpanic-mlx5_3-vanished.txt")
    assert [p.device for p in result] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert len(result.errors) == 2
    assert result.errors[0].startswith("ibwarn:")
    assert "'mlx5_3' failed: No such file or directory" in result.errors[1]
    assert result.ports == list(result)


# ------------------------------------------------------------------------------------- edge cases


def test_sysfs_style_numeric_prefixes_and_state_names():
    text = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: 4: ACTIVE\n"
            "\t\tPhysical state: 5: LinkUp\n\t\tRate: 400 Gb/sec (4X NDR)\n"
            "\tPort 2:\n\t\tState: Armed\n\t\tPhysical state: LinkUp\n\t\tRate: 2.5\n")
    result = parse_ibstat(text)
    assert [(p.state, p.phys_state, p.rate_gbps) for p in result] == [
        ("ACTIVE", "LinkUp", 400.0), ("ARMED", "LinkUp", 2.5)]
    assert result[0].firmware is None


def test_only_ibpanic_gives_no_ports_and_the_error():
    result = parse_ibstat("ibpanic: [812] main: can't list IB device names: No such file or directory\n")
    assert result == [] and len(result.errors) == 1


@pytest.mark.parametrize("bad", ["", "   \n\n", "hello world\n", "State: Active\nRate: 400\n",
                                 "GPU 0: NVIDIA H100 80GB HBM3\n"])
def test_non_ibstat_text_raises(bad):
    with pytest.raises(ParseError):
        parse_ibstat(bad)


@pytest.mark.parametrize("bad", [None, 7, ["CA 'mlx5_0'"]])
def test_non_text_raises(bad):
    with pytest.raises(ParseError):
        parse_ibstat(bad)


def test_bytes_input_is_decoded():
    (port,) = parse_ibstat(b"CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\xff\n")
    assert port.state.startswith("ACTIVE")


# ------------------------------------------------------------------------------------------- fuzz


SEEDS = [p.read_text() for p in sorted(FIX.glob("*.txt"))] + [
    p.read_text() for p in corpus_files("infiniband", "ibstat-*")]


def mutated():
    return fuzz_mutated(SEEDS)


def _check(text):
    try:
        result = parse_ibstat(text)
    except ParseError:
        return
    assert isinstance(result, IbstatResult)
    assert all(isinstance(p, IbPort) and isinstance(p.port, int) for p in result)
    assert all(isinstance(e, str) for e in result.errors)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_fuzz_any_text(text):
    _check(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_fuzz_mutated_real_output(text):
    _check(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="CA 'mlx5_0'\n\tPort 1:State Active Rate 400.Link layer ibpanic", max_size=300))
def test_fuzz_ibstat_alphabet(text):
    _check(text)
