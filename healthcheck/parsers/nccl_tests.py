"""Parse nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``sendrecv_perf``, ``broadcast_perf``, ...; rccl-tests prints the same) into
:class:`NcclResult`. What rank 0 prints::

    # nccl-tests version 2.17.8 nccl-headers=22606 nccl-library=22606        <- 2.13+ only
    # Collective test starting: all_reduce_perf                             <- 2.13+ only
    # nThread 1 nGpus 8 minBytes 8 maxBytes 4294967296 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
    # Using devices
    #  Rank  0 Group  0 Pid  54740 on     thanos device  0 [0x07] NVIDIA A100-SXM4-80GB
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
               8             2     float     sum      -1    40.12    0.00    0.00      0    38.85    0.00    0.00      0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 66.2058

Variants handled:

- headers: old (no ``agg iters``/``graph``), newer (``agg iters``, ``graph``, ``unalign``), 2.13+
  ``# nccl-tests version`` / ``# Collective test starting:`` lines; the ``# nThread`` line's pairs go to
  ``header`` (with ``nccl-headers``, ``nccl-library``, ``collective``);
- rank lines with or without ``Group``, bus ids ``[0x07]`` or ``[0009:01:00]``;
- columns come from the title line: ``time``/``cputime``, ``#wrong`` (new) or ``error`` (old: max
  absolute error such as ``2e-07``, kept in ``NcclSide.error`` with ``wrong`` None), per-iteration
  columns (``i_min`` ... ``i_cv%``, ignored), a trailing ``timestamp``; untitled rows are guessed;
- rows with or without ``redop`` (blank in old alltoall) and ``root`` (``none``/``-1`` for alltoall,
  sendrecv); ``#wrong`` as an integer, ``N/A`` (None) or ``%g`` exponent (``1.04858e+06`` -> 1048580);
  ``nan``/``inf`` -> None; a row cut after out-of-place keeps in-place empty, with a warning;
- noise: ``host:pid:tid [d] NCCL INFO`` lines (also glued to a half-printed row whose numbers follow on
  the next line), launcher lines, prompts, ``[1,0]<stdout>:`` / ``0: `` prefixes, CRLF;
- ``errors``: ``Test NCCL|CUDA failure``, `` .. host pid N: Test failure``, ``Invalid number of GPUs``,
  MPI aborts, failed/cancelled/OOM-killed Slurm tasks, crashes, summary lines saying ``FAILED``, and
  ``no results table`` when nothing else explains an output without rows. ``warnings``: ``NCCL WARN``
  lines (benign ones occur in passing runs), ``# error:`` lines, other ``srun``/``mpirun`` error and
  warning lines, unreadable rows, a missing or repeated summary. A digit run longer than any nccl-tests
  prints (over 20 digits, where the parser reads it as an integer) makes its row unreadable, its rank line
  skipped (a warning) or its ``Out of bounds`` summary an error: never int()'s plain ValueError.

Raises :class:`NcclParseError` for input that is not nccl-tests output (not text, empty, nothing of the
above) or over MAX_INPUT_CHARS / MAX_LINES; longer lines than MAX_LINE_CHARS are skipped (a warning).

Cost: linear, a few microseconds a line (benchmarks/bench_nccl_parser.py), memory proportional to what
is kept: the lines are walked one at a time, rows are slotted objects sharing one string per distinct
type/redop and one float per repeated value (up to _CACHE_SIZE distinct tokens), and at most
MAX_MESSAGES errors and warnings are kept (then one more line says how many were dropped). Most lines
never reach the costlier expressions: _LOG runs only on lines holding ``NCCL ``, _FAIL only on lines
holding one of its literal parts (:func:`_may_fail`), numbers are read by float() over _NUM's characters.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, astuple, dataclass, field

from . import MAX_DIGITS, ParseError, as_text


class NcclParseError(ParseError):
    """Not nccl-tests output at all (empty, binary, no header/rows/errors)."""


@dataclass(slots=True)
class NcclRank:
    rank: int
    host: str | None
    device: int | None
    busid: str | None
    name: str | None
    group: int | None = None
    pid: int | None = None


@dataclass(slots=True)
class NcclSide:
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    error: float | None = None  # old format: max absolute error (``wrong`` is then None)


@dataclass(slots=True)
class NcclRow:
    size_bytes: int
    count: int | None
    type: str | None
    redop: str | None
    root: int | None
    oop: NcclSide
    ip: NcclSide


@dataclass
class NcclResult:
    rows: list[NcclRow]
    ranks: list[NcclRank]
    errors: list[str]
    warnings: list[str]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    out_of_bounds_ok: bool | None
    version: str | None
    header: dict[str, str]

    def to_dict(self) -> dict:
        """JSON-ready (NaN/inf -> None): the contract keys plus warnings, version, header,
        out_of_bounds_ok, and ``error`` per side / ``group``, ``pid`` per rank."""
        return _clean(asdict(self))

    @property
    def wrong_total(self) -> int:
        """Sum of every numeric ``#wrong`` (out-of-place and in-place); 0 when there is none."""
        return sum(s.wrong for r in self.rows for s in (r.oop, r.ip) if s.wrong is not None)

    def busbw_at_large_sizes(self, min_bytes: int | None = None, top: int = 3) -> float | None:
        """Mean of max(oop, ip) busbw over rows >= ``min_bytes``, else over the ``top`` largest rows."""
        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        points = [(r.size_bytes, max(b)) for r in self.rows
                  if (b := [v for v in (r.oop.busbw_gbps, r.ip.busbw_gbps) if v is not None])]
        chosen = ([b for size, b in points if size >= min_bytes] if min_bytes is not None
                  else [b for _, b in sorted(points, key=lambda p: p[0], reverse=True)[:top]])
        return sum(chosen) / len(chosen) if chosen else None


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


