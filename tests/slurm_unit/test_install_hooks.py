"""The Slurm hooks have one source (the package's templates); what is installed and what is committed in
prolog_epilog/ are generated from it, executable."""
from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from healthcheck.cli import cli
from healthcheck.slurm import install

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "prolog_epilog"
CONTEXTS = {"prolog.sh": "prolog", "epilog.sh": "epilog", "healthcheck.sh": "slurm-check"}


def test_each_hook_has_one_template_in_the_package_and_none_elsewhere():
    assert sorted(p.name for p in install.TEMPLATES.glob("*.sh")) == sorted(install.HOOKS)
    other = [p for p in ROOT.rglob("*.sh") if "@PYTHON@" in p.read_text(errors="replace")
             and p.parent != install.TEMPLATES and ".venv" not in p.parts]
    assert other == [], "a second copy of a hook template"
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["healthcheck"]
    for name in [*install.HOOKS, install.UNIT]:  # shipped in the wheel, so install-hooks works from an installed package
        assert any(fnmatch.fnmatch(f"slurm/templates/{name}", g) for g in globs), name


@pytest.mark.parametrize("name", sorted(install.HOOKS))
def test_committed_hooks_are_the_templates_rendered_for_the_default_layout(name):
    committed = (SHIPPED / name).read_text()
    assert committed == install.render(name), (
        f"prolog_epilog/{name} differs from its template: edit healthcheck/slurm/templates/{name}, then run "
        "python -m healthcheck.slurm.install prolog_epilog")
    assert re.search(r"@[A-Z_]+@", committed) is None  # no placeholder left
    assert committed.startswith(f"#!{install.DEFAULT_PYTHON} -I\n")  # a Python script: one process, no shell
    assert (f'run(["{CONTEXTS[name]}", "--config", "{install.DEFAULT_CONFIG}", "--agent", '
            f'"{install.DEFAULT_SOCKET}"])') in committed
    assert os.access(SHIPPED / name, os.X_OK)


def test_the_committed_agent_unit_is_its_template_rendered_for_the_default_layout():
    assert (SHIPPED / install.UNIT).read_text() == install.render_unit()


def test_committed_hooks_are_executable_in_git():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-s", "--", "prolog_epilog/*.sh"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    modes = {line.split("\t")[1]: line.split()[0] for line in out.splitlines()}
    assert modes == {f"prolog_epilog/{n}": "100755" for n in install.HOOKS}


def test_install_hooks_writes_the_rendered_templates_executable_under_any_umask(tmp_path):
    config = tmp_path / "hc.toml"
    config.write_text("")
    slurm_conf = tmp_path / "slurm.conf"
    slurm_conf.write_text("")
    prefix = tmp_path / "hooks"
    old = os.umask(0o077)
    try:
        result = CliRunner().invoke(cli, ["slurm", "install-hooks", "--prefix", str(prefix), "--config",
                                          str(config), "--python", sys.executable, "--slurm-conf", str(slurm_conf)])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    # no partial file left; the agent's unit beside the hooks
    assert sorted(p.name for p in prefix.iterdir()) == sorted([*install.HOOKS, install.UNIT])
    for name in install.HOOKS:
        text = (prefix / name).read_text()
        assert text == install.render(name, sys.executable, str(config), str(slurm_conf))
        assert install.template_text(name) \
            .replace("@ENV@", f'import os\nos.environ["SLURM_CONF"] = "{slurm_conf}"\n') \
            .replace("@PYTHON@", sys.executable).replace("@CONFIG@", str(config)) \
            .replace("@AGENT@", f', "--agent", "{install.DEFAULT_SOCKET}"') == text
        compile(text, name, "exec")  # valid Python
        assert stat.S_IMODE((prefix / name).stat().st_mode) == 0o755
    unit = (prefix / install.UNIT).read_text()
    assert f"ExecStart={sys.executable} -I -m healthcheck.slurm.agent --socket {install.DEFAULT_SOCKET} " \
           f"--config {config}" in unit and "@" not in unit.replace("@PYTHON@", "")
    assert stat.S_IMODE((prefix / install.UNIT).stat().st_mode) == 0o644
    assert f"systemctl enable --now {install.UNIT}" in result.stderr


def test_install_hooks_without_the_agent_writes_hooks_that_never_try_one(tmp_path):
    config = tmp_path / "hc.toml"
    config.write_text("")
    result = CliRunner().invoke(cli, ["slurm", "install-hooks", "--prefix", str(tmp_path / "h"), "--config",
                                      str(config), "--python", sys.executable, "--no-agent"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == sorted(install.HOOKS)
    assert "--agent" not in (tmp_path / "h" / "prolog.sh").read_text()
    custom = install.render("prolog.sh", sys.executable, str(config), agent="/run/hc/a.sock")
    assert custom.rstrip().endswith(f'"--config", "{config}", "--agent", "/run/hc/a.sock"])')
    with pytest.raises(ValueError, match="agent socket path"):
        install.render("prolog.sh", sys.executable, str(config), agent="/run/x;y")


def test_a_python_path_too_long_for_the_first_line_or_one_a_literal_would_misread_is_refused():
    with pytest.raises(ValueError, match="too long for a script's first line"):
        install.render("prolog.sh", python="/opt/" + "v" * 130 + "/bin/python")
    for bad in ('/opt/a"b/python', "/opt/a\\b/python", "/opt/a\rb/python"):
        with pytest.raises(ValueError, match="python path"):
            install.render("prolog.sh", python=bad)


def test_an_installed_hook_runs(tmp_path):
    """The rendered line is valid shell and starts the hook (a missing config: logged, exit 0)."""
    config = tmp_path / "hc.toml"
    config.write_text("")
    install.install_hooks(str(tmp_path / "hooks"), str(config), sys.executable)
    config.unlink()
    proc = subprocess.run([str(tmp_path / "hooks" / "healthcheck.sh")], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0
    assert str(config) in proc.stderr, proc.stderr


@pytest.mark.parametrize("bad", ["/opt/hc venv/bin/python", "/x;rm -rf /", "relative/python", "/a$(id)"])
def test_a_path_a_shell_line_would_misread_is_refused(bad):
    with pytest.raises(ValueError, match="python path"):
        install.render("prolog.sh", python=bad)


def test_unknown_template_is_refused():
    with pytest.raises(ValueError, match="no hook template"):
        install.template_text("../../etc/passwd")
