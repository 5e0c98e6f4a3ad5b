"""The hooks' parsed-config cache: hits, invalidation on change, refusal of untrusted entries."""
from __future__ import annotations

import marshal
import os

import pytest

from healthcheck.safeio import tomlcache
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
    from healthcheck.config import loading

    monkeypatch.setattr(loading, "_parse", lambda *a: pytest.fail("parsed again despite the cache"))
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
    stored["data"]["classes"][0][2]["gpu_count"] = 1
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


def test_an_entry_of_another_shape_is_a_miss_and_is_rewritten(tmp_path, cache):
    """An entry of the parsed TOML (the format before the validated one) or a validated entry with a field
    of the wrong shape is not trusted to be a validated config: the file is read, validated and cached
    again."""
    path = _config(tmp_path)
    load(str(path), use_cache=True)
    entry = next(cache.iterdir())
    good = marshal.loads(entry.read_bytes())
    assert good["data"]["format"] == "healthcheck.config/validated-1"
    stale = dict(good, data={"class": {"a": {"nodes": "gpu[1-4]", "gpu_count": 1}}})
    broken = dict(good, data=dict(good["data"], classes=[["a", "gpu[1-4]"]]))  # a NodeClass without settings
    for bad in (stale, broken):
        entry.write_bytes(marshal.dumps(bad))
        assert load(str(path), use_cache=True).expectations_for("gpu1").gpu_count == 8
        assert marshal.loads(entry.read_bytes()) == good


def test_the_cached_load_builds_the_config_without_the_schema(tmp_path, cache):
    """The hooks' steady state: a cache hit imports neither the schema nor the sections' modules, and
    gives the same config as a full load (its other sections validated when asked for)."""
    import subprocess
    import sys

    path = tmp_path / "site.toml"
    path.write_text('[slurm]\nprolog_budget_s = 4.0\n[class.a]\nnodes = "gpu[1-4]"\ngpu_count = 8\n'
                    '[burnin]\nsuite = "quick"\n[topology.rack]\nr1 = "gpu[1-4]"\n[fleet]\npersist_k = 2\n')
    load(str(path), use_cache=True)
    code = ("import sys; from healthcheck.config import load\n"
            f"c = load({str(path)!r}, use_cache=True)\n"
            "print(c.slurm.prolog_budget_s, c.expectations_for('gpu2').gpu_count, sorted(c.deferred))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('healthcheck.config.', 'healthcheck.burnin', "
            "'healthcheck.config.topology', 'healthcheck.analysis'))))\n"
            "print(c.burnin, c.topology, c.section('fleet').persist_k)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, tomlcache.CACHE_ENV: str(cache)})
    assert proc.returncode == 0, proc.stderr
    first, modules, sections = proc.stdout.splitlines()
    assert first == "4.0 8 ['burnin', 'fleet', 'topology']"
    assert modules == "['healthcheck.config.loading', 'healthcheck.config.model', 'healthcheck.config.slurm_settings']"
    assert sections == "{'suite': 'quick'} {'rack': {'r1': 'gpu[1-4]'}} 2"
