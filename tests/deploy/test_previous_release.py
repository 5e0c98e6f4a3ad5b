"""Nothing installed breaks on upgrade (issue 31.6): the hooks and the agent's systemd unit that an earlier
release installed name that release's module paths (``healthcheck.slurm.agentclient`` in the hooks'
Python part, ``python -I -m healthcheck.slurm.agent`` in the unit). A hook that cannot import exits
non-zero and slurmd drains the node, so an upgrade that broke them would drain the fleet.

The previous release's own ``install.py`` and templates are taken from git history, render the hooks and
the unit against this checkout's package (as the installed files on a node would point at the upgraded
package), and run on the real local Slurm cluster: slurmd runs the old prolog and epilog, the old unit's
command starts the agent, a faulty node is drained by the old prolog through the agent, the job completes
elsewhere, and without the agent the old hooks run the new package in their own process."""
from __future__ import annotations

import io
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from healthcheck.deploy.install import package_path
from tests.slurm.test_agent_cluster import agent_drains_node2
from tests.slurm.test_scenarios import ROOT, Site, sources  # noqa: F401 - the sources fixture

# The release installed before the hook, the agent and the Slurm library became packages of their own
# (its hooks and unit name healthcheck.slurm.*).
PREVIOUS = "fc350ea"


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory) -> Path:
    """The previous release's package source, from git history (a clean clone has it: CI fails, never
    skips, when it is missing)."""
    out = tmp_path_factory.mktemp("previous")
    proc = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS, "healthcheck"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, f"git history lacks {PREVIOUS}: {proc.stderr.decode()[-500:]}"
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(out, filter="data")
    return out


def render_previous(old: Path, dest: Path, config: Path, slurm_conf: Path, sock: Path) -> dict[str, Path]:
    """The previous release's hooks and unit, rendered by its own install.py, pointing at this package."""
    code = (
        "import sys, json\n"
        "from healthcheck.slurm.install import render, render_unit\n"
        "python, config, conf, sock, site = sys.argv[1:6]\n"
        "out = {n: render(n, python, config, conf, sock, site) for n in ('prolog.sh', 'epilog.sh')}\n"
        "out['unit'] = render_unit(python, config, sock)\n"
        "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(old)!r})\n" + code,
                           sys.executable, str(config), str(slurm_conf), str(sock), package_path(sys.executable)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    texts = json.loads(proc.stdout)
    dest.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in texts.items():
        path = dest / (name if name != "unit" else "healthcheck-agent.service")
        path.write_text(text)
        path.chmod(0o755 if name != "unit" else 0o644)
        paths[name] = path
    return paths


def test_the_previous_releases_hooks_and_unit_run_the_new_package_on_slurm(
        tmp_path, previous_release, slurm_cluster_factory, sources):  # noqa: F811
    probe = slurm_cluster_factory()
    site = Site(tmp_path, probe, sources)
    sock = tmp_path / "run" / "agent.sock"
    files = render_previous(previous_release, tmp_path / "old-hooks", site.config, probe.conf, sock)
    prolog, epilog = files["prolog.sh"], files["epilog.sh"]
    assert "healthcheck.slurm.agentclient import run" in prolog.read_text()  # what a node has installed
    unit = files["unit"].read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    command = shlex.split(exec_start.split("=", 1)[1])
    assert command[1:4] == ["-I", "-m", "healthcheck.slurm.agent"], command

    # 1. the old unit's command starts the agent of the new package; slurmd runs the old hooks
    cluster, job, served = agent_drains_node2(tmp_path, site, slurm_cluster_factory, command, sock, prolog, epilog)
    assert f"prolog on node2 for job {job}: exit 1 after" in served, served  # the agent of the new package

    # 2. no agent: the old hooks' Python client (healthcheck.slurm.agentclient) runs the hook itself
    site.set_bundle("node3", "healthy")
    job2 = cluster.sbatch("-N1", "-w", "node3", "-o", str(tmp_path / "job2.out"), "--wrap", "true")
    cluster.wait_for(lambda: cluster.job_state(job2).get("JobState") == "COMPLETED", 60, interval=0.5,
                     message="a job on a healthy node did not complete through the old hooks without the agent")
    runs = cluster.wait_for(lambda: [r for r in site.records("run") if r.get("job_id") == job2
                                     and r["context"] in ("prolog", "epilog")], 20,
                            message="no run records of the old hooks without the agent")
    assert {r["context"] for r in runs} <= {"prolog", "epilog"} and all(r["status"] == "pass" for r in runs)
    assert not site.drained("node3")
