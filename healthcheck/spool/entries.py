"""The spool's records: the "run" record of a verdict and the "action" record of a drain or resume,
the one shape of each that every producer writes (the Slurm hooks, `healthcheck check --spool`, the
burn-in job step, the sweep) and the history ingests (:mod:`healthcheck.history.rows`)."""
from __future__ import annotations

import os

from ..core.model import Verdict


SCHEMA_VERSION = 1  # of the spool records; the history ingest skips versions it does not know
ACTIONS = ("drain", "resume")  # what an action record may say (the history refuses anything else)


def new_run_id() -> str:
    """A run's id: 128 random bits as 32 hex digits (a uuid4's entropy, without importing uuid)."""
    return os.urandom(16).hex()


def run_record(verdict: Verdict, run_id: str, job_id: str | None, config_path: str | None,
               job_nodes: str | None = None) -> dict:
    """``job_nodes``: the job's node list (Slurm hostlist form), for runs that belong to a multi-node job."""
    from .. import __version__

    record = {"kind": "run", "schema_version": SCHEMA_VERSION, "run_id": run_id, "node": verdict.node, "context": verdict.context,
            "job_id": job_id, "started_at": verdict.started_at, "duration_s": round(verdict.duration_s, 6),
            "status": verdict.status.value, "results": [f.to_dict() for f in verdict.findings],
            "config_hash": config_hash(config_path), "tool_version": __version__}
    if job_nodes:
        record["job_nodes"] = job_nodes
    return record


def action_record(run_id: str, node: str, action: str, reason: str | None, *, time: str,
                  job_id: str | None, context: str, why: str, checks=()) -> dict:
    """The "action" record of one drain or resume: ``time`` ISO 8601 (``core.clock.utc_now_iso()``),
    ``context`` who acted (prolog, epilog, slurm-check, queued, burnin, sweep), ``why`` the decision's
    words, ``checks`` the failing checks it rests on. ValueError for an action that is neither."""
    if action not in ACTIONS:
        raise ValueError(f"action record: action {action!r} is not one of {', '.join(ACTIONS)}")
    return {"kind": "action", "schema_version": SCHEMA_VERSION, "run_id": run_id, "node": node, "time": time,
            "action": action, "reason": reason, "job_id": job_id, "context": context, "why": why,
            "checks": list(checks)}


def config_hash(path: str | None) -> str | None:
    """First 16 hex digits of the config file's SHA-256 (which config judged the run)."""
    if not path:
        return None
    try:  # the C SHA-256 without importing hashlib (OpenSSL: ~2 ms, paid by every prolog)
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12+
        except ImportError:
            from hashlib import sha256
    try:
        with open(path, "rb") as fh:
            return sha256(fh.read()).hexdigest()[:16]
    except OSError:
        return None
