"""One property-based suite over every parser entry point and the config loader (issue 7): whatever
comes in, the only outcomes are a result or the module's documented error type, never another
exception, and results are JSON-serialisable where the module promises it (the ``to_dict()`` contracts
of nccl-tests, dcgmi and fio; the `healthcheck parse --json` facts of nvidia-smi, kernel log and
ibstat; the validated [burnin]/[sweep] tables).

Inputs: real outputs damaged by :mod:`tests.fuzzing` (seeds: every file of tests/fixtures/<tool>/, and
the corpus when it is beside the checkout), every seed fed to every other parser (formats mixed up),
random text and bytes, and TOML configs/references damaged the same way. Example counts are modest
(the whole file runs in well under a minute); each parser's own test file fuzzes it further.
"""
from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from healthcheck.burnin import settings as burnin_settings
from healthcheck.policies import references
from healthcheck.config import ConfigError, loads
from healthcheck.core.model import GpuInfo, IbPort, KernelEvent, NvLink
from healthcheck.parsers import ParseError, dcgmi, dcgmi_mndiag, fio, ibstat, kernel_log, nccl_tests, nvidia_smi, \
    nvlink
from healthcheck.slurm import nodestate
from healthcheck.sweep import settings as sweep_settings
from tests.conftest import FIXTURES, ROOT, corpus_files
from tests.fuzzing import mutated, spliced

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


def _texts(*paths: Path) -> list[str]:
    return [p.read_text(errors="replace") for p in paths if p.is_file() and p.name != "README.md"
            and p.suffix != ".md"]


def _fixtures(*subdirs: str) -> list[Path]:
    return sorted(p for d in subdirs for p in (FIXTURES / d).rglob("*") if p.is_file())


SEEDS: dict[str, list[str]] = {
    "nvidia-smi": _texts(*_fixtures("nvidia-smi", "burnin", "topology/nvidia-smi"), *corpus_files("nvidia-smi")),
    "kernel-log": _texts(*_fixtures("kernel-log", "topology/kernel-xid"), *corpus_files("kernel-xid")),
    "ibstat": _texts(*_fixtures("ibstat"), *corpus_files("infiniband", "ibstat-*")),
    "nvlink": _texts(*_fixtures("nvlink", "topology/nvlink-topo"), *corpus_files("nvlink-topo", "nvlink-*")),
    "nccl-tests": _texts(*_fixtures("nccl-tests", "topology/nccl-tests"), *corpus_files("nccl-tests")),
    "dcgmi": _texts(*_fixtures("dcgmi", "topology/dcgmi"), *corpus_files("dcgmi")),
    "fio": _texts(*_fixtures("fio")),
    "dcgmi-mndiag": _texts(*_fixtures("dcgmi/mndiag")),
    "slurm": _texts(*_fixtures("slurm", "slurm-recorded")),
}
ALL_SEEDS = [text for texts in SEEDS.values() for text in texts]
CONFIGS = _texts(*sorted((ROOT / "contrib").rglob("*.toml")))
REFERENCES = _texts(ROOT / "healthcheck" / "data" / "burnin_references.toml",
                    *sorted((ROOT / "contrib" / "burnin").glob("*.toml")))


def _json(value: Any) -> str:
    """Strict JSON (no NaN/inf) of a parser result: dataclasses as dicts, mapping keys as strings."""
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return plain(dataclasses.asdict(v))
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v
    return json.dumps(plain(value), allow_nan=False)


def _check_nvidia_smi(result) -> None:
    assert all(isinstance(g, GpuInfo) for g in result.gpus)
    assert [g.index for g in result.gpus] == list(range(len(result.gpus)))
    _json(result)


def _check_kernel_log(result) -> None:
    assert isinstance(result, list) and all(isinstance(e, KernelEvent) for e in result)
    assert all(e.kind in ("xid", "fallen_off_bus", "rm_init_failed") for e in result)
    _json(result)


