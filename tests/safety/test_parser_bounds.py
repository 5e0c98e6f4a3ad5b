"""Parsers bound their time and memory themselves, not only through the hooks' watchdog: every entry
point refuses input over its documented size with its ParseError, and runs in time linear in the
input. Each parser gets adversarial inputs: 10 MB of one character, very long lines of the characters
its regular expressions loop on (the inputs that made the old expressions quadratic or worse), 1e5
repeated near-matches, deeply nested XML and JSON. Each must end, within a generous wall-clock bound
(a safety bound, not a benchmark), with a result or the parser's own error, never another exception.
"""
from __future__ import annotations

import signal
import time
from typing import Callable

import pytest

from healthcheck.parsers import MAX_JSON_CONTAINERS, ParseError, check_size, dcgmi, fio, ibstat, kernel_log, \
    line_count, nccl_tests, nvidia_smi, nvidia_smi_text, nvidia_smi_xml, nvlink
from healthcheck.parsers import iblinkinfo, ibnetdiscover
from healthcheck.parsers.dcgmi import DcgmiParseError
from healthcheck.parsers.fio import FioParseError
from healthcheck.parsers.nccl_tests import NcclParseError
from healthcheck.parsers import dcgmi_mndiag, fabricmanager, imex

MB10 = 10 * 1024 * 1024
# CPU seconds for 10 MB on a 2-core CI machine: linear parsers take well under a second on most inputs, but
# the heaviest near-match cases (90,000 XML elements, 150,000 distinct ranks) took 5.3-6.8 CPU seconds under
# the clean-clone CI's load on the host of 2026-12-07 (CPU time inflates with the load: shared caches); a
# super-linear parse of these inputs takes hours, and HARD_S ends a parser that never returns.
BOUND_S = 10.0
HARD_S = 120  # a quadratic regex would run for hours: stop it and fail instead of hanging the suite
LONG = 60_000  # a long line, under every per-line limit (64 KiB)
REPEAT = MB10 // LONG  # that many such lines make ~10 MB

PARSERS: dict[str, tuple[Callable[[str], object], type[ParseError], int]] = {
    "nvidia-smi": (nvidia_smi.parse_nvidia_smi, ParseError, nvidia_smi.MAX_INPUT_CHARS),
    "kernel-log": (kernel_log.parse_kernel_log, ParseError, kernel_log.MAX_INPUT_CHARS),
    "ibnetdiscover": (ibnetdiscover.parse_ibnetdiscover, ParseError, ibnetdiscover.MAX_INPUT_CHARS),
    "iblinkinfo": (iblinkinfo.parse_iblinkinfo, ParseError, iblinkinfo.MAX_INPUT_CHARS),
    "ibstat": (ibstat.parse_ibstat, ParseError, ibstat.MAX_INPUT_CHARS),
    "nvlink-status": (nvlink.parse_nvlink_status, ParseError, nvlink.MAX_INPUT_CHARS),
    "nvlink-errors": (nvlink.parse_nvlink_errors, ParseError, nvlink.MAX_INPUT_CHARS),
    "nccl-tests": (nccl_tests.parse, NcclParseError, nccl_tests.MAX_INPUT_CHARS),
    "dcgmi": (dcgmi.parse_diag, DcgmiParseError, dcgmi.MAX_INPUT_CHARS),
    "fio": (fio.parse, FioParseError, fio.MAX_INPUT_CHARS),
    "dcgmi-mndiag": (dcgmi_mndiag.parse_mndiag, dcgmi_mndiag.MndiagParseError, dcgmi_mndiag.MAX_INPUT_CHARS),
    # issue 33: nvidia-imex-ctl -q / -N (-j) and the fabric manager's log
    "imex-query": (imex.parse_imex_query, ParseError, imex.MAX_INPUT_CHARS),
    "imex-domain": (imex.parse_imex_domain, ParseError, imex.MAX_INPUT_CHARS),
    "fabricmanager": (fabricmanager.parse_fabricmanager_log, ParseError, fabricmanager.MAX_INPUT_CHARS),
}


