"""The real 4-node Slurm cluster on localhost for the tests (`slurm_cluster`, `slurm_cluster_factory`;
registered for every subject by tests/conftest.py).

It runs scripts/local-slurm-cluster (Debian's slurm-wlm + munge: one munged, one slurmctld, one
`slurmd -N nodeK` per node, all state under a pytest tmp dir). Slurm commands reach it through
`cluster.env` (SLURM_CONF=DIR/slurm.conf). Missing packages are installed (as root, through
scripts/lib.sh's apt_install); when that is impossible the fixture FAILS with the reason, so CI never
passes by skipping. Set HEALTHCHECK_SKIP_SLURM=1 to skip these tests deliberately (e.g. as non-root).

    def test_x(slurm_cluster):                       # session cluster, default config
        slurm_cluster.run(["sbatch", "--wrap", "true"])

    def test_y(slurm_cluster_factory):               # (re)started with this node config
        cluster = slurm_cluster_factory(prolog="/path/prolog.sh", healthcheck="/path/hc.sh")

After a test that used the factory, the cluster is restarted with the default configuration.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "local-slurm-cluster"
LIB = ROOT / "scripts" / "lib.sh"
NODE_COUNT = 4
PACKAGES = ("slurm-wlm", "munge")
TOOLS = ("munged", "slurmctld", "slurmd", "sinfo", "scontrol", "sbatch")


def _ensure_packages() -> None:
    """Install slurm-wlm and munge when missing; pytest.fail (never skip) when impossible."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        pytest.fail(f"Slurm tools missing ({', '.join(missing)}) and not root: install "
                    f"{' '.join(PACKAGES)} or set HEALTHCHECK_SKIP_SLURM=1", pytrace=False)
    try:
        proc = subprocess.run(["bash", "-c", 'source "$0"; apt_install "$@"', str(LIB), *PACKAGES],
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        pytest.fail("installing slurm-wlm munge took over 15 minutes", pytrace=False)
    still = [t for t in TOOLS if shutil.which(t) is None]
    if proc.returncode != 0 or still:
        pytest.fail(f"could not install {' '.join(PACKAGES)} (exit {proc.returncode}, still "
                    f"missing {still}):\n{proc.stderr[-2000:]}", pytrace=False)


def parse_node_line(line: str) -> dict[str, str]:
    """Minimal `scontrol show node NAME -o` parser: key=value fields, Reason= to the end of its
    text (Reason holds spaces, e.g. 'Prolog error [root@2024-01-01T00:00:00]')."""
    fields: dict[str, str] = {}
    reason = re.search(r"\bReason=(.*?)(?=\s+\w+=|\s*$)", line)
    if reason:
        fields["Reason"] = reason.group(1).strip()
        line = line[:reason.start()] + line[reason.end():]
    for key, value in re.findall(r"(\w[\w/:]*)=(\S*)", line):
        fields.setdefault(key, value)
    return fields


@dataclass
class SlurmCluster:
    """Handle on the running local cluster."""

    dir: Path
    nodes: list[str] = field(default_factory=lambda: [f"node{i}" for i in range(1, NODE_COUNT + 1)])
    options: dict[str, Any] = field(default_factory=dict)
    version: tuple[int, int] = (0, 0)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        return env

    # -- running commands ---------------------------------------------------------------------
    def run(self, argv: Sequence[str], timeout: float = 30.0, check: bool = True,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run a command with SLURM_CONF set; raise AssertionError with its output if it fails."""
        proc = subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def node_state(self, name: str) -> dict[str, str]:
        """Fields of `scontrol show node NAME -o`, plus 'base' (IDLE, DOWN, ...) and 'flags'
        ('+'-joined flags such as 'DRAIN' or 'DRAIN+NOT_RESPONDING'; '*' marks not responding)."""
        line = self.run(["scontrol", "show", "node", name, "-o"]).stdout.strip()
        fields = parse_node_line(line)
        state = fields.get("State", "")
        base, _, flags = state.partition("+")
        fields["base"] = base.rstrip("*")
        fields["flags"] = flags
        return fields

    def job_state(self, job_id: str | int) -> dict[str, str]:
        """Fields of `scontrol show job ID -o` (no accounting database here, so no sacct)."""
        line = self.run(["scontrol", "show", "job", str(job_id), "-o"]).stdout.strip()
        return parse_node_line(line)

    def sbatch(self, *args: str) -> str:
        """Submit with sbatch --parsable; return the job id. Submitted from the cluster's own directory:
        a job without ``-o`` writes its slurm-JOBID.out there, not into the caller's working directory."""
        out = self.run(["sbatch", "--parsable", *args], cwd=self.dir).stdout.strip()
        return out.split(";")[0]

    def wait_job(self, job_id: str | int, state: str = "COMPLETED",
                 timeout: float = 30.0) -> dict[str, str]:
        """Wait until the job reaches `state`; fail at once if it ends in another final state."""
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                 "BOOT_FAIL", "DEADLINE", "PREEMPTED"}

        def reached() -> dict[str, str] | None:
            fields = self.job_state(job_id)
            current = fields.get("JobState", "")
            if current == state:
                return fields
            if current in final:
                raise AssertionError(f"job {job_id} ended {current}, not {state}: {fields}")
            return None
        return self.wait_for(reached, timeout, message=lambda: str(self.job_state(job_id)))

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0,
                 interval: float = 0.25, message: str | Callable[[], str] = "") -> Any:
        """Poll predicate until it returns something truthy; fail after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                text = message() if callable(message) else message
                raise AssertionError(f"condition not met within {timeout} s: {text}\n"
                                     f"{self.diagnostics()}")
            time.sleep(interval)

    def diagnostics(self) -> str:
        out = self.run(["sinfo", "-N", "-o", "%N %T %E"], check=False).stdout
        jobs = self.run(["squeue", "-o", "%i %T %r %N"], check=False).stdout
        return f"sinfo:\n{out}squeue:\n{jobs}"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, **options: Any) -> SlurmCluster:
        """(Re)start the cluster with these options (prolog, epilog, healthcheck,
        healthcheck_interval, gres_gpus, prolog_flags, wait='idle'|'registered')."""
        self.stop()
        argv = [sys.executable, str(SCRIPT), "start", "--dir", str(self.dir),
                "--nodes", str(len(self.nodes))]
        for key, value in options.items():
            if value is None:
                continue
            argv += [f"--{key.replace('_', '-')}", str(value)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=90)
        if proc.returncode != 0:
            pytest.fail(f"local Slurm cluster did not start:\n{proc.stderr}", pytrace=False)
        self.options = dict(options)
        match = re.search(r"Slurm (\d+)\.(\d+)", proc.stderr)
        if match:
            self.version = (int(match.group(1)), int(match.group(2)))
        return self

    def stop(self) -> None:
        if (self.dir / "run").is_dir():
            subprocess.run([sys.executable, str(SCRIPT), "stop", "--dir", str(self.dir)],
                           capture_output=True, text=True, timeout=60)

    def reset(self) -> None:
        """Cancel every job and resume every drained/down node (between tests)."""
        jobs = self.run(["squeue", "-h", "-o", "%i"]).stdout.split()
        if jobs:
            self.run(["scancel", "--full", *jobs], check=False)
        self.wait_for(lambda: not self.run(["squeue", "-h"]).stdout.strip(), 20,
                      message="jobs still queued")
        for node in self.nodes:
            if self.node_state(node)["base"] != "IDLE" or self.node_state(node)["flags"]:
                self.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
        self.wait_for(lambda: all(self.node_state(n).get("State") == "IDLE" for n in self.nodes),
                      20, message="nodes not idle after RESUME")

    @property
    def version_label(self) -> str:
        return f"{self.version[0]}.{self.version[1]:02d}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the cluster carries the `slurm` marker (`-m "not slurm"` drops it)."""
    for item in items:
        if {"slurm_cluster", "slurm_cluster_factory"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if os.environ.get("HEALTHCHECK_SKIP_SLURM") == "1":
        pytest.skip("HEALTHCHECK_SKIP_SLURM=1")
    _ensure_packages()
    cluster = SlurmCluster(dir=tmp_path_factory.mktemp("slurm", numbered=True))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm_cluster_factory(slurm_cluster: SlurmCluster) -> Iterator[Callable[..., SlurmCluster]]:
    """Restart the session cluster with prolog=/epilog=/healthcheck=/... paths; afterwards the
    default configuration is restored (a fresh start: jobs, drains and state are gone)."""
    used = False

    def factory(**options: Any) -> SlurmCluster:
        nonlocal used
        used = True
        return slurm_cluster.start(**options)

    yield factory
    if used or slurm_cluster.options:
        slurm_cluster.start()
