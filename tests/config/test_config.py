"""The expectations file: loading, class matching, merging, and errors that name file and line."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from healthcheck.config import ConfigError, load, loads, overlapping_classes

EXAMPLE = Path(__file__).resolve().parents[2] / "contrib" / "examples" / "h100-example.toml"


def test_example_config_loads_and_resolves_a_node():
    cfg = load(str(EXAMPLE))
    exp = cfg.expectations_for("gpu017")
    assert exp.node_class == "h100"
    assert exp.gpu_count == 8 and exp.nvlinks_per_gpu == 18
    assert exp.pcie_by_kind["gpu"].gen == 5 and exp.pcie_by_kind["hca"].width == 16
    assert exp.ib_port_count == 8 and exp.ib_rate_gbps == 400 and exp.ib_link_layer == "InfiniBand"
    assert exp.versions["driver"] == "550.54.15"
    # class services replace the defaults' list; thresholds and checks come from [defaults]
    assert "nv-fabricmanager" in exp.services
    assert exp.thresholds["gpu.temperature"]["warn_margin_c"] == 5
    assert "gpu.xid" in exp.checks["prolog"]
    # the [xid] override reaches the policy, the packaged defaults stay for the rest
    assert exp.xid_policy.rule(94).action == "fail"
    assert exp.xid_policy.rule(79).action == "fail"


def test_node_outside_every_class_gets_only_defaults():
    cfg = load(str(EXAMPLE))
    exp = cfg.expectations_for("login01")
    assert exp.node_class is None
    assert exp.gpu_count is None
    assert exp.services == ("slurmd", "munged")


def test_first_matching_class_wins_and_overlap_is_reported():
    cfg = loads("""
[class.a]
nodes = "gpu[01-10]"
gpu_count = 8
[class.b]
nodes = "gpu[05-20]"
gpu_count = 4
""", "site.toml")
    assert cfg.expectations_for("gpu07").gpu_count == 8
    assert cfg.expectations_for("gpu15").gpu_count == 4
    overlaps = overlapping_classes(cfg)
    assert overlaps and overlaps[0][:2] == ("a", "b") and overlaps[0][2] == "gpu[05-10]"


def test_threshold_tables_merge_key_by_key():
    cfg = loads("""
[defaults.thresholds."gpu.temperature"]
warn_margin_c = 5
[class.x]
nodes = "n[1-2]"
[class.x.thresholds."gpu.pcie.replays"]
warn = 1000
""")
    exp = cfg.expectations_for("n1")
    assert exp.thresholds == {"gpu.temperature": {"warn_margin_c": 5}, "gpu.pcie.replays": {"warn": 1000}}


@pytest.mark.parametrize("text, line, words", [
    ("[class.h100]\nnodes = \"gpu[1-4]\"\ngpu_count = \"eight\"\n", 3, "gpu_count must be an integer"),
    ("[class.h100]\nnodes = \"gpu[1-4]\"\ngpu_cnt = 8\n", 3, "unknown key 'gpu_cnt'"),
    ("[class.h100]\ngpu_count = 8\n", 1, "needs nodes"),
    ("[class.h100]\nnodes = \"gpu[4-1\"\n", 2, "bad node-set pattern"),
    ("[class.h100]\nnodes = \"gpu1\"\n[class.h100.ib]\nrate_gbps = \"fast\"\n", 4, "rate_gbps must be a number"),
    ("[class.h100]\nnodes = \"gpu1\"\n\n[class.h100.pcie.gpu]\ngen = 5\nwidht = 16\n", 6, "unknown key 'widht'"),
    ("[class.h100]\nnodes = \"gpu1\"\n[class.h100.versions]\ndriver = 550\n", 4, "must be a string"),
    ("[defaults.checks]\nprolog = [\"gpu.nosuch*\"]\n", 2, "matches no check"),
    ("[defaults.checks]\nfoo = [\"gpu.*\"]\n", 2, "unknown context 'foo'"),
    ("[defaults.thresholds.\"gpu.temperature\"]\nwarn_margin = 5\n", 2, "unknown threshold 'warn_margin'"),
    ("[defaults.thresholds.\"gpu.nosuch\"]\nx = 5\n", 1, "unknown check"),
    ("[xid]\n79 = { action = \"explode\" }\n", 2, "action must be fail, warn or ignore"),
    ("[class.h100\nnodes = 1\n", 1, "TOML syntax error"),
    ("nodes = \"x\"\n", 1, "unknown top-level key"),
])
def test_bad_config_names_file_and_line(text, line, words):
    with pytest.raises(ConfigError) as info:
        loads(text, "site.toml")
    err = info.value
    assert err.line == line, str(err)
    assert words in str(err)
    assert str(err).startswith(f"site.toml:{line}: ")


def test_unreadable_and_non_utf8_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load(str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"[class.a]\nnodes = \"\xff\"\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(str(bad))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_config_loader_fuzz_only_config_errors(text):
    try:
        cfg = loads(text, "fuzz.toml")
        cfg.expectations_for("node1")
    except ConfigError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(EXAMPLE.read_text())), st.text(max_size=5))
def test_config_loader_fuzz_mutated_example(pos, junk):
    text = EXAMPLE.read_text()
    try:
        cfg = loads(text[:pos] + junk + text[pos:], "fuzz.toml")
        cfg.expectations_for("gpu001")
    except ConfigError:
        pass


@pytest.mark.parametrize("text, line, words", [
    ("defaults = 5\n", 1, "[defaults] must be a table"),
    ("[xid]\n79 = { action = \"fail\", window_s = -1 }\n", 2, "window_s"),
    ("[defaults.thresholds.\"gpu.temperature\"]\nwarn_margin_c = \"x\"\n", 2, "must be a number"),
    ("[defaults.thresholds.\"gpu.persistence\"]\nrequire = 1\n", 2, "must be true or false"),
])
def test_values_are_type_checked_with_lines(text, line, words):
    with pytest.raises(ConfigError) as info:
        loads(text, "site.toml")
    assert info.value.line == line and words in str(info.value)


def test_unset_thresholds_accept_scalars():
    cfg = loads('[defaults.thresholds."gpu.ecc.mode"]\nrequire_enabled = true\n')
    assert cfg.expectations_for("n").thresholds["gpu.ecc.mode"]["require_enabled"] is True


def test_history_db_url_from_the_config_never_with_a_password(tmp_path, monkeypatch):
    from healthcheck.config import site_db_url

    cfg = tmp_path / "site.toml"
    cfg.write_text('[history]\ndb_url = "postgresql://healthcheck@db1/fleet"\n')
    assert loads(cfg.read_text()).history_db_url == "postgresql://healthcheck@db1/fleet"
    monkeypatch.setenv("HEALTHCHECK_CONFIG", str(cfg))
    assert site_db_url() == "postgresql://healthcheck@db1/fleet"
    with pytest.raises(ConfigError, match="must not carry a password") as info:
        loads('[history]\ndb_url = "postgresql://u:s3cret@db1/fleet"\n', "site.toml")
    assert info.value.line == 2 and "s3cret" not in str(info.value)
    with pytest.raises(ConfigError, match="unknown key 'url'"):
        loads('[history]\nurl = "sqlite:///x"\n')
