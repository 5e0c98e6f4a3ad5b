"""The prolog's fast path: a job starts on the word of the last full health check, re-verified live.

The prolog runs before every job; a full check there costs the interpreter plus ~80 ms of imports.
With ``prolog_mode = "fast"`` ([slurm]), each HealthCheckProgram run that finds the node healthy writes
a *gate* file: when it was written, how long it may be trusted, which config it judged with, and a
short list of live facts that would reveal a fault since (each GPU still on the PCI bus, each active
InfiniBand port still ACTIVE, each expected mount still mounted), plus the error counters the epilog
needs as the job's baseline. The prolog then only:

1. reads the gate (os, sys, time only: no json, no config parsing, no probe, no check import);
2. proves it current: format and tool version, younger than its ``max_age``, written since this boot,
   the config file unchanged (path, inode, size, mtime), no queued Slurm action and no drain of ours
   pending (those need the full path), and as root owned by root and private;
3. re-reads the live facts;
4. saves the baseline for the job (from the gate: counters as of the last health check, at most
   ``max_age`` old; the epilog then attributes growth since that check to the job, and says so), and
   appends the run record to the spool.

Anything unexpected, at any step, returns None: the caller runs the full prolog, so a stale or missing
gate costs time, never a check. A failing full run removes the gate (see hooks.py).
"""
from __future__ import annotations

import os
import time

FORMAT = "healthcheck-gate 1"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def gate_dir() -> str | None:
    """$HEALTHCHECK_CACHE_DIR, else /var/cache/healthcheck as root (as healthcheck.safeio.tomlcache)."""
    explicit = os.environ.get("HEALTHCHECK_CACHE_DIR")
    if explicit:
        return explicit
    return "/var/cache/healthcheck" if os.geteuid() == 0 else None


def gate_path(node: str) -> str | None:
    folder = gate_dir()
    if folder is None or not node or not set(node) <= _SAFE:
        return None
    return os.path.join(folder, f"prolog-gate-{node}")


def config_stamp(config_path: str) -> str | None:
    try:
        real = os.path.realpath(config_path)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}\t{st.st_ino}\t{st.st_size}\t{st.st_mtime_ns}"


def _boot_time(now: float) -> float | None:
    try:
        with open("/proc/uptime", "rb") as fh:
            return now - float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_gate(node: str) -> dict | None:
    """The gate's fields (lists for the repeatable keys), or None when absent, unreadable or untrusted."""
    path = gate_path(node)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if os.geteuid() == 0 and (st.st_uid != 0 or st.st_mode & 0o077):
            return None  # as root only a gate of root's alone
        data = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    try:
        lines = data.decode("ascii").split("\n")
    except UnicodeDecodeError:
        return None
    if not lines or lines[0] != FORMAT:
        return None
    gate: dict = {"exists": [], "equals": [], "mount": []}
    for line in lines[1:]:
        if not line:
            continue
        key, _, value = line.partition(" ")
        if key in ("exists", "mount"):
            gate[key].append(value)
        elif key == "equals":
            target, _, expected = value.partition("\t")
            gate[key].append((target, expected))
        else:
            gate[key] = value
    return gate


def _live_ok(gate: dict) -> bool:
    for path in gate["exists"]:
        if not os.path.exists(path):
            return False
    for path, expected in gate["equals"]:
        try:
            with open(path, "rb") as fh:
                if fh.read(256).decode("ascii", "replace").strip() != expected:
                    return False
        except OSError:
            return False
    for mountpoint in gate["mount"]:
        if not os.path.ismount(mountpoint):
            return False
    return True


def fast_prolog(node: str, job_id: str | None, config_path: str, t0: float, version: str) -> int | None:
    """0 when the gate vouches for the node (baseline saved, run recorded); None: run the full prolog."""
    gate = read_gate(node)
    if gate is None:
        return None
    now = time.time()
    try:
        written, max_age = float(gate["written"]), float(gate["max_age"])
    except (KeyError, ValueError):
        return None
    boot = _boot_time(now)
    if (gate.get("version") != version or not 0 <= now - written <= max_age or boot is None
            or written < boot - 1 or gate.get("config") != config_stamp(config_path)):
        return None
    state, spool = gate.get("state"), gate.get("spool")
    if not state or not spool:
        return None
    if os.path.exists(os.path.join(state, "pending-actions.jsonl")) or \
            os.path.exists(os.path.join(state, "drained-by-us.json")):
        return None
    if not _live_ok(gate):
        return None
    if job_id is not None and not (job_id and set(job_id) <= frozenset("0123456789_") and len(job_id) <= 64):
        return None
    counters = gate.get("counters", "")
    if job_id and counters.startswith("{") and counters.endswith("}"):
        try:
            _save_baseline(state, job_id, counters, now, gate.get("run", ""), written)
        except OSError:
            pass  # no baseline only means no growth check in the epilog (the full path logs the same)
    try:
        _record(spool, node, job_id, gate, now, written, t0, version)
    except Exception:  # noqa: BLE001 - a full /var never fails a job (the full path does the same)
        pass
    return 0


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))


