"""Parse ``fio --output-format=json`` (fio 3.x; ``json+`` and ``json,normal`` too) into a :class:`FioResult`.

Schema (fio's ``stat.c`` JSON writer, as printed by fio 3.x, e.g. 3.28 / 3.36 / 3.42)::

    {"fio version": "fio-3.36", "timestamp": ..., "global options": {...},
     "jobs": [{"jobname": "seqread", "groupid": 0, "error": 0, "job options": {...},
               "read":  {"io_bytes", "io_kbytes", "bw_bytes" (B/s), "bw" (KiB/s), "iops", "runtime" (ms),
                         "total_ios", "slat_ns": {...}, "clat_ns": {"min", "max", "mean", "stddev", "N",
                         "percentile": {"1.000000": ns, ..., "99.000000": ns, ...}}, "lat_ns": {...}, ...},
               "write": {...}, "trim": {...}, "sync": {...}, "job_runtime" (ms), "usr_cpu", ...}],
     "disk_util": [{"name", "read_ios", "write_ios", "util", ...}]}

Variants handled: lines before the JSON (the ``json,normal`` job banner, ``fio-3.x``, ``Starting 1
process``, ``fio: ...`` notes and errors on stderr) and the normal-format report after it; client/
server runs (``"client_stats"`` instead of ``"jobs"``); fio 2.x fields (``"clat"`` in microseconds, ``"bw"``
only, in KiB/s); percentiles switched off (no ``"percentile"`` -> p99 ``None``); several JSON documents
(jobs concatenated, version of the first). A direction that did no I/O (``io_bytes`` 0, or no
``total_ios``) gives ``None`` for its bandwidth, IOPS and latency, not 0. Non-finite numbers -> ``None``.

``errors``: the non-JSON lines that say "error" (``fio: io_u error on file ...: Input/output error``,
``<host> error: failed to setup shm segment``; other ``fio: ...`` notes are skipped), then one
``job 'NAME': error N (ENAME)`` per job whose ``error`` is not 0 (an errno value).

Raises :class:`FioParseError` for input that is not text, empty, without a fio JSON document (an object
with "jobs", "client_stats" or "fio version"), cut short, or with fields of the wrong type.

Bounds: input over MAX_INPUT_CHARS (16 MiB; a ``json+`` job is ~100 KB), MAX_LINES lines or more than
``parsers.MAX_JSON_CONTAINERS`` JSON objects/arrays is refused with FioParseError; the search for JSON
documents is budgeted (:func:`healthcheck.parsers.json_objects`), so time stays linear; more than
MAX_JOBS jobs is refused too.
"""
from __future__ import annotations

import errno
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from . import ParseError, as_text, json_objects

MAX_INPUT_CHARS = 16 * 1024 * 1024
MAX_LINES = 2_000_000
MAX_JOBS = 10_000  # jobs in all documents (numjobs x sections; each costs ~10 us)
_ERROR_LINE = re.compile(r"\berrors?\b", re.I)
_FIO_KEYS = ("jobs", "client_stats", "fio version")


class FioParseError(ParseError):
    """Input is not fio JSON output (or the JSON has the wrong shape)."""


@dataclass
class FioJob:
    name: str
    error: int
    read_bw_bytes: float | None
    write_bw_bytes: float | None
    read_iops: float | None
    write_iops: float | None
    read_clat_p99_us: float | None
    write_clat_p99_us: float | None
    runtime_ms: float | None


@dataclass
class FioResult:
    version: str | None
    jobs: list[FioJob] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"version": self.version, "jobs": [asdict(job) for job in self.jobs],
                "errors": list(self.errors)}


