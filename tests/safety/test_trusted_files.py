"""As root, files that steer the suite must be root's alone (issue 7, first promise), end to end: the
Slurm hook with a config others can write (or another user owns) judges nothing and drains nothing, and
says which file and which fix; the same config made root's drains the failing node, proving the
refusal is what held the drain back. The burn-in's references file is refused the same way.
(tests/safeio/test_trust.py covers check_trusted itself and the Xid policy file.)"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.safety._hookrun import hook, write_config

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the ownership rules apply when running as root")


def fake_scontrol(tmp: Path) -> Path:
    """Answers `show node` with an idle node1, accepts updates; records every call."""
    from tests.conftest import FIXTURES

    idle = FIXTURES / "slurm" / "scontrol-show-node-o-22.05-idle.txt"
    script = tmp / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp}/scontrol.calls\n'
                      f'case "$*" in *show*) cat {idle};; esac\nexit 0\n')
    script.chmod(0o755)
    return script


@pytest.fixture
def site(tmp_path, node_bundles):
    tmp_path.chmod(0o755)
    config = write_config(tmp_path / "site.toml", str(node_bundles / "faulty"), str(tmp_path / "state"),
                          str(tmp_path / "spool"), scontrol=str(fake_scontrol(tmp_path)))
    config.chmod(0o644)
    return tmp_path, config


def drained(tmp: Path) -> list[str]:
    calls = tmp / "scontrol.calls"
    return [c for c in calls.read_text().splitlines() if "State=DRAIN" in c] if calls.exists() else []


@pytest.mark.parametrize("spoil,words", [
    (lambda cfg: cfg.chmod(0o666), ("writable by group or others", "chmod go-w")),
    (lambda cfg: os.chown(cfg, 4321, 4321), ("owned by uid 4321", "chown root:root")),
    (lambda cfg: cfg.parent.chmod(0o777), ("directory", "writable by group or others", "chmod go-w")),
], ids=["world-writable", "foreign-owner", "writable-folder-above"])
def test_a_refused_config_never_drains_and_names_the_file_and_fix(site, spoil, words):
    tmp, config = site
    spoil(config)
    proc, _ = hook("prolog", config, tmp / "cache")
    assert proc.returncode == 0, proc.stderr  # the job runs: nothing was judged
    assert "config not used, nothing judged" in proc.stderr and str(config) in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert drained(tmp) == [] and not (tmp / "state").exists() and not (tmp / "spool").exists()


def test_the_same_config_trusted_drains_the_failing_node(site):
    tmp, config = site
    proc, _ = hook("prolog", config, tmp / "cache")
    assert proc.returncode == 1, proc.stderr
    assert len(drained(tmp)) == 1 and "Reason=healthcheck: gpu.ecc" in drained(tmp)[0]


def test_a_cached_parse_of_a_now_refused_config_is_not_used(site):
    """The hooks cache the parsed config: once others can write the file, the cache must not save it."""
    tmp, config = site
    assert hook("prolog", config, tmp / "cache")[0].returncode == 1  # parsed and cached
    (tmp / "scontrol.calls").unlink()
    config.chmod(0o666)
    proc, _ = hook("prolog", config, tmp / "cache")
    assert proc.returncode == 0 and "config not used" in proc.stderr and drained(tmp) == []


def test_a_references_file_others_can_write_is_refused_for_the_burnin(tmp_path):
    from healthcheck.cli.burnin import _references
    from healthcheck.cli.slurm import UsageFailure

    tmp_path.chmod(0o755)
    refs = tmp_path / "refs.toml"
    refs.write_text('[sku.h100]\nmatch = ["H100"]\n')
    refs.chmod(0o644)
    assert _references(str(refs)) is not None
    refs.chmod(0o666)
    with pytest.raises(UsageFailure, match=r"references file .* writable by group or others .*chmod go-w"):
        _references(str(refs))


def test_a_fleet_digests_file_others_can_write_is_not_used(tmp_path):
    """Its verdicts drain nodes: as root, a fleet digests file others can write is refused (a WARN, the
    products compared within the node), and the same file made root's is used."""
    from healthcheck.burnin import fleetfile
    from healthcheck.policies import references
    from healthcheck.burnin.node_run import NodeContext, _fleet_digests
    from healthcheck.burnin.settings import resolve

    tmp_path.chmod(0o755)
    path = tmp_path / "fleet.json"
    fleetfile.write(str(path), {"k": {"digest": "a1" * 16}}, "2026-12-01T00:00:00+00:00", None)
    ctx = NodeContext("n1", resolve({"fleet_digests": str(path)}), references.load())
    assert _fleet_digests(ctx) == ({"k": "a1" * 16}, None)
    path.chmod(0o666)
    digests, problem = _fleet_digests(ctx)
    assert digests is None and "fleet digests file" in problem and "chmod go-w" in problem
