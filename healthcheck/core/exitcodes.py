"""The exit status of every ``healthcheck`` command: one table, used by the CLI and by the library parts
that decide a status (the sweep's outcome, a check verdict). README.md and the man page print it
(``python -m healthcheck.cli.manpage``).

The hooks (prolog, epilog, HealthCheckProgram) are not commands: their exit status is Slurm's contract
(prolog 1 when it drained the node, else 0; see docs/slurm-actions.md).
"""
from __future__ import annotations

OK = 0
FAIL = 1
USAGE = 2
INTERNAL = 3
FLAGGED = 4
BUSY = 5
UNAVAILABLE = 6

TABLE = (
    (OK, "ok", "done: the node or fabric is healthy (pass, warn, skip; error = the checker could not judge), "
               "the command did what it was asked"),
    (FAIL, "fail", "a check failed, or the command found what it looks for out of order: fabric or software "
                   "deviations, a drill that failed, a database schema that needs `healthcheck db upgrade`, "
                   "a report window with no data"),
    (USAGE, "usage", "usage, config or input error: a bad option, an unreadable or invalid file (the message "
                     "names it), a command whose optional dependencies are not installed"),
    (INTERNAL, "internal", "a bug of ours (set HEALTHCHECK_DEBUG=1 for the traceback)"),
    (FLAGGED, "flagged", "drains held back on purpose: the sweep's blast-radius guard (more nodes failed than it "
                         "allows), or a burn-in allocation that failed for a cause its nodes share"),
    (BUSY, "busy", "sweep: another sweep holds the lock"),
    (UNAVAILABLE, "unavailable", "a service the command needs could not be used: the history database "
                                 "(unreachable, refusing us, or of another schema version: `healthcheck db "
                                 "upgrade`), slurmctld, systemd (`slurm install-hooks` starting the agent), the "
                                 "spool that should record a drill's result (printed all the same), or, with "
                                 "`check --strict`, the probe, tool or driver a check reads (it could not judge)"),
)


def describe() -> str:
    """The table as text lines ``code  meaning``."""
    return "\n".join(f"{code}  {meaning}" for code, _, meaning in TABLE)
