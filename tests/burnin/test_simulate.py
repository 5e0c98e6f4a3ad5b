"""The simulated fleet, the scorer and the two naive baselines bad-node localisation is compared with."""
from __future__ import annotations

import statistics

import pytest

from healthcheck.burnin.localize import localise
from healthcheck.burnin.simulate import Fleet, baseline_random_pairs_second_pass, baseline_shuffles, score


def test_fleet_nodes_and_bad_set_are_seeded():
    fleet = Fleet(256, 0.05, seed=3)
    assert len(fleet.nodes) == len(set(fleet.nodes)) == 256
    assert fleet.nodes[0] == "n000" and fleet.nodes[-1] == "n255"
    assert len(fleet.bad) == 13 and fleet.bad <= set(fleet.nodes)
    assert fleet.group_only == set()
    assert Fleet(256, 0.05, seed=3).bad == fleet.bad
    assert Fleet(256, 0.05, seed=4).bad != fleet.bad
    assert Fleet(1024, 0.01, seed=0).nodes[-1] == "n1023"


def test_group_only_share_of_the_bad_nodes():
    fleet = Fleet(100, 0.1, group_only_fraction=0.5, seed=1)
    assert len(fleet.bad) == 10 and len(fleet.group_only) == 5 and fleet.group_only <= fleet.bad
    everyone = Fleet(64, 0.05, group_only_fraction=1.0, seed=1)
    assert everyone.group_only == everyone.bad and len(everyone.bad) == 3


def test_group_value_is_nominal_times_the_slowest_member_without_noise():
    fleet = Fleet(16, 0.25, group_only_fraction=0.5, noise_sd=0.0, seed=2)
    plain = sorted(fleet.bad - fleet.group_only)
    only = sorted(fleet.group_only)
    good = sorted(set(fleet.nodes) - fleet.bad)
    values = fleet.measure([(good[0], good[1]), (plain[0], good[2]), (only[0], good[3])])
    assert values == {(good[0], good[1]): 400.0, (plain[0], good[2]): 240.0, (only[0], good[3]): 400.0}
    big = (only[0],) + tuple(good[4:11])
    assert fleet.measure([big]) == {big: 240.0}
    assert fleet.full_value() == 240.0
    assert fleet.rounds == 2  # full_value() is not a round


def test_noise_is_gaussian_with_the_given_sd():
    fleet = Fleet(2, 0.0, noise_sd=0.03, seed=5)
    samples = [fleet.measure([("n000", "n001")])[("n000", "n001")] for _ in range(4000)]
    assert statistics.mean(samples) == pytest.approx(400.0, rel=0.003)
    assert statistics.stdev(samples) == pytest.approx(12.0, rel=0.08)


def test_measure_rejects_overlapping_or_unknown_groups():
    fleet = Fleet(8, 0.0)
    with pytest.raises(ValueError, match="disjoint"):
        fleet.measure([("n000", "n001"), ("n001", "n002")])
    with pytest.raises(ValueError, match="unknown nodes"):
        fleet.measure([("n000", "x9")])
    with pytest.raises(ValueError, match="empty group"):
        fleet.measure([()])
    assert fleet.rounds == 0


@pytest.mark.parametrize("kwargs", [{"n_nodes": 0, "bad_fraction": 0.1}, {"n_nodes": 8, "bad_fraction": 1.5},
                                    {"n_nodes": 8, "bad_fraction": 0.1, "group_only_fraction": -1},
                                    {"n_nodes": 8, "bad_fraction": 0.1, "noise_sd": -0.1}])
def test_fleet_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        Fleet(**kwargs)


def test_score():
    assert score([], set()) == (1.0, 1.0)
    assert score([], {"a"}) == (1.0, 0.0)
    assert score(["a", "b"], {"a"}) == (0.5, 1.0)
    assert score(["a"], {"a", "b", "c", "d"}) == (1.0, 0.25)
    assert score(iter(["x"]), set()) == (0.0, 1.0)


def test_pairs_second_pass_baseline_finds_plain_faults_in_two_rounds():
    fleet = Fleet(256, 0.05, seed=1)
    bad, rounds = baseline_random_pairs_second_pass(fleet.nodes, fleet.measure, 320.0, seed=1)
    assert set(bad) == fleet.bad and rounds == fleet.rounds == 2
    healthy = Fleet(64, 0.0, seed=1)
    assert baseline_random_pairs_second_pass(healthy.nodes, healthy.measure, 320.0, seed=1) == ([], 1)


