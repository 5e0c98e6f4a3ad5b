"""nccl-tests parser: every real corpus output, own fixtures (multi-node, alltoall, broadcast, failures,
mpirun tag-output with NCCL INFO glued into a row), and the format variants written inline."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from healthcheck.parsers import ParseError
from healthcheck.parsers.nccl_tests import NcclParseError, NcclResult, NcclRow, NcclSide, parse
from tests.conftest import CORPUS, FIXTURES, corpus_params

FIX = FIXTURES / "nccl-tests"
CONTRACT_ROW = {"size_bytes", "count", "type", "redop", "root", "oop", "ip"}
CONTRACT_SIDE = {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}
CONTRACT_RANK = {"rank", "host", "device", "busid", "name"}


def _corpus(name: str) -> NcclResult:
    path = CORPUS / "nccl-tests" / name
    if not path.is_file():
        pytest.skip(f"corpus file {name} absent")
    return parse(path.read_text())


def _fixture(name: str) -> NcclResult:
    return parse((FIX / name).read_text())


def _row(result: NcclResult, size: int) -> NcclRow:
    [row] = [r for r in result.rows if r.size_bytes == size]
    return row


def _check_contract(result: NcclResult) -> dict:
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert {"avg_busbw_gbps", "out_of_bounds", "rows", "ranks", "errors"} <= set(data)
    for row in data["rows"]:
        assert CONTRACT_ROW <= set(row)
        assert CONTRACT_SIDE <= set(row["oop"]) and CONTRACT_SIDE <= set(row["ip"])
    for rank in data["ranks"]:
        assert CONTRACT_RANK <= set(rank)
    return data


# ------------------------------------------------------------------------------------ real corpus


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params("nccl-tests"))
def test_every_corpus_output_parses(path: Path):
    result = parse(path.read_text())
    data = _check_contract(result)
    assert result.rows or result.errors
    if not result.rows:
        assert data["rows"] == [] and result.errors and result.avg_busbw_gbps is None
    for row in result.rows:
        assert row.size_bytes >= 0 and row.type == "float"
        assert row.oop.time_us is not None and row.oop.time_us > 0
        assert row.oop.busbw_gbps is not None and row.oop.busbw_gbps >= 0
    if result.rows:
        assert result.avg_busbw_gbps is not None and result.out_of_bounds is not None
        assert len({r.rank for r in result.ranks}) == len(result.ranks) > 0


@pytest.mark.corpus
def test_corpus_a100_single_process_healthy():
    result = _corpus("all_reduce-a100-sxm4-8gpu-single-process.txt")
    assert result.avg_busbw_gbps == 66.2058
    assert (result.out_of_bounds, result.out_of_bounds_ok, result.errors, result.warnings) == (0, True, [], [])
    assert len(result.rows) == 30 and result.wrong_total == 0
    assert result.rows[-1] == NcclRow(4294967296, 1073741824, "float", "sum", -1,
                                      NcclSide(32336.0, 132.82, 232.44, 0), NcclSide(32455.0, 132.34, 231.59, 0))
    assert result.rows[0].size_bytes == 8 and result.rows[0].oop.time_us == 40.12
    assert [r.rank for r in result.ranks] == list(range(8))
    assert {(r.host, r.name, r.group, r.pid) for r in result.ranks} == {
        ("thanos", "NVIDIA A100-SXM4-80GB", 0, 54740)}
    assert [r.busid for r in result.ranks] == ["0x07", "0x0a", "0x45", "0x4b", "0x84", "0x8a", "0xc0", "0xc3"]
    assert result.header["agg iters"] == "1" and result.header["graph"] == "0"
    assert result.header["maxBytes"] == "4294967296" and result.header["step"] == "2(factor)"
    assert result.version is None
    assert result.busbw_at_large_sizes() == pytest.approx((232.44 + 230.13 + 228.02) / 3)
    assert result.busbw_at_large_sizes(min_bytes=1 << 30) == pytest.approx((232.44 + 230.13 + 228.02) / 3)
    assert result.busbw_at_large_sizes(top=1) == 232.44


@pytest.mark.corpus
def test_corpus_old_header_validation_off_error_na_and_info_line_in_table():
    result = _corpus("all_reduce-a100-sxm4-40gb-8gpu-validation0-error-na-superbench.log")
    assert result.avg_busbw_gbps == 68.4048 and result.out_of_bounds == 0
    assert len(result.rows) == 34 and [r.size_bytes for r in result.rows[:3]] == [0, 0, 4]
    assert all(r.root is None and r.oop.wrong is None and r.ip.wrong is None and r.oop.error is None
               for r in result.rows)
    assert result.wrong_total == 0 and result.header["validation"] == "0" and "agg iters" not in result.header
    last = result.rows[-1]
    assert (last.size_bytes, last.oop.busbw_gbps, last.ip.busbw_gbps, last.oop.time_us) == (
        8589934592, 235.26, 235.03, 63896.0)
    assert {(r.host, r.busid, r.group, r.name) for r in result.ranks} == {
        ("localhost", "0x00", None, "A100-SXM4-40GB")}
    assert result.to_dict()["rows"][-1]["oop"]["wrong"] is None


@pytest.mark.corpus
def test_corpus_old_format_float_error_column():
    result = _corpus("all_reduce-v100-sxm3-dgx2-12gpu-ok-float-error-2e-07-old-format.log")
    assert result.avg_busbw_gbps == 42.5578 and result.out_of_bounds_ok is True
    first = result.rows[0]
    assert (first.oop.error, first.ip.error, first.oop.wrong, first.ip.wrong) == (2e-07, 1e-07, None, None)
    assert _row(result, 32).ip.error == 6e-08
    assert result.wrong_total == 0 and len(result.rows) == 31 and len(result.ranks) == 12
    assert (result.ranks[11].device, result.ranks[11].busid, result.ranks[11].name) == (
        11, "0xe7", "Tesla V100-SXM3-32GB")
    assert result.rows[-1].oop.busbw_gbps == 123.56 and result.rows[-1].oop.time_us == 127453.0


@pytest.mark.corpus
def test_corpus_wrong_every_size_exponent_notation_oob_failed():
    result = _corpus("all_reduce-rtx3090-2node-inc-offload-wrong-every-size-exp-notation-oob-108-failed.txt")
    assert (result.out_of_bounds, result.out_of_bounds_ok) == (108, False)
    assert result.errors == ["# Out of bounds values : 108 FAILED"]
    assert result.avg_busbw_gbps == 3.02663 and len(result.rows) == 27
    assert (_row(result, 8).oop.wrong, _row(result, 8).ip.wrong) == (4, 4)
    assert _row(result, 2097152).oop.wrong == 1048580          # printed 1.04858e+06
    assert _row(result, 536870912).ip.wrong == 268435000       # printed 2.68435e+08
    assert result.wrong_total == 1073741424
    assert [(r.rank, r.host, r.device) for r in result.ranks] == [(0, "worker1", 0), (1, "worker2", 0)]


@pytest.mark.corpus
def test_corpus_old_alltoall_blank_redop_no_root():
    result = _corpus("alltoall-a100-sxm4-40gb-8gpu-old-format-superbench.log")
    assert result.avg_busbw_gbps == 58.6481 and len(result.rows) == 34
    assert all(r.redop is None and r.root is None for r in result.rows)
    assert _row(result, 32).oop.time_us == 89.0 and _row(result, 32).count == 1
    assert result.rows[-1].oop.busbw_gbps == 224.31 and result.rows[-1].ip.algbw_gbps == 258.47


@pytest.mark.corpus
def test_corpus_single_gpu_alltoall_zero_busbw_and_na():
    result = _corpus("alltoall-rtx5090-1gpu-issue287-excerpt.txt")
    [row] = result.rows
    assert (row.redop, row.root, row.count) == ("none", -1, 8388608)
    assert row.oop == NcclSide(19.56, 1715.44, 0.0, 0)
    assert row.ip == NcclSide(0.78, 43046.1, 0.0, None)
    assert result.avg_busbw_gbps == 0.0 and result.busbw_at_large_sizes() == 0.0
    assert result.header["step"] == "1048576(bytes)"


@pytest.mark.corpus
def test_corpus_reduce_scatter_info_line_inside_table():
    result = _corpus("reduce_scatter-a100-sxm4-40gb-8gpu-nccl-info-in-table-superbench.log")
    assert len(result.rows) == 34 and result.avg_busbw_gbps == 60.168 and result.warnings == []
    assert result.rows[0].oop.time_us == 34.88 and result.rows[-1].ip.busbw_gbps == 231.25


@pytest.mark.corpus
def test_corpus_ib_error_no_table():
    result = _corpus("all_reduce-v100-2node-ib-error12-issue24-excerpt.txt")
    assert result.rows == [] and result.ranks == [] and result.avg_busbw_gbps is None
    assert result.errors == ["gpu5: Test NCCL failure common.cu:343 'unhandled cuda error'",
                             ".. gpu5: Test failure common.cu:393", ".. gpu5: Test failure common.cu:492",
                             ".. gpu5: Test failure all_reduce.cu:103"]
    assert len(result.warnings) == 3 and "Got completion with error 12" in result.warnings[0]
    assert "NCCL WARN Cuda failure 'an illegal memory access was encountered'" in result.warnings[2]


@pytest.mark.corpus
def test_corpus_gh200_device_busy_no_table():
    result = _corpus("all_reduce-gh200-2node-8rank-device-busy-exclusive-process-nccltests2.17.8-issue369.txt")
    assert result.rows == [] and result.version == "2.17.8"
    assert result.header["nccl-headers"] == "22606" and result.header["collective"] == "all_reduce_perf"
    assert len(result.errors) == 12
    assert sum("busy or unavailable" in e for e in result.errors) == 6
    assert ".. gpu-1-7 pid 3230359: Test failure common.cu:1189" in result.errors
    assert [(r.host, r.device, r.busid) for r in result.ranks][3:5] == [
        ("gpu-1-1", 3, "0039:01:00"), ("gpu-1-7", 0, "0009:01:00")]
    assert result.ranks[0].name == "NVIDIA GH200 120GB" and result.ranks[4].pid == 3230358


# ------------------------------------------------------------------------------------ own fixtures


def test_fixture_healthy_multinode_with_info_noise():
    result = _fixture("all_reduce-h100-2node-16rank-nccl2.27-healthy-info-noise.txt")
    assert (result.errors, result.warnings) == ([], [])
    assert result.version == "2.17.6" and result.header["unalign"] == "0"
    assert result.header["nccl-library"] == "22703" and result.header["collective"] == "all_reduce_perf"
    assert len(result.rows) == 31 and result.avg_busbw_gbps == 130.994 and result.out_of_bounds == 0
    assert [r.host for r in result.ranks] == ["h100-a017"] * 8 + ["h100-a018"] * 8
    assert (result.ranks[8].rank, result.ranks[8].device, result.ranks[8].busid, result.ranks[8].pid) == (
        8, 0, "0000:18:00", 98422)
    assert _row(result, 65536).oop == NcclSide(29.38, 2.23, 4.18, 0)   # after two in-table INFO lines
    assert result.rows[-1] == NcclRow(8589934592, 2147483648, "float", "sum", -1,
                                      NcclSide(44585.9, 192.66, 361.24, 0), NcclSide(43537.5, 197.30, 369.94, 0))
    assert result.busbw_at_large_sizes() == pytest.approx((369.94 + 372.54 + 365.75) / 3)


def test_fixture_alltoall_redop_none_root_minus_one():
    result = _fixture("alltoall-h100-2node-16rank-redop-none-root-minus1.txt")
    assert {(r.redop, r.root) for r in result.rows} == {("none", -1)}
    assert result.header["collective"] == "alltoall_perf" and "unalign" not in result.header
    assert _row(result, 1024).count == 16 and _row(result, 1024).oop.time_us == 61.32
    assert len(result.rows) == 21 and result.avg_busbw_gbps == 18.9355 and result.wrong_total == 0


def test_fixture_broadcast_root_zero_old_busid():
    result = _fixture("broadcast-a100-8gpu-single-process-root0.txt")
    assert [(r.size_bytes, r.root, r.redop) for r in result.rows] == [
        (1048576, 0, "none"), (4194304, 0, "none"), (16777216, 0, "none"), (67108864, 0, "none"),
        (268435456, 0, "none")]
    assert result.rows[-1].oop == NcclSide(1841.74, 145.75, 145.75, 0)
    assert result.avg_busbw_gbps == 104.716 and result.header["step"] == "4(factor)"
    assert {r.busid for r in result.ranks} >= {"0x07", "0xc4"} and result.errors == []


def test_fixture_failure_mid_sweep():
    result = _fixture("all_reduce-h100-2node-ib-completion-error12-mid-sweep-failure.txt")
    assert len(result.rows) == 23 and result.rows[-1].size_bytes == 33554432
    assert result.avg_busbw_gbps is None and result.out_of_bounds is None
    assert result.errors[0].startswith("h100-b102: Test NCCL failure common.cu:1279 'remote process exited")
    assert result.errors[1:] == [".. h100-b102 pid 29906: Test failure common.cu:1239",
                                 ".. h100-b102 pid 29906: Test failure common.cu:1170",
                                 "srun: error: h100-b102: task 11: Exited with exit code 2",
                                 "slurmstepd: error: *** STEP 50117.0 ON h100-b101 CANCELLED AT "
                                 "2025-03-02T11:04:37 ***"]
    assert "NCCL WARN NET/IB: Got completion from peer" in result.warnings[0]
    assert "summary" in result.warnings[1]


def test_fixture_no_table_invalid_number_of_gpus():
    result = _fixture("all_reduce-4gpu-node-asked-for-8-invalid-number-of-gpus.txt")
    assert result.rows == [] and result.ranks == [] and result.header["nGpus"] == "8"
    assert result.errors == ["Invalid number of GPUs: 8 requested but only 4 were found."]


def test_fixture_mpirun_tag_output_and_info_glued_to_half_row():
    result = _fixture("all_gather-a100-2node-mpirun-tag-output-info-glued-mid-row.txt")
    assert result.warnings == [] and result.errors == []
    assert [r.size_bytes for r in result.rows] == [65536, 262144, 1048576, 4194304, 16777216, 67108864]
    assert result.rows[0] == NcclRow(65536, 8192, "float", "none", -1,
                                     NcclSide(20.44, 3.21, 1.60, 0), NcclSide(20.53, 3.19, 1.60, 0))
    assert [r.host for r in result.ranks] == ["a100-n07", "a100-n08"]
    assert result.avg_busbw_gbps == 7.93646


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.txt")))
def test_every_fixture_is_json_ready(name):
    data = _check_contract(_fixture(name))
    assert data["rows"] or data["errors"]


# ------------------------------------------------------------------------------------ inline variants

HEAD = ("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n"
        "#  Rank  0 Group  0 Pid   4242 on      node1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n#\n")
PER_ITER = HEAD + """\
# Per-Iteration Report: CUDA event timing; i_* uses max over process rows
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
     1048576        262144     float     sum      -1    20.10   52.17   91.30       0    19.80    21.00    21.00     1.20    20.30   51.65   90.39       0    19.90    21.40    21.40     1.50
     2097152        524288     float     sum      -1    30.10   69.67  121.93       2    29.80    31.00    31.00     0.90    30.30   69.21  121.12       0    29.90    31.40    31.40     1.10
