"""Hostile and faulty configs (issue "Safe under hostile and faulty input", items 4, 5, 6 and 10):
a FIFO or an oversized file at the config path (and at the hooks' parse cache and a references file)
is refused at once with a clear error instead of hanging or taking seconds; NaN, infinities and counts
beyond any real node are refused with file:line; nesting 5,000 deep is a config error (exit 2), not an
internal one; ``check --bundle /`` is a usage error.

Everything that could hang on a regression runs in a subprocess or a daemon thread with a timeout, so
a regression fails the test instead of hanging the suite."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from healthcheck.config import MAX_CONFIG_BYTES, ConfigError, load, loads
from tests.safety._hookrun import ROOT, hook

GOOD = '[defaults]\ngpu_count = 8\n[slurm]\nscontrol = "/bin/false"\n'


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "healthcheck.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def in_thread(fn, fifo: Path | None = None, timeout: float = 20):
    """``fn()``'s result, or a failure when it blocks (a writer then opens ``fifo`` to free it)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"blocked for over {timeout} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ------------------------------------------------------------------------------ item 4: loading


def test_a_fifo_config_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "site.toml"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError) as info:
        in_thread(lambda: load(str(fifo)), fifo)
    assert "is a FIFO, not a regular file" in str(info.value) and str(fifo) in str(info.value)


def test_a_fifo_config_through_a_symlink_is_refused(tmp_path):
    fifo = tmp_path / "real.toml"
    os.mkfifo(fifo, 0o600)
    (tmp_path / "site.toml").symlink_to(fifo)
    with pytest.raises(ConfigError, match="is a FIFO"):
        in_thread(lambda: load(str(tmp_path / "site.toml"), use_cache=True), fifo)


def test_config_validate_on_a_fifo_exits_2_with_the_file(tmp_path):
    fifo = tmp_path / "site.toml"
    os.mkfifo(fifo, 0o600)
    proc = cli("config", "validate", str(fifo))
    assert proc.returncode == 2, proc.stderr
    assert str(fifo) in proc.stderr and "FIFO" in proc.stderr


def test_the_prolog_with_a_fifo_config_judges_nothing_and_returns_at_once(tmp_path):
    tmp_path.chmod(0o755)
    fifo = tmp_path / "site.toml"
    os.mkfifo(fifo, 0o600)
    proc, _ = hook("prolog", fifo, tmp_path / "cache")  # 60 s timeout: the FIFO hung it forever
    assert proc.returncode == 0, proc.stderr
    assert "config not used, nothing judged" in proc.stderr
    assert "is a FIFO, not a regular file" in proc.stderr  # refused at once, not cut by the hook's timer


def test_an_oversized_config_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "site.toml"
    with open(big, "wb") as fh:  # sparse: 200 MB that cost nothing to make
        fh.write(GOOD.encode())
        fh.truncate(200 << 20)
    with pytest.raises(ConfigError) as info:
        load(str(big))
    assert f"over the limit of {MAX_CONFIG_BYTES} bytes" in str(info.value) and str(big) in str(info.value)


