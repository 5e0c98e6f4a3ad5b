"""The config's sections: one registry (healthcheck.config.sections), every section validated by its
subsystem's function, reachable as ``Config.section(name)``, its errors at file:line."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from healthcheck.analysis.fleetsettings import FleetSettings
from healthcheck.burnin.rdma import RdmaSettings
from healthcheck.config import ConfigError, load, loads
from healthcheck.config.schema import validate_section
from healthcheck.config.sections import SECTIONS, TOP_LEVEL
from healthcheck.fabric.counters import CounterSettings, defaults as counter_defaults
from healthcheck.fabric.nodetopo import TopoExpect
from healthcheck.fabric.software import Settings as ConsistencySettings
from healthcheck.config.slurm_settings import SlurmSettings

SITE = '''\
[slurm]
prolog_mode = "fast"

[burnin]
suite = "quick"

[burnin.rdma]
qps = 8
bw_tests = ["ib_write_bw", "ib_read_bw"]

[fabric.counters.SymbolErrorCounter]
per_window = 50

[fabric.node]
gpus = 8
nvlink = "NV18"

[fabric.consistency]
expected = { driver = "550.*" }
ignore = ["kernel"]

[fleet]
persist_k = 2
persist_n = 4
'''


def test_each_new_section_is_accepted_and_reachable():
    cfg = loads(SITE, "site.toml")
    counters = cfg.section("fabric.counters")
    assert isinstance(counters, CounterSettings)
    assert counters.rules["SymbolErrorCounter"].per_window == 50
    assert counters.rules["LinkDownedCounter"] == counter_defaults().rules["LinkDownedCounter"]  # the rest packaged
    rdma = cfg.section("burnin.rdma")
    assert isinstance(rdma, RdmaSettings) and rdma.qps == 8 and rdma.bw_tests == ("ib_write_bw", "ib_read_bw")
    assert cfg.burnin == {"suite": "quick"}  # [burnin.rdma] is not a key of [burnin]
    node = cfg.section("fabric.node")
    assert isinstance(node, TopoExpect) and node.gpus == 8 and node.nvlink == "NV18"
    consistency = cfg.section("fabric.consistency")
    assert isinstance(consistency, ConsistencySettings)
    assert consistency.expected == {"driver": "550.*"} and consistency.ignore == ("kernel",)
    fleet = cfg.section("fleet")
    assert isinstance(fleet, FleetSettings) and (fleet.persist_k, fleet.persist_n) == (2, 4)
    assert cfg.section("slurm") is cfg.slurm and cfg.slurm.prolog_mode == "fast"


def test_a_missing_section_gives_its_defaults():
    cfg = loads('[defaults]\ngpu_count = 8\n', "site.toml")
    assert cfg.section("fleet") == FleetSettings()
    assert cfg.section("burnin.rdma") == RdmaSettings()
    assert cfg.section("fabric.node") == TopoExpect()
    assert cfg.section("fabric.consistency") == ConsistencySettings()
    assert cfg.section("fabric.counters") == counter_defaults()
    assert cfg.section("slurm") == SlurmSettings()
    assert (cfg.burnin, cfg.sweep, cfg.topology, cfg.history_db_url) == ({}, {}, {}, None)
    with pytest.raises(KeyError, match="no config section 'flet'"):
        cfg.section("flet")


# (file, line of the bad key, words of the message): a bad value in each section, written as a table, a
# sub-table, an inline table or a dotted key
BAD = [
    ('[fabric.counters.SymbolErrorCounter]\nper_window = -1\n', 2, "SymbolErrorCounter.per_window"),
    ('[fabric.counters]\nPortRcvErrors = { per_hour = 5 }\nSymbolErrorCounter = { severity = "loud" }\n', 3,
     "severity"),
    ('[fabric]\ncounters.Not_A_Counter = { per_hour = 1 }\n', 2, "not a counter name"),
    ('[burnin]\nsuite = "quick"\n[burnin.rdma]\nqps = 4\nefficiency = 3\n', 5, "[burnin.rdma] efficiency"),
    ('[burnin.rdma]\nlauncher = ["srun"]\n', 2, "launcher"),
    ('[fabric.node]\ngpus = 8\np2p = "maybe"\n', 3, "[fabric.node] p2p"),
    ('[fabric]\nnode = { gpus = 0 }\n', 2, "[fabric.node] gpus"),
    ('[fabric.node]\ngpus = 8\npairs = [1]\n', 3, "[fabric.node] pairs: expected a table"),
    ('[fabric.consistency]\nexpected = { driver = "550.54" }\nignore = "driver"\n', 3, "ignore must be a list"),
    ('[fabric.consistency.expected]\ndriver = "*"\n', 2, "expected.driver"),
    ('[fleet]\npersist_n = 5\npersist_k = 7\n', 3, "fleet.persist_k (7) must not exceed"),
    ('[fleet]\n[fleet.weights]\noutlier = -1\n', 3, "fleet.weights.outlier"),
    ('[fleet]\ngemm_dtype = "int4"\n', 2, "fleet.gemm_dtype"),
    # the sections validated before the registry, now through it
    ('[slurm]\nstate_dir = "/x"\nprolog_mode = "slow"\n', 3, "[slurm] prolog_mode"),
    ('[history]\ndb_url = "postgresql://u:pw@h/db"\n', 2, "must not carry a password"),
    ('[burnin]\nsuite = "quick"\ngemm_n = "big"\n', 3, "gemm_n"),
    ('[sweep]\nmax_nodes = -1\n', 2, "max_nodes"),
    ('[topology.rack]\nr1 = "gpu[1-4]"\nr2 = "gpu[5-8]"\n[topology.power]\npdu = 3\n', 5, "topology.power.pdu"),
]


@pytest.mark.parametrize("text,line,words", BAD, ids=[f"{t.splitlines()[0]}-{n}" for n, (t, _, _) in enumerate(BAD)])
def test_a_bad_value_in_each_section_is_named_with_file_and_line(text, line, words):
    with pytest.raises(ConfigError) as info:
        loads("[defaults]\ngpu_count = 8\n" + text, "site.toml")
    assert info.value.path == "site.toml" and info.value.line == line + 2, str(info.value)
    assert words in info.value.message
    assert str(info.value).startswith(f"site.toml:{line + 2}: ")


@pytest.mark.parametrize("text,line,expected", [
    ('[flet]\npersist_k = 2\n', 3, "unknown top-level key 'flet'"),
    ('[fabric.counter.SymbolErrorCounter]\nper_window = 1\n', 3, "unknown section [fabric.counter]"),
    ('[fabric]\nnodes = { gpus = 8 }\n', 4, "unknown section [fabric.nodes]"),
    ('fleet = 3\n', 1, "[fleet] must be a table"),
])
def test_an_unknown_or_malformed_section_is_refused_at_its_line(text, line, expected):
    with pytest.raises(ConfigError) as info:
        loads(text + "[defaults]\ngpu_count = 8\n" if text.startswith("fleet =") else
              "[defaults]\ngpu_count = 8\n" + text, "site.toml")
    assert info.value.line == line and expected in info.value.message, str(info.value)
    if "top-level" in expected:  # the message lists every section the file may have
        assert all(f"[{name}]" in info.value.message for name in SECTIONS)


def test_the_hooks_load_leaves_the_other_sections_for_later(tmp_path, monkeypatch):
    """The hooks' load (use_cache=True) validates only [slurm] (and the classes): a bad [fleet] does not
    stop a job; asked for, it is a ConfigError naming the file, and `config validate` (a full load)
    names its line."""
    monkeypatch.setenv("HEALTHCHECK_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "site.toml"
    path.write_text('[slurm]\nprolog_mode = "fast"\n[fleet]\npersist_k = 0\n')
    for _ in range(2):  # the read, then the cache hit
        cfg = load(str(path), use_cache=True)
        assert cfg.slurm.prolog_mode == "fast" and cfg.deferred == {"fleet": {"persist_k": 0}}
        with pytest.raises(ConfigError, match="fleet.persist_k: must be an integer") as info:
            cfg.section("fleet")
        assert info.value.path == str(path)
    with pytest.raises(ConfigError) as info:
        load(str(path))
    assert info.value.line == 4 and "persist_k" in info.value.message
    path.write_text('[slurm]\nprolog_mode = "slow"\n[fleet]\npersist_k = 2\n')  # [slurm] is the hooks' own
    with pytest.raises(ConfigError, match="prolog_mode"):
        load(str(path), use_cache=True)


def test_a_cached_config_equals_a_full_load(tmp_path, monkeypatch):
    monkeypatch.setenv("HEALTHCHECK_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "site.toml"
    path.write_text(SITE + '[class.a]\nnodes = "gpu[1-4]"\ngpu_count = 4\n[xid.79]\naction = "warn"\n')
    full = load(str(path))
    load(str(path), use_cache=True)
    cached = load(str(path), use_cache=True)
    assert cached.deferred and not cached.sections  # from the cache: nothing but [slurm] validated
    for name in SECTIONS:
        assert cached.section(name) == full.section(name), name
    assert (cached.defaults, cached.xid, cached.slurm) == (full.defaults, full.xid, full.slurm)
    assert cached.expectations_for("gpu2") == full.expectations_for("gpu2")


def test_one_section_on_its_own():
    assert validate_section("fabric.node", {"gpus": 4}).gpus == 4
    with pytest.raises(ConfigError) as info:
        validate_section("fabric.node", {"gpus": 0}, "node.toml")
    assert str(info.value).startswith("node.toml: [fabric.node] gpus")
    with pytest.raises(ConfigError, match="no config section 'fabric.nodes'"):
        validate_section("fabric.nodes", {})


def test_every_registered_validator_exists_and_gives_defaults():
    """A typo in a module path or function name of the registry fails here, not at a site."""
    for name, entry in SECTIONS.items():
        validate = entry.validator()
        assert callable(validate), name
        validate({})  # an empty table: the defaults, never an error
    assert TOP_LEVEL[:3] == ("defaults", "class", "xid") and "fabric" in TOP_LEVEL


PACKAGE = Path(__file__).resolve().parents[2] / "healthcheck" / "config"
ORDER = ["topology", "generate", "slurm_settings", "sections", "overlap", "model", "schema", "loading", "problems", "__init__"]  # each imports only those before it


def test_the_package_imports_one_way():
    """topology, generate, sections, overlap <- model <- schema <- loading <- __init__: no module imports one after it (at module
    level or inside a function), so there is no circle."""
    for position, name in enumerate(ORDER):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        ours = {alias.name.split(".")[0] if node.module is None else node.module.split(".")[0]
                for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1
                for alias in node.names}
        assert ours <= set(ORDER[:position]), f"{name} imports {sorted(ours - set(ORDER[:position]))}"
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER)


def test_importing_the_package_imports_no_section_module():
    code = ("import sys, healthcheck.config\n"
            "print(sorted(m for m in sys.modules if m.startswith(('healthcheck.config.', 'healthcheck.fabric', "
            "'healthcheck.burnin', 'healthcheck.analysis', 'healthcheck.sweep', 'healthcheck.config.topology', 'tomllib'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                          cwd=str(PACKAGE.parents[1]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['healthcheck.config.loading', 'healthcheck.config.model', 'healthcheck.config.slurm_settings']"


def test_a_validator_that_trips_on_a_type_is_a_config_error_at_the_header(monkeypatch):
    """A validator that did not expect a value's type (TypeError, AttributeError ...) is still the file's
    fault: a ConfigError naming the section at its header line, never a traceback."""
    import healthcheck.fabric.nodetopo as nodetopo

    def trips(section):
        return section["gpus"].upper()  # AttributeError on an int

    monkeypatch.setattr(nodetopo, "validate", trips)
    with pytest.raises(ConfigError) as err:
        loads('[defaults]\n\n[fabric.node]\ngpus = 8\n', "site.toml").section("fabric.node")
    assert "[fabric.node] cannot be read (AttributeError" in str(err.value) and err.value.line == 3
