"""Parse ``dcgmi mndiag`` output (DCGM 4.3+, the multi-node diagnostic of GB200/GB300 NVL racks) into a
:class:`MnDiag`: the test (MNUBERGEMM, or mnnvbandwidth on DCGM 4.7+), its status, the hosts, and every
host's or GPU's result with its messages.

JSON (``dcgmi mndiag --hostList "a;b" -j``; keys as in DCGM's ``NvvsJsonStrings.h``)::

    {"DCGM Diagnostic": "DCGM Multi-Node Diagnostic", "metadata": {"num_hosts": 2, ...},
     "hosts": [{"host_id": 0, "hostname": "gb-r01-t01", "driver_version": ..., "entities": [...]}],
     "test_categories": [{"category": "Multi-Node Tests", "tests": [{"name": "MNUBERGEMM", "status": "Fail",
        "mpi_error": {"warning": "...", "error_category": "MPI"},
        "results": [{"host_id": 0, "entity_group": "GPU", "entity_id": 1, "status": "Fail",
                     "warnings": [{"warning": "...", "error_id": 0}], "info": ["..."]}]}]}],
     "global_errors": [...], "runtime_error": "..."}

Text (the default table)::

    Multi-node diagnostic failed.
    +---------------------------+------------------------------------------------+
    | Diagnostic                | Result                                         |
    |-----  Metadata  ----------+------------------------------------------------|
    | MNUBERGEMM Test           | Fail                                           |
    | Host List                 | 0: gb-r01-t01                                  |
    |                           | 1: gb-r01-t02                                  |
    |-----  Host Details  ------+------------------------------------------------|
    | Host 1                    | Fail                                           |
    |   GPUs: 0, 2, 3           | Pass                                           |
    |   GPU 1                   | Fail                                           |
    |                           | Error: <message>                               |

``Error: Unable to complete multi-node diagnostic on host ...`` lines (the run itself failed) go to
``errors``. dcgmi's exit status is 0 whether the diagnostic passed or failed: the output is the verdict.

Statuses: pass / fail / warn / skip (``Not Run``, ``Skip``) / unknown. :class:`MndiagParseError` for input
that is not text, empty, a ``dcgmi diag`` (single-node) document, or with no mndiag table, document nor
``Error:`` line. Bounds as :mod:`healthcheck.parsers.dcgmi`: linear time, MAX_* limits.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import ParseError, as_text, json_objects

MAX_INPUT_CHARS, MAX_LINES, MAX_RESULTS, MAX_MESSAGES, MAX_TEXT_CHARS = 16 << 20, 200_000, 10_000, 1000, 2048
MNDIAG_TITLE = "DCGM Multi-Node Diagnostic"

_WORDS = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "warn": "warn", "warning": "warn",
          "skip": "skip", "skipped": "skip", "not run": "skip"}
_RANK = {"skip": 0, "pass": 1, "unknown": 2, "warn": 3, "fail": 4}
_ROW = re.compile(r"^\|\s?(?P<left>[^|]{0,80}?)\s*\|\s?(?P<right>.{0,2000}?)\s*\|?\s*$")
_TEST = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_ ]{0,40}?)\s+Test$")
_HOST = re.compile(r"^Host\s+(?P<id>[0-9]{1,4})$")
_GPUS = re.compile(r"^GPUs?\s*:?\s*(?P<ids>[0-9][0-9, ]{0,400})$")
_LISTED = re.compile(r"^(?P<id>[0-9]{1,4})\s*:\s*(?P<name>\S{1,255})$")
_SUMMARY = re.compile(r"^Host\s+(?P<host>[0-9]{1,4})\s*\(\s*GPU\s*(?P<gpu>[0-9]{1,4})\s*\)$")
_ERROR_LINE = re.compile(r"^\s*Error\s*:\s*(?P<text>.{1,2000})$")


class MndiagParseError(ParseError):
    """Input is not ``dcgmi mndiag`` output."""


@dataclass
class MnResult:
    """One host's (``gpu`` None) or one of its GPUs' result."""

    host: str  # the hostname where the output names it, else "host <id>"
    gpu: int | None
    status: str
    messages: list[str] = field(default_factory=list)


@dataclass
class MnDiag:
    test: str | None = None
    status: str = "unknown"  # the test's own status as dcgmi printed it
    hosts: dict[int, str] = field(default_factory=dict)  # host id -> hostname
    results: list[MnResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the run itself: runtime, MPI and global errors

    @property
    def overall(self) -> str:
        """fail (the test, a result or a run error) > warn > pass; skip when nothing ran."""
        statuses = [self.status] + [r.status for r in self.results]
        if self.errors or "fail" in statuses:
            return "fail"
        if "warn" in statuses or "unknown" in statuses:
            return "warn"
        return "pass" if "pass" in statuses else "skip"

    def host_name(self, host_id: int) -> str:
        return self.hosts.get(host_id) or f"host {host_id}"

    def to_dict(self) -> dict:
        return {"test": self.test, "status": self.status, "overall": self.overall,
                "hosts": {str(k): v for k, v in sorted(self.hosts.items())}, "errors": list(self.errors),
                "results": [{"host": r.host, "gpu": r.gpu, "status": r.status, "messages": list(r.messages)}
                            for r in self.results]}


def _status(word: object) -> str:
    return _WORDS.get(str(word or "").strip().lower(), "unknown")


def _clip(text: object) -> str:
    return " ".join(str(text).split())[:MAX_TEXT_CHARS]


def parse_mndiag(text: str | bytes) -> MnDiag:
    """Parse ``dcgmi mndiag`` text or JSON output (auto-detected); see the module docstring."""
    text = as_text(text, "dcgmi mndiag output", MAX_INPUT_CHARS, MAX_LINES, MndiagParseError)
    if not text.strip():
        raise MndiagParseError("dcgmi mndiag output is empty")
    docs, other = json_objects(text, _is_document, "dcgmi mndiag output", MndiagParseError)
    diag = MnDiag()
    for doc in docs:
        _add_document(diag, doc)
    if not docs:
        if '"DCGM Diagnostic"' in text or '"DCGM GPU Diagnostic"' in text:
            raise MndiagParseError("a dcgmi diag (single-node) document, or a cut mndiag one: read single-node "
                                   "diag output with `healthcheck parse dcgmi`")
        _Text(diag).feed(text.splitlines())
    else:
        _Text(scratch := MnDiag()).feed(other.splitlines())
        diag.errors += scratch.errors
    if diag.test is None and not diag.results and not diag.errors:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise MndiagParseError(f"not dcgmi mndiag output: no result table, JSON document or 'Error:' line "
                               f"(first line: {first[:80]!r})")
    return diag


def _is_document(obj: object) -> bool:
    return isinstance(obj, dict) and obj.get("DCGM Diagnostic") == MNDIAG_TITLE


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MndiagParseError(f"dcgmi mndiag JSON: {where} must be a list, not {type(value).__name__}")
    return [v for v in value if v is not None][:MAX_RESULTS]


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isascii() \
            or not str(value).strip().isdigit() or len(str(value).strip()) > 6:
        raise MndiagParseError(f"dcgmi mndiag JSON: {where} must be a whole number, not {str(value)[:40]!r}")
    return int(str(value).strip())


def _add_document(diag: MnDiag, doc: dict) -> None:
    for i, host in enumerate(_list(doc.get("hosts"), "hosts")):
        if isinstance(host, dict):
            ident = _int(host.get("host_id", i), f"hosts[{i}].host_id")
            diag.hosts[ident if ident is not None else i] = _clip(host.get("hostname") or f"host {i}")
    for key in ("runtime_error",):
        if doc.get(key):
            diag.errors.append(_clip(doc[key]))
    for error in _list(doc.get("global_errors"), "global_errors"):
        diag.errors.append(_clip(error.get("warning") or error.get("error") or error) if isinstance(error, dict)
                           else _clip(error))
    for c, category in enumerate(_list(doc.get("test_categories"), "test_categories")):
        if not isinstance(category, dict):
            raise MndiagParseError(f"dcgmi mndiag JSON: test_categories[{c}] must be an object")
        for t, test in enumerate(_list(category.get("tests"), f"test_categories[{c}].tests")):
            if not isinstance(test, dict):
                raise MndiagParseError(f"dcgmi mndiag JSON: test_categories[{c}].tests[{t}] must be an object")
            _add_test(diag, test, f"test_categories[{c}].tests[{t}]")


def _add_test(diag: MnDiag, test: dict, where: str) -> None:
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
    status = _status(test.get("status") or summary.get("status"))
    diag.status = status if diag.test is None else _worst(diag.status, status)
    diag.test = _clip(test.get("name") or diag.test or "unnamed")
    mpi = test.get("mpi_error")
    if isinstance(mpi, dict) and (mpi.get("warning") or mpi.get("error")):
        diag.errors.append("MPI: " + _clip(mpi.get("warning") or mpi.get("error")))
    for r, result in enumerate(_list(test.get("results"), f"{where}.results")):
        if not isinstance(result, dict):
            raise MndiagParseError(f"dcgmi mndiag JSON: {where}.results[{r}] must be an object")
        host_id = _int(result.get("host_id"), f"{where}.results[{r}].host_id")
        group = str(result.get("entity_group") or "GPU").upper()
        entity = _int(result.get("entity_id"), f"{where}.results[{r}].entity_id") if group == "GPU" else None
        item = MnResult(diag.host_name(host_id) if host_id is not None else "unknown host", entity,
                        _status(result.get("status")))
        for w in _list(result.get("warnings"), f"{where}.results[{r}].warnings")[:MAX_MESSAGES]:
            item.messages.append(_clip(w.get("warning") if isinstance(w, dict) else w))
        for i in _list(result.get("info"), f"{where}.results[{r}].info")[:MAX_MESSAGES]:
            item.messages.append("Info: " + _clip(i.get("info") if isinstance(i, dict) else i))
        diag.results.append(item)


def _worst(a: str, b: str) -> str:
    return a if _RANK.get(a, 2) >= _RANK.get(b, 2) else b


class _Text:
    """The default table: metadata rows, then ``Host N`` rows with their ``GPUs: ...`` / ``GPU n`` rows."""

    def __init__(self, diag: MnDiag) -> None:
        self.diag = diag
        self.section = ""
        self.host: int | None = None
        self.last: MnResult | None = None
        self.listing = False

    def feed(self, lines: list[str]) -> None:
        for raw in lines:
            line = raw.strip()
            error = _ERROR_LINE.match(line)
            if error and not line.startswith("|"):
                self.diag.errors.append(_clip(error.group("text")))
                continue
            if line.startswith("|-") or line.startswith("+-"):
                words = line.strip("|+-= ").split("-")[0].strip().lower()
                self.section, self.listing = words, False
                continue
            row = _ROW.match(line)
            if row:
                self._row(row.group("left").strip(), row.group("right").strip())

    def _row(self, left: str, right: str) -> None:
        diag = self.diag
        if left.lower() == "diagnostic" and right.lower() == "result":
            return
        test = _TEST.match(left)
        if test:
            diag.test, diag.status, self.listing = test.group("name").strip(), _status(right), False
            return
        if left.lower() == "host list" or (not left and self.listing):
            self.listing = True
            listed = _LISTED.match(right)
            if listed:
                diag.hosts[int(listed.group("id"))] = listed.group("name")
            return
        self.listing = False
        host = _HOST.match(left)
        if host:
            self.host = int(host.group("id"))
            self.last = MnResult(diag.host_name(self.host), None, _status(right))
            diag.results.append(self.last)
            return
        summary = _SUMMARY.match(left)
        if summary:  # the Error Summary: "Host 0 (GPU 1) | Error: ..."; its message goes to that GPU
            host, gpu = diag.host_name(int(summary.group("host"))), int(summary.group("gpu"))
            self.last = next((r for r in diag.results if r.host == host and r.gpu == gpu), None)
            if self.last is None:
                self.last = MnResult(host, gpu, "fail")
                diag.results.append(self.last)
            left = ""
        gpus = _GPUS.match(left)
        if gpus and self.host is not None:
            for ident in re.findall(r"[0-9]{1,4}", gpus.group("ids"))[:MAX_RESULTS]:
                self.last = MnResult(diag.host_name(self.host), int(ident), _status(right))
                diag.results.append(self.last)
            return
        message = _ERROR_LINE.match(right) or (re.match(r"^(?:Warning|Info)\s*:", right) and right)
        if not left and message and self.last is not None and len(self.last.messages) < MAX_MESSAGES \
                and _clip(right) not in self.last.messages:
            self.last.messages.append(_clip(right))
        elif left.lower() == "mpi error" and right:
            diag.errors.append("MPI: " + _clip(right))
