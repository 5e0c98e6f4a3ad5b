"""`config validate` on admin inputs (issue 30, item 8b): the overlap check finds what intersecting
every pair of classes found (a property over random small configs), stops after MAX_OVERLAPS pairs
and folds at most MAX_SAMPLE nodes a sample; a class naming too many nodes, or a file whose classes
do, is refused before a name is built. No wall-clock assertion: results and counts of operations."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from ClusterShell.NodeSet import NodeSet
from hypothesis import given, settings, strategies as st

import healthcheck.config.overlap as overlap
import healthcheck.config.schema as schema
from healthcheck.cli.config_cmd import config as config_cli
from healthcheck.config import ConfigError, loads, overlapping_classes
from healthcheck.config.overlap import MAX_OVERLAPS, MAX_SAMPLE, overlapping


def brute_force(named):
    """The check as it was: every pair of classes intersected."""
    sets = [(name, NodeSet(nodes)) for name, nodes in named]
    out = []
    for i, (a, sa) in enumerate(sets):
        for b, sb in sets[i + 1:]:
            both = sa & sb
            if len(both):
                out.append((a, b, str(both)))
    return out


@st.composite
def node_pattern(draw) -> str:
    """A small node set: a few terms over two prefixes, ranges with and without padding, 2-D names."""
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        prefix = draw(st.sampled_from(["gpu", "cpu", "r1n"]))
        lo = draw(st.integers(1, 30))
        hi = draw(st.integers(lo, lo + draw(st.integers(0, 12))))
        pad = draw(st.sampled_from(["", "0"]))
        form = draw(st.sampled_from(["range", "single", "twod"]))
        if form == "single":
            terms.append(f"{prefix}{lo:{pad}2d}" if pad else f"{prefix}{lo}")
        elif form == "twod":
            terms.append(f"rack[1-{draw(st.integers(1, 2))}]-{prefix}[{lo}-{hi}]")
        else:
            terms.append(f"{prefix}[{lo:{pad}2d}-{hi:{pad}2d}]" if pad else f"{prefix}[{lo}-{hi}]")
    return ",".join(terms)


@settings(max_examples=150, deadline=None)
@given(st.lists(node_pattern(), min_size=0, max_size=8))
def test_overlaps_agree_with_intersecting_every_pair(patterns):
    named = [(f"c{i}", p) for i, p in enumerate(patterns)]
    assert overlapping(named, limit=10_000) == brute_force(named)


@settings(max_examples=50, deadline=None)
@given(st.lists(node_pattern(), min_size=2, max_size=8), st.integers(0, 6))
def test_a_limit_keeps_the_first_pairs_in_file_order(patterns, limit):
    named = [(f"c{i}", p) for i, p in enumerate(patterns)]
    assert overlapping(named, limit=limit) == brute_force(named)[:limit]


def test_through_the_config_loader():
    cfg = loads('[class.a]\nnodes = "gpu[01-10]"\n[class.b]\nnodes = "gpu[05-20]"\n'
                '[class.c]\nnodes = "cpu[1-4]"\n[class.d]\nnodes = "gpu[10-12],cpu4"\n', "site.toml")
    assert overlapping_classes(cfg) == [("a", "b", "gpu[05-10]"), ("a", "d", "gpu10"),
                                        ("b", "d", "gpu[10-12]"), ("c", "d", "cpu4")]


def test_many_disjoint_classes_fold_only_the_overlapping_pairs(monkeypatch):
    folded = []
    real = overlap._sample
    monkeypatch.setattr(overlap, "_sample", lambda both, *a: folded.append(len(both)) or real(both, *a))
    named = [(f"c{i:05d}", f"gpu[{i * 8 + 1:06d}-{i * 8 + 8:06d}]") for i in range(4000)]
    named += [("overlap_a", "gpu[000001-000004]"), ("overlap_b", "gpu[000003-000010]")]
    assert overlapping(named) == [("c00000", "overlap_a", "gpu[000001-000004]"),
                                  ("c00000", "overlap_b", "gpu[000003-000008]"),
                                  ("c00001", "overlap_b", "gpu[000009-000010]"),
                                  ("overlap_a", "overlap_b", "gpu[000003-000004]")]
    assert folded == [4, 6, 2, 2]  # four samples folded, never one per pair of the 4,002 classes


def test_identical_classes_stop_at_the_limit(monkeypatch):
    folded = []
    real = overlap._sample
    monkeypatch.setattr(overlap, "_sample", lambda both, *a: folded.append(len(both)) or real(both, *a))
    named = [(f"c{i}", "gpu[1-50]") for i in range(60)]  # 1,770 overlapping pairs
    found = overlapping(named)
    assert len(found) == MAX_OVERLAPS and len(folded) == MAX_OVERLAPS
    assert found == brute_force(named[:4])[:3] + found[3:]
    assert found[:3] == [("c0", "c1", "gpu[1-50]"), ("c0", "c2", "gpu[1-50]"), ("c0", "c3", "gpu[1-50]")]
    assert found[-1] == ("c1", "c42", "gpu[1-50]")  # 59 pairs of c0, then c1's


def test_a_large_intersection_folds_at_most_max_sample_nodes():
    count = MAX_SAMPLE * 3
    ((a, b, sample),) = overlapping([("a", f"gpu[1-{count}]"), ("b", f"gpu[2-{count + 10}]")])
    assert (a, b) == ("a", "b")
    assert sample == f"gpu[2-{MAX_SAMPLE + 1}] (and {count - 1 - MAX_SAMPLE:,} more)"


def test_config_validate_says_when_the_list_stops(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text("".join(f'[class.c{i}]\nnodes = "gpu[1-4]"\n' for i in range(20)))
    out = CliRunner().invoke(config_cli, ["validate", str(path), "--format", "json"])
    assert out.exit_code == 0, out.output
    warnings = json.loads(out.output)["warnings"]
    assert len(warnings) == MAX_OVERLAPS + 1
    assert warnings[0] == "classes 'c0' and 'c1' both match gpu[1-4] ('c0' wins)"
    assert warnings[-1] == f"the first {MAX_OVERLAPS} overlapping pairs of classes are listed; there may be more"


def test_a_class_naming_too_many_nodes_is_refused_before_it_is_built(monkeypatch):
    import ClusterShell.NodeSet as clustershell

    built = []
    real = clustershell.NodeSet
    monkeypatch.setattr(clustershell, "NodeSet", lambda *a, **k: built.append(a) or real(*a, **k))
    with pytest.raises(ConfigError, match=r"node-set pattern 'gpu\[1-99999999\]' names 99,999,999 nodes, over the "
                                          r"limit of 100,000 for a class"):
        loads('[class.huge]\nnodes = "gpu[1-99999999]"\n', "site.toml")
    with pytest.raises(ConfigError, match=r"names 1,000,000 nodes"):
        loads('[class.grid]\nnodes = "r[1-1000]n[1-1000]"\n', "site.toml")
    assert built == []


def test_the_classes_of_a_file_are_bounded_in_all(monkeypatch):
    monkeypatch.setattr(schema, "MAX_CONFIG_NODES", 20)
    text = "".join(f'[class.c{i}]\nnodes = "gpu[{i * 8 + 1}-{i * 8 + 8}]"\n' for i in range(3))
    with pytest.raises(ConfigError, match=r"the node classes name 24 nodes in all up to \[class.c2\], over the limit "
                                          r"of 20 for one file"):
        loads(text, "site.toml")
    assert len(loads(text.rsplit("[class.c2]", 1)[0], "site.toml").classes) == 2
