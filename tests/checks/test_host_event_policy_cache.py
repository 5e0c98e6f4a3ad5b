"""The packaged host-event policy read back from the parse cache (patterns compiled on first use) is
the policy validated when the cache entry was written, class by class and pattern by pattern."""
from __future__ import annotations

from healthcheck.policies import host_events as hp
from healthcheck.safeio import tomlcache


def test_the_cached_policy_is_the_validated_one(tmp_path, monkeypatch):
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    hp.default_policy.cache_clear()
    fresh = hp.load_host_event_policy()  # parsed, validated, written to the cache
    assert any(tmp_path.iterdir())
    hp.default_policy.cache_clear()
    cached = hp.load_host_event_policy()  # read back as JSON: nothing compiled yet
    assert all(rule._patterns is None for rule in cached.rules.values())
    assert hp.describe(cached) == hp.describe(fresh)
    for name, rule in fresh.rules.items():
        assert [p.pattern for p in cached.rules[name].patterns] == [p.pattern for p in rule.patterns]
        assert [p.groupindex for p in cached.rules[name].patterns] == [p.groupindex for p in rule.patterns]
    hp.default_policy.cache_clear()


def test_a_cache_entry_that_does_not_fit_is_read_afresh(tmp_path, monkeypatch):
    monkeypatch.setenv(tomlcache.CACHE_ENV, str(tmp_path))
    hp.default_policy.cache_clear()
    hp.load_host_event_policy()
    monkeypatch.setattr(tomlcache, "get", lambda path: {"event": "not a list"})
    hp.default_policy.cache_clear()
    assert hp.load_host_event_policy().rules  # the file itself, validated
    hp.default_policy.cache_clear()


def test_class_names_as_the_pattern_said():
    import re

    from healthcheck.policies.host_events import _is_class_name

    for name in ["edac_ue", "a", "a" * 48, "a" * 49, "", "_x", "1x", "Ab", "aé", "a-b", "a b", "x\n", "ok_2"]:
        assert _is_class_name(name) == (re.fullmatch(r"[a-z][a-z0-9_]{0,47}", name) is not None), name
