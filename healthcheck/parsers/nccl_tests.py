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
  warning lines, unreadable rows, a missing or repeated summary.

Raises :class:`NcclParseError` for input that is not nccl-tests output (not text, empty, nothing of the
above) or over MAX_INPUT_CHARS / MAX_LINES; longer lines than MAX_LINE_CHARS are skipped (a warning).
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, astuple, dataclass, field

from . import ParseError, as_text


class NcclParseError(ParseError):
    """Not nccl-tests output at all (empty, binary, no header/rows/errors)."""


@dataclass
class NcclRank:
    rank: int
    host: str | None
    device: int | None
    busid: str | None
    name: str | None
    group: int | None = None
    pid: int | None = None


@dataclass
class NcclSide:
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None
    error: float | None = None  # old format: max absolute error (``wrong`` is then None)


@dataclass
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
_NUM = r"[-+]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][-+]?\d++)?"  # possessive: nothing after takes a digit
_NUMBER = re.compile(rf"^{_NUM}$", re.ASCII)
_MISSING = {"n/a", "nan", "-nan", "+nan", "inf", "-inf", "+inf"}
_INT = re.compile(r"^\d+$", re.ASCII)
_ROOT = re.compile(r"^-?\d+$", re.ASCII)
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


def parse(text: str) -> NcclResult:
    """Rows, ranks, summary and error lines of one nccl-tests run; see the module docstring."""
    text = as_text(text, "nccl-tests output", MAX_INPUT_CHARS, MAX_LINES, NcclParseError)
    if not text.strip():
        raise NcclParseError("nccl-tests output is empty")
    st = _State()
    for number, raw in enumerate(text.split("\n"), start=1):
        line = _TAG.sub("", raw.replace("\x00", "").replace("\r", ""), count=1).rstrip()
        if len(raw) > MAX_LINE_CHARS:
            st.warnings.append(f"line {number} skipped: {len(raw)} characters, over {MAX_LINE_CHARS}")
        elif line.strip():
            _line(st, line)
    _flush(st)
    if not st.recognised:
        raise NcclParseError("not nccl-tests output: no '# nThread' header, rank line, result row, summary, "
                             "'Test ... failure' or 'NCCL WARN' line")
    if not st.rows and not st.errors:
        st.errors.append("no results table: the output ends before the first result row")
    elif st.rows and st.summaries == 0:
        st.warnings.append("no '# Out of bounds values' / '# Avg bus bandwidth' summary: output cut or run aborted")
    if st.summaries > 1:
        st.warnings.append(f"{st.summaries} summaries in one output: avg_busbw_gbps is the last one")
    return NcclResult(rows=st.rows, ranks=st.ranks, errors=st.errors, warnings=st.warnings,
                      avg_busbw_gbps=st.avg, out_of_bounds=st.oob, out_of_bounds_ok=st.oob_ok,
                      version=st.version, header=st.header)


def _line(st: _State, line: str) -> None:
    stripped = line.strip()
    tokens = stripped.split()
    if st.pending and not stripped.startswith("#") and len(tokens) <= MAX_ROW_NUMBERS and _continues(tokens):
        st.pending[1].extend(tokens)
        if _complete(st, len(_strip_stamps(st.pending[1]))):
            _flush(st)
        return
    log = _LOG.search(stripped)
    if log is not None:  # a log line between a half-printed row and its numbers keeps the row pending
        if not (log.start() > 0 and _glued_row(st, stripped, log)) and log.group(2) in ("WARN", "ABORT"):
            st.recognised = True
            st.warnings.append(stripped[log.start():])
        return
    _flush(st)
    if stripped.startswith("#"):
        _comment(st, stripped)
    elif _FAIL.search(stripped):
        st.recognised = True
        st.errors.append(stripped)
    elif _LAUNCHER.match(stripped):
        st.warnings.append(stripped)  # e.g. "srun: error: ioctl(TIOCGWINSZ)": noise unless a task failed
    elif _row_prefix(tokens) is not None:
        _row_line(st, tokens, stripped)


def _glued_row(st: _State, line: str, log: re.Match) -> bool:
    """``<half row><host>:pid:tid [d] NCCL INFO ...``: keep the half row pending, drop the log text."""
    head = _GLUED_TAIL.match(log.group(1))
    row_text = line[:log.start()] + (head.group(0) if head else "")
    tokens = row_text.split()
    if _row_prefix(tokens) is None:
        return False
    _flush(st)
    if log.group(2) in ("WARN", "ABORT"):
        st.recognised = True
        st.warnings.append(line[log.start() + (head.end() if head else 0):].strip())
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
        group = int(found["group"]) if found["group"] is not None else None
        rank = NcclRank(int(found["rank"]), found["host"], int(found["device"]), found["busid"] or None,
                        found["name"] or None, group=group, pid=int(found["pid"]))
        if st.rank_keys.setdefault(astuple(rank), rank) is rank:
            st.ranks.append(rank)
    elif (found := _RANK_LOOSE.match(line)) is not None:
        st.recognised = True
        st.ranks.append(NcclRank(int(found.group(1)), None, None, None, None))
    elif (found := _OOB.match(line)) is not None:
        st.recognised = True
        count = int(found.group(1))
        st.oob = count + (st.oob or 0)
        ok = count == 0 and (found.group(2) or "OK").upper() == "OK"
        st.oob_ok = ok and st.oob_ok is not False
        st.summaries += 1
        if not ok:
            st.errors.append(line)
    elif (found := _AVG.match(line)) is not None:
        st.recognised = True
        st.avg = _number(found.group(1))
        if (found.group(2) or "").upper() == "FAILED":
            st.errors.append(line)
    elif line[1:].lstrip().lower().startswith("error:"):
        st.warnings.append(line)
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


