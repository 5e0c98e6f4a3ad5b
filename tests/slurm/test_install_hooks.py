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
from healthcheck.deploy import install
from healthcheck.deploy.install import python_part

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "prolog_epilog"
CONTEXTS = {"prolog.sh": "prolog", "epilog.sh": "epilog", "healthcheck.sh": "slurm-check"}



@pytest.fixture(autouse=True)
def _no_systemd_here(monkeypatch):
    """No test here enables a unit on the machine running it: systemd is never 'running' unless a test
    says so (and then the enabling itself is faked)."""
    monkeypatch.setattr(install, "systemd_running", lambda: False)


def test_each_hook_has_one_template_in_the_package_and_none_elsewhere():
    assert sorted(p.name for p in install.TEMPLATES.glob("*.sh")) == sorted(install.HOOKS)
    assert all("@CLIENT@" in install.TEMPLATES.joinpath(n).read_text() for n in install.HOOKS)  # one shared part
    other = [p for p in ROOT.rglob("*.sh") if "@PYTHON@" in p.read_text(errors="replace")
             and p.parent != install.TEMPLATES and ".venv" not in p.parts]
    assert other == [], "a second copy of a hook template"
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["healthcheck"]
    for name in [*install.HOOKS, install.UNIT, install.CLIENT]:  # shipped in the wheel, so install-hooks works from an installed package
        assert any(fnmatch.fnmatch(f"deploy/templates/{name}", g) for g in globs), name


@pytest.mark.parametrize("name", sorted(install.HOOKS))
def test_committed_hooks_are_the_templates_rendered_for_the_default_layout(name):
    committed = (SHIPPED / name).read_text()
    assert committed == install.render(name), (
        f"prolog_epilog/{name} differs from its template: edit healthcheck/deploy/templates/{name}, then run "
        "python -m healthcheck.deploy.install prolog_epilog")
    assert re.search(r"@[A-Z_]+@", committed) is None  # no placeholder left
    # a bash script: the agent's door, else the Python client without the site set-up (-S)
    assert committed.startswith("#!/bin/bash\n") and f"\nhook={CONTEXTS[name]}\n" in committed
    assert "\ndoor=/run/healthcheck/agent.door\n" in committed and '<"/run/healthcheck/agent.pid"' in committed
    assert f"exec {install.DEFAULT_PYTHON} -IS -c '" in committed
    assert (f'run([sys.argv[1], "--config", "{install.DEFAULT_CONFIG}", "--agent", '
            f'"{install.DEFAULT_SOCKET}"], *sys.argv[2:3])') in committed
    assert committed.endswith("""' "$hook" "$t0"\n""")  # the hook's start: its budget counts from there
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
        assert text == install.render(name, sys.executable, str(config), str(slurm_conf),
                                      site=install.package_path(sys.executable))
        assert re.search(r"@[A-Z_]+@", text) is None
        # SLURM_CONF: in the door's request line, and set by the Python client
        assert f' "{config}" " {slurm_conf}" 1<>"$door"' in text
        assert f'os.environ["SLURM_CONF"] = "{slurm_conf}"' in python_part(text)
        subprocess.run(["bash", "-n", str(prefix / name)], check=True, timeout=60)  # valid bash
        compile(python_part(text), name, "exec")  # and valid Python in it
        assert stat.S_IMODE((prefix / name).stat().st_mode) == 0o755
    unit = (prefix / install.UNIT).read_text()
    assert f"ExecStart={sys.executable} -I -m healthcheck.agent.main --socket {install.DEFAULT_SOCKET} " \
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
    never = (tmp_path / "h" / "prolog.sh").read_text()
    assert "--agent" not in never and "\ndoor=\n" in never  # no door to knock at
    custom = install.render("prolog.sh", sys.executable, str(config), agent="/run/hc/a.sock")
    assert f'"--config", "{config}", "--agent", "/run/hc/a.sock"], *sys.argv[2:3])' in custom
    assert "\ndoor=/run/hc/a.door\n" in custom and '<"/run/hc/a.pid"' in custom
    with pytest.raises(ValueError, match="agent socket path"):
        install.render("prolog.sh", sys.executable, str(config), agent="/run/x;y")


