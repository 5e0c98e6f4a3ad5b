"""Parse ``nvbandwidth`` output (text, or ``--json``/``-j``) into one matrix per test case.

The text output prints, per test case::

    Running device_to_device_memcpy_write_ce.
    memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)
              0         1         2
    0      0.00    276.07    276.36          <- row label, then one value per column ("N/A" allowed)
    1    276.19      0.00    276.29
    ...
    SUM device_to_device_memcpy_write_ce 15449.46

and instead of a matrix ``Waived: <why>`` (too few GPUs, no peer access) or ``Error: <why>``. The
header (``nvbandwidth Version: v0.x``, ``Driver Version: 550.54.15``, ``CUDA Runtime Version: 12040``,
``Device 0: NVIDIA H100 80GB HBM3 (00000000:1b:00)``) is read when present.

A multi-node run (nvbandwidth built with ``MULTINODE=1``, one MPI rank per GPU, the ``multinode_*`` test
cases) prints one ``Process 7 (gb-tray02): device 3: HGX GB200 (00000019:01:00)`` line per rank instead of
the ``Device`` lines, and matrices whose labels are ranks: :attr:`NvbResult.processes` maps each rank to
its host and local device. The bisect test labels its rows ``<rank>-><peer>``: the row is the rank.
``--json`` output
(``{"nvbandwidth": {"testcases": [{"name", "status", "bandwidth_description", "bandwidth_matrix",
"sum"}, ...]}}``) gives the same result.

Result: :class:`NvbResult` with one :class:`NvbTest` per test case in the order run; a test's
``matrix[r][c]`` is the value of row label ``rows[r]`` and column label ``columns[c]`` (``None`` for
``N/A``), its ``unit`` the last parenthesised word of the description (``GB/s``; ``ns`` for the latency
tests), and ``row_kind``/``column_kind`` what the labels count (``GPU``, ``CPU``). A diagonal of 0.00
(older versions) and of ``N/A`` (newer ones) both mean "not measured": :func:`pairs` leaves them out.

Pasted outputs are tolerated: prompt lines, notes, blank lines and other text between blocks are
skipped; a first matrix whose ``Running <testcase>.`` line was cut takes its name from the ``SUM`` line
that follows it. Input with no test case, a matrix row whose width differs from its header, or a value that
is not a number raises ParseError naming the line.

Bounds: input over MAX_INPUT_CHARS or MAX_LINES, a line over MAX_LINE_CHARS, a matrix wider than
MAX_DIM, or more than MAX_TESTS test cases is refused with ParseError. Linear time: one pass, one
``split()`` per line, anchored regular expressions without nested quantifiers.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from healthcheck.parsers import ParseError, as_text

MAX_INPUT_CHARS = 16 * 1024 * 1024
MAX_LINES = 200_000
MAX_LINE_CHARS = 64 * 1024
MAX_DIM = 512  # GPUs (or CPUs) per matrix side: a node has a few dozen at most
MAX_TESTS = 1000
MAX_JSON_CONTAINERS = 300_000

_RUNNING = re.compile(r"^\s*Running\s+([A-Za-z0-9_]{1,200})\s*\.?\s*$")
_SUM = re.compile(r"^\s*SUM\s+([A-Za-z0-9_]{1,200})\s+([0-9]{1,12}(?:\.[0-9]{1,12})?)\s*$")
_STATUS = re.compile(r"^\s*(Waived|Error|Not Found)\s*[:.]\s*(.*)$", re.IGNORECASE)
_DEVICE = re.compile(r"^\s*Device\s+([0-9]{1,4}):\s*(.{1,200}?)\s*$")
_PROCESS = re.compile(r"^\s*Process\s+([0-9]{1,5})\s+\(([^()]{1,200})\)\s*:"
                      r"\s*device\s+([0-9]{1,4})\s*:\s*(.{1,200}?)\s*$")
_LABEL = re.compile(r"^[0-9]{1,4}$")  # ASCII digits only: str.isdigit() takes '²', which int() refuses
_ROW_LABEL = re.compile(r"^([0-9]{1,4})(?:->[0-9]{1,4})?$")
_ROW_KIND = re.compile(r"([A-Za-z]{1,16})\(row\)")
_COLUMN_KIND = re.compile(r"([A-Za-z]{1,16})\(column\)")
_UNIT = re.compile(r"\(([^()]{1,16})\)\s*$")
_NUMBER = re.compile(r"^-?[0-9]{1,12}(?:\.[0-9]{1,12})?(?:[eE][-+]?[0-9]{1,3})?$")
_HEADER_KEYS = {"nvbandwidth version": "version", "driver version": "driver",
                "cuda runtime version": "cuda_runtime", "cuda driver version": "cuda_runtime"}


@dataclass
class NvbTest:
    """One test case: its matrix (rows x columns, None where not measured) or why it has none."""

    name: str
    status: str = "passed"  # "passed" | "waived" | "error" | "not_found" | "incomplete"
    description: str | None = None
    unit: str | None = None
    row_kind: str | None = None  # "GPU" / "CPU": what the row labels count
    column_kind: str | None = None
    rows: list[int] = field(default_factory=list)
    columns: list[int] = field(default_factory=list)
    matrix: list[list[float | None]] = field(default_factory=list)
    sum: float | None = None
    message: str | None = None

    def value(self, row: int, column: int) -> float | None:
        """The value at row label ``row`` and column label ``column`` (None: absent / N/A)."""
        try:
            return self.matrix[self.rows.index(row)][self.columns.index(column)]
        except (ValueError, IndexError):
            return None


@dataclass
class NvbResult:
    version: str | None = None
    driver: str | None = None
    cuda_runtime: str | None = None
    devices: dict[int, str] = field(default_factory=dict)  # "NVIDIA H100 80GB HBM3 (00000000:1b:00)"
    # multi-node runs: rank -> (host, local device index, "HGX GB200 (00000008:01:00)")
    processes: dict[int, tuple[str, int, str]] = field(default_factory=dict)
    tests: list[NvbTest] = field(default_factory=list)

    def test(self, name: str) -> NvbTest | None:
        return next((t for t in self.tests if t.name == name), None)


def pairs(test: NvbTest) -> list[tuple[int, int, float]]:
    """The measured ``(row, column, value)`` entries: N/A left out, and for a GPU x GPU matrix the
    diagonal too (nvbandwidth prints 0.00 or N/A there: a GPU is not its own peer)."""
    out = []
    same = test.row_kind is not None and test.row_kind == test.column_kind
    for r, row in zip(test.rows, test.matrix):
        for c, value in zip(test.columns, row):
            if value is None or (same and r == c):
                continue
            out.append((r, c, value))
    return out


def _description(test: NvbTest, line: str) -> None:
    test.description = line.strip()
    row, column = _ROW_KIND.search(line), _COLUMN_KIND.search(line)
    test.row_kind = row.group(1).upper() if row else None  # None: one row of all GPUs, or labelled pairs
    test.column_kind = column.group(1).upper() if column else None
    unit = _UNIT.search(line)
    if unit:
        test.unit = unit.group(1).strip()


def _value(token: str, where: str) -> float | None:
    if token.upper() in ("N/A", "NA", "-"):
        return None
    if not _NUMBER.match(token):
        raise ParseError(f"{where}: {token[:40]!r} is not a bandwidth value (a number or N/A)")
    number = float(token)
    if number < 0 or number != number or number == float("inf"):
        raise ParseError(f"{where}: {token[:40]!r} is not a bandwidth value (negative or not finite)")
    return number


def _labels(tokens: list[str]) -> list[int] | None:
    """Column labels (``0 1 2 ...``) or None when the line is not a header."""
    if not tokens or len(tokens) > MAX_DIM or not all(_LABEL.match(t) for t in tokens):
        return None
    return [int(t) for t in tokens]


def parse_nvbandwidth(text: str | bytes) -> NvbResult:
    """Parse nvbandwidth's text or JSON output (detected: JSON starts with ``{``)."""
    what = "nvbandwidth"
    text = as_text(text, what, MAX_INPUT_CHARS, MAX_LINES)
    if not text.strip():
        raise ParseError(f"{what}: empty output")
    if text.lstrip().startswith("{"):
        return _parse_json(text, what)
    result = NvbResult()
    test: NvbTest | None = None
    in_matrix = False
    previous = ""  # the last text line of a test case before its matrix
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{what}: line {number}"
        if len(line) > MAX_LINE_CHARS:
            raise ParseError(f"{where} is {len(line)} characters long, over the limit of {MAX_LINE_CHARS}")
        running = _RUNNING.match(line)
        if running:
            if len(result.tests) >= MAX_TESTS:
                raise ParseError(f"{what}: more than {MAX_TESTS} test cases")
            test = NvbTest(running.group(1), status="incomplete")
            result.tests.append(test)
            in_matrix, previous = False, ""
            continue
        total = _SUM.match(line)
        if total:
            named = result.test(total.group(1)) or test
            if named is not None:
                if not named.name:  # a matrix whose "Running <testcase>." line was cut: the SUM names it
                    named.name = total.group(1)
                named.sum = float(total.group(2))
            in_matrix = False
            continue
        if test is None:
            if "(row)" in line and "(column)" in line:  # a matrix without its "Running" line (cut above)
                test = NvbTest("", status="incomplete")
                result.tests.append(test)
                _description(test, line)
                continue
            _header_line(result, line)
            continue
        status = _STATUS.match(line)
        if status:
            word = status.group(1).lower().replace(" ", "_")
            test.status = "waived" if word == "waived" else word
            test.message = status.group(2).strip() or None
            in_matrix = False
            continue
        tokens = line.split()
        if not tokens:
            in_matrix = False
            continue
        if "(row)" in line and "(column)" in line:
            _description(test, line)
            test.columns, test.rows, test.matrix, in_matrix = [], [], [], False
            continue
        if test.description is None:
            labels = _labels(tokens)
            if labels is not None and previous:  # a description without "(row)"/"(column)": the line above
                _description(test, previous)
                test.columns, test.rows, test.matrix, in_matrix = labels, [], [], True
            previous = line
            continue  # text between "Running" and the description (warnings)
        if not test.columns:
            labels = _labels(tokens)
            if labels is not None:
                test.columns, in_matrix = labels, True
            continue
        if not in_matrix:
            continue
        label = _ROW_LABEL.match(tokens[0])
        if not label:
            in_matrix = False  # the matrix ended (a note, a prompt)
            continue
        if len(tokens) - 1 != len(test.columns):
            raise ParseError(f"{where}: row {tokens[0]} has {len(tokens) - 1} values for "
                             f"{len(test.columns)} columns (a cut or damaged matrix)")
        if len(test.rows) >= MAX_DIM:
            raise ParseError(f"{where}: more than {MAX_DIM} matrix rows")
        test.rows.append(int(label.group(1)))
        test.matrix.append([_value(t, where) for t in tokens[1:]])
        if test.status == "incomplete":
            test.status = "passed"
    if not result.tests:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise ParseError(f"{what}: no 'Running <testcase>.' line found (first line: {first[:80]!r})")
    if any(not item.name for item in result.tests):
        raise ParseError(f"{what}: a matrix without its testcase name (its 'Running <testcase>.' line was cut "
                         "and no 'SUM <testcase> <value>' line follows it)")
    for item in result.tests:
        if item.status == "passed" and not item.rows:
            item.status = "incomplete"
    return result


