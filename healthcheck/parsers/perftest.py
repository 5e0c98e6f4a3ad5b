"""perftest (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``, ``ib_write_lat``, ``ib_read_lat``,
``ib_send_lat``) text output -> :class:`PerftestResult`. Pure.

The output is a dashed rule, the test's title (``RDMA_Write BW Test``, ``RDMA_Write Bidirectional BW
Test``, ``Send Latency Test``), ``Key : Value`` settings (two per line, columns padded with spaces or
tabs), the local/remote address lines, then one table::

     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     65536      5000             11025.44            11024.71                  0.176395

Bandwidth is in ``Gb/sec`` (``--report_gbits``: 10^9 bit/s) or ``MB/sec`` / ``MiB/sec`` (perftest's
MB is 2^20 bytes); :meth:`PerftestResult.bw_avg_gbps` converts to Gb/s. Latency tables have ``t_min``
... ``99.9% percentile`` columns in microseconds (older builds print fewer; the header names them).
Lines inside the table that are not rows (``Conflicting CPU frequency values detected ...``) are kept
as ``warnings``.

A failed run (``Failed to modify QP to RTR``, ``Couldn't connect to 10.0.0.2:18515``, ``Unable to init
the socket connection``, a completion error, no table at all) is a result with ``error`` set, never an
exception: the only ParseError is for input that is not text or is over the size limit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import as_text

MAX_INPUT_CHARS = 8 * 1024 * 1024  # a full -a sweep of a 64-QP run is ~20 kB
MAX_LINES = 200_000
MAX_KV_LINE = 400  # settings lines are ~90 characters; longer ones are not settings

MB_PER_SEC_TO_GBPS = (1 << 20) * 8 / 1e9  # perftest's MB/sec is 2^20 bytes per second

# Column names of the result table, as the header spells them, -> our keys.
_COLUMNS = (
    ("#bytes", "bytes"), ("#iterations", "iterations"), ("BW peak", "bw_peak"), ("BW average", "bw_avg"),
    ("MsgRate", "msg_rate_mpps"), ("t_min", "t_min_us"), ("t_max", "t_max_us"),
    ("t_typical", "t_typical_us"), ("t_avg", "t_avg_us"), ("t_stdev", "t_stdev_us"),
    ("99.9% percentile", "p99_9_us"), ("99% percentile", "p99_us"), ("tps average", "tps_avg"),
)
_UNIT = re.compile(r"BW (?:peak|average)\s*\[(?P<unit>Gb|MB|MiB|GB|Gbit)/sec\]", re.IGNORECASE)
_TITLE = re.compile(r"^\s*(?P<title>(?:RDMA_)?(?P<verb>Write|Read|Send|Atomic|Fetch_and_Add|Compare_and_Swap)"
                    r"[A-Za-z_ ]*?(?P<kind>BW|Latency) Test)\s*$", re.IGNORECASE)
_KV = re.compile(r"(?P<key>[A-Za-z][\w.*/()-]*(?: [\w.*/()-]+)*)[ \t]*:[ \t]*(?P<value>\S+)")
_RULE = re.compile(r"^\s*-{20,}\s*$")
_ADDRESS = re.compile(r"^\s*(local address|remote address|GID|GID index)\b", re.IGNORECASE)

# Lines that mean the run failed, first one wins; (pattern, reason prefix). Matched per line.
_FAILURES = (
    re.compile(r"Failed to modify QP \S* ?to (RTR|RTS|INIT)", re.IGNORECASE),
    re.compile(r"Couldn'?t connect to \S+", re.IGNORECASE),
    re.compile(r"Unable to (init|open) the socket connection|Unable to open file descriptor for socket",
               re.IGNORECASE),
    re.compile(r"Completion with error at (client|server)", re.IGNORECASE),
    re.compile(r"(IB device|Device) \S+ not found|No IB devices found|Couldn'?t get (context|device)",
               re.IGNORECASE),
    re.compile(r"Failed to exchange data between server and clients|Couldn'?t (read|write) remote address",
               re.IGNORECASE),
    re.compile(r"^\s*(Couldn'?t|Failed to|Unable to|Cannot|Error[: ]|Problems with)\b.*", re.IGNORECASE),
)
# Known harmless lines anywhere (kept as warnings, never errors).
_WARNINGS = re.compile(r"Conflicting CPU frequency|CPU Frequency is not max|Using sampled CPU speed|"
                       r"Requested mtu is higher|Changing to this MTU|Max msg size in UD", re.IGNORECASE)


@dataclass
class PerftestResult:
    test: str | None = None            # "RDMA_Write BW Test"
    kind: str | None = None            # "bw" | "lat"
    verb: str | None = None            # "write" | "read" | "send" | ...
    bidirectional: bool = False
    settings: dict[str, str] = field(default_factory=dict)
    unit: str | None = None            # "Gb/sec" | "MB/sec" (bandwidth tables)
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, float]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None           # why the run gave no (complete) result
    server: bool = False               # "Waiting for client to connect" seen: the server side

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.rows)

    @property
    def device(self) -> str | None:
        return self.settings.get("device")

    def _to_gbps(self, value: float | None) -> float | None:
        if value is None:
            return None
        unit = (self.unit or "").lower()
        if unit.startswith(("mb", "mib")):
            return value * MB_PER_SEC_TO_GBPS
        if unit.startswith("gb/") and self.unit and self.unit[1] == "B":  # GB/sec (bytes)
            return value * 8
        return value

    def _largest(self) -> dict[str, float] | None:
        return max(self.rows, key=lambda r: r.get("bytes", 0)) if self.rows else None

    def bw_avg_gbps(self) -> float | None:
        """Average bandwidth at the largest message size, in Gb/s (10^9 bit/s)."""
        row = self._largest()
        return None if row is None or self.kind != "bw" else self._to_gbps(row.get("bw_avg"))

    def bw_peak_gbps(self) -> float | None:
        row = self._largest()
        return None if row is None or self.kind != "bw" else self._to_gbps(row.get("bw_peak"))

    def latency_us(self, stat: str = "t_typical_us") -> float | None:
        """A latency statistic at the smallest message size (``t_typical_us``, falling back to
        ``t_avg_us``)."""
        if self.kind != "lat" or not self.rows:
            return None
        row = min(self.rows, key=lambda r: r.get("bytes", 0))
        value = row.get(stat)
        return value if value is not None else row.get("t_avg_us")

    def to_dict(self) -> dict:
        return {"test": self.test, "kind": self.kind, "verb": self.verb, "bidirectional": self.bidirectional,
                "device": self.device, "settings": dict(self.settings), "unit": self.unit,
                "columns": list(self.columns), "rows": [dict(r) for r in self.rows],
                "warnings": list(self.warnings), "error": self.error, "server": self.server, "ok": self.ok,
                "bw_avg_gbps": _round(self.bw_avg_gbps()), "bw_peak_gbps": _round(self.bw_peak_gbps()),
                "latency_typical_us": self.latency_us()}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _columns(header: str) -> list[str]:
    found = []
    taken: list[tuple[int, int]] = []
    for label, key in _COLUMNS:
        start = header.find(label)
        while start >= 0 and any(a <= start < b for a, b in taken):
            start = header.find(label, start + 1)
        if start >= 0:
            taken.append((start, start + len(label)))
            found.append((start, key))
    return [key for _, key in sorted(found)]


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _failure(line: str) -> str | None:
    if _WARNINGS.search(line):
        return None
    for pattern in _FAILURES:
        match = pattern.search(line)
        if match:
            return line.strip()[:200]
    return None


def parse_perftest(text: str) -> PerftestResult:
    """One side's output of one perftest run (server or client). See the module docstring."""
    text = as_text(text, "perftest output", MAX_INPUT_CHARS, MAX_LINES)
    result = PerftestResult()
    in_table = False
    table_done = False
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if "Waiting for client" in stripped:
            result.server = True
            continue
        if _RULE.match(line):
            if in_table and result.rows:
                in_table, table_done = False, True
            continue
        title = _TITLE.match(line)
        if title and result.test is None:
            result.test = " ".join(title.group("title").split())
            result.kind = "bw" if title.group("kind").upper() == "BW" else "lat"
            result.verb = title.group("verb").lower()
            result.bidirectional = "bidirectional" in result.test.lower()
            continue
        if stripped.startswith("#bytes"):
            result.columns = _columns(stripped)
            unit = _UNIT.search(stripped)
            result.unit = f"{unit.group('unit')}/sec" if unit else None
            if result.kind is None:
                result.kind = "bw" if "bw_avg" in result.columns else "lat"
            in_table = True
            continue
        if in_table:
            tokens = stripped.split()
            values = [_number(t) for t in tokens]
            if result.columns and len(tokens) == len(result.columns) and None not in values:
                result.rows.append({k: (int(v) if k in ("bytes", "iterations") else v)
                                    for k, v in zip(result.columns, values)})
                continue
        reason = _failure(stripped)
        if reason is not None:
            if result.error is None:
                result.error = reason
            continue
        if in_table or _WARNINGS.search(stripped):
            result.warnings.append(stripped[:200])
            continue
        if result.test is not None and not table_done and len(line) <= MAX_KV_LINE and not _ADDRESS.match(line):
            for kv in _KV.finditer(line):
                key = "_".join(kv.group("key").lower().split())
                result.settings.setdefault(key, kv.group("value"))
    if result.error is None and not result.rows:
        result.error = ("no result table (the run did not finish)" if result.columns or result.test
                        else "no perftest output (no test title, no result table)")
    return result