def test_a_long_python_path_is_taken_and_one_a_literal_would_misread_is_refused():
    long = "/opt/" + "v" * 200 + "/bin/python"  # no longer on a "#!" line, which the kernel cuts at 128 bytes
    assert f"exec {long} -IS -c '" in install.render("prolog.sh", python=long)
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


def test_the_hooks_find_the_package_without_the_site_set_up(tmp_path):
    """The hooks run with -S: they import the package from where install-hooks found it (this interpreter's
    install), else from the venv's site-packages beside the python they name (the default layout, a
    wheel); where it is not there, the usual site set-up finds it, and a hook running in its own process
    does that set-up first."""
    here = install.package_path(sys.executable)
    assert here is not None and (Path(here) / "healthcheck" / "__init__.py").is_file()
    assert install.package_path("/opt/other/.venv/bin/python") is None
    assert f'sys.path.append("{here}")' in install.render("prolog.sh", sys.executable, site=here)
    default = install.render("prolog.sh")
    assert 'sys.path.append("/opt/healthcheck/.venv/lib/python" + str(sys.version_info[0])' in default
    with pytest.raises(ValueError, match="package path"):
        install.render("prolog.sh", sys.executable, site='/opt/a"b')
    config = tmp_path / "hc.toml"
    config.write_text(f'[slurm]\nstate_dir = "{tmp_path}/state"\nspool_dir = "{tmp_path}/spool"\n')
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node1", "HEALTHCHECK_CACHE_DIR": str(tmp_path / "cache")}
    for site in (here, str(tmp_path / "not-here")):  # found where installed; not there: site.main() finds it
        code = python_part(install.render("healthcheck.sh", sys.executable, str(config), agent=None, site=site))
        proc = subprocess.run([sys.executable, "-IS", "-X", "importtime", "-c", code, "slurm-check"],
                              capture_output=True, text=True, timeout=120, env=env, cwd="/")
        assert proc.returncode == 0, proc.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                    if line.startswith("import time:")}
        assert "site" in imported  # the hook ran here: the usual set-up first (pynvml, .pth paths)
        assert (tmp_path / "spool" / "records.jsonl").is_file()
        (tmp_path / "spool" / "records.jsonl").unlink()


