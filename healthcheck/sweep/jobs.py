"""The sweep's Slurm calls beyond node state (I/O): reservations, sbatch, job states. One subprocess
seam, fixed executables from the safe PATH, no shell; SLURM_CONF passed on when set."""
from __future__ import annotations

import re

from ..safeio import subproc
from ..slurm.backend_base import slurm_env

_JOB_STATE = re.compile(r"\bJobState=(\S+)")
_JOB_ID = re.compile(r"^\d+(_\d+)?$")


class JobError(RuntimeError):
    pass


class SlurmJobs:
    def __init__(self, run=subproc.run, timeout_s: float = 30.0) -> None:
        self._run = run
        self.timeout_s = timeout_s

    def _call(self, argv: list[str], env: dict[str, str] | None = None) -> str:
        try:
            res = self._run(argv, timeout=self.timeout_s, env=env or slurm_env())
        except subproc.ToolNotFound as exc:
            raise JobError(str(exc)) from None
        if not res.ok:
            raise JobError(f"{' '.join(argv[:3])}: {(res.stderr or res.stdout).strip()[:300] or res.returncode}")
        return res.stdout

    def create_reservation(self, name: str, nodes: list[str], minutes: int, user: str) -> None:
        self._call(["scontrol", "create", "reservation", f"ReservationName={name}", "StartTime=now",
                    f"Duration={max(1, minutes)}", f"Nodes={','.join(nodes)}", f"Users={user}",
                    "Flags=MAINT,IGNORE_JOBS"])

    def delete_reservation(self, name: str) -> None:
        self._call(["scontrol", "delete", f"ReservationName={name}"])

    def reservation_exists(self, name: str) -> bool:
        try:
            return f"ReservationName={name} " in self._call(["scontrol", "-o", "show", "reservation", name]) + " "
        except JobError:
            return False

    def submit(self, argv: list[str], env: dict[str, str]) -> str:
        out = self._call(argv, env).strip().split(";")[0]
        if not _JOB_ID.match(out):
            raise JobError(f"sbatch printed no job id: {out[:100]!r}")
        return out

    def jobs_named(self, prefix: str) -> dict[str, str]:
        """job name -> job id of the jobs still known to slurmctld whose name starts with ``prefix``."""
        out = self._call(["squeue", "-h", "-t", "all", "-o", "%i|%j"])  # ended ones too, while still known
        found = {}
        for line in out.splitlines():
            job, _, name = line.partition("|")
            if name.startswith(prefix):
                found[name] = job
        return found

    def job_state(self, job_id: str) -> str | None:
        """PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ... or None when slurmctld has
        forgotten the job (MinJobAge passed: it ended)."""
        try:
            out = self._call(["scontrol", "-o", "show", "job", job_id])
        except JobError as exc:
            if "Invalid job id" in str(exc):
                return None
            raise
        m = _JOB_STATE.search(out)
        return m.group(1) if m else None

    def cancel(self, job_id: str) -> None:
        self._call(["scancel", job_id])