MAX_INPUT_CHARS, MAX_LINES, MAX_LINE_CHARS, MAX_ROW_NUMBERS = 64 << 20, 1_000_000, 64 << 10, 256
MAX_MESSAGES = 1000  # errors, and warnings, kept (then one line says how many more there were)
_CACHE_SIZE = 4096   # distinct tokens remembered per parse (a real output repeats a few hundred)
_NUM = r"[-+]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?"  # possessive: nothing after takes a digit
_NUMBER = re.compile(rf"^{_NUM}$", re.ASCII)
_NUM_CHARS = "0123456789.eE+-"  # every character _NUM can match
_MISSING = {"n/a", "nan", "-nan", "+nan", "inf", "-inf", "+inf"}
_WORD = re.compile(r"^[A-Za-z_][\w.]*$", re.ASCII)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}(?:\.\d+)?$", re.ASCII)
_STAMP = re.compile(f"{_DATE.pattern}|{_CLOCK.pattern}", re.ASCII)
_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s{0,8}\d{1,6}: )")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(.*)$")
_KEYVAL = re.compile(r"(?<!\S)(\S+)=(\S+)")  # from a token's start only (same matches)
_COLLECTIVE = re.compile(r"^#\s*Collective test (?:starting|concluded)\s*:\s*(\S+)")
_PARAMS = re.compile(r"^#\s*nThread\s+\d")
# Linear: no adjacent overlapping quantifiers; (?<! ): the shortest key never ends in a blank.
_PARAM = re.compile(r"([A-Za-z][A-Za-z_ ]{0,40}?)(?<! )(?:\s*+:)?\s++(-?\d\S*)")
_RANK = re.compile(r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)"
                   r"\s+on\s+(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+\[(?P<busid>[^\]]*)\]\s*(?P<name>.*\S)?\s*$")
_RANK_LOOSE = re.compile(r"^#\s*Rank\s+(\d+)\b")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.IGNORECASE)
_AVG = re.compile(rf"^#\s*Avg bus bandwidth\s*:\s*({_NUM}|[-+]?nan|[-+]?inf)\s*(OK|FAILED)?", re.IGNORECASE)
_LOG = re.compile(r"(?<!\S)(\S{0,256}?):\d+:\d+ \[\d+\] (?:\S+ )?NCCL (INFO|WARN|TRACE|ABORT)\b")
_GLUED_TAIL = re.compile(rf"^(?:{_NUM}|N/A)", re.ASCII)
_FAIL = re.compile(r"Test (?:NCCL |CUDA )?failure|Invalid number of GPUs|MPI_ABORT was invoked|mpirun noticed that"
                   r"|^srun: error: \S+: tasks? [\d,-]+: |^slurmstepd: error: \*\*\* (?:STEP|JOB) .*CANCELLED"
                   r"|^slurmstepd: error: Detected \d+ oom|Segmentation fault|core dumped|^terminate called after")
