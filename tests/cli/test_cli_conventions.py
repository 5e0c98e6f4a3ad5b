"""Issue 35.6: the CLI as admins expect it. `check`'s verdict line says how many checks judged and how
many skipped; one probe failure is one ERROR line, not one per check; `--strict` makes "could not judge"
non-zero for scripts; colours follow NO_COLOR and --no-color; a missing extra names a command that works."""
from __future__ import annotations

import json

from click.testing import CliRunner

from healthcheck.cli.main import cli
from healthcheck.core.model import Finding, Status, Verdict
from healthcheck.output.render import exit_code, text


def _verdict(*findings: Finding) -> Verdict:
    return Verdict.of("n1", list(findings), "2026-12-06T00:00:00Z", 0.1)


GPU_DOWN = [Finding(f"gpu.{name}", Status.ERROR, "cannot judge: gpus: nvmlInit failed: Driver Not Loaded")
            for name in ("ecc", "remap", "xid", "thermal", "power", "clocks")]


def test_the_verdict_line_counts_judged_skipped_and_unjudged_checks():
    line = text(_verdict(Finding("host.load", Status.PASS, "ok"), Finding("ib.port.state", Status.SKIP, "no HCA"),
                         Finding("ib.port.rate", Status.SKIP, "no HCA"), *GPU_DOWN)).splitlines()[0]
    assert "1 judged, 2 skipped, 6 could not judge;" in line, line
    assert "checks," not in line  # not "9 checks": 8 of them judged nothing
    assert "1 judged, 0 skipped;" in text(_verdict(Finding("host.load", Status.PASS, "ok"))).splitlines()[0]


def test_one_probe_failure_is_one_error_line_naming_its_checks():
    out = text(_verdict(Finding("host.load", Status.PASS, "ok"), *GPU_DOWN))
    errors = [line for line in out.splitlines() if line.strip().startswith("ERROR")]
    assert len(errors) == 1, out
    assert "6 checks (gpu.ecc, gpu.remap, gpu.xid, gpu.thermal, gpu.power, gpu.clocks)" in errors[0]
    assert "nvmlInit failed" in errors[0]
    # different messages, or an error on a component, stay lines of their own
    out = text(_verdict(Finding("gpu.ecc", Status.ERROR, "cannot judge: a"),
                        Finding("gpu.xid", Status.ERROR, "cannot judge: b"),
                        Finding("gpu.remap", Status.ERROR, "answered an error", "gpu3")))
    assert sum(line.strip().startswith("ERROR") for line in out.splitlines()) == 3
    assert len(text(_verdict(*GPU_DOWN), verbose=True).splitlines()) >= 7  # -v shows every one


def test_strict_makes_could_not_judge_non_zero_and_keeps_fail_and_healthy():
    unjudged = _verdict(Finding("host.load", Status.PASS, "ok"), *GPU_DOWN)
    assert exit_code(unjudged) == 0 and exit_code(unjudged, strict=True) == 6
    failed = _verdict(Finding("host.load", Status.FAIL, "load 99"), *GPU_DOWN)
    assert exit_code(failed, strict=True) == 1
    assert exit_code(_verdict(Finding("host.load", Status.WARN, "busy")), strict=True) == 0


def _broken_gpu_bundle(tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "nvidia-smi-q-x.xml").write_text("<nvidia_smi_log><gpu id='0000:07:00.0'><oops")
    return bundle


def test_check_strict_from_the_command_line(tmp_path):
    bundle = _broken_gpu_bundle(tmp_path)
    args = ["check", "--bundle", str(bundle), "--only", "gpu.*"]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 0, plain.output
    assert "could not judge" in plain.output.splitlines()[0]
    strict = CliRunner().invoke(cli, [*args, "--strict"])
    assert strict.exit_code == 6, strict.output
    data = json.loads(CliRunner().invoke(cli, [*args, "--strict", "--format", "json"]).output)
    assert any(r["status"] == "error" for r in data["results"])


