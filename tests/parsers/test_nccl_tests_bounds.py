"""The nccl-tests parser's cost at scale (issue "Safe under hostile and faulty input", item 7): memory
proportional to the rows kept (measured by tracemalloc: deterministic, whatever the machine's load),
a shared string per distinct type/redop and a shared float per repeated value, messages capped, and
the shortcuts that make it linear give exactly what the expressions they stand for give. The time per
row is measured by benchmarks/bench_nccl_parser.py (docs/performance.md), not asserted here."""
from __future__ import annotations

import re
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from healthcheck.parsers import nccl_tests
from healthcheck.parsers.nccl_tests import MAX_MESSAGES, parse

HEADER = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
          "algbw   busbw #wrong\n")
ROW = "{size:>12} {count:>12}     float     sum      -1    40.12    0.00    0.00      0    38.85    0.00    0.00      0\n"


def rows_text(n: int) -> str:
    return HEADER + "".join(ROW.format(size=8 << (i % 30), count=2 << (i % 30)) for i in range(n))


def parse_peak(text: str) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = parse(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_memory_is_proportional_to_the_rows_kept():
    """The previous parser held every line of the input as a string and a dict per row object: about
    about 840 bytes a row of 110 characters here; now about 300, the lines of the input never listed."""
    n = 40_000
    text = rows_text(n)
    result, peak = parse_peak(text)
    assert len(result.rows) == n
    assert peak / n < 400, f"{peak / n:.0f} bytes a row"
    small, small_peak = parse_peak(rows_text(n // 4))
    assert len(small.rows) == n // 4
    assert peak < 4.6 * small_peak  # linear: four times the rows, about four times the memory


def test_rows_share_their_type_and_redop_strings_and_repeated_values():
    result = parse(rows_text(50))
    first, last = result.rows[0], result.rows[-1]
    assert first.type is last.type and first.redop is last.redop
    assert first.oop.time_us is last.oop.time_us  # one float object per distinct token (up to a bound)
    assert (first.oop.time_us, first.ip.time_us, first.oop.wrong) == (40.12, 38.85, 0)


def test_warnings_and_errors_are_capped_with_a_count():
    bad_rows = "".join(f"{i} {i} float sum -1 x{i} 0 0 0 1 0 0 0\n" for i in range(MAX_MESSAGES + 500))
    failures = "".join(f"rank {i}: Test NCCL failure common.cu:{i}\n" for i in range(MAX_MESSAGES + 7))
    result = parse(HEADER + bad_rows + failures)
    assert len(result.warnings) == MAX_MESSAGES + 1
    assert result.warnings[-1].startswith("50") and "more warnings not kept" in result.warnings[-1]
    assert len(result.errors) == MAX_MESSAGES + 1 and result.errors[-1].startswith("7 more errors")
    assert result.errors[0] == "rank 0: Test NCCL failure common.cu:0"


NUM_PARTS = st.sampled_from(["0", "1", "9", ".", "e", "E", "+", "-", "_", "n", "a", "N", "/", "A", "i", "f",
                             "inf", "nan", "x", "\u0661", "1e999", "07"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(NUM_PARTS, min_size=1, max_size=6).map("".join))
def test_a_tokens_value_is_what_the_number_expression_says(token):
    expected = (nccl_tests._number(token) if nccl_tests._NUMBER.match(token) or token.lower() in nccl_tests._MISSING
                else nccl_tests._BAD)
    got = nccl_tests._value(token)
    assert got is expected or got == expected, (token, got, expected)


FAIL_PIECES = st.sampled_from(["Test ", "NCCL ", "CUDA ", "failure", "Invalid number of GPUs", "MPI_ABORT",
                               " was invoked", "mpirun", " noticed that", "srun: error: ", "slurmstepd: error: ",
                               "h1: task 3: ", "*** STEP 1 CANCELLED", "Detected 1 oom", "Segmentation",
                               " fault", "core", " dumped", "terminate called after", " ", "x", "\n", "1"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(FAIL_PIECES, max_size=8).map("".join))
def test_the_failure_prefilter_never_hides_a_failure_line(line):
    if nccl_tests._FAIL.search(line):
        assert nccl_tests._may_fail(line), line


def test_the_failure_prefilter_names_a_literal_of_every_alternative():
    """Each alternative of _FAIL carries one of the prefilter's literals (a new alternative must add one)."""
    import inspect

    source = inspect.getsource(nccl_tests._may_fail)
    literals = re.findall(r'"([^"]+)" in line', source)
    alternatives, depth, current = [], 0, ""
    for char in nccl_tests._FAIL.pattern:  # split at the top level only: (?:STEP|JOB) stays whole
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "|" and depth == 0:
            alternatives.append(current)
            current = ""
        else:
            current += char
    alternatives.append(current)
    assert len(alternatives) == 10
    for alternative in alternatives:
        plain = alternative.lstrip("^").replace("\\", "")
        assert any(lit in plain for lit in literals), alternative


def test_an_untitled_row_of_256_numbers_is_still_read():
    row = "8 2 float sum " + " ".join(["1"] * 256) + "\n"
    result = parse(row * 3)
    assert len(result.rows) == 3 and result.rows[0].oop.time_us == 1.0
