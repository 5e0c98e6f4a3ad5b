"""``sqlframe.read_frame``: the report's one way from a SELECT to a frame (COPY + CSV on PostgreSQL, the
driver's rows on SQLite) gives the same frame on both: text stays text (a node named 001, an empty
string apart from NULL, commas, quotes and newlines in a message), numbers and times by their SQL type,
the statement's order kept, an empty result with its columns; a naive time parameter is refused."""
from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from sqlalchemy import String, func, insert, select, type_coerce

from healthcheck.history import migrations, schema
from healthcheck.history.db import make_engine, resolve_url
from healthcheck.report.sqlframe import read_frame

T0 = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
ROWS = [  # run_id, seq, node, started_at, check, component, status, message
    ("r1", 0, "001", T0, "gpu.ecc", None, "pass", ""),
    ("r1", 1, "001", T0, "gpu.xid", "GPU0", "fail", 'Xid 79, "fell off the bus"\nsecond line, with a comma'),
    ("r2", 0, "gpu7", T0 + timedelta(hours=1), "host.disk", "", "warn", "\\N"),  # COPY's usual NULL, as text
]


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request, tmp_path_factory):
    if request.param == "sqlite":
        eng = make_engine(resolve_url(f"sqlite:///{tmp_path_factory.mktemp('sqlframe') / 'h.sqlite'}", env={}))
    else:
        server = request.getfixturevalue("postgres_server")
        name = f"sqlframe{os.getpid()}_{time.monotonic_ns() % 10**9}"
        server.admin(f"CREATE DATABASE {name}")
        eng = make_engine(resolve_url(server.url(name), env={"HEALTHCHECK_DB_PASSWORD": server.password}))
    migrations.upgrade(eng)
    with eng.begin() as conn:
        for run_id, node, at in (("r1", "001", T0), ("r2", "gpu7", T0 + timedelta(hours=1))):
            conn.execute(insert(schema.runs).values(run_id=run_id, record_id=run_id, node=node, context="check",
                                                    started_at=at, duration_s=0.5, status="fail",
                                                    tool_version="t", ingested_at=at))
        conn.execute(insert(schema.results), [dict(zip(("run_id", "seq", "node", "started_at", "check", "component",
                                                        "status", "message"), r)) for r in ROWS])
    yield eng
    eng.dispose()


def _time(engine, col):
    return type_coerce(col, String()).label(col.name) if engine.dialect.name == "sqlite" else col


def test_text_numbers_times_and_order_survive(engine):
    r = schema.results
    stmt = (select(r.c.run_id, r.c.seq, r.c.node, _time(engine, r.c.started_at), r.c.component, r.c.message)
            .order_by(r.c.started_at.desc(), r.c.seq))
    with engine.connect() as conn:
        df = read_frame(conn, stmt, ["run_id", "seq", "node", "started_at", "component", "message"], ("started_at",))
    assert list(df["run_id"]) == ["r2", "r1", "r1"]
    assert list(df["seq"]) == [0, 0, 1] and df["seq"].dtype.kind == "i"
    assert list(df["node"]) == ["gpu7", "001", "001"]  # not the number 1
    comp = df["component"]
    assert comp[0] == "" and pd.isna(comp[1]) and comp[2] == "GPU0"  # empty string and NULL kept apart
    assert list(df["message"]) == [ROWS[2][7], ROWS[0][7], ROWS[1][7]]
    assert list(df["started_at"]) == [pd.Timestamp(T0 + timedelta(hours=1)), pd.Timestamp(T0), pd.Timestamp(T0)]
    assert str(df["started_at"].dt.tz) == "UTC"


def test_aggregates_and_bound_parameters(engine):
    r = schema.results
    stmt = (select(r.c.node, func.count().label("n"), func.max(r.c.message).label("m"))
            .where(r.c.started_at >= T0, r.c.check.in_(["gpu.ecc", "gpu.xid", "host.disk"]))
            .group_by(r.c.node).order_by(r.c.node))
    with engine.connect() as conn:
        df = read_frame(conn, stmt, ["node", "n", "m"])
    assert list(df["node"]) == ["001", "gpu7"] and list(df["n"]) == [2, 1]


def test_an_empty_result_keeps_its_columns(engine):
    r = schema.results
    with engine.connect() as conn:
        df = read_frame(conn, select(r.c.node, r.c.seq).where(r.c.node == "nowhere"), ["node", "seq"])
    assert df.empty and list(df.columns) == ["node", "seq"]


def test_column_names_must_match_the_selection(engine):
    if engine.dialect.name == "sqlite":
        pytest.skip("the COPY reader checks the names against the statement; SQLite's rows are named by pandas")
    r = schema.results
    with engine.connect() as conn, pytest.raises(ValueError, match="column name"):
        read_frame(conn, select(r.c.node, r.c.seq), ["node"])


def test_a_naive_time_parameter_is_refused(engine):
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite binds through UTCDateTime, which takes naive times as UTC")
    r = schema.results
    with engine.connect() as conn, pytest.raises(ValueError, match="naive"):
        read_frame(conn, select(r.c.node).where(r.c.started_at >= datetime(2026, 5, 1)), ["node"])


