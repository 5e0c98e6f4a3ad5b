"""Eight processes ingest overlapping spools at once: no loss, no duplicate, no deadlock, exact rollups."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from healthcheck.history import migrations
from healthcheck.history.schema import actions, results, runs
from tests.history.conftest import ROOT
from tests.history.recs import action_record, run_record, write_spool
from tests.history.rollupcheck import expected, stored

WORKER = """
import json, sys
from healthcheck.history.db import make_engine, resolve_url
from healthcheck.history.ingest import ingest
url, paths = sys.argv[1], sys.argv[2:]
engine = make_engine(resolve_url(url))  # the password comes from the environment
report = ingest(paths, engine, batch_rows=300)
print(json.dumps({"runs": report.runs, "actions": report.actions, "retries": report.retries}))
"""


@pytest.mark.parametrize("store", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"],
                         indirect=True)
def test_eight_concurrent_ingests_of_overlapping_spools(store, tmp_path):
    nodes = [f"gpu{n:02d}" for n in range(8)]
    for n, node in enumerate(nodes):
        recs = [run_record(node, i) for i in range(40)]
        for i, rec in enumerate(recs):  # error counters: every ingest merges into the same rollup rows
            rec["results"][8]["metrics"] = {"symbol_error": float(i // 5), "link_downed": 0.0}
        write_spool(tmp_path / node, recs + [action_record(node, 39)])
    engine = store.engine()
    migrations.upgrade(engine)
    procs = []
    for k in range(8):  # process k ingests 4 of the 8 spools, starting at a different one: heavy overlap
        paths = [str(tmp_path / nodes[(k + j) % 8]) for j in range(4)]
        proc = subprocess.Popen([sys.executable, "-c", WORKER, store.url, *paths], cwd=ROOT, text=True,
                                env={**os.environ, **store.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(proc)
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        outcomes.append(json.loads(out))
    assert sum(o["runs"] for o in outcomes) == 8 * 40  # each run stored by exactly one process
    assert sum(o["actions"] for o in outcomes) == 8
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(runs)).scalar_one() == 320
        assert conn.execute(select(func.count(func.distinct(runs.c.run_id)))).scalar_one() == 320
        assert conn.execute(select(func.count()).select_from(results)).scalar_one() == 3200
        assert conn.execute(select(func.count()).select_from(actions)).scalar_one() == 8
    assert sum(o["retries"] for o in outcomes) == 0  # key-ordered inserts: no deadlock to retry
    assert stored(engine) == expected(engine)  # the rollups, merged by eight writers, are the rows' own
