"""Parse ``dcgmi diag`` output (text table or ``-j`` JSON) into a :class:`DcgmDiag`.

Text (DCGM 2.x-4.x; ``+---`` borders, ``| Diagnostic | Result |`` header, cells wrapped every 45 chars)::

    | GPU Memory                | Pass - GPUs: 1, 2, 3, 4, 5, 6, 7               |
    |                           | Fail - GPU: 0                                  |
    | Warning                   | GPU 0 Thermal violations totaling 13.3 second  |
    |                           | s started at 9.7 seconds into the test for GP  |

Text variants: category rows ``|-----  Deployment  ---+---|``, ``+-----  Hardware  ---+---+``, padded
``| -----  Metadata  ---+--- |``; 3.x cells ``Pass``, ``Skip - All``, ``Fail - GPU: 0``, ``Pass - GPUs:
1, 2`` (continued on name-less rows); 4.x status rows followed by ``GPU0: Pass`` entity rows and
``Warning: GPU0`` / ``Info: GPU0`` rows; wrapped ``Warning``/``Info``/``Error`` rows (re-joined; one with
no test row before it, as in a cut fragment, becomes a test named after its label); a last row without
its closing ``|``; several tables (srun tasks, ``--iterations``): one run each, tests in order, differing
metadata values joined with ``"; "``; ``srun --label`` prefixes (``0: | ...``, grouped by task); text
around the tables. ``Error: ...`` / ``srun: error: ...`` lines (``Error: unable to establish a connection
to the specified host``, with continuation lines) go to ``errors``.

JSON (field names as in DCGM's ``NvvsJsonStrings.h``): DCGM 3 ``{"DCGM GPU Diagnostic": {"test_categories":
[{"category", "tests": [{"name", "results": [{"gpu_ids" (CSV string or int) | "gpu_id", "status",
"warnings": [{"warning", "error_id"}], "info"}]}]}], "version", "Driver Version Detected"}}``; DCGM 4
``{"DCGM Diagnostic": {...}, "entity_groups", "metadata"}`` with ``entity_group``/``entity_id`` results
and a per-test ``test_summary``; ``runtime_error`` documents (-> ``errors``); ``{"iterations": [...]}``;
``null`` entries; non-JSON lines around documents (``WARNING: ...``).

Statuses: pass/fail/warn/skip/info/unknown (``Not Run`` or an empty cell -> skip; an unknown word counts
as a warning in :attr:`DcgmDiag.overall`). Messages keep kind and entity: ``"Warning: GPU 0 Thermal ..."``,
``"Warning: GPU0: A memory ..."``, ``"Info: ..."``, ``"Error: ..."``. :class:`DcgmiParseError` for input
that is not text, empty, a cut or misshapen DCGM JSON document, or with no diag table, diag JSON document
nor ``Error:`` line (``dcgmi discovery -l`` tables are rejected).
Bounds (linear time): input over MAX_INPUT_CHARS, MAX_LINES or ``parsers.MAX_JSON_CONTAINERS`` is refused;
JSON search is budgeted (``parsers.json_objects``); MAX_MESSAGES per test, MAX_ERRORS, MAX_TEXT_CHARS kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import ParseError, as_text, json_objects

# MAX_TEXT_CHARS: an error or metadata value grows by continuation lines up to this (each is compared)
MAX_INPUT_CHARS, MAX_LINES, MAX_MESSAGES, MAX_ERRORS, MAX_TEXT_CHARS = 16 << 20, 200_000, 1000, 1000, 4096

_RANK = {"info": 0, "skip": 1, "pass": 2, "unknown": 3, "warn": 4, "fail": 5}
_WORDS = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "error": "fail",
          "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip", "not run": "skip", "": "skip"}
_LABEL_STATUS = {"Warning": "warn", "Info": "info", "Error": "fail"}
_LIGHT = {"deployment", "metadata"}  # software checks: alone they do not mean the GPUs were tested
_CHUNK = 45  # dcgmi wraps message cells every 45 characters
_DIAG_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
_TASK = re.compile(r"^[0-9]{1,6}: (?=\s*[|+])")
# Linear: (?<! ): the shortest name never ends in a blank; ids follow an optional colon (no \s*\s* runs)
_CATEGORY = re.compile(r"^[|+]\s*-{3,}\s+(?P<name>[A-Za-z][\w /&()-]{0,40}?)(?<! )\s++-{2,}")
_BORDER = re.compile(r"^\+[-=+]*$")
_MSG = re.compile(r"^(?P<kind>Warning|Info|Error)(?:\s*:\s*(?P<ent>[A-Za-z]{2,12}\s?[0-9]{1,5}))?$", re.I)
_ENTITY = re.compile(r"^(?P<grp>[A-Za-z]{2,12})\s?(?P<id>[0-9]{1,5})\s*:\s*(?P<st>[A-Za-z][A-Za-z ]{0,15})$")
_CELL = re.compile(r"^(?P<st>[A-Za-z][A-Za-z ]{1,10}?)(?:\s*-\s*(?:all|gpus?(?:\s*:)?(?P<ids>[0-9,\s]*)))?$",
                   re.I)
_META = re.compile(r"(?:Version|Detected|Device Serials)$")
_ERROR = re.compile(r"^(?:Error|Err)\b|^Aborting the iterative runs|^srun: error\b", re.I)
_NOT_MORE = re.compile(r"^(?:Successfully ran|Running iteration|Passed all|WARNING\b|\S+@\S+|[$#>]\s)|dcgmi ")
_JSON_START = re.compile(r"^[ \t]*\{", re.M)


class DcgmiParseError(ParseError):
    """Input is not ``dcgmi diag`` output (or a DCGM diag JSON document of the wrong shape)."""


@dataclass
class DcgmTest:
    category: str | None
    name: str
    status: str  # pass | fail | warn | skip | info | unknown
    gpus: dict[int, str] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)


@dataclass
class DcgmDiag:
    tests: list[DcgmTest] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    runs: int = 0

    @property
    def overall(self) -> str:
        """fail (a test or run error) > warn > skip (all non-Deployment tests skipped) > pass."""
        statuses = [t.status for t in self.tests if t.status != "info"]
        if self.errors or "fail" in statuses:
            return "fail"
        if "warn" in statuses or "unknown" in statuses:
            return "warn"
        heavy = [t.status for t in self.tests
                 if t.status != "info" and (t.category or "").lower() not in _LIGHT]
        return "skip" if all(s == "skip" for s in heavy or statuses) else "pass"

    def to_dict(self) -> dict:
        return {"overall": self.overall, "runs": self.runs, "metadata": dict(self.metadata),
                "errors": list(self.errors),
                "tests": [{"category": t.category, "name": t.name, "status": t.status,
                           "gpus": {str(k): v for k, v in sorted(t.gpus.items())},
                           "messages": list(t.messages)} for t in self.tests]}


def parse_diag(text: str) -> DcgmDiag:
    """Parse ``dcgmi diag`` text or JSON output (auto-detected); see the module docstring."""
    text = as_text(text, "dcgmi diag output", MAX_INPUT_CHARS, MAX_LINES, DcgmiParseError)
    if not (text := text.replace("\x00", "")).strip():
        raise DcgmiParseError("dcgmi diag output is empty")
    diag = DcgmDiag()
    docs, other = _json_documents(text)
    if docs:
        for doc in docs:
            _add_doc(diag, doc, "$")
        _Text(scratch := DcgmDiag()).feed(other.splitlines())
        diag.errors += scratch.errors
        return diag
    if _JSON_START.search(text) and any(f'"{key}"' in text for key in _DIAG_KEYS):
        raise DcgmiParseError("dcgmi diag JSON document is cut short or not valid JSON")
    streams: dict[str, list[str]] = {}
    for line in text.splitlines():  # srun --label: one stream per task
        task = _TASK.match(line.lstrip())
        streams.setdefault(task.group(0) if task else "", []).append(
            line.lstrip()[task.end():] if task else line)
    found = False
    for key in sorted(streams, key=lambda k: (len(k), k)):
        found = _Text(diag).feed(streams[key]) or found
    if not found and not diag.errors:
        raise DcgmiParseError("not dcgmi diag output: no result table, JSON document or 'Error:' line")
    return diag


class _Text:
    """Reads the lines of one stream, adding tests/metadata/errors/runs to ``diag``."""

    def __init__(self, diag: DcgmDiag) -> None:
        self.diag = diag
        self.anchored = self.run_open = self.found = self.error_open = False
        self.category: str | None = None
        self.test: DcgmTest | None = None
        self.msg: tuple[str, str | None, DcgmTest | None, list[str]] | None = None
        self.meta_key: str | None = None
        self.meta: dict[str, str] = {}

    def feed(self, lines: list[str]) -> bool:
        for raw in lines:
            line = raw.strip()
            if not line.startswith(("|", "+")):
                self.end_table()
                self.free_text(line)
                continue
            self.error_open = False
            if category := _CATEGORY.match(line):
                self.flush()
                self.open_run()
                self.category, self.test, self.meta_key = category.group("name").strip(), None, None
            elif _BORDER.match(line):
                self.flush()
                if "=" not in line:
                    self.end_table()
            else:
                self.row(line)
        self.end_table()
        return self.found

    def open_run(self) -> None:
        self.anchored = self.found = True
        if not self.run_open:
            self.run_open, self.meta = True, {}
            self.diag.runs += 1

    def end_table(self) -> None:
        self.flush()
        for key, value in self.meta.items():
            _merge_meta(self.diag.metadata, key, value)
        self.anchored, self.run_open, self.meta = False, False, {}
        self.category = self.test = self.meta_key = None

    def row(self, line: str) -> None:
        body = line[1:-1] if line.endswith("|") and len(line) > 1 else line[1:]
        name, sep, raw = body.partition("|")
        if not sep:
            return
        name, raw = name.strip(), raw[1:] if raw.startswith(" ") else raw
        value = raw.strip()
        if name == "Diagnostic" and value == "Result":
            self.end_table()
            self.open_run()
            return
        if not self.anchored and not (name and value and _status(value)[0] != "unknown"):
            return  # not (yet) inside a diag table: discovery tables, banners
        self.open_run()
        label = _MSG.match(name)
        if label:
            self.flush()
            entity = re.sub(r"\s", "", label.group("ent") or "") or None
            self.msg = (label.group("kind").capitalize(), entity, self.test, [raw])
        elif not name:
            self.nameless(value, raw)
        elif (self.category or "").lower() == "metadata" or _META.search(name):
            self.flush()
            self.meta[name] = value
            self.meta_key, self.test = name, None
        else:
            self.flush()
            self.test = DcgmTest(self.category, name, *_status(value))
            self.meta_key = None
            self.diag.tests.append(self.test)

    def nameless(self, value: str, raw: str) -> None:
        """A row with an empty first cell: entity result, message continuation, more GPUs, metadata."""
        test, entity = self.test, _ENTITY.match(value)
        status, gpus = _status(value) if test is not None and self.msg is None else ("unknown", {})
        if entity and test is not None:
            self.flush()
            status = _WORDS.get(entity.group("st").strip().lower(), "unknown")
            if entity.group("grp").upper() == "GPU":
                _set_gpu(test, int(entity.group("id")), status)
            test.status = _worst(test.status, status)
        elif self.msg is not None:
            self.msg[3].append(raw)
        elif test is not None and value and status != "unknown":
            test.status = _worst(test.status, status)
            for gpu, gpu_status in gpus.items():
                _set_gpu(test, gpu, gpu_status)
        elif self.meta_key is not None and value:
            if len(self.meta[self.meta_key]) < MAX_TEXT_CHARS:
                self.meta[self.meta_key] = f"{self.meta[self.meta_key]} {value}"
        elif test is not None and value:
            self.msg = ("", None, test, [raw])

    def flush(self) -> None:
        if self.msg is None:
            return
        kind, entity, owner, chunks = self.msg
        self.msg = None
        if not (text := _join_chunks(chunks)):
            return
        if owner is None:  # a label row with no test row before it
            owner = self.test = DcgmTest(self.category, kind, _LABEL_STATUS[kind])
            self.diag.tests.append(owner)
        _add_message(owner, kind, entity, text)

    def free_text(self, line: str) -> None:
        if line and _ERROR.match(line):
            self.error_open = len(self.diag.errors) < MAX_ERRORS
            self.diag.errors += [line] if self.error_open else []
        elif line and self.error_open and not _NOT_MORE.search(line):
            if len(self.diag.errors[-1]) < MAX_TEXT_CHARS:
                self.diag.errors[-1] += " " + line
        else:
            self.error_open = False


def _status(value: str) -> tuple[str, dict[int, str]]:
    """``"Fail - GPU: 0"`` -> ("fail", {0: "fail"}); ``"Pass - All"`` -> ("pass", {})."""
    found = _CELL.match(value.strip())
    status = _WORDS.get((found.group("st") if found else value).strip().lower(), "unknown")
    ids = found.group("ids") if found and status != "unknown" else None
    return status, {int(i): status for i in re.findall(r"[0-9]{1,5}", ids or "")}


def _join_chunks(chunks: list[str]) -> str:
    """Re-join a cell wrapped every 45 characters (padding restores a space cut at a chunk's end)."""
    parts = [c.rstrip() for c in chunks]
    parts = [p.ljust(_CHUNK) if i < len(parts) - 1 else p for i, p in enumerate(parts)]
    return " ".join("".join(parts).split())


def _json_documents(text: str) -> tuple[list[dict], str]:
    """DCGM diag JSON objects that start a line, and the text outside them."""
    return json_objects(text, _is_diag_doc, "dcgmi diag output", DcgmiParseError)


def _is_diag_doc(obj: object) -> bool:
    return isinstance(obj, dict) and (any(k in obj for k in _DIAG_KEYS) or "iterations" in obj)


def _typed(value: Any, types: type | tuple[type, ...], path: str, default: Any = None) -> Any:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, types):
        raise DcgmiParseError(f"dcgmi diag JSON: {path} has the wrong type ({type(value).__name__})")
    return value


