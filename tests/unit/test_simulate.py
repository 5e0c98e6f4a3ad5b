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
