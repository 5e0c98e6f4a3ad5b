"""Dependencies by need (issue 18): pyproject.toml's dependencies and extras, healthcheck.core.extras' table
of what each extra provides and which command needs it, constraints.txt, and the clear error a command
gives when its extra is missing."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from healthcheck.core import extras
from healthcheck.core.extras import EXTRAS, MissingExtra

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NODE = {"click": "click", "pynvml": "nvidia-ml-py", "ClusterShell": "clustershell"}  # module -> distribution
# top-level module -> the distribution that provides it (names normalised: lower case, '-')
DISTRIBUTION = {"sqlalchemy": "sqlalchemy", "alembic": "alembic", "pandas": "pandas", "numpy": "numpy",
                "psycopg": "psycopg", "pyarrow": "pyarrow", "torch": "torch", "cupy": "cupy-cuda12x",
                "cupyx": "cupy-cuda12x", "pyslurm": "pyslurm"}
BLOCK = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
"""


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower().replace("_", "-")


def _extra(name: str) -> set[str]:
    """The distributions an extra installs, self-references (healthcheck[a,b]) followed."""
    out = set()
    for req in PYPROJECT["project"]["optional-dependencies"][name]:
        if _name(req) == "healthcheck":
            for inner in re.search(r"\[(.*)\]", req).group(1).split(","):
                out |= _extra(inner.strip())
        else:
            out.add(_name(req))
    return out


def _third_party_imports() -> set[str]:
    found = set()
    for path in (ROOT / "healthcheck").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            found |= {n.split(".")[0] for n in names}
    return {m for m in found if m not in sys.stdlib_module_names and not m.startswith("_") and m != "healthcheck"}


def test_the_node_install_is_click_nvml_and_clustershell():
    assert {_name(r) for r in PYPROJECT["project"]["dependencies"]} == set(NODE.values())


def test_every_library_the_code_imports_is_the_nodes_or_in_an_extra():
    imported = _third_party_imports()
    declared = set(NODE) | {m for modules in EXTRAS.values() for m in modules} | {"cupyx"}
    assert imported - declared == set(), "imported but in no extra (healthcheck/core/extras.py, pyproject.toml)"
    assert "psutil" not in imported  # dropped: nothing imports it (the probes read /proc themselves)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_in_pyproject_installs_what_extras_py_says_it_provides(extra):
    assert {DISTRIBUTION[m] for m in EXTRAS[extra]} <= _extra(extra)


def test_all_is_every_extra_but_the_gpu_stacks_and_pyslurm():
    everything = set().union(*(_extra(e) for e in ("history", "parquet", "burnin")))
    assert _extra("all") == everything
    assert not _extra("all") & {"torch", "cupy-cuda12x", "pyslurm"}


def test_constraints_pin_every_dependency_the_tests_install():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and re.fullmatch(r"[0-9][0-9A-Za-z.+]*", version), line
            pins[_name(name)] = version
    wanted = set(NODE.values()) | _extra("all") | _extra("test") | {"torch"}
    assert wanted - set(pins) == set()
    assert "psutil" not in pins and "pyslurm" not in pins  # not a dependency; must match the site's Slurm


@pytest.mark.parametrize("command, extra", [
    ("report", "history"), ("history export", "history"), ("history ingest", "history"), ("db upgrade", "history"),
    ("sweep", "history"), ("burnin fleet-digests", "history"), ("burnin run", "burnin"),
    ("check", None), ("burnin report", None), ("slurm install-hooks", None), ("parse nvidia-smi", None),
])
def test_which_extra_a_command_needs(command, extra):
    assert extras.extra_for(command) == extra


def test_a_missing_extra_names_the_extra_and_the_install_line(monkeypatch):
    monkeypatch.setitem(EXTRAS, "history", ("sqlalchemy", "healthcheck_test_no_such_module"))
    with pytest.raises(MissingExtra) as err:
        extras.require_for("report")
    assert str(err.value) == (f"healthcheck report needs the [history] extra: {sys.executable} -m pip install -e "
                              f"'{ROOT}[history]' (not installed: healthcheck_test_no_such_module)")
    # never the bare package-index name: 'healthcheck' there is another project
    assert "pip install 'healthcheck[" not in str(err.value)
    assert err.value.extra == "history" and err.value.missing == ["healthcheck_test_no_such_module"]
    extras.require_for("check")  # needs nothing beyond the node install


def test_an_unknown_extra_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown extra 'histroy': one of .*history"):
        extras.require("histroy")


def _blocked(code: str, *modules: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-c", BLOCK.format(blocked=set(modules)) + code],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_require_sees_a_library_refused_by_the_import_system(tmp_path):
    proc = _blocked("from healthcheck.core.extras import require\nrequire('history', 'healthcheck report')\n",
                    "pandas", "sqlalchemy", cwd=tmp_path)
    assert proc.returncode == 1
    assert ("healthcheck.core.extras.MissingExtra: healthcheck report needs the [history] extra: "
            f"{sys.executable} -m pip install -e '{ROOT}[history]' (not installed: sqlalchemy, pandas)") in proc.stderr


def test_parquet_export_without_pyarrow_names_the_parquet_extra_and_writes_nothing(tmp_path):
    code = ("import sys\nfrom healthcheck.history.db import HistoryError\n"
            "from healthcheck.history.queries import export\n"
            "try:\n    export(None, 'parquet', sys.argv[1])\n"
            "except HistoryError as exc:\n    print(exc)\n")
    target = tmp_path / "out.parquet"
    proc = subprocess.run([sys.executable, "-I", "-c", BLOCK.format(blocked={"pyarrow"}) + code, str(target)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.stdout.strip() == ("healthcheck history export --format parquet needs the [parquet] extra: "
                                   f"{sys.executable} -m pip install -e '{ROOT}[parquet]' (not installed: pyarrow)"), \
        proc.stderr
    assert list(tmp_path.iterdir()) == []
