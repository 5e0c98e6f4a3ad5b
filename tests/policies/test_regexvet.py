"""The one vetting of patterns matched against others' text (healthcheck/policies/regexvet.py): the host-event
policy's patterns (kernel messages) and a fabric design's hca_regex (node descriptions) refuse the same
exponential shapes, and accept what real policies write."""
import re

import pytest

from healthcheck.fabric.hcaregex import hca_regex_problem
from healthcheck.policies.host_events import load_host_event_policy
from healthcheck.policies.regexvet import choice_points, nested_quantifier, repeated_alternation, vet_regex


@pytest.mark.parametrize("pattern, refused", [
    (r"(a+)+", "(a+)+"),
    (r"^x(?:\w+\s?)*y", r"(?:\w+\s?)*"),
    (r"(a*){2,}", "(a*){2,}"),
    (r"(a*){,}", "(a*){,}"),         # {,} is * to Python's re
    (r"((ab)+c)+", "((ab)+c)+"),
    (r"(\d+)+", r"(\d+)+"),          # an escaped character's quantifier counts
    (r"([a-z]+)*", "([a-z]+)*"),     # so does a class's
])
def test_nested_quantifiers_are_found(pattern, refused):
    assert nested_quantifier(pattern) == refused
    assert "nested quantifier" in vet_regex(pattern, 256)


@pytest.mark.parametrize("pattern, refused", [
    (r"(a|a)*", "(a|a)*"),
    (r"^(?:ab|a)+$", "(?:ab|a)+"),
    (r"(x(a|b)y)*", "(x(a|b)y)*"),   # the bar of an inner group makes the outer repeated group one
    (r"(a|b){3,}", "(a|b){3,}"),
])
def test_repeated_alternations_are_found(pattern, refused):
    assert repeated_alternation(pattern) == refused
    assert "repeated group with an alternation" in vet_regex(pattern, 256)


@pytest.mark.parametrize("pattern", [
    r"^(?P<node>\S+)\s+(?P<hca>\S+)$",
    r"(a+)?", r"(a|b)?", r"(a|b){1}", r"(ab){3}",     # at most one repetition, or a fixed count
    r"[(a+)+]", r"\(a+\)+", r"[a|b]+",               # classes and escapes are literals
    r"x{}y", r"a{b}", r"a{x,2}", r"(a+){ 2}",         # braces that are no quantifier
    r"^mce: \[Hardware Error\]: (?:CPU|Machine check) (?P<n>\d+)",
])
def test_linear_patterns_pass(pattern):
    assert vet_regex(pattern, 256) is None
    re.compile(pattern)  # (each is a valid pattern: the vetting is not what makes it one)


def test_bad_values_are_refused_with_the_limit():
    for value in ("", None, 5, "a" * 257):
        assert vet_regex(value, 256) == "must be a non-empty string of at most 256 characters"


def test_choice_points_count_quantifiers_and_bars_outside_classes():
    assert choice_points(r"^(?P<node>\S+)\s+(?P<hca>\S+)$") == 3
    assert choice_points(r"a?b*c{2,5}d{3}|e") == 4      # {3} is fixed: no choice
    assert choice_points(r"[a|b*]\|\*") == 0
    assert choice_points(r"(a|b)?") == 2


def test_the_host_event_policy_refuses_a_repeated_alternation_naming_its_class():
    text = """
[[event]]
class = "bad"
literal = "x"
patterns = ['^x(?P<dev>a|aa)+$']
severity = "fail"
"""
    with pytest.raises(ValueError, match=r"bad.*repeated group with an alternation"):
        load_host_event_policy(text)


def test_the_packaged_policy_passes_and_hca_regex_shares_the_vetting():
    assert load_host_event_policy().rule("link_down") is not None  # every shipped pattern vetted at load
    assert "repeated group with an alternation" in hca_regex_problem(r"^(?P<node>(a|a)*) (?P<hca>\S+)$")
    assert "nested quantifier" in hca_regex_problem(r"^(?P<node>(a+)+) (?P<hca>\S+)$")