class _Hung(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in a parser swallows it."""


def run_bounded(kind: str, text: str) -> tuple[object, float]:
    """(result or the parser's error, CPU seconds of this thread). Fails on any other exception or on a
    hang. CPU time, not wall time: on a loaded machine (CI runs beside other jobs) waiting for a core is
    not the parser's cost; the wall-clock alarm still ends a parser that never returns."""
    parse, error, _ = PARSERS[kind]

    def alarm(*_):
        raise _Hung()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(HARD_S)
    start = time.thread_time()
    try:
        try:
            outcome: object = parse(text)
        except error as exc:
            outcome = exc
    except _Hung:
        pytest.fail(f"{kind}: still parsing {len(text)} characters after {HARD_S} s (super-linear)")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return outcome, time.thread_time() - start


def assert_bounded(kind: str, text: str, bound_s: float = BOUND_S) -> object:
    outcome, elapsed = run_bounded(kind, text)
    assert elapsed < bound_s, f"{kind}: {elapsed:.2f} s for {len(text)} characters (bound {bound_s:.1f} s)"
    return outcome


# ------------------------------------------------------------------ 10 MB of a single character

SINGLE = ["a", " ", "\n", ":", "0", "{", "<", "|", "\t", "#", "-", ">", "\x00", "é"]


@pytest.mark.parametrize("char", SINGLE, ids=[repr(c) for c in SINGLE])
@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_ten_megabytes_of_one_character(kind, char):
    assert_bounded(kind, char * MB10)


@pytest.mark.parametrize("text", [
    lambda: "a\n" * (MB10 // 2),                 # 5 M short lines
    lambda: "a" + " " * MB10 + "b",              # one run of blanks between two words
    lambda: "1 " * (MB10 // 2),                  # 5 M numbers on one line
    lambda: ("a" + " " * LONG + "b:\n") * REPEAT,  # long blank runs before a colon
], ids=["short-lines", "blank-run", "number-tokens", "blank-runs-colon"])
@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_generic_ten_megabyte_shapes(kind, text):
    assert_bounded(kind, text())


# ----------------------------------------------------------------------- size limits themselves


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_input_over_the_documented_size_is_refused_before_parsing(kind):
    _, error, limit = PARSERS[kind]
    outcome = assert_bounded(kind, "x" * (limit + 1), bound_s=2.0)
    assert isinstance(outcome, error) and "over the limit" in str(outcome) and str(limit) in str(outcome)


@pytest.mark.parametrize("kind,limit", [
    ("nvidia-smi", nvidia_smi_text.MAX_LINES), ("kernel-log", kernel_log.MAX_LINES),
    ("ibstat", ibstat.MAX_LINES), ("nvlink-status", nvlink.MAX_LINES), ("nvlink-errors", nvlink.MAX_LINES),
    ("nccl-tests", nccl_tests.MAX_LINES), ("dcgmi", dcgmi.MAX_LINES), ("fio", fio.MAX_LINES),
    ("dcgmi-mndiag", dcgmi_mndiag.MAX_LINES),
])
def test_more_lines_than_the_documented_limit_are_refused(kind, limit):
    outcome = assert_bounded(kind, "x\n" * (limit + 1), bound_s=2.0)
    assert isinstance(outcome, PARSERS[kind][1]) and f"{limit + 1} lines" in str(outcome)


def test_limits_are_sane_and_bytes_are_checked_before_decoding():
    for kind, (_, _, limit) in PARSERS.items():
        # a whole fabric's topology (10,000 nodes x 8 HCAs: ~50 MB of ibnetdiscover) may take twice a node file
        upper = 128 if kind in ("ibnetdiscover", "iblinkinfo") else 64
        assert 1024 * 1024 <= limit <= upper * 1024 * 1024, kind
    assert kernel_log.MAX_INPUT_CHARS == 64 * 1024 * 1024  # same as a bundle file (bundle.MAX_FILE_BYTES)
    for parse, error, limit in [(kernel_log.parse_kernel_log, ParseError, kernel_log.MAX_INPUT_CHARS),
                                (nccl_tests.parse, NcclParseError, nccl_tests.MAX_INPUT_CHARS),
                                (dcgmi.parse_diag, DcgmiParseError, dcgmi.MAX_INPUT_CHARS),
                                (ibstat.parse_ibstat, ParseError, ibstat.MAX_INPUT_CHARS),
                                (fio.parse, FioParseError, fio.MAX_INPUT_CHARS)]:
        with pytest.raises(error, match=f"{limit + 1} bytes, over the limit"):
            parse(b"\xff" * (limit + 1))  # would decode to 3x as many characters


def test_line_count_agrees_with_splitlines():
    for text in ["", "a", "a\n", "a\r\nb", "a\rb\n\nc", "x\x0by\x0cz\x1c\x1d\x1e\x85\u2028\u2029end", "\r\n\r\n"]:
        assert line_count(text) == len(text.splitlines()), repr(text)
    with pytest.raises(ParseError, match="3 lines, over the limit of 2"):
        check_size("a\nb\nc", "thing", 100, 2)
    check_size("a\nb", "thing", 3, 2)


# --------------------------------------------------- near-matches of each parser's expressions


def _xml(body: str) -> str:
    return '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>1</driver_version>' + body + "</nvidia_smi_log>\n"


NEAR_MATCHES: list[tuple[str, str, Callable[[], str]]] = [
    # nvidia-smi: summary-table rows after many blank lines; "No devices" after blank lines; a hand
    # annotation after a long blank run; "label<spaces>value" without a colon; XML shapes.
    ("nvidia-smi", "summary-after-blank-lines", lambda: "NVIDIA-SMI 550\n" + "\n" * 150_000 + "| x |\n"),
    ("nvidia-smi", "no-devices-after-blank-lines", lambda: "x\n" + " \n" * 150_000),
    ("nvidia-smi", "annotation-after-blanks", lambda: "".join(
        f"GPU 00000000:{i % 256:02x}:00.0\n    Product Name : a{' ' * LONG}b\n" for i in range(REPEAT))),
    ("nvidia-smi", "label-blanks-no-colon", lambda: "GPU 00000000:07:00.0\n"
     + ("    a" + " " * LONG + "b\n") * REPEAT),
    ("nvidia-smi", "line-over-64KiB", lambda: "GPU 00000000:07:00.0\n    Product Name : " + "a" * MB10),
    ("nvidia-smi", "xml-nested-45k", lambda: _xml('<gpu id="00000000:07:00.0">' + "<a>" * 45_000 + "x"
                                                  + "</a>" * 45_000 + "</gpu>")),
    ("nvidia-smi", "xml-over-tag-limit", lambda: _xml('<gpu id="0">' + "<a/>" * (MB10 // 4) + "</gpu>")),
    ("nvidia-smi", "xml-90k-elements", lambda: _xml('<gpu id="0">' + "<a_b_c/>" * 90_000 + "</gpu>")),
    ("nvidia-smi", "xml-annotations-in-a-value", lambda: _xml(
        '<gpu id="00000000:07:00.0"><product_name>' + "&lt;=" * 500_000 + "\nx</product_name></gpu>")),
    ("nvidia-smi", "xml-long-tag-name", lambda: _xml('<gpu id="0"><' + "a_" * (MB10 // 2) + "/></gpu>")),
    ("nvidia-smi", "xml-many-doctypes", lambda: '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">'
     * 150_000),
    ("nvidia-smi", "xml-entity-declarations", lambda: "<!ENTITY a 'b'>" * (MB10 // 16)),
    ("nvidia-smi", "190k-header-labels", lambda: "".join(f"k{i}: v\n" for i in range(190_000))),
    ("nvidia-smi", "190k-gpu-headers", lambda: "".join(f"GPU 00000000:{i % 256:02x}:00.0\n" for i in range(190_000))),
    ("nvidia-smi", "one-gpu-190k-labels", lambda: "GPU 00000000:07:00.0\n"
     + "".join(f"    k{i} : v\n" for i in range(190_000))),
    ("nvidia-smi", "xml-90k-gpus", lambda: _xml('<gpu id="0"/>' * 90_000)),
    # kernel log: blanks after "Xid"; 100k+ events (only the newest are read); prefixes' expressions
    ("kernel-log", "xid-blank-run", lambda: ("NVRM: Xid" + " " * LONG + "x\n") * REPEAT),
    ("kernel-log", "sxid-blank-run", lambda: ("nvidia-nvswitch1: SXid (PCI:0000:00:08.0):" + " " * LONG + "x\n")
     * REPEAT),
    ("kernel-log", "sxid-many-marks", lambda: ("SXid (" * (LONG // 6) + "\n") * REPEAT),
    ("kernel-log", "sxid-storm-10MB", lambda: "[ 1.1] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, "
     "Link 32 egress non-posted PRIV error (First)\n" * 90_000),
    ("imex-domain", "node-line-blanks", lambda: ("Node #0 " + " " * LONG + "- x\n") * REPEAT),
    ("imex-domain", "matrix-head-digits", lambda: " Nodes From\\To " + "0 " * (MB10 // 2 - 20)),
    ("imex-domain", "matrix-rows", lambda: " Nodes From\\To  0  1\n" + ("  0  " + "C " * 20_000 + "\n") * 200),
    ("imex-domain", "json-many-nodes", lambda: '{"status": "UP", "nodes": {' + ",".join(
        f'"{i}": {{"status": "READY"}}' for i in range(5000)) + "}}"),
    ("imex-query", "no-state-lines", lambda: ("READYX" + " " * LONG + "\n") * REPEAT),
    ("fabricmanager", "marks-without-a-match", lambda: ("[Dec 19 2024 19:17:49]" + " " * 150
                                                        + "detected NVSwitch " * 3000 + "\n") * 150),
    ("fabricmanager", "error-storm", lambda: "[Dec 19 2024 19:17:49] [ERROR] [tid 1] detected NVSwitch non-fatal error "
     "12028 on fid 0 on NVSwitch pci bus id 00000000:83:00.0 physical id 0 port 34\n" * 60_000),
    ("kernel-log", "xid-dev-blank-run", lambda: ("NVRM: Xid (PCI:0000:07:00)" + " " * LONG + "x\n") * REPEAT),
    ("kernel-log", "xid-storm-10MB", lambda: "[ 1.1] NVRM: Xid (PCI:0000:07:00): 48, pid=1, name=x, m\n"
     * (MB10 // 56)),
    ("kernel-log", "quote-blanks", lambda: (" " * LONG + "> NVRM: x\n") * REPEAT),
    ("kernel-log", "brackets-uptime", lambda: ("[" * LONG + " NVRM: x\n") * REPEAT),
    ("kernel-log", "uptime-blanks", lambda: ("[" + " " * LONG + " NVRM: x\n") * REPEAT),
    ("kernel-log", "ctime-blanks", lambda: ("Mon" + " " * LONG + "Mar NVRM: x\n") * REPEAT),
    ("kernel-log", "gpu-pci-blanks", lambda: ("NVRM: GPU" + " " * LONG + "at x RmInitAdapter failed\n") * REPEAT),
    ("kernel-log", "fallen-blanks", lambda: ("NVRM: fallen" + " " * LONG + "x\n") * REPEAT),
    ("kernel-log", "long-bodies", lambda: ("NVRM: " + "x" * LONG + "\n") * REPEAT),
    ("kernel-log", "long-prefixes", lambda: ("x" * LONG + " NVRM: Xid: 1, m\n") * REPEAT),
    ("kernel-log", "lines-over-64KiB", lambda: ("NVRM: Xid: 13, " + "x" * 70_000 + "\n") * 150),
    ("kernel-log", "pid-unclosed-quote", lambda: ("NVRM: Xid: 1, pid='" + "x" * LONG + "\n") * REPEAT),
    ("kernel-log", "minor-number", lambda: ("NVRM: rm_init_adapter failed" + " minor" * 10_000 + "\n") * REPEAT),
    # ibstat: a field name followed by a long blank run; long device names; 100k ports
    ("ibstat", "field-blank-run", lambda: "CA 'mlx5_0'\n\tPort 1:\n\t\tState" + " " * MB10 + "x\n"),
    ("ibstat", "field-blank-runs", lambda: "CA 'mlx5_0'\n\tPort 1:\n" + ("\t\tRate" + " " * LONG + "x\n") * REPEAT),
    ("ibstat", "ca-name-unclosed", lambda: "CA '" + "x" * MB10),
    ("ibstat", "100k-ports", lambda: "CA 'mlx5_0'\n" + "Port 1:\nState: Active\n" * 66_000),
    ("ibstat", "numeric-prefix-digits", lambda: "CA 'x'\nPort 1:\nState: " + "1" * MB10 + "x\n"),
    # nvlink: digits before "GB/s"; blank runs in link lines; an unclosed UUID
    ("nvlink-status", "speed-digits", lambda: "GPU 0: x\n" + ("\tLink 0: " + "1" * LONG + "\n") * REPEAT),
    ("nvlink-status", "line-over-64KiB", lambda: "GPU 0: x\n\tLink 0: " + "1" * MB10 + "\n"),
    ("nvlink-status", "link-blank-runs", lambda: "GPU 0: x\n" + ("\tLink 0: " + " " * LONG + "x\n") * REPEAT),
    ("nvlink-errors", "counter-digits", lambda: "GPU 0: x\n" + ("\tLink 0: CRC Errors: " + "9" * LONG + "\n") * REPEAT),
    ("nvlink-errors", "uuid-unclosed", lambda: ("GPU 0: x (UUID: " + "a" * LONG + "\n\tLink 0: Replay Errors: 0\n")
     * REPEAT),
    ("nvlink-status", "2000-gpus", lambda: "".join(f"GPU {i}: x\n\tLink 0: 25 GB/s\n" for i in range(2000))),
    ("nvlink-status", "100k-headers", lambda: "GPU 1: x\n\tLink 0: 25 GB/s\n" * 100_000),
    # nccl-tests: each expression's old weak spot
    ("nccl-tests", "150k-distinct-ranks", lambda: "".join(f"# Rank {i} Pid 1 on h device 0 [0] x\n"
                                                          for i in range(150_000))),
    ("nccl-tests", "param-blank-runs", lambda: ("# nThread 1 a" + " " * LONG + "x\n") * REPEAT),
    ("nccl-tests", "rank-name-blank-runs", lambda: ("# Rank 0 Pid 1 on h device 0 [0] a" + " " * LONG + "b\n")
     * REPEAT),
    ("nccl-tests", "rank-blank-runs", lambda: ("# Rank 0" + " " * LONG + "x\n") * REPEAT),
    ("nccl-tests", "version-long-token", lambda: ("# nccl-tests version 2.17 " + "a" * LONG + "\n") * REPEAT),
    ("nccl-tests", "number-digit-runs", lambda: ("8 2 float sum\n" + "1" * LONG + "x\n") * REPEAT),
    ("nccl-tests", "log-colon-runs", lambda: ("x:1" * (LONG // 3) + "\n") * REPEAT),
    ("nccl-tests", "log-digit-runs", lambda: ("x:" + "1" * LONG + "\n") * REPEAT),
    ("nccl-tests", "row-with-30k-numbers", lambda: ("8 2 float sum -1 " + "1 " * 30_000 + "\n") * (MB10 // LONG)),
    ("nccl-tests", "line-over-64KiB", lambda: "# nThread 1\n8 2 float sum " + "1 " * (MB10 // 2)),
    ("nccl-tests", "failure-cancelled", lambda: ("slurmstepd: error: *** STEP " + "x" * LONG + "\n") * REPEAT),
    # dcgmi: status cells and category rows with blank runs; JSON documents cut or nested
    # dcgmi mndiag: host and GPU rows, blank runs, a JSON document of many results
    ("dcgmi-mndiag", "190k-gpu-rows", lambda: "| MNUBERGEMM Test | Fail |\n| Host 0 | Fail |\n"
     + "".join(f"|   GPU {i % 9999} | Fail |\n|  | Error: e{i} |\n" for i in range(95_000))),
    ("dcgmi-mndiag", "gpus-list-blank-runs", lambda: "| Host 0 | Fail |\n"
     + ("|   GPUs: 0," + " " * 390 + "1 | Pass |\n") * REPEAT),
    ("dcgmi-mndiag", "row-blank-runs", lambda: ("| a" + " " * LONG + "x | y" + " " * LONG + "\n") * REPEAT),
    ("dcgmi-mndiag", "json-200k-results", lambda: '{"DCGM Diagnostic": "DCGM Multi-Node Diagnostic", '
     '"test_categories": [{"tests": [{"name": "MNUBERGEMM", "status": "Fail", "results": ['
     + ",".join(f'{{"host_id": 0, "entity_id": {i % 9999}, "status": "Fail"}}' for i in range(200_000)) + "]}]}]}"),
    ("dcgmi", "cell-blank-runs", lambda: "| Diagnostic | Result |\n"
     + ("| Memory | Pass - GPUs" + " " * LONG + "x |\n") * REPEAT),
    ("dcgmi", "cell-colon-blank-runs", lambda: "| Diagnostic | Result |\n"
     + ("| Memory | Fail - GPU :" + " " * LONG + "x |\n") * REPEAT),
    ("dcgmi", "category-blank-runs", lambda: ("|-----  a" + " " * LONG + "x\n") * REPEAT),
    ("dcgmi", "error-continuations", lambda: "Error: x\n" + "more text\n" * 190_000),
    ("dcgmi", "metadata-continuations", lambda: "| Diagnostic | Result |\n|----- Metadata ---+---|\n"
     "| Driver Version Detected | 1 |\n" + "|  | v |\n" * 190_000),
    ("dcgmi", "metadata-values-of-60k-tables", lambda: "".join(
        f"| Diagnostic | Result |\n| Driver Version Detected | v{i} |\n+---+\n" for i in range(60_000))),
    ("dcgmi", "190k-warnings-one-test", lambda: "| Diagnostic | Result |\n| Memory | Pass |\n"
     + "".join(f"| Warning | w{i} |\n" for i in range(190_000))),
    ("dcgmi", "json-100k-runtime-errors", lambda: '{"iterations": [' + ",".join(
        f'{{"DCGM Diagnostic": {{}}, "runtime_error": "e{i}"}}' for i in range(100_000)) + "]}"),
    ("dcgmi", "json-200k-warnings-one-result", lambda: '{"DCGM GPU Diagnostic": {"test_categories": [{"tests": '
     '[{"name": "t", "results": [{"gpu_ids": "0", "status": "Warn", "warnings": ['
     + ",".join(f'"w{i}"' for i in range(200_000)) + "]}]}]}]}}"),
    ("dcgmi", "json-200k-tests", lambda: '{"DCGM GPU Diagnostic": {"test_categories": [{"tests": ['
     + ",".join('{"name": "t"}' for _ in range(200_000)) + "]}]}}"),
    ("dcgmi", "json-cut-arrays", lambda: ('{"a":[' + "1," * 5000 + "\n") * 1000),
    ("dcgmi", "json-nested-lines", lambda: '{"a":\n' * 190_000),
    ("dcgmi", "json-unterminated-string", lambda: '{"a":[\n' * 900 + '"' + "x" * MB10),
    ("dcgmi", "json-too-many-containers", lambda: "{" + "[" * (MAX_JSON_CONTAINERS + 1)),
    ("dcgmi", "json-deep-iterations", lambda: '{"iterations": [' * 300 + '{"DCGM Diagnostic": {}}' + "]}" * 300),
    ("fio", "json-cut-arrays", lambda: ('{"jobs":[' + "1," * 5000 + "\n") * 1000),
    ("fio", "json-nested-lines", lambda: '{"jobs":\n' * 190_000),
    ("fio", "json-unterminated-string", lambda: '{"jobs":[\n' * 900 + '"' + "x" * MB10),
    ("fio", "json-300k-jobs", lambda: '{"fio version": "fio-3.36", "jobs": [' + '{"jobname": "j"},' * 300_000
     + '{"jobname": "j"}]}'),
    ("fio", "json-9k-jobs-per-document", lambda: ('{"jobs": [' + ",".join(['{"jobname": "j", "read": {"io_bytes": 1, '
                                                  '"bw_bytes": 5}}'] * 9_000) + "]}\n") * 3),
    ("fio", "json-huge-number", lambda: '{"jobs": [{"error": ' + "9" * MB10 + "}]}"),
    ("fio", "error-lines", lambda: "fio: io_u error on file x\n" * 190_000 + '{"jobs": []}'),
]


@pytest.mark.parametrize("kind,make", [(k, m) for k, _, m in NEAR_MATCHES],
                         ids=[f"{k}-{name}" for k, name, _ in NEAR_MATCHES])
def test_near_matches_of_each_expression_stay_linear(kind, make):
    assert_bounded(kind, make())


# ------------------------------------------------------------ what the bounds keep and refuse


def test_an_xid_storm_keeps_the_newest_events_only():
    lines = [f"[ {i}.5] NVRM: Xid (PCI:0000:07:00): {13 if i % 2 else 31}, pid={i}, name=x, m" for i in range(120_000)]
    events = assert_bounded("kernel-log", "\n".join(lines))
    assert len(events) == kernel_log.MAX_NVRM_LINES
    assert events[-1].pid == 119_999 and events[0].pid == 120_000 - kernel_log.MAX_NVRM_LINES
    assert events[-1].uptime_s == 119_999.5 and {e.xid for e in events} == {13, 31}


def test_long_lines_are_refused_or_skipped_with_a_note():
    outcome = assert_bounded("nvidia-smi", "GPU 00000000:07:00.0\n    Product Name : " + "a" * 70_000 + "\n")
    assert isinstance(outcome, ParseError) and "line 2 is 70019 characters long" in str(outcome)
    result = assert_bounded("nccl-tests", "# nThread 1 nGpus 1\n" + "x" * 70_000 + "\n# Avg bus bandwidth : 1.5\n")
    assert result.avg_busbw_gbps == 1.5
    assert "line 2 skipped: 70000 characters, over 65536" in result.warnings


def test_xml_tag_limit_and_depth_limit():
    outcome = assert_bounded("nvidia-smi", _xml('<gpu id="0">' + "<a/>" * (nvidia_smi_xml.MAX_TAGS + 1) + "</gpu>"))
    assert isinstance(outcome, ParseError) and f"over the limit of {nvidia_smi_xml.MAX_TAGS}" in str(outcome)
    deep = assert_bounded("nvidia-smi", _xml('<gpu id="0">' + "<a>" * 40_000 + "</a>" * 40_000 + "</gpu>"))
    assert isinstance(deep, ParseError) and "nested too deeply" in str(deep)


def test_a_cut_json_document_with_many_line_start_braces_is_still_a_clear_error():
    cut = ('{"DCGM Diagnostic": {"test_categories": [\n' + '{"a": [' + "1," * 5000 + "\n") * 1000
    outcome = assert_bounded("dcgmi", cut)
    assert isinstance(outcome, DcgmiParseError) and "cut short" in str(outcome)
    fio_cut = '{"fio version": "fio-3.36", "jobs": [\n' + ('{"a": [' + "1," * 5000 + "\n") * 1000
    outcome = assert_bounded("fio", fio_cut)
    assert isinstance(outcome, FioParseError) and "cut short" in str(outcome)


def test_the_json_budget_still_finds_documents_after_cut_ones():
    """A few cut documents before a whole one (iterations printed by a killed run): still found."""
    doc = '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "Memory", ' \
          '"results": [{"gpu_ids": "0", "status": "Pass"}]}]}]}}'
    text = "\n".join(['{"DCGM GPU Diagnostic": {"test_categories": [', "{ broken", doc[:40], doc])
    diag = assert_bounded("dcgmi", text)
    assert [(t.name, t.status, t.gpus) for t in diag.tests] == [("Memory", "pass", {0: "pass"})]
