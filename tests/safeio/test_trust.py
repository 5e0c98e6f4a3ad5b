"""As root, a config that others can write (or that root does not own) is refused, with the fix named."""
from __future__ import annotations

import os

import pytest

from healthcheck.config import ConfigError, load
from healthcheck.safeio.trust import UntrustedFile, check_trusted

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="ownership rules apply when running as root")


def _config(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('[defaults]\nservices = ["slurmd"]\n')
    path.chmod(0o644)
    tmp_path.chmod(0o755)
    return path


def test_root_owned_config_is_accepted(tmp_path):
    cfg = load(str(_config(tmp_path)))
    assert cfg.expectations_for("n1").services == ("slurmd",)


def test_world_writable_config_is_refused_with_the_fix(tmp_path):
    path = _config(tmp_path)
    path.chmod(0o666)
    with pytest.raises(ConfigError, match=r"writable by group or others .*chmod go-w"):
        load(str(path))


def test_config_not_owned_by_root_is_refused(tmp_path):
    path = _config(tmp_path)
    os.chown(path, 65534, 65534)
    with pytest.raises(ConfigError, match=r"owned by uid 65534.*chown root:root"):
        load(str(path))


def test_writable_directory_above_is_refused_but_sticky_tmp_is_fine(tmp_path):
    path = _config(tmp_path)
    tmp_path.chmod(0o777)
    with pytest.raises(UntrustedFile, match="directory .* writable by group or others"):
        check_trusted(str(path))
    tmp_path.chmod(0o1777)  # sticky, root-owned: like /tmp
    check_trusted(str(path))


def test_symlink_is_judged_by_its_target(tmp_path):
    path = _config(tmp_path)
    link = tmp_path / "link.toml"
    link.symlink_to(path)
    path.chmod(0o666)
    with pytest.raises(UntrustedFile, match=str(path)):
        check_trusted(str(link))


def test_xid_policy_file_others_can_write_is_refused(tmp_path, monkeypatch):
    import healthcheck.policies.xid as xp

    copy = tmp_path / "xid_policy.toml"
    copy.write_text(xp.default_policy_text())
    copy.chmod(0o666)
    monkeypatch.setattr(xp, "DEFAULT_POLICY_FILE", copy)
    xp._default_data.cache_clear()
    try:
        with pytest.raises(ValueError, match="Xid policy .* writable by group or others"):
            xp.load_xid_policy()
    finally:
        xp._default_data.cache_clear()