def test_pairs_second_pass_baseline_misses_group_only_faults_and_flags_without_partner():
    fleet = Fleet(256, 0.02, group_only_fraction=1.0, seed=2)
    assert baseline_random_pairs_second_pass(fleet.nodes, fleet.measure, 320.0, seed=2) == ([], 1)
    crowded = Fleet(32, 0.7, seed=2)  # more suspects than good partners: the rest are flagged unseen
    bad, _ = baseline_random_pairs_second_pass(crowded.nodes, crowded.measure, 320.0, seed=2)
    assert score(bad, crowded.bad)[0] < 1.0
    loc = localise(crowded.nodes, Fleet(32, 0.7, seed=2).measure, 320.0, seed=2)
    assert score(loc.bad, crowded.bad)[0] == 1.0


def test_shuffles_baseline_needs_more_rounds_for_the_same_precision():
    precision3, precision8, recall3 = [], [], []
    for seed in range(10):
        for rounds, sink in ((3, precision3), (8, precision8)):
            fleet = Fleet(256, 0.05, seed=seed)
            bad, used = baseline_shuffles(fleet.nodes, fleet.measure, 320.0, rounds, seed)
            assert used == rounds == fleet.rounds
            p, r = score(bad, fleet.bad)
            sink.append(p)
            if rounds == 3:
                recall3.append(r)
    assert min(recall3) == 1.0
    assert min(precision3) < 1.0  # good nodes unlucky twice out of three pairings get flagged
    assert statistics.mean(precision8) > statistics.mean(precision3)
    fleet = Fleet(256, 0.05, seed=0)
    loc = localise(fleet.nodes, fleet.measure, 320.0, seed=0, full_group_value=fleet.full_value())
    assert score(loc.bad, fleet.bad) == (1.0, 1.0) and len(loc.rounds) <= 3


def test_baselines_on_empty_input():
    assert baseline_random_pairs_second_pass([], Fleet(1, 0.0).measure, 320.0, seed=0) == ([], 0)
    assert baseline_shuffles([], Fleet(1, 0.0).measure, 320.0, rounds=3, seed=0) == ([], 0)


# ---------------------------------------------------------------- per-node factors (heterogeneous fleets)

def test_defaults_reproduce_the_fleet_without_per_node_factors():
    # values recorded from the simulator before per-node factors existed (same seed, same calls)
    fleet = Fleet(64, 0.05, seed=11, group_only_fraction=0.5)
    assert sorted(fleet.bad) == ["n007", "n028", "n055"] and sorted(fleet.group_only) == ["n007", "n055"]
    got = fleet.measure([("n007", "n000"), ("n001", "n002"), ("n028", "n003")])
    assert got == {("n007", "n000"): 411.20879012527104, ("n001", "n002"): 398.35143786344844,
                   ("n028", "n003"): 239.38643112930436}
    assert fleet.full_value() == 238.13110163367787
    assert set(fleet.healthy_factors.values()) == {1.0}
    assert {fleet.factors[n] for n in fleet.bad} == {0.6}
    assert {fleet.factors[n] for n in set(fleet.nodes) - fleet.bad} == {1.0}
    assert fleet.good_spread == 0.0 and fleet.bad_factor_range is None


def test_per_node_factors_are_reproducible_per_seed():
    opts = {"good_spread": 0.05, "bad_factor_range": (0.5, 0.85)}
    a, b, c = Fleet(256, 0.05, seed=7, **opts), Fleet(256, 0.05, seed=7, **opts), Fleet(256, 0.05, seed=8, **opts)
    assert a.factors == b.factors and a.healthy_factors == b.healthy_factors and a.bad == b.bad
    assert a.factors != c.factors
    pairs = [("n000", "n001"), ("n002", "n003")]
    assert a.measure(pairs) == b.measure(pairs)
    # the bad set and the noise do not move when the factors are switched on
    plain, fresh = Fleet(256, 0.05, seed=7), Fleet(256, 0.05, seed=7, **opts)
    assert plain.bad == fresh.bad and plain.group_only == fresh.group_only
    pair = tuple(sorted(set(fresh.nodes) - fresh.bad)[:2])
    relative = fresh.measure([pair])[pair] / (400 * min(fresh.factors[n] for n in pair))
    assert relative == pytest.approx(plain.measure([pair])[pair] / 400, rel=1e-12)  # same noise draw
    # the healthy draws do not depend on the bad range, nor the bad draws on the spread
    assert Fleet(256, 0.05, seed=7, good_spread=0.05).healthy_factors == a.healthy_factors
    spread_only = Fleet(256, 0.05, seed=7, bad_factor_range=(0.5, 0.85))
    assert {n: spread_only.factors[n] for n in a.bad} == {n: a.factors[n] for n in a.bad}


