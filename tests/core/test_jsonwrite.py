"""jsonwrite.dumps writes what json.dumps writes (compact, ASCII, no NaN) and fails where it fails."""
from __future__ import annotations

import json
import random

import pytest

from healthcheck.core import jsonwrite
from healthcheck.core.model import Status

COMPACT = {"ensure_ascii": True, "allow_nan": False, "separators": (",", ":")}


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randrange(-10 ** 20, 10 ** 20)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1e-310, 1.5e300, 0.1, -2.5, rng.random() * 1e6, float(rng.randrange(1 << 60))])
    if kind in (3, 4, 5):
        alphabet = "ab \"\\/\n\t\x00\x1f\x7f\u00e9\u2028\U0001F600<>&'"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    return {rng.choice(["k", "é", "a\nb", "", "z" * 3]) + str(i): _random_value(rng, depth + 1)
            for i in range(rng.randrange(4))}


def test_the_same_text_as_json_dumps():
    rng = random.Random(15)
    for _ in range(3000):
        value = _random_value(rng)
        assert jsonwrite.dumps(value) == json.dumps(value, **COMPACT)
        assert jsonwrite.dumps(value, sort_keys=True) == json.dumps(value, sort_keys=True, **COMPACT)


def test_scalar_keys_and_str_subclasses_as_json_writes_them():
    value = {1: "a", 2.5: Status.FAIL, True: [Status.PASS], None: {"x": False}, -3: 10 ** 30}
    assert jsonwrite.dumps(value) == json.dumps(value, **COMPACT)


@pytest.mark.parametrize("bad", [float("nan"), [float("inf")], {"k": -float("inf")}, {float("nan"): 1}])
def test_non_finite_numbers_are_refused(bad):
    with pytest.raises(ValueError):
        json.dumps(bad, **COMPACT)
    with pytest.raises(ValueError):
        jsonwrite.dumps(bad)


@pytest.mark.parametrize("bad", [object(), {"s": {1, 2}}, {(1, 2): "tuple key"}, b"bytes"])
def test_other_objects_are_refused(bad):
    with pytest.raises(TypeError):
        json.dumps(bad, **COMPACT)
    with pytest.raises(TypeError):
        jsonwrite.dumps(bad)


def test_a_container_holding_itself_is_refused():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        jsonwrite.dumps(loop)
