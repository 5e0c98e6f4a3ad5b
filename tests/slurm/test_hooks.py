"""The hook entry point as slurmd runs it (a subprocess with Slurm's environment), without slurmctld:
budgets, exit codes, spool records, baselines, lean imports. The drain/resume behaviour against a real
slurmctld is tested in tests/slurm/."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from healthcheck.bundles.collect import collect_bundle
from tests.bundles.test_bundles import make_node

HEAVY = ("pandas", "sqlalchemy", "numpy", "rich", "click")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundles")
    healthy = make_node(root / "src-healthy")
    collect_bundle(str(root / "healthy"), options=healthy)
    faulty = make_node(root / "src-faulty")
    faulty.nvml.gpus[3].ecc[(1, 0)] = 2  # uncorrected, volatile
    collect_bundle(str(root / "faulty"), options=faulty)
    return root


def write_config(tmp_path: Path, bundle: str, **slurm) -> Path:
    settings = {"state_dir": str(tmp_path / "state"), "spool_dir": str(tmp_path / "spool"),
                "scontrol": "/bin/false", **slurm}
    lines = ["[defaults]", f'bundle = "{bundle}"', "[slurm]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    path = tmp_path / "site.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def hook(context: str, config: Path, job: str | None = "4242", extra: list[str] = (), node="node1"):
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": node}
    if job:
        env.update(SLURM_JOB_ID=job, SLURM_JOB_USER="alice", SLURM_JOB_UID="1000")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-I", *extra, "-m", "healthcheck.hook.run", context,
                           "--config", str(config)], capture_output=True, text=True, env=env, timeout=120,
                          cwd="/")
    return proc, time.monotonic() - start


def spool(tmp_path: Path) -> list[dict]:
    path = tmp_path / "spool" / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_healthy_prolog_exits_0_records_the_run_and_saves_a_baseline(tmp_path, bundles):
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, _ = hook("prolog", config)
    assert proc.returncode == 0, proc.stderr
    runs = [r for r in spool(tmp_path) if r["kind"] == "run"]
    assert runs and runs[-1]["context"] == "prolog" and runs[-1]["job_id"] == "4242"
    assert runs[-1]["status"] in ("pass", "warn") and runs[-1]["node"] == "node1"
    assert (tmp_path / "state" / "node1" / "baselines" / "4242.json").exists()
    # the epilog consumes the baseline and attributes growth (none here) to the job
    proc, _ = hook("epilog", config)
    assert proc.returncode == 0, proc.stderr
    epilog = [r for r in spool(tmp_path) if r["kind"] == "run"][-1]
    growth = [r for r in epilog["results"] if r["check"] == "job.counter_growth"]
    assert growth and growth[0]["status"] == "pass" and "4242" in growth[0]["message"]
    assert not (tmp_path / "state" / "node1" / "baselines" / "4242.json").exists()


def test_failing_prolog_exits_1_and_names_the_check(tmp_path, bundles):
    config = write_config(tmp_path, str(bundles / "faulty"))
    proc, _ = hook("prolog", config)
    assert proc.returncode == 1
    run = [r for r in spool(tmp_path) if r["kind"] == "run"][-1]
    failing = [(r["check"], r["component"]) for r in run["results"] if r["status"] == "fail"]
    assert ("gpu.ecc.uncorrected", "gpu3") in failing


def test_warn_mode_prolog_lets_the_job_run(tmp_path, bundles):
    config = write_config(tmp_path, str(bundles / "faulty"), prolog_on_fail="warn")
    proc, _ = hook("prolog", config)
    assert proc.returncode == 0


def test_unreachable_slurmctld_queues_the_drain(tmp_path, bundles):
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n")
    fake.chmod(0o755)
    config = write_config(tmp_path, str(bundles / "faulty"), scontrol=str(fake))
    proc, _ = hook("slurm-check", config)
    assert proc.returncode == 0, proc.stderr
    queued = (tmp_path / "state" / "node1" / "pending-actions.jsonl").read_text()
    assert '"drain"' in queued and "healthcheck:" in queued and "gpu.ecc.uncorrected" in queued
    actions = [r for r in spool(tmp_path) if r["kind"] == "action"]
    assert actions and "queued" in actions[-1]["why"]


def test_budget_overrun_is_a_fail_of_its_own_and_returns_in_time(tmp_path, bundles):
    config = write_config(tmp_path, str(bundles / "healthy"), prolog_budget_s=0.001)
    proc, elapsed = hook("prolog", config)
    assert proc.returncode == 1
    run = [r for r in spool(tmp_path) if r["kind"] == "run"][-1]
    assert run["results"][0]["check"] == "node.responsive" and run["results"][0]["status"] == "fail"
    assert "budget" in run["results"][0]["message"]
    assert elapsed < 5


def test_hung_sysfs_read_cannot_hold_the_prolog(tmp_path):
    """A read that never returns (a FIFO standing in for a wedged device's sysfs file): the hook
    exits 1 within its budget (asserted inside ``hung_prolog``) and names node.responsive."""
    from tests.faults.hung import hung_prolog

    findings = hung_prolog(tmp_path)
    assert findings[0].check == "node.responsive" and findings[0].status.value == "fail"


def test_unreadable_config_never_drains(tmp_path):
    bad = tmp_path / "site.toml"
    bad.write_text("[class.a\n")
    proc, _ = hook("prolog", bad)
    assert proc.returncode == 0 and "config not used" in proc.stderr


def test_prolog_path_imports_nothing_heavy(tmp_path, bundles):
    config = write_config(tmp_path, str(bundles / "healthy"))
    proc, _ = hook("prolog", config, extra=["-X", "importtime"])
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "healthcheck.hook.run" in modules or "healthcheck.pipeline.judge" in modules
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy


def test_a_bug_of_ours_never_drains(tmp_path, bundles, monkeypatch, capsys):
    """An exception escaping the hook logic is logged and the hook exits 0 (Slurm would drain on 1)."""
    from healthcheck.hook import run as hooks

    config = write_config(tmp_path, str(bundles / "healthy"))
    monkeypatch.setattr(hooks, "load_config", lambda *a: (_ for _ in ()).throw(ZeroDivisionError("boom")))
    monkeypatch.setenv("SLURMD_NODENAME", "node1")
    # _load's failure is the config path: logged as "config not used"; break a later step too
    assert hooks.guarded_main(["prolog", "--config", str(config)]) == 0
    monkeypatch.setattr(hooks, "load_config", lambda *a: (None, __import__("healthcheck.config").config.default_expectations()))
    monkeypatch.setattr(hooks, "_findings_of", lambda *a: (_ for _ in ()).throw(KeyError("bug")))
    assert hooks.guarded_main(["prolog", "--config", str(config)]) == 0
    assert "internal error, nothing judged: KeyError" in capsys.readouterr().err


def test_hook_log_lines_cannot_be_forged(capsys):
    from healthcheck.hook.run import log

    log("config /etc/x\nhealthcheck: resumed node7\x1b[2J")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\\n" in err


def test_the_wrappers_entry_leaves_without_teardown_but_runs_exit_handlers_and_flushes(tmp_path):
    """run() ends with os._exit (no module teardown before every job): what atexit holds still runs (the
    watchdog's reaping of abandoned children), stderr reaches slurmd's log, the exit status is the hook's."""
    marker = tmp_path / "atexit-ran"
    code = (f"import atexit; atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
            "import sys; print('pending stdout', end='')\n"
            "from healthcheck.hook.run import run; run()")
    proc = subprocess.run([sys.executable, "-I", "-c", code, "prolog", "--config", str(tmp_path / "missing.toml")],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "n1"},
                          timeout=60, cwd="/")
    assert proc.returncode == 0  # a config that cannot be used never drains
    assert "missing.toml: no such config file" in proc.stderr and proc.stdout == "pending stdout"
    assert marker.read_text() == "ran"
    usage = subprocess.run([sys.executable, "-I", "-c", "from healthcheck.hook.run import run; run()", "bogus"],
                           capture_output=True, text=True, timeout=60, cwd="/")
    assert usage.returncode == 1 and "usage:" in usage.stderr  # SystemExit leaves the usual way


def test_on_decided_comes_after_the_action_and_before_the_bookkeeping(tmp_path, bundles, monkeypatch):
    """The agent answers its wrapper at on_decided: by then the drain is done (Slurm must see the node
    drained when the prolog exits 1); the baseline and the spool record follow."""
    from healthcheck.slurm import actions
    from healthcheck.hook import run as hooks

    config = write_config(tmp_path, str(bundles / "faulty"))
    order = []
    for name in ("decide_and_act", "save_baseline", "record"):
        real = getattr(actions, name)
        monkeypatch.setattr(actions, name, lambda *a, _n=name, _r=real, **k: (order.append(_n), _r(*a, **k))[1])
    for key, value in {"SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "77"}.items():
        monkeypatch.setenv(key, value)
    code = hooks.main(["prolog", "--config", str(config)],
                      hooks.Handoff(on_decided=lambda c: order.append(f"decided {c}")))
    assert code == 1
    assert order == ["decide_and_act", "decided 1", "save_baseline", "record"], order
    assert [r["job_id"] for r in spool(tmp_path) if r["kind"] == "run"] == ["77"]


def test_the_hooks_child_leaves_nvmls_session_to_its_exit(tmp_path, monkeypatch):
    """The child that probes exits once it has answered: NVML's session is not closed in it (that close
    overlaps the hook's next steps as part of the child's exit)."""
    from healthcheck.pipeline import acquire
    from healthcheck.config.model import default_expectations
    from healthcheck.hook import run as hooks

    seen = {}

    class Stop(Exception):
        pass

    def snapshot_for(node, exp, started_at, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(acquire, "snapshot_for", snapshot_for)
    with pytest.raises(Stop):
        hooks.work("prolog", "n1", default_expectations(), None, "1", str(tmp_path), "2026-12-04T00:00:00+00:00", 5.0)
    assert seen["nvml_close"] is False