def parse(text: str) -> FioResult:
    """Parse fio JSON output; see the module docstring for the variants."""
    text = as_text(text, "fio output", MAX_INPUT_CHARS, MAX_LINES, FioParseError)
    if not text.strip():
        raise FioParseError("fio output is empty")
    docs, other = _documents(text)
    if not docs:
        if '"fio version"' in text or '"jobs"' in text:
            raise FioParseError("fio JSON document is cut short or not valid JSON")
        raise FioParseError("no fio JSON document (an object with \"jobs\") in the input")
    version = _typed(docs[0].get("fio version"), str, "fio version")
    result = FioResult(version=version)
    result.errors = [line.strip() for line in other.splitlines() if _ERROR_LINE.search(line.strip())]
    for d, doc in enumerate(docs):
        key = "jobs" if "jobs" in doc else "client_stats"
        jobs = _typed(doc.get(key), list, key, [])
        if len(result.jobs) + len(jobs) > MAX_JOBS:
            raise FioParseError(f"fio JSON: more than {MAX_JOBS} jobs (not a real fio output)")
        for i, job in enumerate(jobs):
            result.jobs.append(_job(_typed(job, dict, f"{key}[{i}]", {}), f"{key}[{i}]" if d == 0 else
                                    f"document {d + 1}: {key}[{i}]"))
    for job in result.jobs:
        if job.error:
            name = errno.errorcode.get(job.error, "unknown errno")
            result.errors.append(f"job {job.name!r}: error {job.error} ({name})")
    return result


def _documents(text: str) -> tuple[list[dict], str]:
    """fio JSON objects that start a line, and the text outside them."""
    return json_objects(text, _is_fio_doc, "fio output", FioParseError)


def _is_fio_doc(obj: object) -> bool:
    return isinstance(obj, dict) and any(key in obj for key in _FIO_KEYS)


def _typed(value: Any, types: type | tuple[type, ...], path: str, default: Any = None) -> Any:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, types):
        raise FioParseError(f"fio JSON: {path} has the wrong type ({type(value).__name__})")
    return value


def _number(container: dict, key: str, path: str) -> float | None:
    """A finite number, or None when absent / null / NaN / infinite."""
    value = _typed(container.get(key), (int, float), f"{path}.{key}")
    return float(value) if value is not None and math.isfinite(value) else None


def _job(job: dict, path: str) -> FioJob:
    name = job.get("jobname")
    name = str(_typed(name, (str, int, float), f"{path}.jobname", "")) if name is not None else ""
    error = _typed(job.get("error"), int, f"{path}.error", 0)
    read = _direction(job.get("read"), f"{path}.read")
    write = _direction(job.get("write"), f"{path}.write")
    runtime = _number(job, "job_runtime", path)
    if runtime is None:
        runtimes = [r for r in (read[3], write[3]) if r is not None]
        runtime = max(runtimes) if runtimes else None
    return FioJob(name=name, error=error, read_bw_bytes=read[0], write_bw_bytes=write[0],
                  read_iops=read[1], write_iops=write[1], read_clat_p99_us=read[2],
                  write_clat_p99_us=write[2], runtime_ms=runtime)


def _direction(value: Any, path: str) -> tuple[float | None, float | None, float | None, float | None]:
    """(bw bytes/s, iops, clat p99 in us, runtime ms) of one direction; Nones when it did no I/O."""
    data = _typed(value, dict, path, {})
    io_bytes = _number(data, "io_bytes", path)
    moved = io_bytes if io_bytes is not None else _number(data, "total_ios", path)
    runtime = _number(data, "runtime", path)
    if not moved:
        return None, None, None, runtime or None
    bw = _number(data, "bw_bytes", path)
    if bw is None and (kib := _number(data, "bw", path)) is not None:
        bw = kib * 1024
    p99 = _percentile(data, "clat_ns", path, 1000.0)
    if p99 is None and "clat_ns" not in data:
        p99 = _percentile(data, "clat", path, 1.0)  # fio 2.x: microseconds
    return bw, _number(data, "iops", path), p99, runtime


def _percentile(data: dict, key: str, path: str, per_us: float) -> float | None:
    """The 99th percentile of ``data[key]["percentile"]`` in microseconds (keys like "99.000000")."""
    stats = _typed(data.get(key), dict, f"{path}.{key}", {})
    percentiles = _typed(stats.get("percentile"), dict, f"{path}.{key}.percentile", {})
    for name in percentiles:
        try:
            is_p99 = float(name) == 99.0
        except ValueError:  # not a number: not a percentile key
            continue
        if is_p99:
            value = _number(percentiles, name, f"{path}.{key}.percentile")
            return None if value is None else value / per_us
    return None
