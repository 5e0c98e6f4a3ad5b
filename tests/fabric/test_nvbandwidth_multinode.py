"""Multi-node nvbandwidth across the trays of one NVLink domain (issue 33, point 5): the ranks' hosts read
from the "Process N (host): device D" lines, every pair judged against the GB200 reference and the run's
median, a rank's GPU or a whole tray named when it is in every slow pair. The fixture is our own, in the
format of nvbandwidth's multi-node output (2 GB200 trays x 4 GPUs, rank 5 = tray t02's GPU1 slow)."""
from __future__ import annotations

from healthcheck.core.model import Status
from healthcheck.fabric import p2p
from healthcheck.parsers.nvbandwidth import pairs, parse_nvbandwidth
from tests.conftest import FIXTURES

TEXT = (FIXTURES / "fabric" / "node" / "nvbandwidth-multinode-gb200-2trays-slow-rank5.txt").read_text()
READ = "multinode_device_to_device_memcpy_read_ce"


def _judge(text: str = TEXT):
    return p2p.judge(parse_nvbandwidth(text), p2p.load_references())


def _healed(text: str = TEXT) -> str:
    """The fixture with rank 5 as fast as the others (its 486.x cells at 797.9)."""
    import re
    return re.sub(r"\b486\.\d\d\b", "797.90", text)


def test_ranks_hosts_and_every_matrix_are_read():
    result = parse_nvbandwidth(TEXT)
    assert result.processes[5] == ("gb-r01-t02", 1, "NVIDIA GB200 (00000009:01:00)")
    assert len(result.processes) == 8 and result.devices == {}
    read = result.test(READ)
    assert (read.status, len(pairs(read)), read.row_kind, read.column_kind) == ("passed", 56, "GPU", "GPU")
    all_to_one = result.test("multinode_device_to_device_all_to_one_write_sm")
    assert (all_to_one.status, all_to_one.rows, all_to_one.row_kind, all_to_one.column_kind) == \
        ("passed", [0], None, "GPU")  # "All Gpus -> GPU(column)": its description has no (row)
    bisect = result.test("multinode_bisect_write_ce")
    assert bisect.status == "passed" and bisect.rows == list(range(8)) and bisect.columns == [0]  # "0->4" rows
    assert p2p.gpu_name_of(result) == "NVIDIA GB200"


def test_gb200_takes_its_own_reference_not_b200s():
    refs = p2p.load_references()
    assert refs.sku_for("NVIDIA GB200").name == "gb200"
    assert refs.sku_for("NVIDIA B200").name == "b200"
    ref = refs.by_name("gb200").tests[READ]
    assert ref.value == 798.0 and ref.estimate is False and "GPU Operator" in ref.source


def test_slow_rank_is_named_by_its_tray_and_gpu():
    found = [f for f in _judge() if f.status is Status.FAIL]
    suspect = [f for f in found if "is in all" in f.message]
    assert len(suspect) == 1 and suspect[0].component == "gb-r01-t02:GPU1"
    pairs_failed = [f for f in found if f not in suspect]
    assert len(pairs_failed) == 14 and all("gb-r01-t02:GPU1" in f.component for f in pairs_failed)
    assert "below the gb200 reference 798 GB/s-15% (published)" in pairs_failed[0].message
    assert "of the run's median" in pairs_failed[0].message


def test_healthy_domain_passes_against_the_published_figure():
    found = _judge(_healed())
    assert {f.status for f in found} == {Status.PASS}
    assert "reference 798 GB/s-15% (published)" in next(f.message for f in found if f.component == READ)


def test_a_tray_whose_gpus_are_all_slow_is_named_as_the_tray():
    lines = _healed().splitlines()
    start = lines.index("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)") + 2
    for r in range(8):  # every pair with a GPU of tray t02 (ranks 4-7) at 60 %, within t02 too
        cells = lines[start + r].split()
        lines[start + r] = f"{r:>2}" + "".join(
            f"{'N/A' if c == r else f'{float(v) * (0.6 if r >= 4 or c >= 4 else 1):.2f}':>10}"
            for c, v in enumerate(cells[1:]))
    found = [f for f in _judge("\n".join(lines) + "\n") if f.status is Status.FAIL]
    tray = [f for f in found if "suspect that tray" in f.message]
    assert len(tray) == 1 and tray[0].component == "gb-r01-t02"
    assert not any("is in all" in f.message for f in found)  # no single GPU is blamed


def test_slow_pairs_across_both_trays_name_no_tray():
    lines = _healed().splitlines()
    start = lines.index("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)") + 2
    for r, c in ((0, 1), (6, 7)):  # one slow pair inside each tray
        cells = lines[start + r].split()
        cells[c + 1] = "400.00"
        lines[start + r] = f"{r:>2}" + "".join(f"{v:>10}" for v in cells[1:])
    found = [f for f in _judge("\n".join(lines) + "\n") if f.status is Status.FAIL]
    assert len(found) == 2 and not any("suspect" in f.message for f in found)


def test_superscript_digits_are_a_parse_error_not_a_crash():
    from healthcheck.parsers import ParseError
    import pytest
    broken = TEXT.replace("           0         1", "²          0         1", 1)
    result = parse_nvbandwidth(broken)  # the damaged header is skipped, the matrix never starts
    assert result.test(READ).status == "incomplete"
    with pytest.raises(ParseError):
        parse_nvbandwidth(TEXT.replace(" 0       N/A", " 0       ²", 1))
