"""nvidia-smi parsers: T.Limit margin, performance state and GPU utilisation (Hopper-era fields),
from our own 8x H100 fixtures (565.57.01) and from real corpus recordings, exact values."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.core.model import GpuInfo, Snapshot
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi, to_pstate
from tests.conftest import CORPUS, FIXTURES
from tests.parsers.test_nvidia_smi import line, replace_in_gpu

H100_XML = FIXTURES / "nvidia-smi" / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml"
H100_TEXT = FIXTURES / "nvidia-smi" / "q-h100-sxm-8gpu-565.57.01-healthy.txt"


def corpus_gpus(name: str) -> list[GpuInfo]:
    path = CORPUS / "nvidia-smi" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return parse_nvidia_smi(path.read_text()).gpus


def load_facts(gpus: list[GpuInfo]) -> list[tuple]:
    return [(g.temp_tlimit_margin_c, g.performance_state, g.utilization_gpu_pct) for g in gpus]


# ------------------------------------------------------------------------------------ own fixtures


@pytest.mark.parametrize("path", [H100_XML, H100_TEXT], ids=["xml", "text"])
def test_h100_fixture_values(path):
    gpus = parse_nvidia_smi(path.read_text()).gpus
    # GPUs 0-1 run a CUDA process (23 %), GPUs 2-7 are idle; all in P0 (persistence mode).
    assert load_facts(gpus) == [
        (55.0, "P0", 23.0), (53.0, "P0", 23.0), (51.0, "P0", 0.0), (54.0, "P0", 0.0),
        (52.0, "P0", 0.0), (55.0, "P0", 0.0), (53.0, "P0", 0.0), (51.0, "P0", 0.0),
    ]
    # The offset lines (Shutdown -8 / Slowdown -2 / Max Operating 0 T.Limit) are not thresholds
    # and not the margin.
    for gpu in gpus:
        assert (gpu.temp_shutdown_c, gpu.temp_slowdown_c, gpu.temp_max_operating_c) == (None,) * 3
        assert gpu.mem_temp_max_c is None
    assert gpus[0].temperature_c == 34.0


def test_tlimit_fault_same_in_both_formats():
    """GPU 5 (bus AB) hot and busy: 1 C above T.Limit, 100 % at P0."""
    xml, text = H100_XML.read_text(), H100_TEXT.read_text()
    for old, new in (("<gpu_temp_tlimit>55 C<", "<gpu_temp_tlimit>-1 C<"),
                     ("<gpu_util>0 %<", "<gpu_util>100 %<")):
        xml = replace_in_gpu(xml, "AB", old, new)
    for old, new in ((line("GPU T.Limit Temp", "55 C", 8), line("GPU T.Limit Temp", "-1 C", 8)),
                     (line("Gpu", "0 %", 8), line("Gpu", "100 %", 8))):
        text = replace_in_gpu(text, "AB", old, new)
    from_xml, from_text = parse_nvidia_smi(xml).gpus, parse_nvidia_smi(text).gpus
    assert from_xml == from_text
    assert load_facts(from_xml)[5] == (-1.0, "P0", 100.0)
    assert load_facts(from_xml)[4] == (52.0, "P0", 0.0)  # neighbours unchanged


@pytest.mark.parametrize("value, expected", [
    ("N/A", None), ("[N/A]", None), ("Unknown", None), ("Not Supported", None),
])
def test_unreported_values_are_none(value, expected):
    text = H100_TEXT.read_text()
    text = replace_in_gpu(text, "18", line("GPU T.Limit Temp", "55 C", 8), line("GPU T.Limit Temp", value, 8))
    text = replace_in_gpu(text, "18", line("Performance State", "P0", 4), line("Performance State", value, 4))
    text = replace_in_gpu(text, "18", line("Gpu", "23 %", 8), line("Gpu", value, 8))
    assert load_facts(parse_nvidia_smi(text).gpus)[0] == (expected,) * 3


@pytest.mark.parametrize("raw, expected", [
    ("P0", "P0"), ("P8", "P8"), ("P12", "P12"), ("p2", "P2"), (" P5 ", "P5"), ("P05", "P5"),
    ("Unknown", None), ("N/A", None), ("", None), (None, None), ("P", None), ("P100", None),
    ("0", None), ("P0 extra", None),
])
def test_to_pstate(raw, expected):
    assert to_pstate(raw) == expected


def test_new_fields_round_trip_through_snapshot_json():
    gpus = parse_nvidia_smi(H100_XML.read_text()).gpus
    gpus[3] = dataclasses.replace(gpus[3], temp_tlimit_margin_c=-2.5)
    snap = Snapshot(node="gpu01", taken_at="2024-11-14T09:12:44Z", gpus=gpus,
                    gpu_source="nvidia-smi-xml")
    back = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert back == snap
    assert load_facts(back.gpus)[3] == (-2.5, "P0", 0.0)
    # a snapshot written before these fields existed still loads (fields default to None)
    old = snap.to_dict()
    for gpu in old["gpus"]:
        for key in ("temp_tlimit_margin_c", "performance_state", "utilization_gpu_pct"):
            del gpu[key]
    assert load_facts(Snapshot.from_dict(old).gpus)[0] == (None, None, None)


# ------------------------------------------------------------------------------------------ corpus


def test_corpus_h100_nvl_550():
    gpus = corpus_gpus("q-a-text-h100-nvl-x2-550.54.14-healthy.txt")
    assert load_facts(gpus) == [(55.0, "P0", 0.0), (55.0, "P0", 0.0)]
    assert [g.temperature_c for g in gpus] == [32.0, 31.0]
    assert gpus[0].temp_slowdown_c is None  # "GPU Slowdown T.Limit Temp : -2 C" is an offset


def test_corpus_h100_sxm_545():
    (gpu,) = corpus_gpus("q-a-text-h100-sxm-80gb-545.23.08-single-gpu-healthy-della.txt")
    assert load_facts([gpu]) == [(54.0, "P0", 0.0)]
    assert (gpu.temperature_c, gpu.temp_shutdown_c) == (33.0, None)


def test_corpus_h800_525_margin_next_to_absolute_limits():
    # 525 prints both: "GPU T.Limit Temp : 51 C" and absolute Shutdown 92 / Slowdown 89 / Max Op 87
    (gpu,) = corpus_gpus("q-text-h800-525.105.17-gpu0-fabric-completed.txt")
    assert load_facts([gpu]) == [(51.0, "P0", 0.0)]
    assert (gpu.temp_shutdown_c, gpu.temp_slowdown_c, gpu.temp_max_operating_c) == (92, 89, 87)


def test_corpus_a10_535_margin_not_available():
    (gpu,) = corpus_gpus("q-text-a10-535.129.03-remap-pending.txt")
    assert load_facts([gpu]) == [(None, "P8", 0.0)]  # "GPU T.Limit Temp : N/A"


@pytest.mark.parametrize("name, expected", [
    ("q-x-geforce-gtx1070-384.66-mining-pcie-x1-of-x16-2of6gpus.xml",
     [(None, "P2", 100.0), (None, "P2", 98.0)]),
    ("q-x-geforce-rtx2080ti-410.73-ecc-na-sw-power-cap-active.xml",
     [(None, "P8", 0.0), (None, "P8", 0.0)]),
    ("q-x-tesla-k80x4-azure-430.26-retired-pages-pending-blacklist.xml",
     [(None, "P0", 99.0), (None, "P0", 99.0), (None, "P8", 0.0), (None, "P8", 0.0)]),
    ("q-x-tesla-p100-pcie-510.47.03-aggregate-sbe3.xml", [(None, "P0", 0.0)]),
])
def test_corpus_xml_pstate_and_utilisation(name, expected):
    assert load_facts(corpus_gpus(name)) == expected


@pytest.mark.parametrize("name", [
    "q-d-ecc-row-remapper-550.90.07-ecc-mode-unknown-error-remap-pending-annotated.txt",
    "q-text-ecc-errors-block-sram-uncorrectable-vol1-agg5-fragment.txt",
])
def test_corpus_fragments_without_these_sections(name):
    assert load_facts(corpus_gpus(name)) == [(None, None, None)]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["P0", "P12", "P32", "p 3"])))
def test_to_pstate_never_raises(raw):
    value = to_pstate(raw)
    assert value is None or (value.startswith("P") and value[1:].isdigit())