def _text(value: Any, path: str) -> str | None:
    if isinstance(value, list):
        return ", ".join(str(_typed(v, (str, int), path)) for v in value if v is not None) or None
    found = _typed(value, (str, int, float), path)
    return None if found is None else str(found)


def _items(container: dict, key: str, path: str) -> list[tuple[str, Any]]:
    """(path, item) for the non-null items of the list ``container[key]`` (absent -> none)."""
    values = _typed(container.get(key), list, f"{path}.{key}", [])
    return [(f"{path}.{key}[{i}]", v) for i, v in enumerate(values) if v is not None]


def _add_doc(diag: DcgmDiag, doc: dict, path: str) -> None:
    if doc.get("iterations") is not None:
        for where, item in _items(doc, "iterations", path):
            _add_doc(diag, _typed(item, dict, where), where)
        if (_text(doc.get("Overall Result"), f"{path}.Overall Result") or "").lower() == "fail":
            reason = _text(doc.get("warning"), f"{path}.warning")
            diag.errors.append("Overall Result: Fail" + (f": {reason}" if reason else ""))
        return
    key = next((k for k in _DIAG_KEYS if k in doc), None)
    if doc.get("DCGM Diagnostic") == "DCGM Multi-Node Diagnostic":
        raise DcgmiParseError("a dcgmi mndiag (multi-node) document: judge it with `healthcheck fabric mndiag`")
    if key is None:
        raise DcgmiParseError(f"dcgmi diag JSON: {path} has neither 'iterations' nor 'DCGM Diagnostic'")
    body = _typed(doc[key], dict, f"{path}.{key}", {})
    diag.runs += 1
    for src, where in ((body, f"{path}.{key}"), (doc, path)):
        if (error := _text(src.get("runtime_error"), f"{where}.runtime_error")) \
                and len(diag.errors) < MAX_ERRORS and error not in diag.errors:
            diag.errors.append(error)
        extra = _typed(src.get("metadata"), dict, f"{where}.metadata", {})
        pairs = [("DCGM Version", src.get("version")), *extra.items(),
                 ("Driver Version Detected", src.get("Driver Version Detected")),
                 ("GPU Device IDs Detected", src.get("GPU Device IDs"))]
        for name, value in pairs:
            if not isinstance(value, dict) and (found := _text(value, f"{where}.{name}")) is not None:
                _merge_meta(diag.metadata, "DCGM Version" if name == "version" else name, found)
        for gpath, group in _items(src, "entity_groups", where):
            group = _typed(group, dict, gpath)
            kind = _text(group.get("entity_group"), f"{gpath}.entity_group") or "GPU"
            ids = [_text(_typed(e, dict, epath).get("device_id"), f"{epath}.device_id")
                   for epath, e in _items(group, "entities", gpath)]
            if any(ids):
                _merge_meta(diag.metadata, f"{kind} Device IDs Detected", ", ".join(i for i in ids if i))
    for cpath, cat in _items(body, "test_categories", f"{path}.{key}"):
        cat = _typed(cat, dict, cpath)
        category = _text(cat.get("category"), f"{cpath}.category")
        for tpath, test in _items(cat, "tests", cpath):
            test = _typed(test, dict, tpath)
            out = DcgmTest(category, _text(test.get("name"), f"{tpath}.name") or "?", "skip")
            summary = _typed(test.get("test_summary"), dict, f"{tpath}.test_summary")
            results = _items(test, "results", tpath)  # the summary last: its messages repeat theirs
            results += [(f"{tpath}.test_summary", summary)] if summary else []
            statuses = [_add_result(out, _typed(r, dict, rpath), rpath) for rpath, r in results]
            out.status = max(statuses, key=_RANK.__getitem__, default="skip")
            diag.tests.append(out)


