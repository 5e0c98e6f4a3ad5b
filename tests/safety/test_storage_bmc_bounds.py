"""The storage-health and BMC parsers bound their time and memory like the others
(tests/safety/test_parser_bounds.py): input over the limit is refused with ParseError before parsing,
adversarial inputs under it end in time linear in the input, and nothing but ParseError escapes."""
from __future__ import annotations

import json
import random
import signal
import time

import pytest

from healthcheck.parsers import ParseError, ipmitool, smart

MB10 = 10 * 1024 * 1024
BOUND_S = 5.0  # 10 MB on a loaded 2-core machine; a linear parser takes well under a second
HARD_S = 120

PARSERS = {
    "smart": (smart.parse_storage_health, smart.MAX_INPUT_CHARS),
    "smart-text": (smart.parse_text, smart.MAX_INPUT_CHARS),
    "sel": (ipmitool.parse_sel, ipmitool.MAX_INPUT_CHARS),
    "sdr": (ipmitool.parse_sdr, ipmitool.MAX_INPUT_CHARS),
}


class _Hung(BaseException):
    pass


def bounded(kind: str, text) -> object:
    parse, _ = PARSERS[kind]

    def alarm(*_):
        raise _Hung()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HARD_S)
    start = time.perf_counter()
    try:
        try:
            outcome = parse(text)
        except ParseError as exc:
            outcome = exc
    except _Hung:
        pytest.fail(f"{kind}: still parsing after {HARD_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start
    assert elapsed < BOUND_S, f"{kind}: {elapsed:.2f} s for {len(text)} characters"
    return outcome


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_input_over_the_limit_is_refused_before_parsing(kind):
    _, limit = PARSERS[kind]
    outcome = bounded(kind, "a" * (limit + 1))
    assert isinstance(outcome, ParseError) and "over the limit" in str(outcome)
    outcome = bounded(kind, b"\n" * (limit + 1))
    assert isinstance(outcome, ParseError)


SHAPES = {
    "pipes": "|" * (MB10 // 4),
    "record-ids": "1 | " * (MB10 // 8),
    "near-sel": "1 | 01/01/2000 | 00:00:00 | Memory | Correctable ECC | Asserted | x\n" * 40_000,
    "near-sdr": "FAN1 | 41h | ok | 29.1 | 3400 RPM\n" * 60_000,
    "colons": "critical_warning : 0x" + "0" * (MB10 // 4),
    "commas": "media_errors : " + "1," * (MB10 // 8),
    "health-words": "SMART overall-health self-assessment test result: " * 50_000,
    "devices": "smartctl /dev/" * 200_000,
    "json-nesting": "{" + '"a":[' * 50_000,
    "json-big": json.dumps({"smart_status": {"passed": True}, "ata_smart_attributes": {
        "table": [{"id": 5, "when_failed": "now", "name": "x" * 50, "raw": {"value": 1}}] * 20_000}}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_adversarial_shapes_end_quickly_with_a_result_or_parse_error(kind, shape):
    bounded(kind, SHAPES[shape])


def test_random_text_and_values_raise_only_parse_error():
    rng = random.Random(21)
    alphabet = "|{}[]:,0123456789abcdef \n\tAsertdOKPASSEDFAILED!x\"/-#"
    samples = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400))) for _ in range(400)]
    samples += [json.dumps(v) for v in ({"critical_warning": "x"}, {"smart_status": []}, {"device": None},
                                        {"smartctl": {"exit_status": "3"}}, {"media_errors": 1e400},
                                        {"critical_warning": 0, "media_errors": 10 ** 400})]
    for text in samples:
        for kind in PARSERS:
            bounded(kind, text)
    for value in (None, 3, 2.5, ["a"], {"a": 1}):
        for kind in PARSERS:
            with pytest.raises(ParseError):
                PARSERS[kind][0](value)
