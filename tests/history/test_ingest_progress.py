"""`healthcheck history ingest --progress`: spools read and rows stored so far on stderr after each batch;
none unless asked when stderr is not a terminal; stdout keeps only the summary."""
from __future__ import annotations

import re

from click.testing import CliRunner

from healthcheck.cli.history import history
from tests.history.recs import run_record, write_spool


def _spools(tmp_path, nodes=3, runs=4):
    for n in range(nodes):
        write_spool(tmp_path / "sp" / f"gpu0{n}", [run_record(f"gpu0{n}", i) for i in range(runs)])
    return str(tmp_path / "sp")


def test_progress_lines_count_spools_and_rows(tmp_path):
    res = CliRunner().invoke(history, ["ingest", _spools(tmp_path), "--db", str(tmp_path / "h.sqlite"),
                                       "--batch-rows", "50", "--progress"])
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("ingest: ")]
    assert len(lines) >= 3  # a line per batch of ~50 rows: 12 runs of 28 rows each
    got = [tuple(int(v.replace(",", "")) for v in re.match(
        r"ingest: (\d+)/3 spool\(s\) read, ([\d,]+) record\(s\), ([\d,]+) row\(s\) stored in (\d+) batch", x).groups())
        for x in lines]
    assert [g[3] for g in got] == list(range(1, len(got) + 1))  # one per batch, in order
    assert all(a[2] <= b[2] and a[0] <= b[0] for a, b in zip(got, got[1:]))  # rows and spools only grow
    # every record in by the last batch; the last spool counts as read once its end is seen, which may be
    # after that batch was committed
    assert got[-1][1] == 12 and got[-1][0] in (2, 3)
    assert "ingest: " not in res.stdout and "stored 12 run(s)" in res.stdout


def test_no_progress_off_a_terminal_unless_asked(tmp_path):
    db = str(tmp_path / "h.sqlite")
    res = CliRunner().invoke(history, ["ingest", _spools(tmp_path), "--db", db, "--batch-rows", "50"])
    assert res.exit_code == 0 and "ingest: " not in res.stderr and "stored 12 run(s)" in res.stdout
    res = CliRunner().invoke(history, ["ingest", _spools(tmp_path), "--db", db, "--no-progress"])
    assert res.exit_code == 0 and "ingest: " not in res.stderr