def _add_result(test: DcgmTest, result: dict, path: str) -> str:
    """Fold one JSON result (DCGM 3 ``gpu_ids``, DCGM 4 entity, or a test summary) into ``test``."""
    status = _WORDS.get((_text(result.get("status"), f"{path}.status") or "").strip().lower(), "unknown")
    gpus: list[int] = []
    entity = None
    if "entity_id" in result:
        group = _text(result.get("entity_group"), f"{path}.entity_group") or "GPU"
        number = _typed(result.get("entity_id"), int, f"{path}.entity_id")
        if number is not None:
            entity = f"{group}{number}"
            gpus += [number] if group.upper() == "GPU" else []
    else:
        ids = result.get("gpu_ids", result.get("gpu_id"))
        for token in re.split(r"[,\s]+", _text(ids, f"{path}.gpu_ids") or ""):
            if token and not re.fullmatch(r"[0-9]{1,5}", token):
                raise DcgmiParseError(f"dcgmi diag JSON: {path}.gpu_ids has a bad GPU id {token[:20]!r}")
            gpus += [int(token)] if token else []
        entity = f"GPU{gpus[0]}" if isinstance(ids, int) and gpus else None
    for gpu in gpus:
        _set_gpu(test, gpu, status)
    info = result.get("info")
    notes = [("Warning", where, w.get("warning") if isinstance(w, dict) else w)
             for where, w in _items(result, "warnings", path)]
    notes += [("Info", f"{path}.info", i) for i in (info if isinstance(info, list) else [info])]
    for kind, where, note in notes:
        if found := _text(note, where):
            _add_message(test, kind, entity, found)
    return status


def _add_message(test: DcgmTest, kind: str, entity: str | None, text: str) -> None:
    text = " ".join(text.split())
    message = ": ".join(part for part in (kind, entity, text) if part)
    if len(test.messages) < MAX_MESSAGES and message not in test.messages and \
            not (entity is None and any(m.endswith(text) for m in test.messages)):
        test.messages.append(message)


def _set_gpu(test: DcgmTest, gpu: int, status: str) -> None:
    test.gpus[gpu] = _worst(test.gpus.get(gpu, "info"), status)


def _worst(a: str, b: str) -> str:
    return a if _RANK.get(a, 3) >= _RANK.get(b, 3) else b


def _merge_meta(metadata: dict[str, str], key: str, value: str) -> None:
    old = metadata.setdefault(key, value)
    if len(old) < MAX_TEXT_CHARS and value not in old.split("; "):
        metadata[key] = f"{old}; {value}"