def test_a_config_just_under_the_limit_loads(tmp_path):
    text = GOOD + "# padding\n" * ((MAX_CONFIG_BYTES - len(GOOD)) // 10 - 1)
    path = tmp_path / "site.toml"
    path.write_text(text)
    assert path.stat().st_size <= MAX_CONFIG_BYTES
    assert load(str(path)).defaults["gpu_count"] == 8


def test_the_prolog_refuses_an_oversized_config_quickly(tmp_path):
    tmp_path.chmod(0o755)
    big = tmp_path / "site.toml"
    big.write_text(GOOD + "# padding padding padding padding padding padding\n" * 200_000)  # ~10 MB
    proc, _ = hook("prolog", big, tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert "config not used, nothing judged" in proc.stderr
    assert f"over the limit of {MAX_CONFIG_BYTES} bytes" in proc.stderr  # refused unread, not cut by a timer


def _cache_entry(tmp_path, monkeypatch) -> tuple[Path, Path]:
    from healthcheck.safeio import tomlcache

    config = tmp_path / "site.toml"
    config.write_text(GOOD)
    monkeypatch.setenv("HEALTHCHECK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir(mode=0o700)
    return config, Path(tomlcache._entry(str(config))[0])


def test_a_fifo_in_the_parse_cache_is_a_miss_not_a_hang(tmp_path, monkeypatch):
    from healthcheck.safeio import tomlcache

    config, entry = _cache_entry(tmp_path, monkeypatch)
    os.mkfifo(entry, 0o600)
    assert in_thread(lambda: tomlcache.get(str(config)), entry) is None
    assert in_thread(lambda: load(str(config), use_cache=True), entry).defaults["gpu_count"] == 8


def test_an_oversized_parse_cache_entry_is_a_miss(tmp_path, monkeypatch):
    from healthcheck.safeio import tomlcache

    config, entry = _cache_entry(tmp_path, monkeypatch)
    tomlcache.put(str(config), {"defaults": {"gpu_count": 8}})
    assert tomlcache.get(str(config)) == {"defaults": {"gpu_count": 8}}  # the control: a real entry is used
    with open(entry, "r+b") as fh:
        fh.truncate(tomlcache.MAX_ENTRY_BYTES + 1)
    assert tomlcache.get(str(config)) is None


def test_a_deeply_nested_parse_cache_entry_is_a_miss(tmp_path, monkeypatch):
    from healthcheck.safeio import tomlcache

    config, entry = _cache_entry(tmp_path, monkeypatch)
    entry.write_text('{"key": ' + "[" * 100_000 + "]" * 100_000 + "}")
    entry.chmod(0o600)
    assert tomlcache.get(str(config)) is None


def test_a_fifo_references_file_is_refused(tmp_path):
    from healthcheck.policies.references import ReferencesError, load as load_references

    fifo = tmp_path / "refs.toml"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ReferencesError, match="is a FIFO"):
        in_thread(lambda: load_references(str(fifo)), fifo)


def test_read_regular_refuses_what_is_not_a_regular_file(tmp_path):
    from healthcheck.safeio.trust import NotARegularFile, read_regular

    with pytest.raises(NotARegularFile, match="is a directory"):
        read_regular(str(tmp_path), "config")
    with pytest.raises(NotARegularFile, match="is a device"):
        read_regular("/dev/null", "config")
    small = tmp_path / "a.toml"
    small.write_bytes(b"x" * 100)
    assert read_regular(str(small), "config", limit=100) == b"x" * 100
    with pytest.raises(NotARegularFile, match="over the limit of 99 bytes"):
        read_regular(str(small), "config", limit=99)


# ------------------------------------------------------------------- item 5: numbers in the schema


@pytest.mark.parametrize("text, line, words", [
    ('[defaults.thresholds."gpu.ecc.uncorrected"]\nmax_volatile = nan\n', 2, "max_volatile must be a finite"),
    ('[defaults.thresholds."gpu.ecc.uncorrected"]\nmax_volatile = inf\n', 2, "max_volatile must be a finite"),
    ('[defaults.thresholds."gpu.ecc.uncorrected"]\nmax_aggregate = -nan\n', 2, "max_aggregate must be a finite"),
    ('[defaults.thresholds."gpu.ecc.corrected"]\nwarn_volatile = 9223372036854775807\n', 2, "[0, 1e+12]"),
    ('[defaults.thresholds."gpu.temperature"]\nwarn_margin_c = -inf\n', 2, "warn_margin_c must be a finite"),
    ('[defaults.thresholds."host.memory"]\ntolerance = nan\n', 2, "tolerance must be a finite"),
    ('[defaults.thresholds."gpu.throttle"]\nfail_reasons = [1.5, nan]\n', 2, "must be a list of strings"),
    ("[defaults]\nmem_total_gib = nan\n", 2, "mem_total_gib must be a finite number"),
    ("[defaults]\nmem_total_gib = inf\n", 2, "mem_total_gib must be a finite number"),
    ("[defaults]\ngpu_count = 9223372036854775807\n", 2, "gpu_count must be a finite number in [0, 1,024]"),
    ('[class.a]\nnodes = "n1"\nnvlinks_per_gpu = 100000\n', 3, "nvlinks_per_gpu must be"),
    ("[defaults.cpu]\ncores = 100000000000\n", 2, "cores must be a finite number"),
    ("[defaults.ib]\nrate_gbps = nan\n", 2, "rate_gbps must be a finite number"),
    ("[defaults.ib]\nports = 1000000\n", 2, "ports must be a finite number"),
    ('[defaults.ib.per_port]\n"mlx5_0:1" = { rate_gbps = nan }\n', 2, "rate_gbps must be a positive number"),
    ('[defaults.gpu_models."NVIDIA H100"]\ncount = 100000\n', 2, "count must be a finite number in [0, 1,024]"),
    ('[defaults.pcie.gpu]\ngen = 5\nwidth = 4096\n', 3, "width must be a finite number in [0, 64]"),
    ('[xid]\n79 = { min_count = 100000000000000 }\n', 2, "min_count must be in [1, 1,000,000]"),
    ('[xid]\n79 = { window_s = nan }\n', 2, "window_s"),
    ("[slurm]\nprolog_budget_s = nan\n", 2, "prolog_budget_s must be a number of seconds"),
    ("[slurm]\nprolog_budget_s = inf\n", 2, "prolog_budget_s must be a number of seconds"),
    ("[burnin]\ngemm_duration_s = nan\n", 2, "gemm_duration_s"),
    ("[burnin]\nmax_drain_fraction = inf\n", 2, "max_drain_fraction"),
    ("[burnin]\nseed = 99999999999999999999\n", 2, "seed"),
    ("[sweep]\nmax_drain_fraction = nan\n", 2, "max_drain_fraction"),
    ("[sweep]\npoll_s = inf\n", 2, "poll_s"),
    ("[sweep]\nmax_nodes = 99999999999999999999\n", 2, "max_nodes"),
])
def test_nan_infinity_and_absurd_counts_are_refused_with_file_and_line(text, line, words):
    with pytest.raises(ConfigError) as info:
        loads(text, "site.toml")
    assert str(info.value).startswith(f"site.toml:{line}: "), str(info.value)
    assert words in str(info.value)


@pytest.mark.parametrize("text", [
    '[defaults.thresholds."gpu.ecc.uncorrected"]\nmax_volatile = 0\nmax_aggregate = 1000000000000\n',
    '[defaults.thresholds."host.memory"]\ntolerance = 0.03\n',
    "[defaults]\nmem_total_gib = 2015.5\ngpu_count = 8\nnvlinks_per_gpu = 18\n",
    "[defaults.ib]\nrate_gbps = 400\nports = 8\n[defaults.cpu]\nsockets = 2\ncores = 112\nthreads = 224\n",
    '[xid]\n79 = { min_count = 1, window_s = 86400 }\n',
])
def test_real_values_still_load(text):
    loads(text, "site.toml").expectations_for("n1")


def test_config_validate_says_no_to_a_nan_threshold(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('[defaults.thresholds."gpu.ecc.uncorrected"]\nmax_volatile = nan\n')
    proc = cli("config", "validate", str(path))
    assert proc.returncode == 2 and f"{path}:2: " in proc.stderr, proc.stderr


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10 ** 30])
def test_the_settings_validators_refuse_nan_infinity_and_huge(value):
    from dataclasses import fields

    from healthcheck.burnin import settings as burnin
    from healthcheck.config import slurm_settings as slurm
    from healthcheck.sweep import settings as sweep

    numeric = lambda cls: [f.name for f in fields(cls) if type(f.default) in (int, float)]  # noqa: E731
    for key in numeric(burnin.BurninSettings):
        with pytest.raises(burnin.SettingsError, match=key):
            burnin.validate({key: value})
        with pytest.raises(burnin.SettingsError, match=key):
            burnin.from_env({f"HEALTHCHECK_BURNIN_{key.upper()}": str(value)})
    for key in numeric(sweep.SweepSettings):
        with pytest.raises(sweep.SweepSettingsError, match=key):
            sweep.validate({key: value})
    for key in numeric(slurm.SlurmSettings):
        assert slurm.validate({key: value})[1][0] == key


@pytest.mark.parametrize("entry, words", [
    ("{ value = nan, unit = 'GB/s' }", "must be a finite number"),
    ("{ value = 1e300, unit = 'GB/s' }", "value: must be at most 1e+12"),
    ("{ value = 100, unit = 'GB/s', peak = inf }", "peak: must be a finite number"),
    ("{ value = 100, unit = 'GB/s', peak = 0 }", "peak: must be > 0"),
    ("{ value = 100, unit = 'GB/s', upper = 1e9 }", "upper: a relative bound in [0, 100]"),
    ("{ value = 100, unit = 'GB/s', lower = -inf }", "lower: must be a finite number"),
])
def test_references_refuse_nan_infinity_and_absurd_values(entry, words):
    from healthcheck.policies.references import ReferencesError, merge

    with pytest.raises(ReferencesError) as info:
        merge(None, f"[sku.x]\nmatch = ['X']\nbw = {entry}\n", "refs.toml")
    assert words in str(info.value) and str(info.value).startswith("refs.toml: sku.x.bw")


def test_references_refuse_an_absurd_gpus_per_node():
    from healthcheck.policies.references import ReferencesError, merge

    with pytest.raises(ReferencesError, match=r"gpus_per_node: an integer in \[1, 1024\]"):
        merge(None, "[sku.x]\nmatch = ['X']\ngpus_per_node = 100000000\n", "refs.toml")


# ----------------------------------------------------------------------- item 6: deep nesting


@pytest.mark.parametrize("text", [
    "a = " + "[" * 5000 + "]" * 5000 + "\n",
    "a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n",
    "a = " + "[" * 200 + "]" * 200 + "\n",  # parses, but deeper than any config
], ids=["arrays-5000", "inline-tables-5000", "arrays-200"])
def test_deep_nesting_is_a_config_error_naming_the_file(text):
    with pytest.raises(ConfigError) as info:
        loads(text, "site.toml")
    assert str(info.value).startswith("site.toml:1: nested too deeply")


def test_config_validate_on_a_deeply_nested_file_exits_2(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text("[defaults]\ngpu_count = 8\n[history]\ndb_url = " + "[" * 5000 + "]" * 5000 + "\n")
    proc = cli("config", "validate", str(path))
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:4: nested too deeply" in proc.stderr and "RecursionError" not in proc.stderr


def test_an_integer_of_5000_digits_is_a_config_error():
    with pytest.raises(ConfigError, match="TOML syntax error"):
        loads("[defaults]\ngpu_count = 1" + "0" * 5000 + "\n", "site.toml")


def test_references_nested_5000_deep_are_a_references_error():
    from healthcheck.policies.references import ReferencesError, merge

    with pytest.raises(ReferencesError, match="nested too deeply"):
        merge(None, "a = " + "[" * 5000 + "]" * 5000 + "\n", "refs.toml")


# ----------------------------------------------------------------------- item 10: check --bundle /


def test_check_bundle_root_is_a_usage_error_not_an_internal_one():
    proc = cli("check", "--bundle", "/", timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "internal error" not in proc.stderr and proc.stderr.strip()


def test_an_unreadable_symlink_in_a_bundle_folder_is_refused_with_its_name(tmp_path, monkeypatch):
    from healthcheck.bundles import files as bundle_files

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cwd").symlink_to("/nowhere")
    real = os.path.realpath

    def denied(path, *args, **kwargs):
        if str(path).endswith("cwd"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(bundle_files.os.path, "realpath", denied)
    with pytest.raises(ValueError, match=r"cannot read symlink 'proc/cwd': Permission denied"):
        bundle_files.vet_tree(tmp_path, max_file_bytes=1 << 20, max_entries=100, error=ValueError)
