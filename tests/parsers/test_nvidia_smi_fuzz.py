"""Fuzz the nvidia-smi parsers: whatever comes in, only ParseError may come out."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.core.model import GpuInfo
from healthcheck.parsers import ParseError
from healthcheck.parsers.nvidia_smi import parse_nvidia_smi
from tests.conftest import FIXTURES

_DIR = FIXTURES / "nvidia-smi"
XML = (_DIR / "q-x-h100-sxm-8gpu-565.57.01-healthy.xml").read_text()
TEXT = (_DIR / "q-h100-sxm-8gpu-565.57.01-healthy.txt").read_text()
SEEDS = [XML, TEXT]
SNIPPETS = ["GPU 00000000:18:00.0\n", "    Fabric\n        State : In Progress\n",
            "<nvidia_smi_log>", "</gpu>", "<gpu id=\"x\">", "    ECC Errors\n        Volatile\n",
            "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n",
            " : ", "N/A", "\t", "<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">"]

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def only_parse_error(text: str) -> None:
    try:
        result = parse_nvidia_smi(text)
    except ParseError:
        return
    assert all(isinstance(g, GpuInfo) for g in result.gpus)
    assert [g.index for g in result.gpus] == list(range(len(result.gpus)))


@FUZZ
@given(st.text())
def test_arbitrary_text(text):
    only_parse_error(text)


@FUZZ
@given(st.lists(st.sampled_from(SNIPPETS) | st.text(max_size=20), max_size=30))
def test_arbitrary_mix_of_format_pieces(pieces):
    only_parse_error("".join(pieces))


@FUZZ
@given(st.sampled_from(SEEDS), st.floats(0, 1))
def test_truncations(seed, fraction):
    only_parse_error(seed[: int(len(seed) * fraction)])


@FUZZ
@given(st.sampled_from(SEEDS),
       st.lists(st.tuples(st.floats(0, 1), st.characters()), min_size=1, max_size=20))
def test_random_character_flips(seed, flips):
    chars = list(seed)
    for where, char in flips:
        chars[min(int(where * len(chars)), len(chars) - 1)] = char
    only_parse_error("".join(chars))


@FUZZ
@given(st.sampled_from(SEEDS), st.binary(min_size=1, max_size=8), st.floats(0, 1))
def test_random_bytes_inserted(seed, junk, where):
    at = int(where * len(seed))
    only_parse_error(seed[:at] + junk.decode("latin-1") + seed[at:])


@FUZZ
@given(st.sampled_from([TEXT]), st.lists(st.floats(0, 1), max_size=40))
def test_text_lines_dropped(seed, drops):
    lines = seed.splitlines()
    for where in drops:
        if lines:
            del lines[min(int(where * len(lines)), len(lines) - 1)]
    only_parse_error("\n".join(lines))
