"""The Slurm side of a drill: commands through the subprocess seam with SLURM_CONF set, node and job
state, the daemons named by the pid files of slurm.conf, and waiting (monotonic) for a condition.

Daemon control is for a cluster whose daemons run on this host (the local test cluster: one
``slurmd -N NODE`` per node): a daemon is stopped by the pid in its pid file after checking the pid's
command name (a recycled pid is never signalled), and started again as ``slurmd -N NODE -f CONF`` /
``slurmctld -f CONF``."""
from __future__ import annotations

import os
import re
import signal
import time
from typing import Any, Callable

from ..safeio import subproc
from ..slurm.nodestate import NodeState, parse_scontrol_nodes
from ..slurm.reasons import is_ours

CMD_TIMEOUT_S = 20.0
FINAL_JOB_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                              "BOOT_FAIL", "DEADLINE", "PREEMPTED"})
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_JOB_ID = re.compile(r"^[0-9]{1,12}$")


class DrillError(RuntimeError):
    """The drill cannot run or go on (bad input, a command that failed); the message says why."""


class TimedOut(DrillError):
    """A condition a drill waited for did not come within its bound."""


def check_node(name: str) -> str:
    if not isinstance(name, str) or not _NODE_NAME.match(name):
        raise DrillError(f"not a node name: {name!r}")
    return name


def check_job(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
        raise DrillError(f"not a job id: {job_id!r}")
    return job_id


def read_slurm_conf(path: str) -> dict[str, str]:
    """key -> value of the simple ``Key=Value`` lines of slurm.conf (first one wins; comments and the
    NodeName/PartitionName lines skipped). DrillError when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise DrillError(f"cannot read slurm.conf {path}: {exc.strerror}") from None
    conf: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if sep and " " not in key and key not in ("NodeName", "PartitionName"):
            conf.setdefault(key.strip().lower(), value.strip())
    return conf


def parse_job_line(line: str) -> dict[str, str]:
    """Fields of ``scontrol -o show job ID`` (``Key=Value`` tokens; values are single words for the
    fields a drill reads: JobState, Reason, NodeList, Restarts, BatchHost)."""
    return dict(re.findall(r"(\w[\w/:]*)=(\S*)", line))


def pid_alive(pid: int, comm: str) -> bool:
    """pid runs (not a zombie) and its command name starts with ``comm``."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    state = stat[stat.rindex(")") + 2:].split()[0]
    return state not in ("Z", "X") and name.startswith(comm[:15])


