"""The hooks' parsed-config cache: hits, invalidation on change, refusal of untrusted entries."""
from __future__ import annotations

import marshal
import os

import pytest

from healthcheck import tomlcache
from healthcheck.config import load


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(folder))
    return folder


def _config(tmp_path, gpus=8):
    path = tmp_path / "site.toml"
    path.write_text(f'[class.a]\nnodes = "gpu[1-4]"\ngpu_count = {gpus}\n')
    return path


def test_second_load_comes_from_the_cache(tmp_path, cache, monkeypatch):
    path = _config(tmp_path)
    assert load(str(path), use_cache=True).expectations_for("gpu1").gpu_count == 8
    entries = [p.name for p in cache.iterdir()]
    assert any(name.endswith("site.toml.marshal") for name in entries), entries
    import healthcheck.config as config

    monkeypatch.setattr(config, "_parse", lambda *a: pytest.fail("parsed again despite the cache"))
    assert load(str(path), use_cache=True).expectations_for("gpu1").gpu_count == 8


def test_an_edited_file_is_parsed_again(tmp_path, cache):
    path = _config(tmp_path)
    load(str(path), use_cache=True)
    path.write_text('[class.a]\nnodes = "gpu[1-4]"\ngpu_count = 4\n')
    os.utime(path, ns=(1, 1))  # even a file whose mtime went backwards
    assert load(str(path), use_cache=True).expectations_for("gpu1").gpu_count == 4


@pytest.mark.skipif(os.geteuid() != 0, reason="trust rules apply as root")
def test_an_entry_others_could_write_is_ignored(tmp_path, cache):
    path = _config(tmp_path)
    load(str(path), use_cache=True)
    entry = next(cache.iterdir())
    stored = marshal.loads(entry.read_bytes())
    stored["data"]["class"]["a"]["gpu_count"] = 1
    entry.write_bytes(marshal.dumps(stored))
    entry.chmod(0o666)
    assert tomlcache.get(str(path)) is None
    assert load(str(path), use_cache=True).expectations_for("gpu1").gpu_count == 8


def test_invalid_configs_are_never_cached(tmp_path, cache):
    from healthcheck.config import ConfigError

    path = tmp_path / "bad.toml"
    path.write_text('[class.a]\nnodes = "gpu1"\ngpu_count = "x"\n')
    with pytest.raises(ConfigError):
        load(str(path), use_cache=True)
    assert not cache.exists() or not list(cache.iterdir())


def test_a_cut_or_garbled_entry_is_a_miss(tmp_path, cache):
    path = _config(tmp_path)
    load(str(path), use_cache=True)
    entry = next(cache.iterdir())
    whole = entry.read_bytes()
    for broken in (whole[: len(whole) // 2], b"\x00garbage", b"", marshal.dumps(["not", "a", "dict"])):
        entry.write_bytes(broken)
        assert tomlcache.get(str(path)) is None
        assert load(str(path), use_cache=True).expectations_for("gpu1").gpu_count == 8


def test_data_marshal_cannot_write_is_not_cached(tmp_path, cache):
    import datetime

    tomlcache.put(str(_config(tmp_path)), {"when": datetime.date(2026, 1, 1)})
    assert not cache.exists() or not list(cache.iterdir())