def _save_baseline(state: str, job_id: str, counters: str, now: float, run: str, written: float) -> None:
    folder = os.path.join(state, "baselines")
    if not os.path.isdir(folder):
        from ..safeio.trust import make_private

        make_private(folder)
    run = run if set(run) <= _SAFE else ""
    text = (f'{{"version": 1, "job_id": "{job_id}", "saved_at": {now:.3f}, "source": "health check {run[:12]} '
            f'at {_iso(written)}", "counters": {counters}}}')
    _write_private(os.path.join(folder, f"{job_id}.json"), text.encode("ascii"))


def _write_private(path: str, data: bytes) -> None:
    """Atomically, mode 0600, never through a planted link; as root only in a folder of root's alone."""
    from ..safeio.atomic import atomic_write

    atomic_write(path, data, 0o600, private_dir=True)


def _record(spool: str, node: str, job_id: str | None, gate: dict, now: float, written: float, t0: float,
            version: str) -> None:
    """The run record, encoded by hand (every value is generated here or checked against _SAFE)."""
    from ..spool.append import append_line, new_record_id

    run = gate.get("run", "")
    if not set(run) <= _SAFE or not set(version) <= _SAFE:
        return
    live = len(gate["exists"]) + len(gate["equals"]) + len(gate["mount"])
    message = (f"vouched by the health check {run[:12]} at {_iso(written)} ({int(now - written)} s ago); "
               f"{live} live facts re-read")
    job = f'"{job_id}"' if job_id else "null"
    line = (f'{{"kind":"run","schema_version":1,"record_id":"{new_record_id()}","run_id":"{os.urandom(16).hex()}",'
            f'"node":"{node}","context":"prolog","job_id":{job},"started_at":"{_iso(now)}",'
            f'"duration_s":{time.monotonic() - t0:.6f},"status":"pass","results":[{{"check":"prolog.gate",'
            f'"status":"pass","message":"{message}","component":null,"metrics":{{"gate_age_s":{now - written:.1f}}}}}],'
            f'"config_hash":null,"tool_version":"{version}"}}\n')
    append_line(spool, line.encode("ascii"))


def write_gate(node: str, config_path: str, facts: dict, *, max_age_s: float, state_dir: str, spool_dir: str,
               run_id: str, version: str, now: float | None = None) -> str | None:
    """Written by a healthy HealthCheckProgram run (any imports allowed here). ``facts``: "exists",
    "equals" ([path, content]), "mount" lists and "counters" (a dict). Returns the path, or None."""
    import json

    path = gate_path(node)
    stamp = config_stamp(config_path)
    if path is None or stamp is None:
        return None
    now = time.time() if now is None else now
    lines = [FORMAT, f"written {now:.3f}", f"max_age {max_age_s:g}", f"version {version}", f"config {stamp}",
             f"state {state_dir}", f"spool {spool_dir}", f"run {run_id}"]
    for key in ("exists", "mount"):
        lines += [f"{key} {p}" for p in facts.get(key, ()) if "\n" not in p and "\t" not in p]
    lines += [f"equals {p}\t{v}" for p, v in facts.get("equals", ()) if not any(c in p + v for c in "\n\t")]
    lines.append("counters " + json.dumps(facts.get("counters") or {}, sort_keys=True, allow_nan=False,
                                          separators=(",", ":")))
    text = "\n".join(lines) + "\n"
    try:
        text.encode("ascii")
    except UnicodeEncodeError:
        return None  # a path the fast path could not compare byte for byte: no gate, full prologs
    folder = os.path.dirname(path)
    from ..safeio.trust import make_private

    make_private(folder)
    _write_private(path, text.encode("ascii"))
    return path


def remove_gate(node: str) -> None:
    path = gate_path(node)
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