def _header_line(result: NvbResult, line: str) -> None:
    process = _PROCESS.match(line)
    if process:
        if len(result.processes) < MAX_DIM:
            result.processes[int(process.group(1))] = (process.group(2).strip(), int(process.group(3)),
                                                       process.group(4))
        return
    device = _DEVICE.match(line)
    if device:
        result.devices[int(device.group(1))] = device.group(2)
        return
    key, sep, value = line.partition(":")
    field_name = _HEADER_KEYS.get(key.strip().lower()) if sep else None
    if field_name and value.strip() and getattr(result, field_name) is None:
        setattr(result, field_name, value.strip()[:100])


def _parse_json(text: str, what: str) -> NvbResult:
    containers = text.count("{") + text.count("[")
    if containers > MAX_JSON_CONTAINERS:
        raise ParseError(f"{what}: {containers} JSON objects/arrays, over the limit of {MAX_JSON_CONTAINERS}")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"{what}: not valid JSON ({str(exc)[:120]})") from None
    root = doc.get("nvbandwidth") if isinstance(doc, dict) else None
    if not isinstance(root, dict):
        raise ParseError(f"{what}: JSON without an 'nvbandwidth' object (not nvbandwidth --json output)")
    result = NvbResult(version=_str(root.get("version")), driver=_str(root.get("Driver Version")),
                       cuda_runtime=_str(root.get("CUDA Runtime Version")))
    cases = root.get("testcases", [])
    if not isinstance(cases, list) or not cases:
        error = _str(root.get("error"))
        raise ParseError(f"{what}: no test cases in the JSON output" + (f" (error: {error})" if error else ""))
    if len(cases) > MAX_TESTS:
        raise ParseError(f"{what}: more than {MAX_TESTS} test cases")
    for i, case in enumerate(cases):
        where = f"{what}: testcases[{i}]"
        if not isinstance(case, dict) or not isinstance(case.get("name"), str):
            raise ParseError(f"{where}: a test case needs a 'name'")
        status = (_str(case.get("status")) or "").lower().replace(" ", "_")
        test = NvbTest(case["name"][:200], status=status if status in (
            "passed", "waived", "error", "not_found") else "incomplete",
            message=_str(case.get("error")))
        if isinstance(case.get("bandwidth_description"), str):
            _description(test, case["bandwidth_description"])
        matrix = case.get("bandwidth_matrix")
        if matrix is not None:
            if not isinstance(matrix, list) or len(matrix) > MAX_DIM:
                raise ParseError(f"{where}: bandwidth_matrix must be a list of at most {MAX_DIM} rows")
            width = None
            for r, row in enumerate(matrix):
                if not isinstance(row, list) or len(row) > MAX_DIM or (width is not None and len(row) != width):
                    raise ParseError(f"{where}: bandwidth_matrix row {r} is not a list of the same "
                                     "width as the others")
                width = len(row)
                test.matrix.append([_value(str(v), f"{where} row {r}") for v in row])
            test.rows = list(range(len(test.matrix)))
            test.columns = list(range(width or 0))
        if isinstance(case.get("sum"), (int, float)) and not isinstance(case.get("sum"), bool):
            test.sum = float(case["sum"])
        if test.status == "passed" and not test.rows:
            test.status = "incomplete"
        result.tests.append(test)
    return result


def _str(value: object) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    return str(value)[:200] or None


def to_dict(result: NvbResult) -> dict:
    """JSON-ready form (for ``healthcheck parse nvbandwidth --format json``)."""
    return {"version": result.version, "driver": result.driver, "cuda_runtime": result.cuda_runtime,
            "devices": {str(k): v for k, v in sorted(result.devices.items())},
            "processes": {str(k): {"host": host, "device": dev, "name": name}
                          for k, (host, dev, name) in sorted(result.processes.items())},
            "tests": [{"name": t.name, "status": t.status, "description": t.description, "unit": t.unit,
                       "row_kind": t.row_kind, "column_kind": t.column_kind, "rows": t.rows,
                       "columns": t.columns, "matrix": t.matrix, "sum": t.sum, "message": t.message}
                      for t in result.tests]}