# Out of bounds values : 2 FAILED
# Avg bus bandwidth    : 106.185 OK
"""
STAMPED = HEAD + """\
#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw  #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S
     1048576        262144     float     sum      -1    20.10   52.17   91.30       0    20.30   51.65   90.39       0 2025-03-02 11:04:37
     2097152        524288     float     sum      -1    30.10   69.67  121.93       0    30.30   69.21  121.12     N/A 2025-03-02 11:04:38
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 106.185 FAILED
"""


def test_per_iteration_columns_are_skipped_by_name():
    result = parse(PER_ITER)
    assert [r.oop for r in result.rows] == [NcclSide(20.10, 52.17, 91.30, 0), NcclSide(30.10, 69.67, 121.93, 2)]
    assert result.rows[1].ip == NcclSide(30.30, 69.21, 121.12, 0)
    assert result.wrong_total == 2 and result.out_of_bounds == 2 and result.out_of_bounds_ok is False
    assert result.errors == ["# Out of bounds values : 2 FAILED"] and result.avg_busbw_gbps == 106.185


def test_cputime_and_timestamp_columns():
    result = parse(STAMPED)
    assert [(r.oop.time_us, r.ip.time_us, r.ip.wrong) for r in result.rows] == [(20.10, 20.30, 0), (30.10, 30.30, None)]
    assert result.errors == ["# Avg bus bandwidth    : 106.185 FAILED"]


def test_untitled_rows_guess_the_layout():
    text = ("           8             2   float     sum    61.03    0.00    0.00  2e-07    61.04    0.00    0.00  1e-07\n"
            "          16             4     float     sum      -1    21.33    0.00    0.00      4    20.55    0.00    0.00   1e+06\n"
            "# Out of bounds values : 0 OK\n")
    old, new = parse(text).rows
    assert (old.root, old.oop.error, old.oop.wrong) == (None, 2e-07, None)
    assert (new.root, new.oop.wrong, new.ip.wrong) == (-1, 4, 1000000)


def test_crlf_srun_label_and_nan_values():
    text = (HEAD + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "0:      1048576        262144     float     sum      -1    20.10     nan    -nan      0      inf   51.65   90.39    N/A\n"
            "# Avg bus bandwidth    : nan\n").replace("\n", "\r\n")
    result = parse(text)
    [row] = result.rows
    assert row.oop == NcclSide(20.10, None, None, 0) and row.ip == NcclSide(None, 51.65, 90.39, None)
    assert result.avg_busbw_gbps is None
    assert json.dumps(result.to_dict(), allow_nan=False)


def test_cut_mid_row_and_unreadable_rows_are_warnings():
    title = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    text = (HEAD + title + "     1048576        262144     float     sum      -1    20.10   52.17   91.30    abc    20.30   51.65   90.39      0\n"
            "     2097152        524288     float     sum      -1    30.10   69.67  121.93       0\n")
    result = parse(text)
    [row] = result.rows
    assert row.size_bytes == 2097152 and row.oop.busbw_gbps == 121.93 and row.ip == NcclSide(None, None, None, None)
    assert result.warnings[0].startswith("unreadable result row ('abc' in column '#wrong' is not a number)")
    assert "without in-place columns" in result.warnings[1] and "summary" in result.warnings[2]


def test_header_only_output_gets_a_no_table_error():
    result = parse(HEAD)
    assert result.rows == [] and result.errors == ["no results table: the output ends before the first result row"]
    assert result.ranks[0].busid == "0000:18:00" and result.header["nThread"] == "1"


def test_two_summaries_and_mangled_rank_line():
    text = "#  Rank  3 Pid ?? garbled\n# Out of bounds values : 0 OK\n# Avg bus bandwidth : 1.5\n" \
           "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth : 2.5\n"
    result = parse(text)
    assert [(r.rank, r.host) for r in result.ranks] == [(3, None)]
    assert (result.out_of_bounds, result.out_of_bounds_ok, result.avg_busbw_gbps) == (3, False, 2.5)
    assert "2 summaries" in result.warnings[-1]


@pytest.mark.parametrize("text", ["", "   \n\t", "hello world\n", "1 2 3\n4 5 6\n", "\x00\x01\x02",
                                  "# just a comment\n", "host:1:2 [0] NCCL INFO only info\n"])
def test_not_nccl_tests_output_raises(text):
    with pytest.raises(NcclParseError) as info:
        parse(text)
    assert isinstance(info.value, ParseError) and isinstance(info.value, ValueError)
    assert "nccl-tests output" in str(info.value)


def test_non_text_raises_and_bytes_are_decoded():
    with pytest.raises(NcclParseError, match="must be text"):
        parse(42)  # type: ignore[arg-type]
    assert parse(PER_ITER.encode()).rows[0].size_bytes == 1048576


def test_busbw_at_large_sizes_edges():
    result = parse(PER_ITER)
    assert result.busbw_at_large_sizes(min_bytes=2097152) == 121.93
    assert result.busbw_at_large_sizes(min_bytes=1 << 40) is None
    assert result.busbw_at_large_sizes(top=10) == pytest.approx((91.30 + 121.93) / 2)
    with pytest.raises(ValueError):
        result.busbw_at_large_sizes(top=0)


def test_benign_launcher_errors_are_warnings_failed_tasks_are_errors():
    ok = parse(PER_ITER.replace("# Out of bounds values : 2 FAILED", "# Out of bounds values : 0 OK")
               + "srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device\n"
               + "mpirun: Warning: unable to bind to core\n")
    assert ok.errors == [] and ok.warnings == ["srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device",
                                               "mpirun: Warning: unable to bind to core"]
    failed = parse(HEAD + "srun: error: node1: tasks 0-3: Killed\n"
                   "slurmstepd: error: Detected 1 oom_kill event in StepId=12.0. Some of the step tasks have been OOM Killed.\n")
    assert failed.errors == ["srun: error: node1: tasks 0-3: Killed", "slurmstepd: error: Detected 1 oom_kill event in "
                             "StepId=12.0. Some of the step tasks have been OOM Killed."]
