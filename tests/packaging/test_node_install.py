"""The node install is enough for the node (issue 18): `healthcheck check` and the Slurm hooks run with
only click, nvidia-ml-py and ClusterShell importable beside the standard library.

Each run is a subprocess whose first act is to put a finder on ``sys.meta_path`` that refuses every
other third-party module (pandas, SQLAlchemy, Alembic, psycopg, pyarrow, NumPy, torch, …): they may be
installed in the test venv, but for the program they are not there. The finder also records every
refused import: the node path must not even try one (an optional ``try: import numpy`` on the node path
would be a dependency in disguise). A first check in the same prelude proves the blocker works."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the node's third-party modules: pyproject's dependencies (and PyYAML, which ClusterShell imports)
NODE_MODULES = ("healthcheck", "click", "pynvml", "ClusterShell", "yaml", "_yaml")
# what the standard library itself probes for (copy.py: ``from org.python.core import PyStringMap``, Jython)
STDLIB_PROBES = ("org",)

PRELUDE = f"""
import atexit, json, sys
ALLOWED = set({NODE_MODULES!r} + {STDLIB_PROBES!r})
REFUSED = []
class NodeInstallOnly:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names or top in ALLOWED:
            return None
        REFUSED.append(name)
        raise ModuleNotFoundError(f"No module named {{name!r}} (not in the node install)", name=name)
sys.meta_path.insert(0, NodeInstallOnly())
for probe in ("pandas", "numpy"):
    try:
        __import__(probe)
    except ModuleNotFoundError:
        pass
    else:
        sys.exit("the blocker let " + probe + " through")
del REFUSED[:]
atexit.register(lambda: sys.stderr.write("\\nREFUSED " + json.dumps(REFUSED) + "\\n"))
"""


def _entry_point() -> str:
    """`healthcheck`'s console entry point as pyproject.toml declares it (module:function)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return scripts["healthcheck"]


def _cli(*argv: str) -> str:
    module, func = _entry_point().split(":")
    return PRELUDE + f"import sys; sys.argv = ['healthcheck', *{list(argv)!r}]\nfrom {module} import {func}\n{func}()\n"


def _run(code: str, env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str, list[str]]:
    proc = subprocess.run([sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)
    lines = proc.stderr.splitlines()
    refused = [json.loads(line[len("REFUSED "):]) for line in lines if line.startswith("REFUSED ")]
    assert refused, f"the prelude did not run (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, refused[-1]


def _site(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    config = tmp_path / "site.toml"
    config.write_text(f'[slurm]\nstate_dir = "{tmp_path / "state"}"\nspool_dir = "{tmp_path / "spool"}"\n'
                      f'scontrol = "/bin/false"\n')
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "4242",
           "SLURM_JOB_USER": "root", "SLURM_JOB_UID": "0", "HEALTHCHECK_CACHE_DIR": str(tmp_path / "cache"),
           "HOME": str(tmp_path)}
    return config, env


def test_the_blocker_refuses_what_the_node_does_not_install(tmp_path):
    _, env = _site(tmp_path)
    code = PRELUDE + "import sqlalchemy\n"
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 1
    assert "No module named 'sqlalchemy' (not in the node install)" in proc.stderr
    assert 'REFUSED ["sqlalchemy"]' in proc.stderr


def test_check_json_runs_with_the_node_install_only(tmp_path):
    config, env = _site(tmp_path)
    rc, out, refused = _run(_cli("check", "--format", "json", "--config", str(config)), env, tmp_path)
    assert rc in (0, 1), out  # 1: a check failed on this machine; 2/3 would be a usage or internal error
    report = json.loads(out)
    assert report["context"] == "check" and report["results"], report
    assert refused == []


def test_help_and_checks_list_run_with_the_node_install_only(tmp_path):
    _, env = _site(tmp_path)
    rc, out, refused = _run(_cli("--help"), env, tmp_path)
    assert rc == 0 and "check" in out and "report" in out  # every group's module is loaded for the help
    assert refused == []
    rc, out, refused = _run(_cli("checks"), env, tmp_path)
    assert rc == 0 and "gpu.ecc.uncorrected" in out
    assert refused == []


def test_prolog_and_epilog_run_with_the_node_install_only(tmp_path):
    config, env = _site(tmp_path)
    hook = PRELUDE + "import sys; from healthcheck.hook.run import guarded_main; sys.exit(guarded_main())\n"
    for context in ("prolog", "epilog"):
        rc, _, refused = _run(hook, env, tmp_path, context, "--config", str(config))
        assert rc == 0, context
        assert refused == [], context
    records = [json.loads(line) for line in (tmp_path / "spool" / "records.jsonl").read_text().splitlines()]
    runs = [r["context"] for r in records if r.get("kind") == "run"]
    assert runs == ["prolog", "epilog"], runs