def _check_ibstat(result) -> None:
    assert all(isinstance(p, IbPort) for p in result) and all(isinstance(e, str) for e in result.errors)
    _json({"ports": list(result), "errors": result.errors})


def _check_nvlink(result) -> None:
    assert all(isinstance(k, nvlink.GpuKey) and all(isinstance(x, NvLink) for x in v) for k, v in result.items())
    _json(result)


def _check_to_dict(result) -> None:
    json.dumps(result.to_dict(), allow_nan=False)


def _check_dcgmi(result) -> None:
    assert result.overall in ("pass", "fail", "warn", "skip")
    _check_to_dict(result)


def _check_slurm(result) -> None:
    assert isinstance(result, (dict, list))


# entry point -> (function, its documented error, what a result must satisfy)
PARSERS: dict[str, tuple[Callable[[Any], Any], type[Exception], Callable[[Any], None]]] = {
    "nvidia-smi": (nvidia_smi.parse_nvidia_smi, ParseError, _check_nvidia_smi),
    "kernel-log": (kernel_log.parse_kernel_log, ParseError, _check_kernel_log),
    "ibstat": (ibstat.parse_ibstat, ParseError, _check_ibstat),
    "nvlink-status": (nvlink.parse_nvlink_status, ParseError, _check_nvlink),
    "nvlink-errors": (nvlink.parse_nvlink_errors, ParseError, _check_nvlink),
    "nccl-tests": (nccl_tests.parse, nccl_tests.NcclParseError, _check_to_dict),
    "dcgmi": (dcgmi.parse_diag, dcgmi.DcgmiParseError, _check_dcgmi),
    "fio": (fio.parse, fio.FioParseError, _check_to_dict),
    "dcgmi-mndiag": (dcgmi_mndiag.parse_mndiag, dcgmi_mndiag.MndiagParseError, _check_dcgmi),
    "scontrol-show-node": (nodestate.parse_scontrol_nodes, ParseError, _check_slurm),
    "sinfo-reasons": (nodestate.parse_sinfo_reasons, ParseError, _check_slurm),
}
OWN_SEEDS = {"nvlink-status": "nvlink", "nvlink-errors": "nvlink", "scontrol-show-node": "slurm",
             "sinfo-reasons": "slurm"}
ACCEPTS_BYTES = ("kernel-log", "ibstat", "nccl-tests", "dcgmi", "fio", "dcgmi-mndiag")


def only_documented(kind: str, text: Any) -> None:
    parse, error, check = PARSERS[kind]
    try:
        result = parse(text)
    except error:
        return
    check(result)


def test_every_parser_has_seeds_from_its_own_fixtures():
    for kind in PARSERS:
        assert SEEDS[OWN_SEEDS.get(kind, kind)], kind
    assert CONFIGS and REFERENCES


def _parser_test(kind: str):
    seeds = SEEDS[OWN_SEEDS.get(kind, kind)]

    @FUZZ
    @given(mutated(seeds, edits=6))
    def damaged_own_output(text):
        only_documented(kind, text)

    @FUZZ
    @given(st.sampled_from(ALL_SEEDS) | mutated(ALL_SEEDS))
    def any_tool_output(text):
        only_documented(kind, text)

    @FUZZ
    @given(st.text(max_size=400) | spliced(seeds))
    def random_text(text):
        only_documented(kind, text)

    return damaged_own_output, any_tool_output, random_text


for _kind in PARSERS:
    _name = _kind.replace("-", "_")
    (globals()[f"test_{_name}_damaged_own_output"], globals()[f"test_{_name}_any_tool_output"],
     globals()[f"test_{_name}_random_text"]) = _parser_test(_kind)


@FUZZ
@given(st.sampled_from(ACCEPTS_BYTES), mutated(ALL_SEEDS), st.binary(max_size=16), st.floats(0, 1))
def test_parsers_taking_bytes_take_any_bytes(kind, text, junk, where):
    raw = text.encode("utf-8", "surrogatepass")
    at = int(where * len(raw))
    only_documented(kind, raw[:at] + junk + raw[at:])