def test_no_color_and_the_no_color_option(tmp_path, monkeypatch):
    from healthcheck.cli import common

    bundle = _broken_gpu_bundle(tmp_path)
    args = ["check", "--bundle", str(bundle), "--only", "gpu.*"]
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert common.use_color(_Tty()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert common.use_color(_Tty()) is False
    monkeypatch.setenv("NO_COLOR", "")  # set but empty: no effect (no-color.org)
    assert common.use_color(_Tty()) is True
    monkeypatch.delenv("NO_COLOR")
    seen = []
    monkeypatch.setattr("healthcheck.cli.check.use_color", lambda: seen.append(common.use_color(_Tty())) or False)
    CliRunner().invoke(cli, ["--no-color", *args])
    CliRunner().invoke(cli, args)
    assert seen == [False, True]


class _Tty:
    @staticmethod
    def isatty() -> bool:
        return True


def test_the_man_page_is_installed_with_the_package(tmp_path):
    """`man healthcheck` after `pip install`: the wheel carries docs/healthcheck.1 to share/man/man1 (built
    from a copy of the checkout, so that the build leaves nothing in it)."""
    import glob
    import shutil
    import subprocess
    import sys
    import zipfile

    from tests.conftest import ROOT

    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "tests", "build", "*.egg-info",
                                                            "__pycache__", "benchmarks", ".pytest_cache"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           str(src), "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = glob.glob(str(tmp_path / "dist" / "*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    page = [n for n in names if n.endswith("data/share/man/man1/healthcheck.1")]
    assert page, [n for n in names if ".data/" in n]
    assert zipfile.ZipFile(wheel).read(page[0]).decode() == (ROOT / "docs" / "healthcheck.1").read_text()


def test_the_man_page_lists_every_environment_variable_the_commands_read():
    import re

    from healthcheck.cli import manpage
    from tests.conftest import ROOT

    read = set()
    for path in (ROOT / "healthcheck").rglob("*.py"):
        read |= set(re.findall(r"""(?:environ(?:\.get)?\(|environ\[|getenv\()["']((?:HEALTHCHECK|NO)_[A-Z_]+)["']""",
                               path.read_text(encoding="utf-8")))
    listed = {name for name, _ in manpage.ENVIRONMENT}
    assert read and read <= listed, sorted(read - listed)
    assert ".SH ENVIRONMENT" in (ROOT / "docs" / "healthcheck.1").read_text()


def test_an_output_path_that_cannot_be_written_is_a_usage_error_before_any_work(tmp_path):
    missing = tmp_path / "no-such-dir" / "node.tar.gz"
    result = CliRunner().invoke(cli, ["collect", "-o", str(missing), "--sysfs-root", str(tmp_path)])
    assert result.exit_code == 2 and "does not exist" in result.output, result.output
    assert not (tmp_path / "no-such-dir").exists()
    result = CliRunner().invoke(cli, ["burnin", "fleet-digests", "-o", str(tmp_path), "--db",
                                      f"sqlite:///{tmp_path}/h.db"])
    assert result.exit_code == 2 and "is a folder" in result.output, result.output
    assert not (tmp_path / "h.db").exists()  # refused before the history was opened


def test_sweep_quiet_and_verbose(monkeypatch, tmp_path):
    """-q: no progress and no [sweep] lines; -v: a line per step even off a terminal; both: usage error."""
    from healthcheck.sweep import run as sweep_run

    class FakeOutcome:
        results_dir, results, report, fleet, exit_code = None, [], None, None, 0

        def to_dict(self):
            return {"schema_version": 1}

    class FakeSweeper:
        def __init__(self, config, settings, backend, log, progress, fleet_digests):
            self.log, self.progress = log, progress

        def run(self, dry_run):
            self.log("planning 2 nodes")
            for done in (1, 2):
                if self.progress is not None:
                    self.progress(done, 2)
            return FakeOutcome()

    monkeypatch.setattr(sweep_run, "Sweeper", FakeSweeper)
    monkeypatch.setattr("healthcheck.slurm.actions.backend_for", lambda settings: None)
    config = tmp_path / "site.toml"
    config.write_text(f'[sweep]\nresults_root = "{tmp_path / "sweeps"}"\n')
    base = ["sweep", "--config", str(config), "--no-report", "--format", "json"]
    normal = CliRunner().invoke(cli, base)
    assert "[sweep] planning 2 nodes" in normal.output and "of 2 done" not in normal.output  # not a tty: no bar
    verbose = CliRunner().invoke(cli, [*base, "-v"])
    assert "[sweep] burn-in jobs: 1 of 2 done" in verbose.output and "2 of 2 done" in verbose.output
    quiet = CliRunner().invoke(cli, [*base, "-q"])
    assert quiet.exit_code == 0 and "[sweep]" not in quiet.output, quiet.output
    both = CliRunner().invoke(cli, [*base, "-q", "-v"])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_the_completion_line_the_readme_documents_works():
    """README: `eval "$(_HEALTHCHECK_COMPLETE=bash_source healthcheck)"`; the completion it installs
    completes command names."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import ROOT

    exe = str(Path(sys.executable).parent / "healthcheck")
    assert '_HEALTHCHECK_COMPLETE=bash_source healthcheck' in (ROOT / "README.md").read_text()
    env = {**os.environ, "_HEALTHCHECK_COMPLETE": "bash_source"}
    script = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60).stdout
    assert "_healthcheck_completion" in script and "complete " in script
    env = {**os.environ, "_HEALTHCHECK_COMPLETE": "bash_complete", "COMP_WORDS": "healthcheck ch", "COMP_CWORD": "1"}
    words = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60).stdout.split()
    assert "plain,check" in words and "plain,checks" in words