def test_per_node_factors_stay_in_their_ranges_and_spread_over_them():
    fleet = Fleet(1024, 0.05, seed=3, good_spread=0.05, bad_factor_range=(0.5, 0.85))
    good = [fleet.factors[n] for n in fleet.nodes if n not in fleet.bad]
    bad = [fleet.factors[n] for n in fleet.bad]
    assert len(good) == 973 and len(bad) == 51
    assert all(0.95 <= f <= 1.0 for f in good) and all(0.5 <= f <= 0.85 for f in bad)
    assert min(good) < 0.952 and max(good) > 0.998 and statistics.mean(good) == pytest.approx(0.975, abs=0.003)
    assert min(bad) < 0.56 and max(bad) > 0.79 and len(set(bad)) == 51
    assert all(0.95 <= fleet.healthy_factors[n] <= 1.0 for n in fleet.nodes)
    fixed = Fleet(64, 0.05, seed=3, bad_factor_range=(0.7, 0.7))
    assert {fixed.factors[n] for n in fixed.bad} == {0.7}


def test_group_value_uses_the_slowest_members_own_factor():
    fleet = Fleet(32, 0.25, noise_sd=0.0, seed=4, good_spread=0.1, bad_factor_range=(0.4, 0.7),
                  group_only_fraction=0.5)
    plain = sorted(fleet.bad - fleet.group_only)
    only = sorted(fleet.group_only)
    good = sorted(set(fleet.nodes) - fleet.bad)
    pair, mixed, hidden = (good[0], good[1]), (plain[0], good[2]), (only[0], good[3])
    got = fleet.measure([pair, mixed, hidden])
    assert got[pair] == pytest.approx(400 * min(fleet.factors[good[0]], fleet.factors[good[1]]))
    assert got[mixed] == pytest.approx(400 * fleet.factors[plain[0]])
    # a group-only fault shows the node's healthy factor in a small group, its bad factor from 8 nodes up
    assert got[hidden] == pytest.approx(400 * min(fleet.healthy_factors[only[0]], fleet.factors[good[3]]))
    assert fleet.factor(only[0], 2) == fleet.healthy_factors[only[0]] >= 0.9
    big = (only[0],) + tuple(good[4:11])
    assert fleet.measure([big])[big] == pytest.approx(400 * fleet.factors[only[0]])
    assert 0.4 <= fleet.factor(only[0], 8) <= 0.7
    assert fleet.full_value() == pytest.approx(400 * min(fleet.factors.values()))


@pytest.mark.parametrize("kwargs, message", [
    ({"good_spread": -0.01}, "good_spread"), ({"good_spread": 1.0}, "good_spread"),
    ({"good_spread": float("nan")}, "good_spread"), ({"good_spread": "0.05"}, "good_spread"),
    ({"good_spread": True}, "good_spread"),
    ({"bad_factor_range": (0.9, 0.5)}, "low <= high"), ({"bad_factor_range": (-0.1, 0.5)}, "low <= high"),
    ({"bad_factor_range": (0.5, 1.2)}, "low <= high"), ({"bad_factor_range": (0.5, float("nan"))}, "low <= high"),
    ({"bad_factor_range": (0.5,)}, "pair"), ({"bad_factor_range": (0.5, 0.6, 0.7)}, "pair"),
    ({"bad_factor_range": "ab"}, "pair"), ({"bad_factor_range": (0.5, None)}, "pair"),
    ({"bad_factor_range": 0.6}, "pair"), ({"bad_factor": float("nan")}, "bad_factor"),
])
def test_fleet_refuses_bad_factor_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Fleet(16, 0.1, **kwargs)


def test_localise_finds_the_bad_nodes_of_a_small_heterogeneous_fleet():
    # healthy nodes 0.97-1.0, two bad nodes at 0.6-0.8: the threshold goes in the gap (0.88 x nominal)
    for seed in range(20):
        fleet = Fleet(64, 2 / 64, seed=seed, good_spread=0.03, bad_factor_range=(0.6, 0.8))
        assert len(fleet.bad) == 2
        result = localise(fleet.nodes, fleet.measure, 0.88 * fleet.nominal, seed=seed,
                          full_group_value=fleet.full_value())
        assert set(result.bad) == fleet.bad, seed
        assert result.suspects == [] and len(result.rounds) <= 4 and len(result.rounds) == fleet.rounds


def test_bad_nodes_above_the_threshold_cannot_be_attributed():
    # a "bad" node at 0.86-0.9 of nominal runs above 0.8 x nominal: no threshold test sees it
    fleet = Fleet(64, 0.05, seed=1, good_spread=0.03, bad_factor_range=(0.86, 0.9), noise_sd=0.01)
    result = localise(fleet.nodes, fleet.measure, 0.8 * fleet.nominal, seed=1, full_group_value=fleet.full_value())
    assert len(fleet.bad) == 3 and min(fleet.factors[n] for n in fleet.bad) >= 0.86
    assert result.bad == [] and result.suspects == [] and result.good == fleet.nodes  # every pair passed
    assert score(result.bad, fleet.bad) == (1.0, 0.0)