def test_the_client_reads_the_environment_as_os_environ_would(tmp_path):
    """Under -S the client does not import os: its request carries the environment decoded from posix.environ
    as os.environ decodes it (undecodable bytes included); once os is loaded (a wrapper that set
    SLURM_CONF), os.environ and what was set in it."""
    code = (f"import sys; sys.path.append({install.package_path(sys.executable)!r})\n"
            "from healthcheck.hook.client import process_context\n"
            "before = 'os' in sys.modules; env = process_context()[0]\n"
            "import os; same = env == dict(os.environ)\n"
            "os.environ['SLURM_CONF'] = '/etc/slurm/other.conf'\n"
            "print(before, same, process_context()[0].get('SLURM_CONF'))")
    proc = subprocess.run([sys.executable, "-IS", "-c", code], capture_output=True, text=True, timeout=60,
                          env={b"PATH": b"/usr/bin:/bin", b"ODD": b"caf\xe9 \xff", b"SLURM_JOB_ID": b"7"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "/etc/slurm/other.conf"]


@pytest.mark.parametrize("bad", ["/opt/hc venv/bin/python", "/x;rm -rf /", "relative/python", "/a$(id)"])
def test_a_path_a_shell_line_would_misread_is_refused(bad):
    with pytest.raises(ValueError, match="python path"):
        install.render("prolog.sh", python=bad)


def test_unknown_template_is_refused():
    with pytest.raises(ValueError, match="no hook template"):
        install.template_text("../../etc/passwd")


class FakeSystemctl:
    """The subprocess seam for systemctl: records each call; ``fail``: the argv that exits 1."""

    def __init__(self, fail: tuple[str, ...] = (), missing: bool = False):
        self.calls, self.fail, self.missing = [], fail, missing

    def __call__(self, argv, timeout):
        from healthcheck.safeio.subproc import Result, ToolNotFound

        if self.missing:
            raise ToolNotFound("systemctl: not found in /usr/sbin:/usr/bin")
        self.calls.append(argv)
        code = 1 if tuple(argv[1:]) == self.fail else 0
        return Result(argv, code, "", "Failed to restart: unit masked\n" if code else "", 0.01)


def test_enable_agent_installs_the_unit_enables_and_restarts_it(tmp_path):
    config = tmp_path / "hc.toml"
    config.write_text("")
    install.install_hooks(str(tmp_path / "hooks"), str(config), sys.executable)
    systemd = tmp_path / "systemd"
    systemd.mkdir()
    fake = FakeSystemctl()
    done = install.enable_agent(str(tmp_path / "hooks"), str(systemd), run=fake)
    unit = systemd / install.UNIT
    assert unit.read_text() == (tmp_path / "hooks" / install.UNIT).read_text()
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644
    assert fake.calls == [["systemctl", "daemon-reload"], ["systemctl", "enable", install.UNIT],
                          ["systemctl", "restart", install.UNIT]]
    assert done[0] == f"installed {unit}" and done[-1] == f"systemctl restart {install.UNIT}"


def test_enable_agent_says_why_it_could_not(tmp_path):
    config = tmp_path / "hc.toml"
    config.write_text("")
    hooks = tmp_path / "hooks"
    install.install_hooks(str(hooks), str(config), sys.executable)
    systemd = tmp_path / "systemd"
    systemd.mkdir()
    with pytest.raises(install.AgentNotEnabled, match="start the agent another way .*healthcheck.agent.main"):
        install.enable_agent(str(hooks), str(systemd), run=FakeSystemctl(missing=True))
    with pytest.raises(install.AgentNotEnabled, match="systemctl restart .*exit 1: Failed to restart: unit masked"):
        install.enable_agent(str(hooks), str(systemd), run=FakeSystemctl(fail=("restart", install.UNIT)))
    with pytest.raises(install.AgentNotEnabled, match="unit not installed"):
        install.enable_agent(str(hooks), str(tmp_path / "no-such-dir"), run=FakeSystemctl())


def test_install_hooks_enable_agent_from_the_command_line(tmp_path, monkeypatch):
    config = tmp_path / "hc.toml"
    config.write_text("")
    calls = []

    def enable(prefix):
        calls.append(prefix)
        raise install.AgentNotEnabled("systemctl: not found")

    monkeypatch.setattr(install, "enable_agent", enable)
    args = ["slurm", "install-hooks", "--prefix", str(tmp_path / "h"), "--config", str(config), "--python",
            sys.executable]
    result = CliRunner().invoke(cli, [*args, "--enable-agent"])
    assert result.exit_code == 6 and calls == [str(tmp_path / "h")]
    assert "hooks written, agent not enabled: systemctl: not found" in result.output
    assert "Prolog=" in result.output  # the slurm.conf lines all the same: the hooks work without it
    assert (tmp_path / "h" / "prolog.sh").is_file()
    refused = CliRunner().invoke(cli, [*args, "--enable-agent", "--no-agent"])
    assert refused.exit_code == 2 and "choose one" in refused.output


def test_as_root_under_systemd_install_hooks_enables_the_agent_unless_told_not_to(tmp_path, monkeypatch):
    config = tmp_path / "hc.toml"
    config.write_text("")
    enabled = []
    monkeypatch.setattr(install, "enable_agent", lambda prefix: enabled.append(prefix) or ["systemctl restart x"])
    args = ["slurm", "install-hooks", "--prefix", str(tmp_path / "h"), "--config", str(config), "--python",
            sys.executable]
    assert CliRunner().invoke(cli, args).exit_code == 0 and enabled == []  # no systemd: only written
    monkeypatch.setattr(install, "systemd_running", lambda: True)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0 and enabled == [str(tmp_path / "h")], result.output
    assert "systemctl restart x" in result.output
    for opt_out in (["--no-enable-agent"], ["--no-agent"]):
        assert CliRunner().invoke(cli, [*args, *opt_out]).exit_code == 0
    assert len(enabled) == 1


@pytest.mark.parametrize("uid, runtime_dir, running", [(0, True, True), (0, False, False), (1000, True, False)])
def test_systemd_running_means_root_and_systemds_runtime_directory(monkeypatch, uid, runtime_dir, running):
    monkeypatch.undo()  # the real function (the autouse guard replaced it)
    monkeypatch.setattr(install.os, "geteuid", lambda: uid)
    monkeypatch.setattr(install.os.path, "isdir", lambda path: runtime_dir and path == "/run/systemd/system")
    assert install.systemd_running() is running