_LAUNCHER = re.compile(r"^(?:srun|slurmstepd|mpirun|prterun): (?:error|warning)\b", re.IGNORECASE)
_DEFAULT_SIDE = ("time", "algbw", "busbw", "#wrong")
_CODES = {"time": 1, "cputime": 1, "algbw": 2, "busbw": 3, "error": 4, "#wrong": 5, "wrong": 5}
_BAD = object()     # token cache: not a number
_UNSEEN = object()  # token cache: not looked at yet


class _BadRow(Exception):
    """Internal: a row-looking line whose numbers cannot be read (becomes a warning)."""


@dataclass
class _State:
    """Everything gathered while walking the lines."""
    rows: list[NcclRow] = field(default_factory=list)
    ranks: list[NcclRank] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    side: tuple[str, ...] = _DEFAULT_SIDE   # column names of one side, from the title line
    titled: bool = False                    # a column-title line was seen
    has_root: bool | None = None
    summaries: int = 0
    avg: float | None = None
    oob: int | None = None
    oob_ok: bool | None = None
    recognised: bool = False
    pending: tuple[list[str], list[str], str] | None = None  # a row's prefix, its numbers, the line
    rank_keys: dict[tuple, NcclRank] = field(default_factory=dict)  # ranks seen (a list scan is quadratic)
    values: dict[str, object] = field(default_factory=dict)  # token -> its value, None or _BAD (bounded)
    words: dict[str, object] = field(default_factory=dict)   # token -> itself when a _WORD, else False
    codes: dict[tuple, tuple] = field(default_factory=dict)  # a side's column names -> _CODES
    dropped: list[int] = field(default_factory=lambda: [0, 0])  # errors, warnings over MAX_MESSAGES

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_MESSAGES:
            self.errors.append(message)
        else:
            self.dropped[0] += 1

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_MESSAGES:
            self.warnings.append(message)
        else:
            self.dropped[1] += 1


def parse(text: str) -> NcclResult:
    """Rows, ranks, summary and error lines of one nccl-tests run; see the module docstring."""
    text = as_text(text, "nccl-tests output", MAX_INPUT_CHARS, MAX_LINES, NcclParseError)
    if not text.strip():
        raise NcclParseError("nccl-tests output is empty")
    st = _State()
    for number, raw in enumerate(_lines(text), start=1):
        if len(raw) > MAX_LINE_CHARS:
            st.warn(f"line {number} skipped: {len(raw)} characters, over {MAX_LINE_CHARS}")
            continue
        if "\x00" in raw or "\r" in raw:
            raw = raw.replace("\x00", "").replace("\r", "")
        tag = _TAG.match(raw)
        line = (raw[tag.end():] if tag else raw).rstrip()
        if line and not line.isspace():
            _line(st, line)
    _flush(st)
    if not st.recognised:
        raise NcclParseError("not nccl-tests output: no '# nThread' header, rank line, result row, summary, "
                             "'Test ... failure' or 'NCCL WARN' line")
    if not st.rows and not st.errors:
        st.error("no results table: the output ends before the first result row")
    elif st.rows and st.summaries == 0:
        st.warn("no '# Out of bounds values' / '# Avg bus bandwidth' summary: output cut or run aborted")
    if st.summaries > 1:
        st.warn(f"{st.summaries} summaries in one output: avg_busbw_gbps is the last one")
    for kept, dropped, what in ((st.errors, st.dropped[0], "errors"), (st.warnings, st.dropped[1], "warnings")):
        if dropped:
            kept.append(f"{dropped} more {what} not kept (the first {MAX_MESSAGES} are above)")
    return NcclResult(rows=st.rows, ranks=st.ranks, errors=st.errors, warnings=st.warnings,
                      avg_busbw_gbps=st.avg, out_of_bounds=st.oob, out_of_bounds_ok=st.oob_ok,
                      version=st.version, header=st.header)


