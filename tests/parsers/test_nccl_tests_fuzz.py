"""Fuzz the nccl-tests parser: whatever comes in, it returns an NcclResult whose to_dict() is strict
JSON, or raises NcclParseError -- nothing else."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.parsers.nccl_tests import NcclParseError, NcclResult, parse
from tests.conftest import FIXTURES, corpus_files
from tests.fuzzing import mutated

SEEDS = [p.read_text() for p in sorted((FIXTURES / "nccl-tests").glob("*.txt"))] + [
    p.read_text() for p in corpus_files("nccl-tests")]
SNIPPETS = ["# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20\n",
            "#  Rank  0 Group  0 Pid  1 on  h device  0 [0000:18:00] NVIDIA H100\n",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n",
            "           8             2     float     sum      -1    40.12    0.00    0.00      0",
            "    38.85    0.00    0.00      0\n", "h:1:2 [0] NCCL INFO x\n", "h:1:2 [0] f.cc:1 NCCL WARN y\n",
            "# Out of bounds values : 1 FAILED\n", "# Avg bus bandwidth    : nan\n", "1e999", "N/A", "-nan",
            " .. h pid 1: Test failure common.cu:1\n", "[1,0]<stdout>:", "0: ", "\r\n", "2025-03-02 11:04:37"]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(text: str) -> None:
    try:
        result = parse(text)
    except NcclParseError as exc:
        assert str(exc)
        return
    assert isinstance(result, NcclResult)
    json.dumps(result.to_dict(), allow_nan=False)
    assert isinstance(result.wrong_total, int)
    assert result.rows or result.errors
    for row in result.rows:
        assert isinstance(row.size_bytes, int) and row.size_bytes >= 0
    big = result.busbw_at_large_sizes()
    assert big is None or isinstance(big, float)


@FUZZ
@given(mutated(SEEDS))
def test_damaged_real_outputs(text):
    check(text)


@FUZZ
@given(st.text())
def test_arbitrary_text(text):
    check(text)


@FUZZ
@given(st.lists(st.sampled_from(SNIPPETS) | st.text(max_size=12), max_size=30))
def test_arbitrary_mix_of_format_pieces(pieces):
    check("".join(pieces))


@FUZZ
@given(st.sampled_from(SEEDS), st.lists(st.tuples(st.floats(0, 1), st.characters()), min_size=1, max_size=20))
def test_random_character_flips(seed, flips):
    chars = list(seed)
    for where, char in flips:
        chars[min(int(where * len(chars)), len(chars) - 1)] = char
    check("".join(chars))