@FUZZ
@given(st.sampled_from(sorted(PARSERS)), st.one_of(st.none(), st.integers(), st.lists(st.text(max_size=3)),
                                                   st.dictionaries(st.text(max_size=3), st.integers())))
def test_parsers_refuse_non_text_with_their_error(kind, value):
    parse, error, _ = PARSERS[kind]
    try:
        parse(value)
    except error:
        return
    except (TypeError, AttributeError) as exc:  # documented for none of them
        raise AssertionError(f"{kind}: {type(exc).__name__} for {type(value).__name__}") from exc


# ------------------------------------------------------------------------------- configuration


def _config_outcome(text: str) -> None:
    try:
        cfg = loads(text, "fuzz.toml")
        exp = cfg.expectations_for("gpu001")
    except ConfigError as exc:
        assert str(exc)
        return
    assert exp is not None
    json.dumps(cfg.burnin, allow_nan=False) and json.dumps(cfg.sweep, allow_nan=False)


@FUZZ
@given(mutated(CONFIGS, edits=6))
def test_config_loader_damaged_site_configs(text):
    _config_outcome(text)


@FUZZ
@given(st.lists(st.sampled_from(["[defaults]\n", "[class.a]\n", 'nodes = "gpu[001-004]"\n', "[xid]\n",
                                 '79 = { action = "warn" }\n', "[slurm]\n", "[burnin]\n", "[sweep]\n",
                                 "[history]\n", 'db_url = "postgresql://u:p@h/db"\n', "[thresholds]\n",
                                 "gpu_temp_c = 1e999\n", "x = nan\n", "= 1\n", "[[a]]\n"])
                | st.text(max_size=20), max_size=20))
def test_config_loader_pieces_of_the_format(pieces):
    _config_outcome("".join(pieces))


@FUZZ
@given(mutated(REFERENCES, edits=6), st.booleans())
def test_references_merge_damaged_files(text, over_builtin):
    base = references.merge(None, REFERENCES[0], "built-in") if over_builtin else None
    try:
        merged = references.merge(base, text, "fuzz.toml")
    except references.ReferencesError as exc:
        assert "fuzz.toml" in str(exc) or str(exc)
        return
    assert merged.sources[-1] == "fuzz.toml"


def _tables(name: str) -> list[dict]:
    found = []
    for text in CONFIGS:
        try:
            found.append(tomllib.loads(text).get(name) or {})
        except tomllib.TOMLDecodeError:
            continue
    return [t for t in found if t] or [{}]


_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                   max_size=3), max_leaves=8)


def _damaged_table(fields: list[str], seeds: list[dict]):
    keys = st.sampled_from(fields) | st.text(max_size=12)
    return st.builds(lambda base, extra, drop: {**{k: v for k, v in base.items() if k not in drop}, **extra},
                     st.sampled_from(seeds), st.dictionaries(keys, _VALUES, max_size=4),
                     st.sets(st.sampled_from(fields), max_size=3))


def _validated(validate, error: type[Exception], table: dict) -> None:
    try:
        clean = validate(table)
    except error as exc:
        assert str(exc)
        return
    assert set(clean) <= set(table)
    json.dumps(clean, allow_nan=False)
    assert all(not isinstance(v, float) or math.isfinite(v) for v in clean.values())


@FUZZ
@given(_damaged_table([f.name for f in dataclasses.fields(burnin_settings.BurninSettings)], _tables("burnin")))
def test_burnin_settings_validate(table):
    _validated(burnin_settings.validate, burnin_settings.SettingsError, table)


@FUZZ
@given(_damaged_table([f.name for f in dataclasses.fields(sweep_settings.SweepSettings)], _tables("sweep")))
def test_sweep_settings_validate(table):
    _validated(sweep_settings.validate, sweep_settings.SweepSettingsError, table)