@pytest.mark.parametrize("reader", ["array_items", "_array_items_numpy"])  # with pyarrow, and without it
def test_number_arrays_come_back_flat_with_their_lengths(reader):
    from healthcheck.report import sqlframe

    array_items = getattr(sqlframe, reader)
    items, lengths = array_items(pd.Series(["{1714521600000000,1714608000000001}", "{7}"]), "int64")
    assert items.tolist() == [1714521600000000, 1714608000000001, 7] and lengths.tolist() == [2, 1]
    values, _ = array_items(pd.Series(["{742.2,-0.5,1e-05}"]), "float64")
    assert values.tolist() == [742.2, -0.5, 1e-05]
    for bad in (["{1,NULL}"], ["{}"], ["1,2"]):
        with pytest.raises(ValueError):
            array_items(pd.Series(bad), "float64")


def test_both_csv_readers_give_the_same_frame():
    """pyarrow's reader (where installed) and pandas' C parser read COPY's CSV alike: text stays text (001,
    '' apart from NULL, a quoted newline), an integer column with a NULL becomes float with NaN, an all-NULL
    number column float."""
    import io

    from healthcheck.report import sqlframe

    null = "hc-null-0123"
    csv = (b'001,,1,1.5,' + null.encode() + b',t\n'
           b'' + null.encode() + b',"a, ""b""\nc",' + null.encode() + b',2.25,' + null.encode() + b',f\n')
    columns, kinds = ["node", "msg", "n", "x", "none", "flag"], ["text", "text", "number", "number", "number", "bool"]
    fast = sqlframe._parse_csv(io.BytesIO(csv), columns, kinds, null)
    slow = sqlframe._parse_csv(io.BytesIO(csv), columns, kinds, null, arrow=False)
    pd.testing.assert_frame_equal(fast, slow)
    assert list(fast["node"].astype(object).where(fast["node"].notna(), None)) == ["001", None]
    assert fast["msg"][0] == "" and fast["msg"][1] == 'a, "b"\nc'
    assert fast["n"].dtype == "float64" and fast["n"][0] == 1 and pd.isna(fast["n"][1])
    assert fast["x"].tolist() == [1.5, 2.25] and fast["none"].dtype == "float64" and fast["none"].isna().all()
    assert list(fast["flag"]) == ["t", "f"]  # read as text; read_frame maps t/f to booleans


def test_postgresqls_nan_is_a_float_with_pyarrows_reader():
    import io

    pytest.importorskip("pyarrow")
    from healthcheck.report import sqlframe

    nan = sqlframe._parse_csv(io.BytesIO(b"NaN\n1\n"), ["x"], ["number"], "hc-null-0")
    assert nan["x"].dtype == "float64" and pd.isna(nan["x"][0]) and nan["x"][1] == 1.0


def _pg_only(engine):
    if engine.dialect.name == "sqlite":
        pytest.skip("the COPY reader is PostgreSQL's")


def test_every_row_of_a_large_copy_arrives_in_order(engine):
    """More rows than one socket read holds: the reader waits on the socket between batches of rows and
    hands back all of them, in the statement's order."""
    _pg_only(engine)
    from sqlalchemy import BigInteger, column, text

    stmt = text("SELECT x, 'node' || x AS node FROM generate_series(1, 200000) AS x ORDER BY x DESC").columns(
        column("x", BigInteger), column("node", String))
    with engine.connect() as conn:
        df = read_frame(conn, stmt, ["x", "node"])
    assert len(df) == 200_000 and df["x"].iloc[0] == 200_000 and df["x"].iloc[-1] == 1
    assert (df["x"].diff().dropna() == -1).all() and df["node"].iloc[1] == "node199999"


@pytest.mark.parametrize("sql, error, says", [
    ("SELECT 10 / (x - 3) AS v FROM generate_series(1, 5) AS x", "DataError", "division by zero"),  # part-way
    ("SELECT no_such_column AS v FROM generate_series(1, 5) AS x", "ProgrammingError", "no_such_column"),
])
def test_a_server_error_is_sqlalchemys_and_the_connection_recovers(engine, sql, error, says):
    """The server's error, before the first row or part-way through them, is raised as SQLAlchemy's error of
    its class (what every caller of the report's reads handles), naming the cause; after a rollback the
    connection reads again."""
    _pg_only(engine)
    from sqlalchemy import Integer, column, exc, text

    with engine.connect() as conn:
        with pytest.raises(exc.DBAPIError, match=says) as err, conn.begin():
            read_frame(conn, text(sql).columns(column("v", Integer)), ["v"])
        assert type(err.value).__name__ == error
        with conn.begin():
            df = read_frame(conn, text("SELECT 7 AS v").columns(column("v", Integer)), ["v"])
    assert list(df["v"]) == [7]


def test_a_query_larger_than_one_socket_write_is_sent_whole(engine):
    """The statement, its parameters bound in (COPY takes no server-side ones), can be megabytes (the keys of
    thousands of series): the non-blocking connection sends it in as many writes as it takes."""
    _pg_only(engine)
    from sqlalchemy import bindparam

    big = "x" * 4_000_000
    with engine.connect() as conn:
        df = read_frame(conn, select(func.char_length(bindparam("big", big, type_=String)).label("n")), ["n"])
    assert list(df["n"]) == [4_000_000]