def _lines(text: str):
    """``text.split("\n")`` one line at a time (no list of a million lines beside the text)."""
    start, find = 0, text.find
    while True:
        end = find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def _line(st: _State, line: str) -> None:
    stripped = line.strip()
    tokens = stripped.split()
    if st.pending and not stripped.startswith("#") and len(tokens) <= MAX_ROW_NUMBERS and _continues(tokens):
        st.pending[1].extend(tokens)
        if _complete(st, len(_strip_stamps(st.pending[1]))):
            _flush(st)
        return
    log = _LOG.search(stripped) if "NCCL " in stripped else None  # the expression needs " NCCL "
    if log is not None:  # a log line between a half-printed row and its numbers keeps the row pending
        if not (log.start() > 0 and _glued_row(st, stripped, log)) and log.group(2) in ("WARN", "ABORT"):
            st.recognised = True
            st.warn(stripped[log.start():])
        return
    if st.pending is not None:
        _flush(st)
    first = stripped[0]
    if first == "#":
        _comment(st, stripped)
    elif _may_fail(stripped) and _FAIL.search(stripped):
        st.recognised = True
        st.error(stripped)
    elif not ("0" <= first <= "9"):  # a result row starts with its size
        if _LAUNCHER.match(stripped):
            st.warn(stripped)  # e.g. "srun: error: ioctl(TIOCGWINSZ)": noise unless a task failed
    elif (start := _row_prefix(st, tokens)) is not None:
        body = _strip_stamps(tokens[start:])
        if _complete(st, len(body)):  # a whole row on one line: no need to keep it pending
            _add_row(st, tokens[:start], body, stripped)
        else:
            _row_line(st, tokens, stripped, start=start)


def _may_fail(line: str) -> bool:
    """False when _FAIL cannot match ``line`` (it holds none of the expression's literal parts)."""
    return ("failure" in line or "Invalid number of GPUs" in line or "MPI_ABORT" in line or "mpirun noticed" in line
            or "srun: error: " in line or "slurmstepd: error: " in line or "Segmentation fault" in line
            or "core dumped" in line or "terminate called after" in line)


def _glued_row(st: _State, line: str, log: re.Match) -> bool:
    """``<half row><host>:pid:tid [d] NCCL INFO ...``: keep the half row pending, drop the log text."""
    head = _GLUED_TAIL.match(log.group(1))
    row_text = line[:log.start()] + (head.group(0) if head else "")
    tokens = row_text.split()
    if _row_prefix(st, tokens) is None:
        return False
    _flush(st)
    if log.group(2) in ("WARN", "ABORT"):
        st.recognised = True
        st.warn(line[log.start() + (head.end() if head else 0):].strip())
    _row_line(st, tokens, row_text.strip(), force_pending=True)
    return True


def _comment(st: _State, line: str) -> None:
    if _PARAMS.match(line):
        st.recognised = True
        for key, value in _PARAM.findall(line[1:]):
            st.header[key.strip()] = value
    elif (found := _VERSION.match(line)) is not None:
        st.recognised = True
        st.version = found.group(1)
        st.header.update(_KEYVAL.findall(found.group(2)))
    elif (found := _COLLECTIVE.match(line)) is not None:
        st.recognised = True
        st.header["collective"] = found.group(1)
    elif (found := _RANK.match(line)) is not None:
        st.recognised = True
        if any(len(found[key] or "") > MAX_DIGITS for key in ("rank", "group", "pid", "device")):
            st.warn(f"rank line skipped: a number over {MAX_DIGITS} digits: {line[:200]}")
            return
        group = int(found["group"]) if found["group"] is not None else None
        rank = NcclRank(int(found["rank"]), found["host"], int(found["device"]), found["busid"] or None,
                        found["name"] or None, group=group, pid=int(found["pid"]))
        if st.rank_keys.setdefault(astuple(rank), rank) is rank:
            st.ranks.append(rank)
    elif (found := _RANK_LOOSE.match(line)) is not None:
        st.recognised = True
        if len(found.group(1)) > MAX_DIGITS:
            st.warn(f"rank line skipped: a number over {MAX_DIGITS} digits: {line[:200]}")
            return
        st.ranks.append(NcclRank(int(found.group(1)), None, None, None, None))
    elif (found := _OOB.match(line)) is not None:
        st.recognised = True
        if len(found.group(1)) > MAX_DIGITS:  # not a count nccl-tests prints: the summary cannot be read
            st.summaries += 1
            st.oob_ok = False
            st.error(f"unreadable summary (a count over {MAX_DIGITS} digits): {line[:200]}")
            return
        count = int(found.group(1))
        st.oob = count + (st.oob or 0)
        ok = count == 0 and (found.group(2) or "OK").upper() == "OK"
        st.oob_ok = ok and st.oob_ok is not False
        st.summaries += 1
        if not ok:
            st.error(line)
    elif (found := _AVG.match(line)) is not None:
        st.recognised = True
        st.avg = _number(found.group(1))
        if (found.group(2) or "").upper() == "FAILED":
            st.error(line)
    elif line[1:].lstrip().lower().startswith("error:"):
        st.warn(line)
    else:
        _titles(st, line[1:].split())