def descendants(root: int) -> list[int]:
    """The pids below ``root`` in the process tree (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Cluster:
    """A running Slurm cluster reached through ``slurm_conf``. ``clock``/``sleep`` are injectable."""

    def __init__(self, slurm_conf: str, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, poll_s: float = 0.2):
        self.slurm_conf = os.path.abspath(slurm_conf)
        self.conf = read_slurm_conf(self.slurm_conf)
        self.clock, self.sleep, self.poll_s = clock, sleep, poll_s
        self.env = dict(subproc.SAFE_ENV, SLURM_CONF=self.slurm_conf)

    # -- commands ---------------------------------------------------------------------------------
    def run(self, argv: list[str], timeout: float = CMD_TIMEOUT_S, check: bool = True) -> subproc.Result:
        try:
            res = subproc.run(list(argv), timeout=timeout, env=self.env)
        except subproc.ToolNotFound as exc:
            raise DrillError(str(exc)) from None
        if check and not res.ok:
            raise DrillError(f"{' '.join(argv)} failed ({'timed out' if res.timed_out else res.returncode}): "
                             f"{(res.stderr or res.stdout).strip()[:500]}")
        return res

    def controller_up(self) -> bool:
        res = self.run(["scontrol", "ping"], timeout=10, check=False)
        return "UP" in res.stdout

    def node(self, name: str) -> NodeState:
        out = self.run(["scontrol", "-o", "show", "node", check_node(name)]).stdout
        nodes = parse_scontrol_nodes(out)
        if name not in nodes:
            raise DrillError(f"node {name} not known to Slurm")
        return nodes[name]

    def nodes(self) -> list[str]:
        return sorted(parse_scontrol_nodes(self.run(["scontrol", "-o", "show", "node"]).stdout))

    def drained_by_us(self, name: str) -> bool:
        node = self.node(name)
        return node.drained and is_ours(node.reason)

    def in_service(self, name: str) -> bool:
        """Responding, not down, not drained: the scheduler may place jobs on it."""
        node = self.node(name)
        return not (node.drained or node.down or node.not_responding) and node.state in (
            "IDLE", "ALLOCATED", "MIXED", "COMPLETING")

    def job(self, job_id: str) -> dict[str, str]:
        res = self.run(["scontrol", "-o", "show", "job", check_job(job_id)], check=False)
        if not res.ok:
            return {}
        return parse_job_line(res.stdout.strip())

    def sbatch(self, *args: str) -> str:
        out = self.run(["sbatch", "--parsable", *args]).stdout.strip()
        job_id = out.split(";")[0]
        return check_job(job_id)

    def release_if_held(self, job_id: str) -> bool:
        """Slurm 22.05 holds a job whose prolog failed (launch_failed_requeued_held): release it, as an
        admin would once the node is repaired. True when it was held."""
        fields = self.job(job_id)
        if fields.get("JobState") == "PENDING" and "held" in fields.get("Reason", "").lower():
            self.run(["scontrol", "release", job_id], check=False)
            return True
        return False

    def cancel(self, job_id: str) -> None:
        self.run(["scancel", check_job(job_id)], check=False)

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue JOB``: Slurm ends the running job and queues it again (``--requeue`` jobs)."""
        self.run(["scontrol", "requeue", check_job(job_id)])

    def resume(self, name: str) -> None:
        self.run(["scontrol", "update", f"NodeName={check_node(name)}", "State=RESUME"], check=False)

    # -- waiting ----------------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> float:
        """Poll ``predicate`` every ``poll_s`` until it is truthy; return the monotonic instant it was
        seen true (an upper bound within one poll interval). TimedOut after ``timeout`` seconds."""
        deadline = self.clock() + timeout
        while True:
            if predicate():
                return self.clock()
            if self.clock() >= deadline:
                raise TimedOut(f"{what}: not within {timeout:g} s")
            self.sleep(self.poll_s)

    # -- daemons ----------------------------------------------------------------------------------
    def _pidfile(self, key: str, node: str | None = None) -> str:
        path = self.conf.get(key)
        if not path:
            raise DrillError(f"slurm.conf {self.slurm_conf} sets no {key}: cannot find the daemon")
        return path.replace("%n", node) if node else path

    def _daemon_pid(self, key: str, comm: str, node: str | None = None) -> int:
        path = self._pidfile(key, node)
        try:
            with open(path) as fh:
                pid = int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            raise DrillError(f"no {comm} pid in {path}") from None
        if not pid_alive(pid, comm):
            raise DrillError(f"{comm} pid {pid} (from {path}) is not running")
        return pid

    def kill_node(self, node: str, job_id: str | None = None) -> list[int]:
        """The node dies: SIGKILL its slurmd and, for ``job_id``, the job's slurmstepd and everything
        below it (what a power loss takes down with the node). Returns the pids signalled."""
        pid = self._daemon_pid("slurmdpidfile", "slurmd", check_node(node))
        victims = [pid]
        if job_id is not None:
            tag = f"[{check_job(job_id)}."
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as fh:
                        cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if cmd.startswith("slurmstepd:") and tag in cmd and pid_alive(int(entry), "slurmstepd"):
                    victims += [int(entry), *descendants(int(entry))]
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return victims

    def start_slurmd(self, node: str) -> None:
        self.run(["slurmd", "-N", check_node(node), "-f", self.slurm_conf])

    def stop_controller(self, timeout: float = 30.0) -> None:
        pid = self._daemon_pid("slurmctldpidfile", "slurmctld")
        os.kill(pid, signal.SIGTERM)
        self.wait_for(lambda: not pid_alive(pid, "slurmctld"), timeout, "slurmctld stopped")

    def start_controller(self) -> None:
        self.run(["slurmctld", "-f", self.slurm_conf])
