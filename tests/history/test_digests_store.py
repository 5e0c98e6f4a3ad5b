"""The burn-in's GEMM digests in the store (migration 0004), on SQLite and a real PostgreSQL: stored
with their run in one transaction, idempotent, malformed entries refused with the field named, read back
by time window, exported."""
from __future__ import annotations

import csv
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from healthcheck.analysis.digests import fleet_view
from healthcheck.history.digests import fleet_from_history, load_digests
from healthcheck.history.ingest import ingest
from healthcheck.history.queries import export
from healthcheck.history.rows import RecordInvalid, digest_rows
from healthcheck.history.schema import gemm_digests, runs
from tests.history.recs import T0, run_record, write_spool

KEY = "NVIDIA H200|torch 2.5.1 cuda 12.4|bf16|n=8192|seed=1234"
GOOD, BAD = "a1" * 16, "b2" * 16


def burnin_record(node: str, i: int, digests: dict[str, str]) -> dict:
    rec = run_record(node, i, gpus=2)
    rec["context"] = "burnin"
    rec["burnin"] = {"suite": "quick", "backend": "torch",
                     "gemm_digests": {gpu: [KEY, digest] for gpu, digest in digests.items()}}
    return rec


def n_digests(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(gemm_digests)).scalar_one()


def test_digests_are_stored_once_and_read_back_by_window(engine, tmp_path):
    recs = [burnin_record(f"gpu{n:02d}", n, {"gpu0": GOOD, "gpu1": BAD if n == 3 else GOOD}) for n in range(1, 5)]
    write_spool(tmp_path / "sp", recs + [run_record("gpu01", 9)])  # a prolog run: no digests
    first = ingest([tmp_path / "sp"], engine)
    assert first.runs == 5 and first.skipped == [] and n_digests(engine) == 8
    again = ingest([tmp_path / "sp"], engine)
    assert again.runs == 0 and n_digests(engine) == 8
    rows = load_digests(engine)
    assert [(r.node, r.component, r.digest) for r in rows if r.digest == BAD] == [("gpu03", "gpu1", BAD)]
    assert {r.fleet_key for r in rows} == {KEY} and all(r.started_at.tzinfo is not None for r in rows)
    assert {r.node for r in load_digests(engine, since=T0 + timedelta(hours=3))} == {"gpu03", "gpu04"}
    assert {r.node for r in load_digests(engine, until=T0 + timedelta(hours=2))} == {"gpu01", "gpu02"}
    view = fleet_from_history(engine)
    assert view.majorities == {KEY: GOOD} and [(d.node, d.component) for d in view.deviants] == [("gpu03", "gpu1")]
    assert view.keys == fleet_view(rows).keys


def test_a_malformed_digest_refuses_that_record_only(engine, tmp_path):
    bad = burnin_record("gpu01", 1, {"gpu0": GOOD})
    bad["burnin"]["gemm_digests"]["gpu1"] = [KEY, "not-hex!"]
    write_spool(tmp_path / "sp", [bad, burnin_record("gpu02", 2, {"gpu0": GOOD})])
    report = ingest([tmp_path / "sp"], engine)
    assert report.runs == 1 and n_digests(engine) == 1
    (skipped,) = report.skipped
    assert "burnin.gemm_digests['gpu1']: digest must be 12 to 64 hex digits" in skipped.reason
    with engine.connect() as conn:  # nothing of the refused run was stored
        assert conn.execute(select(runs.c.node)).scalars().all() == ["gpu02"]


def test_export_the_digests_table(engine, tmp_path):
    write_spool(tmp_path / "sp", [burnin_record("gpu01", 1, {"gpu0": GOOD, "gpu1": GOOD})])
    ingest([tmp_path / "sp"], engine)
    out = tmp_path / "digests.csv"
    assert export(engine, "csv", out, table="gemm_digests") == 2
    with open(out, newline="") as fh:
        got = list(csv.DictReader(fh))
    assert [(r["component"], r["fleet_key"], r["digest"]) for r in got] == [("gpu0", KEY, GOOD), ("gpu1", KEY, GOOD)]


@pytest.mark.parametrize("digests, message", [
    ("x", "'burnin.gemm_digests' must be an object"),
    ({"gpu0": "abc"}, "must be [fleet key, hex digest]"),
    ({"gpu0": [KEY]}, "must be [fleet key, hex digest]"),
    ({"gpu0": [KEY, 5]}, "must be [fleet key, hex digest]"),
    ({"gpu0": ["", GOOD]}, "component or fleet key empty or too long"),
    ({"gpu0": ["k" * 256, GOOD]}, "component or fleet key empty or too long"),
    ({"gpu0": [KEY, "ab" * 40]}, "12 to 64 hex digits"),
    ({"gpu0": [KEY, "abc"]}, "12 to 64 hex digits"),
])
def test_digest_rows_name_the_bad_field(digests, message):
    with pytest.raises(RecordInvalid, match=message.replace("[", r"\[").replace("]", r"\]")):
        digest_rows({"burnin": {"gemm_digests": digests}}, "r", "n", T0)


def test_digest_rows_of_other_runs_are_none_and_hex_is_lower_case():
    assert digest_rows({}, "r", "n", T0) == [] and digest_rows({"burnin": {"suite": "quick"}}, "r", "n", T0) == []
    assert digest_rows({"burnin": {"gemm_digests": {"gpu0": [KEY, GOOD.upper()]}}}, "r", "n", T0) == [
        ("r", "gpu0", KEY, "n", T0, GOOD)]