def _titles(st: _State, names: list[str]) -> None:
    """The column-title line: where the two column groups start and what each column is."""
    lowered = [n.lower() for n in names]
    if "size" not in lowered or not ({"algbw", "busbw"} & set(lowered)):
        return
    starts = [i for i, n in enumerate(lowered) if n in ("time", "cputime")]
    if not starts or len(names) > MAX_ROW_NUMBERS:
        return
    st.recognised = st.titled = True
    st.has_root = "root" in lowered[:starts[0]]
    end = starts[1] if len(starts) > 1 else len(lowered)
    st.side = tuple(n for n in lowered[starts[0]:end] if n != "timestamp")


def _row_prefix(st: _State, tokens: list[str]) -> int | None:
    """Index of the first body token when ``tokens`` start a row (size count type [redop]), else None.
    Type and redop are replaced by one shared string per distinct word (a million rows, two strings)."""
    if len(tokens) < 3 or not (tokens[0].isdigit() and tokens[1].isdigit() and tokens[0].isascii()
                               and tokens[1].isascii()):  # ^[0-9]+$, without an expression
        return None
    words = st.words
    kind = words.get(tokens[2]) or _word(st, tokens[2])
    if kind is False or kind.lower() in _MISSING:
        return None
    tokens[2] = kind
    if len(tokens) > 3 and (redop := words.get(tokens[3]) or _word(st, tokens[3])) is not False \
            and redop.lower() not in _MISSING:
        tokens[3] = redop
        return 4
    return 3


def _is_root(token: str) -> bool:
    """The same as matching ``^-?[0-9]+$`` (ASCII digits), faster."""
    return _is_int(token[1:] if token[:1] == "-" else token)


def _is_int(token: str) -> bool:
    """The same as matching ``^[0-9]+$`` (ASCII digits), faster."""
    return token.isdigit() and token.isascii()


def _word(st: _State, token: str):
    """``token`` (its shared copy) when it is a _WORD, else False; remembered for _CACHE_SIZE tokens."""
    found = st.words.get(token)
    if found is None:
        found = token if _WORD.match(token) else False
        if len(st.words) < _CACHE_SIZE:
            st.words[token] = found
    return found


def _row_line(st: _State, tokens: list[str], raw: str, force_pending: bool = False, start: int | None = None) -> None:
    if start is None:
        start = _row_prefix(st, tokens) or 3
    body = tokens[start:]
    st.pending = (tokens[:start], body, raw)
    if not force_pending and _complete(st, len(_strip_stamps(body))):
        _flush(st)


def _continues(tokens: list[str]) -> bool:
    """A line of only numbers / N/A / timestamp parts: the rest of a half-printed row."""
    return bool(tokens) and all(_NUMBER.match(t) or t.lower() in _MISSING or _STAMP.match(t) for t in tokens)


def _complete(st: _State, n: int) -> bool:
    return n >= 2 * len(st.side) + (1 if st.titled and st.has_root else 0)


def _strip_stamps(body: list[str]) -> list[str]:
    """Drop a trailing ``YYYY-mm-dd HH:MM:SS`` timestamp column (``body`` itself when there is none)."""
    end = len(body)
    if end and ":" in body[end - 1] and _CLOCK.match(body[end - 1]):
        end -= 1
    if end and "-" in body[end - 1] and _DATE.match(body[end - 1]):
        end -= 1
    return body if end == len(body) else body[:end]


