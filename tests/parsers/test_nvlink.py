"""nvlink parser: own fixtures (8x H100, 18 links), real corpus, output variants, joining, fuzz."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.core.model import GpuInfo, NvLink
from healthcheck.parsers import ParseError
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from healthcheck.parsers.nvlink import (
    GpuKey,
    apply_to_gpus,
    merge_nvlinks,
    parse_nvlink_errors,
    parse_nvlink_status,
)
from tests.conftest import CORPUS, FIXTURES, corpus_params

FIX = FIXTURES / "nvlink"
STATUS_OK = (FIX / "nvlink-s-h100x8-healthy.txt").read_text()
STATUS_GPU3 = (FIX / "nvlink-s-h100x8-gpu3-link5-inactive.txt").read_text()
ERRORS_OK = (FIX / "nvlink-e-h100x8-healthy.txt").read_text()
ERRORS_GPU5 = (FIX / "nvlink-e-h100x8-gpu5-link11-replay-crc.txt").read_text()
UUIDS = [
    "GPU-2fd736d2-a0b7-2ff1-0a75-93da08bb11b2", "GPU-1436f412-7384-1a43-626b-a4b053a66946",
    "GPU-d4412199-3fab-2fbe-0b94-e456049dc386", "GPU-b5521d4a-f9f8-1cd8-e241-ea70c75aeb1d",
    "GPU-41b502cf-3e48-1895-70b0-999369551350", "GPU-e19e1697-f2dd-40d5-27ed-db3de5e5b750",
    "GPU-007a36ba-89d1-575d-a7be-082a58bbfb82", "GPU-a6de978a-eff7-cdf4-4d17-0d9ea6f5eec1",
]
H100 = "NVIDIA H100 80GB HBM3"


def _by_index(result: dict[GpuKey, list[NvLink]]) -> dict[int, list[NvLink]]:
    return {key.index: links for key, links in result.items()}


# ------------------------------------------------------------------------------- own fixtures


def test_status_healthy_h100x8_eighteen_links_each():
    result = parse_nvlink_status(STATUS_OK)
    assert list(result) == [GpuKey(i, UUIDS[i], H100) for i in range(8)]
    for links in result.values():
        assert [link.link for link in links] == list(range(18))
        assert all(link.active is True and link.speed_gbps == 26.562 for link in links)
        assert all(link.replay_errors is None and link.crc_flit_errors is None for link in links)


def test_status_gpu3_link5_inactive_only():
    result = _by_index(parse_nvlink_status(STATUS_GPU3))
    down = [(gpu, link.link) for gpu, links in result.items() for link in links if not link.active]
    assert down == [(3, 5)]
    assert result[3][5] == NvLink(link=5, active=False, speed_gbps=None)
    assert len(result[3]) == 18 and result[3][4].active and result[3][6].speed_gbps == 26.562


def test_errors_healthy_all_zero_crc_goes_to_flit():
    result = parse_nvlink_errors(ERRORS_OK)
    assert list(result) == [GpuKey(i, UUIDS[i], H100) for i in range(8)]
    for links in result.values():
        assert [link.link for link in links] == list(range(18))
        for link in links:
            assert (link.replay_errors, link.recovery_errors, link.crc_flit_errors) == (0, 0, 0)
            assert link.crc_data_errors is None  # "CRC Errors" has no flit/data split
            assert link.active is None and link.speed_gbps is None


def test_errors_gpu5_link11_replay_recovery_crc():
    result = _by_index(parse_nvlink_errors(ERRORS_GPU5))
    assert result[5][11] == NvLink(link=11, replay_errors=37, recovery_errors=2, crc_flit_errors=1342)
    dirty = [(g, l.link) for g, links in result.items() for l in links
             if l.replay_errors or l.recovery_errors or l.crc_flit_errors]
    assert dirty == [(5, 11)]


def test_merge_status_and_errors():
    merged = _by_index(merge_nvlinks(parse_nvlink_status(STATUS_GPU3), parse_nvlink_errors(ERRORS_GPU5)))
    assert sorted(merged) == list(range(8)) and all(len(v) == 18 for v in merged.values())
    assert merged[3][5] == NvLink(5, active=False, speed_gbps=None, replay_errors=0,
                                  recovery_errors=0, crc_flit_errors=0)
    assert merged[5][11] == NvLink(11, active=True, speed_gbps=26.562, replay_errors=37,
                                   recovery_errors=2, crc_flit_errors=1342)
    assert merged[0][0] == NvLink(0, True, 26.562, 0, 0, 0, None)


def test_merge_joins_by_uuid_when_indexes_differ_and_keeps_one_sided_gpus():
    status = {GpuKey(0, UUIDS[1], H100): [NvLink(0, True, 26.562)],
              GpuKey(2, None, H100): [NvLink(0, False)]}
    errors = {GpuKey(1, UUIDS[1], None): [NvLink(0, replay_errors=4), NvLink(1, crc_flit_errors=9)],
              GpuKey(7, UUIDS[7], H100): [NvLink(3, recovery_errors=1)]}
    merged = merge_nvlinks(status, errors)
    assert list(merged) == [GpuKey(0, UUIDS[1], H100), GpuKey(2, None, H100), GpuKey(7, UUIDS[7], H100)]
    first = merged[GpuKey(0, UUIDS[1], H100)]
    assert first == [NvLink(0, True, 26.562, replay_errors=4), NvLink(1, crc_flit_errors=9)]
    assert merged[GpuKey(7, UUIDS[7], H100)] == [NvLink(3, recovery_errors=1)]
    first[0].active = False  # the inputs are not aliased
    assert status[GpuKey(0, UUIDS[1], H100)][0].active is True


def test_merge_fills_uuid_and_name_from_the_other_side():
    merged = merge_nvlinks({GpuKey(4): [NvLink(0, True, 25.0)]},
                           {GpuKey(4, UUIDS[4], H100): [NvLink(0, replay_errors=0)]})
    assert list(merged) == [GpuKey(4, UUIDS[4], H100)]


# ---------------------------------------------------------------------------------- apply_to_gpus


def _smi_gpus() -> list[GpuInfo]:
    return parse_nvidia_smi((FIXTURES / "nvidia-smi" / "q-h100-sxm-8gpu-565.57.01-healthy.txt")
                            .read_text()).gpus


def test_apply_to_gpus_from_nvidia_smi_q_by_uuid():
    gpus = _smi_gpus()
    assert [g.uuid for g in gpus] == UUIDS and all(g.nvlinks is None for g in gpus)
    links = merge_nvlinks(parse_nvlink_status(STATUS_GPU3), parse_nvlink_errors(ERRORS_GPU5))
    # Reverse the key order: matching must not depend on it.
    applied = apply_to_gpus(gpus, dict(reversed(list(links.items()))))
    assert [g.uuid for g in applied] == UUIDS
    assert all(a is not g for a, g in zip(applied, gpus)) and all(g.nvlinks is None for g in gpus)
    assert [len(g.nvlinks) for g in applied] == [18] * 8
    assert applied[3].nvlinks[5].active is False
    assert applied[5].nvlinks[11].crc_flit_errors == 1342 and applied[5].nvlinks[11].active is True
    assert applied[0].pci_bus_id == gpus[0].pci_bus_id and applied[0].name == H100


def test_apply_to_gpus_by_index_when_a_uuid_is_missing_never_across_uuids():
    gpus = [GpuInfo(index=0, uuid=UUIDS[0]), GpuInfo(index=1, uuid=None), GpuInfo(index=2, uuid=UUIDS[2])]
    links = {GpuKey(0, None): [NvLink(0, True, 25.0)],
             GpuKey(1, UUIDS[1]): [NvLink(1, False)],
             GpuKey(2, UUIDS[6]): [NvLink(2, True, 25.0)]}  # same index, other GPU: no match
    applied = apply_to_gpus(gpus, links)
    assert applied[0].nvlinks == [NvLink(0, True, 25.0)]
    assert applied[1].nvlinks == [NvLink(1, False)]
    assert applied[2].nvlinks is None
    applied[0].nvlinks[0].active = False
    assert links[GpuKey(0, None)][0].active is True


def test_apply_all_inactive_gives_empty_list_unsupported_stays_none():
    text = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-7fded661-d216-81c9-bd6d-4d3c0941a4a7)\n"
            "NVML: Unable to retrieve NVLink information as all links are inActive\n"
            "GPU 1: NVIDIA RTX A4000 (UUID: GPU-c70cc88f-417f-faf3-9238-292380156520)\n"
            "Device does not have or support Nvlink\n")
    applied = apply_to_gpus([GpuInfo(index=0), GpuInfo(index=1)], parse_nvlink_status(text))
    assert applied[0].nvlinks == [] and applied[1].nvlinks is None


# ------------------------------------------------------------------------------- format variants


@pytest.mark.parametrize("word", ["<inactive>", "Inactive", "inActive", "Not Active", "Down", "<Down>"])
def test_status_inactive_words(word):
    result = parse_nvlink_status(f"GPU 0: Tesla V100-SXM2-32GB (UUID: {UUIDS[0]})\n\t Link 0: {word}\n")
    assert list(result.values()) == [[NvLink(0, active=False)]]


def test_status_speeds_active_word_unknown_and_zero():
    text = ("GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-00000000-1111-2222-3333-444444444444)\n"
            "\t Link 0: 25.781 GB/s\n\t Link 1: 25 GB/s\n\t Link 2: Active\n"
            "\t Link 3: some future status\n\t Link 4: 0 GB/s\n")
    (links,) = parse_nvlink_status(text).values()
    assert links == [NvLink(0, True, 25.781), NvLink(1, True, 25.0), NvLink(2, True, None),
                     NvLink(3, None, None), NvLink(4, False, 0.0)]


def test_all_inactive_message_on_header_line_and_unsupported_left_out():
    text = ("GPU 0: NVIDIA RTX A4000 (UUID: GPU-c70cc88f-417f-faf3-9238-292380156520) "
            "Device does not have or support Nvlink\n"
            "GPU 1: Quadro RTX 5000 (UUID: GPU-c01ce12b-7986-694b-9b2c-0da9306f5ded) NVML: Unable to "
            "retrieve Nvlink information as all links are inActive\n"
            "GPU 2: NVIDIA L40S (UUID: GPU-11111111-2222-3333-4444-555555555555)\n")
    result = parse_nvlink_status(text)
    assert result == {GpuKey(1, "GPU-c01ce12b-7986-694b-9b2c-0da9306f5ded", "Quadro RTX 5000"): []}
    assert parse_nvlink_errors(text) == result  # -e prints the same messages


def test_header_without_uuid_message_split_from_name():
    result = parse_nvlink_status("GPU 3: Fixture NVML: Unable to retrieve NVLink information as all "
                                 "links are inActive\n")
    assert result == {GpuKey(3, None, "Fixture"): []}


def test_redacted_uuid_is_none_prompts_and_elisions_skipped():
    text = ("user@node01:~$ nvidia-smi nvlink -s\n"
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)\n"
            "\t Link 0: 26.562 GB/s\n\t [...]\n\t Link 17: 26.562 GB/s\n...\n"
            "> nvidia-smi nvlink -s -i 1\n")
    assert parse_nvlink_status(text) == {GpuKey(0, None, H100): [NvLink(0, True, 26.562),
                                                                 NvLink(17, True, 26.562)]}


def test_errors_flit_data_split_explicit_flit_wins_and_na():
    text = ("GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-00000000-1111-2222-3333-444444444444)\n"
            "\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 0\n"
            "\t Link 0: CRC FLIT Errors: 65535\n\t Link 0: CRC Data Errors: 12\n"
            "\t Link 1: CRC Errors: 5\n\t Link 1: CRC Flit Errors: 7\n"
            "\t Link 2: Replay Errors: N/A\n\t Link 2: Malformed Packet Errors: 0\n"
            "\t Link 3: Effective BER: 1.5e-15\n")
    (links,) = parse_nvlink_errors(text).values()
    assert links == [NvLink(0, replay_errors=0, recovery_errors=0, crc_flit_errors=65535, crc_data_errors=12),
                     NvLink(1, crc_flit_errors=7), NvLink(2), NvLink(3)]


def test_concatenated_status_and_errors_in_one_file():
    text = "$ nvidia-smi nvlink -s\n" + STATUS_GPU3 + "$ nvidia-smi nvlink -e\n" + ERRORS_GPU5
    status, errors = _by_index(parse_nvlink_status(text)), _by_index(parse_nvlink_errors(text))
    assert status[3][5].active is False and status[5][11].replay_errors is None
    assert errors[5][11].replay_errors == 37 and errors[3][5].active is None


# ----------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("parse", [parse_nvlink_status, parse_nvlink_errors])
@pytest.mark.parametrize("text, match", [
    ("", "empty"),
    ("  \n\t\n", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no 'GPU N"),
    ("GPU 00000000:18:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n", "no 'GPU N"),
    ("\t Link 0: 26.562 GB/s\n", "no 'GPU N"),
])
def test_no_header_is_parse_error(parse, text, match):
    with pytest.raises(ParseError, match=match):
        parse(text)


@pytest.mark.parametrize("parse", [parse_nvlink_status, parse_nvlink_errors])
def test_not_text_is_parse_error(parse):
    with pytest.raises(ParseError, match="expected text"):
        parse(b"GPU 0: x")


def test_wrong_file_is_parse_error():
    with pytest.raises(ParseError, match="nvlink -e"):
        parse_nvlink_status(ERRORS_OK)
    with pytest.raises(ParseError, match="link status"):
        parse_nvlink_errors(STATUS_OK)
    throughput = f"GPU 0: {H100} (UUID: {UUIDS[0]})\n\t Link 0: Data Tx: 5863784 KiB\n"
    with pytest.raises(ParseError, match="-gt"):
        parse_nvlink_errors(throughput)
    with pytest.raises(ParseError, match="counters"):
        parse_nvlink_status(throughput)


# ---------------------------------------------------------------------------------- real corpus


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nvlink-topo", "nvlink-*"))
def test_every_corpus_nvlink_file(path: Path):
    """-s/--status files parse as status, -e as errors; each is refused by the other parser;
    `-gt d` throughput counters are for neither."""
    text = path.read_text()
    if path.name.startswith("nvlink-gt-"):
        for parse in (parse_nvlink_status, parse_nvlink_errors):
            with pytest.raises(ParseError):
                parse(text)
        return
    right, wrong = ((parse_nvlink_errors, parse_nvlink_status) if path.name.startswith("nvlink-e-")
                    else (parse_nvlink_status, parse_nvlink_errors))
    result = right(text)
    assert result and all(links for links in result.values())
    assert all(key.name and key.name.startswith("NVIDIA ") and key.uuid for key in result)
    with pytest.raises(ParseError):
        wrong(text)


def _corpus(name: str) -> str:
    path = CORPUS / "nvlink-topo" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return path.read_text()


@pytest.mark.corpus
def test_corpus_h800x8_status_gpus_2_to_6_elided():
    result = parse_nvlink_status(_corpus("nvlink-status-h800x8-author-ellipsis.txt"))
    assert list(result) == [
        GpuKey(0, "GPU-34bf77d1-c686-6821-79a8-32d326c5039c", "NVIDIA H800"),
        GpuKey(1, "GPU-f5046fa5-3db4-45e8-870a-dc1376becaa5", "NVIDIA H800"),
        GpuKey(7, "GPU-474d838c-171f-d249-4f45-bbc01a8eb74a", "NVIDIA H800"),
    ]
    for links in result.values():
        assert links == [NvLink(n, True, 26.562) for n in range(8)]


@pytest.mark.corpus
def test_corpus_h100_status_excerpt_links_0_and_17():
    result = parse_nvlink_status(_corpus("nvlink-status-h100-26.562gbs-uuid-redacted-excerpt.txt"))
    assert result == {GpuKey(0, "GPU-abcdefab-cdef-abdc-abcd-abababababab", H100):
                      [NvLink(0, True, 26.562), NvLink(17, True, 26.562)]}


@pytest.mark.corpus
def test_corpus_a100_status_gpu0_twelve_links_at_25():
    result = parse_nvlink_status(_corpus("nvlink-s-a100-sxm4-80gb-gpu0-truncated.txt"))
    assert result == {GpuKey(0, "GPU-7eeee076-1b59-1cb1-6ac0-6070eca44f7d", "NVIDIA A100-SXM4-80GB"):
                      [NvLink(n, True, 25.0) for n in range(12)]}


@pytest.mark.corpus
def test_corpus_h100_errors_excerpt_links_0_1_17_all_zero():
    result = parse_nvlink_errors(_corpus("nvlink-e-h100-18links-all-zero-uuid-redacted-excerpt.txt"))
    assert result == {GpuKey(0, "GPU-abcdefab-cdef-abdc-abcd-abababababab", H100):
                      [NvLink(n, replay_errors=0, recovery_errors=0, crc_flit_errors=0)
                       for n in (0, 1, 17)]}


# ----------------------------------------------------------------------------------------- fuzz

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = [STATUS_GPU3, ERRORS_GPU5]
PIECES = ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: ", "GPU-2fd736d2-a0b7-2ff1-0a75-93da08bb11b2)", "\n",
          "\t Link 5: ", "26.562 GB/s", "<inactive>", "Replay Errors: ", "CRC Errors: 7", ": ",
          "NVML: Unable to retrieve NVLink information as all links are inActive", "GPU 12:", "(UUID:"]
PARSERS = [parse_nvlink_status, parse_nvlink_errors]


def only_parse_error(text: str) -> None:
    for parse in PARSERS:
        try:
            result = parse(text)
        except ParseError:
            continue
        for key, links in result.items():
            assert isinstance(key, GpuKey) and isinstance(key.index, int)
            assert [link.link for link in links] == sorted({link.link for link in links})
        apply_to_gpus([GpuInfo(index=i) for i in range(4)], merge_nvlinks(result, result))


@FUZZ
@given(st.text())
def test_fuzz_arbitrary_text(text):
    only_parse_error(text)


@FUZZ
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=12), max_size=30))
def test_fuzz_mix_of_format_pieces(pieces):
    only_parse_error("".join(pieces))


@FUZZ
@given(st.sampled_from(SEEDS), st.floats(0, 1), st.floats(0, 1))
def test_fuzz_truncated_real_inputs(seed, start, end):
    a, b = sorted((int(len(seed) * start), int(len(seed) * end)))
    only_parse_error(seed[a:b])


@FUZZ
@given(st.sampled_from(SEEDS), st.lists(st.tuples(st.floats(0, 1), st.characters()), min_size=1,
                                        max_size=20))
def test_fuzz_character_flips(seed, flips):
    chars = list(seed)
    for where, char in flips:
        chars[min(int(where * len(chars)), len(chars) - 1)] = char
    only_parse_error("".join(chars))
