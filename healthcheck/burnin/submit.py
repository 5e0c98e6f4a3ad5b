"""`healthcheck burnin submit`: the sbatch command line for a burn-in, and submitting it."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..safeio import subproc

_HOSTLIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._,\[\]-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


class SubmitError(ValueError):
    pass


def default_template(name: str = "burnin.sbatch") -> str:
    """sbatch_templates/<name> of this installation: $HEALTHCHECK_SBATCH_DIR, the source tree next to
    the package, or <prefix>/share/healthcheck/sbatch_templates."""
    import sys

    candidates = [os.environ.get("HEALTHCHECK_SBATCH_DIR", ""),
                  str(Path(__file__).resolve().parents[2] / "sbatch_templates"),
                  os.path.join(sys.prefix, "share", "healthcheck", "sbatch_templates")]
    for folder in candidates:
        path = os.path.join(folder, name) if folder else ""
        if path and os.path.isfile(path):
            return path
    raise SubmitError(f"{name} not found: give --template or set HEALTHCHECK_SBATCH_DIR")


def sbatch_argv(template: str | None, *, nnodes: int | None = None, nodelist: str | None = None,
                partition: str | None = None, reservation: str | None = None, gpus_per_node: int | None = None,
                suite: str | None = None, time_limit: str | None = None) -> list[str]:
    """The sbatch argument list (values checked: they become arguments, never shell text). Without
    ``suite`` the job runs the site's (``[burnin] suite``, else standard)."""
    argv = ["sbatch", "--parsable"]
    if nnodes is not None:
        if nnodes < 1:
            raise SubmitError(f"--nodes must be >= 1, got {nnodes}")
        argv += ["-N", str(nnodes)]
    if nodelist:
        if not _HOSTLIST.match(nodelist):
            raise SubmitError(f"--nodelist {nodelist!r} is not a Slurm hostlist")
        argv += ["-w", nodelist]
    for flag, value in (("-p", partition), ("--reservation", reservation)):
        if value:
            if not _NAME.match(value):
                raise SubmitError(f"{flag} {value!r} is not a plain name")
            argv += [flag, value]
    if gpus_per_node is not None:
        if gpus_per_node < 1:
            raise SubmitError(f"--gpus-per-node must be >= 1, got {gpus_per_node}")
        argv += [f"--gpus-per-node={gpus_per_node}"]
    if time_limit:
        if not _TIME.match(time_limit):
            raise SubmitError(f"--time {time_limit!r} is not a Slurm time (e.g. 2:00:00 or 1-00:00:00)")
        argv += [f"--time={time_limit}"]
    if suite is not None and suite not in ("quick", "standard", "full"):
        raise SubmitError(f"--suite {suite!r} is not one of quick, standard, full")
    export = f"--export=ALL,HEALTHCHECK_BURNIN_SUITE={suite}" if suite else "--export=ALL"
    argv += [export, template or default_template()]
    return argv


def submit(argv: list[str], timeout_s: float = 60.0) -> str:
    """Run sbatch; the job id it printed. SubmitError with sbatch's own message when it refuses."""
    env = subproc.job_env()  # SLURM_CONF and the like; plus our own settings, exported to the job
    env.update({k: v for k, v in os.environ.items()
                if k.startswith("HEALTHCHECK") and not k.startswith("HEALTHCHECK_DB_")})  # never credentials
    try:
        res = subproc.run(argv, timeout=timeout_s, env=env)
    except subproc.ToolNotFound as exc:
        raise SubmitError(str(exc)) from None
    if not res.ok:
        raise SubmitError(f"sbatch failed: {(res.stderr or res.stdout).strip()[:500] or res.returncode}")
    return res.stdout.strip().split(";")[0]