def _flush(st: _State) -> None:
    """Turn the pending row (if any) into an NcclRow, or a warning when it cannot be read."""
    if st.pending is None:
        return
    prefix, body, raw = st.pending
    st.pending = None
    _add_row(st, prefix, _strip_stamps(body), raw)


def _add_row(st: _State, prefix: list[str], body: list[str], raw: str) -> None:
    try:
        row, complete = _build_row(st, prefix, body)
    except _BadRow as exc:
        st.warn(f"unreadable result row ({exc}): {raw[:200]}")
        return
    if not complete:
        st.warn(f"result row without in-place columns (output cut?): {raw[:200]}")
    st.recognised = True
    st.rows.append(row)


def _build_row(st: _State, prefix: list[str], body: list[str]) -> tuple[NcclRow, bool]:
    n, side = len(body), st.side
    if not st.titled and 2 * len(side) + 1 < n <= MAX_ROW_NUMBERS:
        side = _DEFAULT_SIDE + ("?",) * (n // 2 - 4)   # untitled per-iteration columns
    width = len(side)
    root = None
    if n and ((n != 2 * width) if st.titled and st.has_root else n in (2 * width + 1, width + 1)):
        if not _is_root(body[0]):
            raise _BadRow(f"root {body[0]!r} is not an integer")
        root, body = _whole(body[0], "root"), body[1:]
    if not width <= len(body) <= 2 * width:
        raise _BadRow(f"{len(body)} numbers for {2 * width} columns")
    complete = len(body) == 2 * width
    oop = _side(st, side, body[:width])
    ip = _side(st, side, body[width:]) if complete else NcclSide(None, None, None, None)
    row = NcclRow(_whole(prefix[0], "size"), _whole(prefix[1], "count"), prefix[2],
                  prefix[3] if len(prefix) > 3 else None, root, oop, ip)
    return row, complete


def _whole(token: str, what: str) -> int:
    """``int(token)`` of a row's digit run; _BadRow over MAX_DIGITS digits (int() raises a plain
    ValueError over 4,300 and is quadratic below that; no size, count or root has more than 20)."""
    if len(token.lstrip("-")) > MAX_DIGITS:
        raise _BadRow(f"{what} has {len(token)} digits")
    return int(token)


def _side(st: _State, names: tuple[str, ...], tokens: list[str]) -> NcclSide:
    """One side's columns; every token must be a number (or N/A, nan, inf), used or not."""
    codes = st.codes.get(names)
    if codes is None:
        codes = tuple(_CODES.get(name, 0) for name in names)
        if len(st.codes) < 64:
            st.codes[names] = codes
    values = st.values
    time_us = algbw = busbw = wrong = error = None
    for name, code, token in zip(names, codes, tokens):
        value = values.get(token, _UNSEEN)
        if value is _UNSEEN:
            value = _value(token)
            if len(values) < _CACHE_SIZE:
                values[token] = value
        if value is _BAD:
            raise _BadRow(f"{token!r} in column {name!r} is not a number")
        if code == 1:
            time_us = value
        elif code == 2:
            algbw = value
        elif code == 3:
            busbw = value
        elif code == 4:
            error = value
        elif code == 5 and value is not None:
            if value == int(value) and "e-" not in token.lower():
                wrong = int(round(value))
            else:
                error = value   # an untitled old-format error column
    return NcclSide(time_us, algbw, busbw, wrong, error)


def _value(token: str):
    """What a column's token says: a finite float, None (``N/A``, ``nan``, ``inf``, out of range) or _BAD
    (not a number). The same as ``_number(token) if _NUMBER.match(token) or token.lower() in _MISSING
    else _BAD``, without the expression: over the characters of _NUM, float() takes exactly _NUM."""
    try:
        value = float(token)
    except ValueError:
        value = _BAD
    if value is _BAD or token.strip(_NUM_CHARS):  # float() also takes nan, inf, 1_000, non-ASCII digits
        return None if token.lower() in _MISSING else _BAD
    return value if math.isfinite(value) else None


def _number(token: str) -> float | None:
    """``N/A``, ``nan``, ``inf`` (and anything not a number) -> None; else a finite float."""
    value = float(token) if _NUMBER.match(token) else math.nan
    return value if math.isfinite(value) else None