def _row_prefix(tokens: list[str]) -> int | None:
    """Index of the first body token when ``tokens`` start a row (size count type [redop]), else None."""
    if len(tokens) < 3 or not (_INT.match(tokens[0]) and _INT.match(tokens[1]) and _WORD.match(tokens[2])) \
            or tokens[2].lower() in _MISSING:
        return None
    if len(tokens) > 3 and _WORD.match(tokens[3]) and tokens[3].lower() not in _MISSING:
        return 4
    return 3


def _row_line(st: _State, tokens: list[str], raw: str, force_pending: bool = False) -> None:
    start = _row_prefix(tokens) or 3
    st.pending = (tokens[:start], tokens[start:], raw)
    if not force_pending and _complete(st, len(_strip_stamps(tokens[start:]))):
        _flush(st)


def _continues(tokens: list[str]) -> bool:
    """A line of only numbers / N/A / timestamp parts: the rest of a half-printed row."""
    return bool(tokens) and all(_NUMBER.match(t) or t.lower() in _MISSING or _STAMP.match(t) for t in tokens)


def _complete(st: _State, n: int) -> bool:
    return n >= 2 * len(st.side) + (1 if st.titled and st.has_root else 0)


def _strip_stamps(body: list[str]) -> list[str]:
    """Drop a trailing ``YYYY-mm-dd HH:MM:SS`` timestamp column."""
    end = len(body)
    if end and _CLOCK.match(body[end - 1]):
        end -= 1
    if end and _DATE.match(body[end - 1]):
        end -= 1
    return body[:end]


def _flush(st: _State) -> None:
    """Turn the pending row (if any) into an NcclRow, or a warning when it cannot be read."""
    if st.pending is None:
        return
    prefix, body, raw = st.pending
    st.pending = None
    try:
        row, complete = _build_row(st, prefix, _strip_stamps(body))
    except _BadRow as exc:
        st.warnings.append(f"unreadable result row ({exc}): {raw[:200]}")
        return
    if not complete:
        st.warnings.append(f"result row without in-place columns (output cut?): {raw[:200]}")
    st.recognised = True
    st.rows.append(row)


def _build_row(st: _State, prefix: list[str], body: list[str]) -> tuple[NcclRow, bool]:
    n, side = len(body), st.side
    if not st.titled and 2 * len(side) + 1 < n <= MAX_ROW_NUMBERS:
        side = _DEFAULT_SIDE + ("?",) * (n // 2 - 4)   # untitled per-iteration columns
    width = len(side)
    root = None
    if n and ((n != 2 * width) if st.titled and st.has_root else n in (2 * width + 1, width + 1)):
        if not _ROOT.match(body[0]):
            raise _BadRow(f"root {body[0]!r} is not an integer")
        root, body = int(body[0]), body[1:]
    if not width <= len(body) <= 2 * width:
        raise _BadRow(f"{len(body)} numbers for {2 * width} columns")
    complete = len(body) == 2 * width
    ip = _side(side, body[width:]) if complete else NcclSide(None, None, None, None)
    row = NcclRow(size_bytes=int(prefix[0]), count=int(prefix[1]), type=prefix[2],
                  redop=prefix[3] if len(prefix) > 3 else None, root=root, oop=_side(side, body[:width]), ip=ip)
    return row, complete


def _side(names: tuple[str, ...], tokens: list[str]) -> NcclSide:
    result = NcclSide(None, None, None, None)
    for name, token in zip(names, tokens):
        if not (_NUMBER.match(token) or token.lower() in _MISSING):
            raise _BadRow(f"{token!r} in column {name!r} is not a number")
        value = _number(token)
        if name in ("time", "cputime"):
            result.time_us = value
        elif name == "algbw":
            result.algbw_gbps = value
        elif name == "busbw":
            result.busbw_gbps = value
        elif name == "error":
            result.error = value
        elif name in ("#wrong", "wrong") and value is not None:
            if value == int(value) and "e-" not in token.lower():
                result.wrong = int(round(value))
            else:
                result.error = value   # an untitled old-format error column
    return result


def _number(token: str) -> float | None:
    """``N/A``, ``nan``, ``inf`` (and anything not a number) -> None; else a finite float."""
    value = float(token) if _NUMBER.match(token) else math.nan
    return value if math.isfinite(value) else None
