"""Bad-node localisation: exact attribution in hand-built cases, the simulator at scale, soundness fuzz."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.burnin.localize import Group, Localisation, Round, localise
from healthcheck.burnin.simulate import Fleet, score

THRESHOLD = 320.0  # 0.8 x nominal 400 GB/s


def model(bad=(), group_only=(), min_size=8, dead=(), overrides=None, calls=None):
    """A noise-free fleet: a group runs at 400 GB/s x the slowest member's factor (0.6 when bad).

    ``dead`` nodes make their group's test fail to run (None); ``overrides`` maps a frozenset of nodes to
    a list of values returned on successive measurements of that exact group.
    """
    overrides = {k: list(v) for k, v in (overrides or {}).items()}

    def measure(groups: list[Group]) -> dict[Group, float | None]:
        members = [n for g in groups for n in g]
        assert len(members) == len(set(members)), f"groups of one round overlap: {groups}"
        if calls is not None:
            calls.append(list(groups))
        out: dict[Group, float | None] = {}
        for g in groups:
            key = frozenset(g)
            if overrides.get(key):
                out[g] = overrides[key].pop(0)
            elif any(n in dead for n in g):
                out[g] = None
            else:
                slow = any(n in bad or (n in group_only and len(g) >= min_size) for n in g)
                out[g] = 400.0 * (0.6 if slow else 1.0)
        return out

    return measure


def names(k: int) -> list[str]:
    return [f"n{i:03d}" for i in range(k)]


def check_invariants(result: Localisation, nodes: list[str], max_rounds: int = 6) -> None:
    assert sorted(result.bad + result.suspects + result.good) == sorted(nodes)
    assert len(result.rounds) <= max_rounds
    for r in result.rounds:
        assert r.kind in {"pairs", "repair", "retest", "bisect"}
        flat = [n for g in r.groups for n in g]
        assert len(flat) == len(set(flat)), "a round's groups must be disjoint"
        assert set(r.results) == set(r.groups)
    for n in result.bad:  # never attributed without evidence
        assert any("with known-good" in line or "isolated" in line for line in result.evidence[n]), n


# ------------------------------------------------------------------------------------ hand-built cases


def test_one_bad_node_among_eight():
    nodes = names(8)
    result = localise(nodes, model(bad={"n005"}), THRESHOLD, seed=1)
    assert result.bad == ["n005"]
    assert result.suspects == []
    assert result.good == [n for n in nodes if n != "n005"]
    assert [r.kind for r in result.rounds] == ["pairs", "repair"]
    assert len(result.rounds[0].groups) == 4 and all(len(g) == 2 for g in result.rounds[0].groups)
    assert len(result.rounds[1].groups) == 2  # both members of the failed pair, each with a cleared node
    lines = result.evidence["n005"]
    assert lines[0].startswith("round 1 pairs: (") and "240.0 GB/s < 320.0" in lines[0]
    assert lines[1].startswith("round 2 repair: (n005,") and "with known-good" in lines[1]
    assert result.group_fault is False
    check_invariants(result, nodes)


def test_two_bad_nodes_in_the_same_pair_are_both_attributed():
    nodes = names(8)
    first = localise(nodes, model(), THRESHOLD, seed=7).rounds[0].groups  # the seeded pairing
    a, b = first[2]
    result = localise(nodes, model(bad={a, b}), THRESHOLD, seed=7)
    assert result.rounds[0].groups == first
    assert result.bad == sorted([a, b])
    assert len(result.rounds) == 2
    check_invariants(result, nodes)


def test_odd_node_count_makes_a_triple_without_known_good():
    nodes = names(7)
    result = localise(nodes, model(bad={"n003"}), THRESHOLD, seed=0)
    sizes = sorted(len(g) for g in result.rounds[0].groups)
    assert sizes == [2, 2, 3]
    assert result.bad == ["n003"]
    assert result.suspects == []
    check_invariants(result, nodes)


def test_odd_node_out_is_paired_with_a_known_good_node():
    nodes = names(7)
    pairing = localise(nodes, model(), THRESHOLD, seed=0, known_good=["spare1"]).rounds[0].groups
    odd = next(g for g in pairing if "spare1" in g)
    assert len(odd) == 2 and all(len(g) == 2 for g in pairing)
    lonely = odd[0]
    result = localise(nodes, model(bad={lonely}), THRESHOLD, seed=0, known_good=["spare1"])
    assert result.bad == [lonely]
    assert len(result.rounds) == 1  # attributed directly: its partner was known-good
    assert "with known-good spare1" in result.evidence[lonely][0]
    assert "spare1" not in result.good  # outside the allocation: not reported


def test_known_good_inside_the_allocation_is_trusted_and_used_first():
    nodes = names(9)  # 8 nodes to test: n008 is not needed in round 1
    result = localise(nodes, model(bad={"n002"}), THRESHOLD, seed=3, known_good=["n008"])
    assert result.bad == ["n002"]
    assert "n008" in result.good and result.evidence["n008"] == ["given as known-good"]
    assert all("n008" not in g for g in result.rounds[0].groups)
    assert ("n002", "n008") in result.rounds[1].groups or ("n008" in result.rounds[1].groups[0])


def test_a_test_that_fails_to_run_counts_as_below_threshold():
    nodes = names(8)
    result = localise(nodes, model(dead={"n003"}), THRESHOLD, seed=2)
    assert result.bad == ["n003"]
    assert "failed to run" in result.evidence["n003"][1]
    check_invariants(result, nodes)


def test_unsure_values_are_retested_and_cleared():
    nodes = names(8)
    pairing = localise(nodes, model(), THRESHOLD, seed=4).rounds[0].groups
    unsure = pairing[1]
    result = localise(nodes, model(overrides={frozenset(unsure): [318.0]}), THRESHOLD, seed=4)
    assert [r.kind for r in result.rounds] == ["pairs", "retest"]
    assert result.bad == [] and result.suspects == [] and len(result.good) == 8
    assert "(unsure)" in result.evidence[unsure[0]][0]
    assert {n for g in result.rounds[1].groups for n in g} >= set(unsure)


def test_a_node_stuck_inside_the_margin_band_stays_a_suspect():
    nodes = names(8)
    pairing = localise(nodes, model(), THRESHOLD, seed=4).rounds[0].groups
    slowish = pairing[0][0]
    overrides = {frozenset((slowish, other)): [316.0] * 10 for other in nodes if other != slowish}
    result = localise(nodes, model(overrides=overrides), THRESHOLD, seed=4, max_rounds=4)
    assert result.bad == []
    assert result.suspects == [slowish]
    assert len(result.rounds) == 4
    assert result.evidence[slowish][-1] == "unresolved after 4 rounds (max_rounds=4)"


def test_group_only_fault_is_found_by_bisection():
    nodes = names(16)
    result = localise(nodes, model(group_only={"n011"}), THRESHOLD, full_group_value=240.0, max_rounds=8)
    assert result.bad == ["n011"]
    assert result.group_fault is True
    assert result.rounds[0].kind == "pairs" and {r.kind for r in result.rounds[1:]} == {"bisect"}
    assert all(v == 400.0 for v in result.rounds[0].results.values())
    assert result.evidence["n011"][-1].endswith("240.0 GB/s < 320.0: isolated")
    assert "(n011 + 7 known-good)" in result.evidence["n011"][-1]
    check_invariants(result, nodes, 8)


def test_pair_fault_and_group_only_fault_together():
    nodes = names(32)
    result = localise(nodes, model(bad={"n003"}, group_only={"n020"}), THRESHOLD, full_group_value=240.0,
                      max_rounds=10)
    assert result.bad == ["n003", "n020"]
    assert result.group_fault is True
    assert result.rounds[2].kind == "retest" and len(result.rounds[2].groups[0]) == 31
    check_invariants(result, nodes, 10)


def test_pair_fault_explains_the_full_result_after_one_confirmation_round():
    nodes = names(16)
    result = localise(nodes, model(bad={"n009"}), THRESHOLD, full_group_value=240.0)
    assert result.bad == ["n009"] and result.group_fault is False
    assert [r.kind for r in result.rounds] == ["pairs", "repair", "retest"]
    assert list(result.rounds[2].results.values()) == [400.0]


def test_fault_that_needs_more_than_half_the_allocation_leaves_honest_suspects():
    nodes = names(16)
    result = localise(nodes, model(group_only={"n005"}, min_size=12), THRESHOLD, full_group_value=240.0)
    assert result.bad == []
    assert result.suspects == nodes
    assert result.group_fault is True


def test_all_good_attributes_nothing_in_one_round():
    nodes = names(12)
    for full in (None, 401.0):
        result = localise(nodes, model(), THRESHOLD, full_group_value=full)
        assert result.bad == [] and result.suspects == []
        assert result.good == nodes
        assert len(result.rounds) == 1 and result.rounds[0].kind == "pairs"


def test_more_bad_than_good_gives_suspects_not_wrong_attributions():
    nodes = names(8)
    truth = {"n000", "n001", "n002", "n003", "n004", "n005"}
    result = localise(nodes, model(bad=truth), THRESHOLD, seed=5, max_rounds=2)
    assert set(result.bad) <= truth
    assert not set(result.good) & truth
    assert result.suspects  # not enough cleared partners within 2 rounds
    everyone_bad = localise(nodes, model(bad=set(nodes)), THRESHOLD, seed=5)
    assert everyone_bad.bad == [] and everyone_bad.good == [] and everyone_bad.suspects == nodes


def test_one_node_and_no_nodes():
    alone = localise(["a"], model(), THRESHOLD)
    assert alone.suspects == ["a"] and alone.rounds == []
    assert "no partner" in alone.evidence["a"][0]
    paired = localise(["a"], model(bad={"a"}), THRESHOLD, known_good=["b"])
    assert paired.bad == ["a"] and len(paired.rounds) == 1
    empty = localise([], model(), THRESHOLD)
    assert (empty.bad, empty.suspects, empty.good, empty.rounds) == ([], [], [], [])


def test_to_dict_is_json_ready():
    nodes = names(6)
    result = localise(nodes, model(bad={"n004"}), THRESHOLD, seed=1)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["bad"] == ["n004"] and data["group_fault"] is False
    assert data["rounds"][0]["kind"] == "pairs"
    assert {len(g["nodes"]) for g in data["rounds"][0]["groups"]} == {2}
    assert data["evidence"]["n004"] == result.evidence["n004"]
    assert isinstance(result.rounds[0], Round)


def test_same_seed_same_rounds_and_different_seed_different_pairs():
    nodes = names(16)
    a = localise(nodes, model(bad={"n001"}), THRESHOLD, seed=11)
    b = localise(nodes, model(bad={"n001"}), THRESHOLD, seed=11)
    c = localise(nodes, model(bad={"n001"}), THRESHOLD, seed=12)
    assert a.to_dict() == b.to_dict()
    assert a.rounds[0].groups != c.rounds[0].groups
    assert a.bad == c.bad == ["n001"]


@pytest.mark.parametrize("kwargs, message", [
    ({"threshold": 0.0}, "threshold"), ({"threshold": float("nan")}, "threshold"),
    ({"margin": 1.0}, "margin"), ({"margin": -0.1}, "margin"), ({"max_rounds": 0}, "max_rounds"),
])
def test_bad_arguments_raise_value_error(kwargs, message):
    args = {"threshold": THRESHOLD, **kwargs}
    threshold = args.pop("threshold")
    with pytest.raises(ValueError, match=message):
        localise(names(4), model(), threshold, **args)


def test_duplicate_nodes_and_a_broken_measure_raise_value_error():
    with pytest.raises(ValueError, match="duplicate node names: n001"):
        localise(["n000", "n001", "n001"], model(), THRESHOLD)
    with pytest.raises(ValueError, match="must return a dict"):
        localise(names(4), lambda groups: [400.0] * len(groups), THRESHOLD)
    with pytest.raises(ValueError, match="expected GB/s or None"):
        localise(names(4), lambda groups: {g: "fast" for g in groups}, THRESHOLD)


def test_missing_and_nan_results_count_as_failed_to_run():
    nodes = names(4)

    def partial(groups):
        return {g: (float("nan") if "n001" in g else 400.0) for g in groups if "n002" not in g}

    result = localise(nodes, partial, THRESHOLD, seed=0)
    assert result.bad == ["n001", "n002"]


# ------------------------------------------------------------------------------------ simulator at scale


@pytest.mark.parametrize("seed", range(8))
def test_simulated_256_nodes_5_percent_bad_exact_in_three_rounds(seed):
    fleet = Fleet(256, 0.05, seed=seed)
    result = localise(fleet.nodes, fleet.measure, 0.8 * fleet.nominal, seed=seed,
                      full_group_value=fleet.full_value())
    assert score(result.bad, fleet.bad) == (1.0, 1.0)
    assert result.suspects == []
    assert len(result.rounds) <= 3 and fleet.rounds == len(result.rounds)
    assert len(fleet.bad) == 13


@pytest.mark.parametrize("seed", range(3))
def test_simulated_group_only_faults_found_with_enough_rounds(seed):
    fleet = Fleet(64, 0.05, group_only_fraction=1.0, seed=seed)
    result = localise(fleet.nodes, fleet.measure, 320.0, seed=seed, full_group_value=fleet.full_value(),
                      max_rounds=10)
    assert result.group_fault is True
    assert score(result.bad, fleet.bad) == (1.0, 1.0)


# ------------------------------------------------------------------------------------ fuzz


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 40), data=st.data())
def test_noise_free_model_never_attributes_a_good_node(n, data):
    nodes = names(n)
    bad = data.draw(st.sets(st.sampled_from(nodes), max_size=n))
    group_only = data.draw(st.sets(st.sampled_from(nodes), max_size=3)) - bad
    min_size = data.draw(st.integers(3, 16))
    spare = data.draw(st.lists(st.sampled_from(["s1", "s2"] + [x for x in nodes if x not in bad | group_only]),
                               max_size=2, unique=True))
    seed = data.draw(st.integers(0, 1000))
    measure = model(bad=bad, group_only=group_only, min_size=min_size)
    full = measure([tuple(nodes)])[tuple(nodes)]
    result = localise(nodes, measure, THRESHOLD, known_good=spare, seed=seed, full_group_value=full,
                      max_rounds=12)
    assert set(result.bad) <= bad | group_only
    assert not set(result.good) & bad
    # a group-only fault shows only while what is left of the allocation (no bad nodes, no suspects) is big
    # enough; then such a node must never be reported good, unless the rounds ran out before it was retested
    if n - len(bad) - len(result.suspects) >= min_size and len(result.rounds) < 12:
        assert not set(result.good) & group_only
    check_invariants(result, nodes, 12)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 24), seed=st.integers(0, 50),
       values=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.just(318.0)),
                       min_size=1, max_size=30),
       full=st.one_of(st.none(), st.floats(0, 500)))
def test_arbitrary_measurements_never_crash(n, seed, values, full):
    nodes = names(n)
    feed = iter(values * 200)

    def measure(groups):
        return {g: next(feed) for g in groups}

    result = localise(nodes, measure, THRESHOLD, seed=seed, full_group_value=full)
    check_invariants(result, nodes)
