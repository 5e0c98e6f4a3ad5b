"""A SELECT's rows as a DataFrame, the fast way each database offers: the one place the report turns
query results into frames.

- PostgreSQL: ``COPY (SELECT ...) TO STDOUT`` in CSV, read by libpq's own loop (:func:`copy_out`) and parsed
  by pyarrow's CSV reader (pandas' C reader without pyarrow). Through SQLAlchemy's
  rows each value is a Python object made by the driver, wrapped in a Row and converted again by the
  column's type (UTCDateTime); at 10,000 nodes the report reads millions of values, and that per-value
  work cost more than the queries (docs/performance.md, "10,000 nodes on PostgreSQL"). The statement is
  compiled by SQLAlchemy and its parameters bound client-side by psycopg (COPY takes no server-side
  parameters); text columns are read as text (a node named ``001`` stays ``001``), numbers and times by
  the selected column's SQL type. NULL is written as a random token of each read, so that an empty string
  stays an empty string and no stored text (``\\N`` included) is taken for NULL.
- SQLite: the driver's rows (times selected as text by the callers and converted by pandas in one pass).

Either way: text columns are pandas' text dtype with NULL as missing (not the empty string), numbers
float64/int64 as pandas infers them, the ``times`` columns UTC datetimes, and the rows keep the
statement's ORDER BY.
"""
from __future__ import annotations

import io
import secrets
from datetime import datetime
from typing import Sequence

import pandas as pd

NULL_PREFIX = "hc-null-"  # + random hex per read: no stored text can be taken for NULL


def read_frame(conn, stmt, columns: Sequence[str], times: Sequence[str] = ()) -> pd.DataFrame:
    """``stmt``'s rows as a frame with ``columns`` (its selected columns, in order); ``times`` converted to
    UTC datetimes. ``conn``: an open SQLAlchemy connection (inside the caller's transaction)."""
    columns = list(columns)
    if conn.dialect.name == "postgresql":
        df = _copy_frame(conn, stmt, columns)
    else:
        df = pd.DataFrame.from_records([tuple(r) for r in conn.execute(stmt).all()], columns=columns)
    for c in times:
        df[c] = pd.to_datetime(df[c], utc=True, format="ISO8601")
    return df


def _kind(sql_type) -> str:
    from sqlalchemy import Boolean, DateTime, Float, Integer, Numeric

    t = getattr(sql_type, "impl", sql_type)  # a TypeDecorator (UTCDateTime) by what it stores
    if isinstance(t, (Integer, Float, Numeric)):
        return "number"
    if isinstance(t, Boolean):
        return "bool"
    if isinstance(t, DateTime):
        return "time"
    return "text"


def _copy_frame(conn, stmt, columns: list[str]) -> pd.DataFrame:
    selected = list(stmt.selected_columns)
    if len(selected) != len(columns):
        raise ValueError(f"read_frame: {len(columns)} column name(s) for {len(selected)} selected column(s)")
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.params
    for name, value in params.items():
        if isinstance(value, datetime) and value.tzinfo is None:  # UTCDateTime's rule, applied by us here
            raise ValueError(f"read_frame: parameter {name} is a naive datetime; pass aware UTC times")
    kinds = [_kind(c.type) for c in selected]
    null = NULL_PREFIX + secrets.token_hex(12)
    import psycopg
    from sqlalchemy.exc import DBAPIError

    driver = conn.connection.driver_connection
    query = f"COPY ({compiled.string}) TO STDOUT (FORMAT csv, NULL '{null}')"
    try:
        with driver.cursor() as cur:
            cur.execute("SET LOCAL TIME ZONE 'UTC'")  # times as "...+00", whatever the server's default
        with psycopg.ClientCursor(driver) as cur:
            query = cur.mogrify(query, params)  # COPY takes no server-side parameters: bound here, as psycopg's own
        buf = copy_out(driver.pgconn, query.encode(driver.info.encoding))
    except psycopg.Error as exc:  # the server's error as SQLAlchemy's, as every other read of the report
        raise DBAPIError.instance(query, None, exc, psycopg.Error) from None
    if not buf.tell():
        return pd.DataFrame({c: pd.Series([], dtype="float64" if k == "number" else object)
                             for c, k in zip(columns, kinds)})
    buf.seek(0)
    df = _parse_csv(buf, columns, kinds, null)
    for c, k in zip(columns, kinds):
        if k == "bool":
            df[c] = df[c].map({"t": True, "f": False})
    return df


def copy_out(pgconn, query: bytes) -> io.BytesIO:
    """``query`` (a ``COPY .. TO STDOUT``) run on ``pgconn`` (a ``psycopg.pq.PGconn``, psycopg's public libpq
    API; the connection idle in its transaction) -> everything it wrote. Every row libpq has already received is
    taken in one tight loop, waiting on the socket (the GIL released) only when none is: psycopg's ``Copy``
    hands over one row per call through its generator machinery (2.2-2.8 us a row in all against 1.3 here), and
    the report reads about 900,000 rows at 10,000 nodes: over a second of CPU, and of the GIL, saved. The
    server's error (in the query, or part-way through the rows) raises psycopg's exception of its SQLSTATE;
    the connection is then in a failed transaction, as after any failed statement."""
    import select

    from psycopg import errors, pq

    def wait(event: int) -> None:  # poll, not select: no limit on the descriptor's number
        poller = select.poll()
        poller.register(pgconn.socket, event)
        poller.poll()

    def readable() -> None:
        wait(select.POLLIN)
        pgconn.consume_input()

    def result():
        while pgconn.is_busy():
            readable()
        return pgconn.get_result()

    def failure(res) -> Exception:
        state = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode("ascii", "replace")
        message = (res.error_message or pgconn.error_message or b"COPY failed").decode("utf-8", "replace").strip()
        try:
            cls = errors.lookup(state)
        except KeyError:
            cls = errors.DatabaseError
        return cls(message)

    pgconn.send_query(query)
    while pgconn.flush():  # non-blocking connection: the query may not have left in one write
        wait(select.POLLOUT)
    res = result()
    if res is None or res.status != pq.ExecStatus.COPY_OUT:
        error = failure(res) if res is not None else errors.DatabaseError("COPY did not start")
        while res is not None:
            res = result()
        raise error
    buf = io.BytesIO()
    write, get = buf.write, pgconn.get_copy_data
    while True:
        nbytes, data = get(1)
        if nbytes > 0:
            write(data)
        elif nbytes == 0:
            readable()
        elif nbytes == -1:
            break
        else:
            detail = (pgconn.error_message or b"").decode("utf-8", "replace").strip()
            raise errors.OperationalError(f"receiving COPY data failed: {detail or 'no detail'}")
    error = None
    while (res := result()) is not None:
        if res.status != pq.ExecStatus.COMMAND_OK and error is None:
            error = failure(res)
    if error is not None:
        raise error
    return buf


def _parse_csv(buf: io.BytesIO, columns: list[str], kinds: list[str], null: str,
               arrow: bool | None = None) -> pd.DataFrame:
    """COPY's CSV -> frame: pyarrow's reader where pyarrow is installed (three to five times faster on the
    report's large reads at 10,000 nodes), else (or ``arrow=False``) pandas' C parser; the same frame either way
    (text as text, NULL only where the token stands, numbers inferred: an integer column with a NULL as
    float with NaN, as pandas does)."""
    text = [c for c, k in zip(columns, kinds) if k != "number"]
    try:
        if arrow is False:
            raise ImportError("the C parser asked for")
        import pyarrow as pa
        import pyarrow.csv as pv
    except ImportError:
        return pd.read_csv(buf, header=None, names=columns, na_values=[null], keep_default_na=False,
                           dtype={c: str for c in text}, engine="c", low_memory=False)
    # one thread: the report reads on two connections at once already, and on two cores pyarrow's threads took
    # three times the CPU of one for the same parse, and more time (docs/performance.md)
    table = pv.read_csv(buf, read_options=pv.ReadOptions(column_names=columns, use_threads=False),
                        parse_options=pv.ParseOptions(newlines_in_values=True),
                        convert_options=pv.ConvertOptions(column_types={c: pa.string() for c in text},
                                                          null_values=[null], strings_can_be_null=True,
                                                          quoted_strings_can_be_null=False))
    df = table.to_pandas()
    nulls = [c for c, k in zip(columns, kinds) if k == "number" and df[c].dtype == object]  # every one NULL
    return df.astype({**{c: "str" for c in text}, **{c: "float64" for c in nulls}})


def array_items(texts: pd.Series, dtype: str) -> tuple:
    """PostgreSQL's text form of one-dimensional number arrays as ``read_frame`` gives them (``{1,2,3}``)
    -> (the items, flat, as a numpy array of ``dtype``; each array's length). Through pyarrow where it is
    installed (ten times faster at 10,000 nodes), else NumPy alone (pyarrow is not a dependency of the
    history extra). A NULL item or a malformed array: ValueError either way."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return _array_items_numpy(texts, dtype)
    import numpy as np

    arr = pa.array(texts.astype(str), type=pa.string())
    if len(arr) and not (pc.all(pc.starts_with(arr, "{")).as_py() and pc.all(pc.ends_with(arr, "}")).as_py()):
        raise ValueError("read_frame: not a one-dimensional, non-empty PostgreSQL number array")
    lists = pc.split_pattern(pc.utf8_slice_codeunits(arr, 1, -1), ",")
    lengths = np.asarray(pc.list_value_length(lists).to_numpy(zero_copy_only=False), dtype=np.int64)
    try:
        items = pc.cast(pc.list_flatten(lists), pa.from_numpy_dtype(np.dtype(dtype)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:  # "NULL", "", a word
        raise ValueError(f"read_frame: an array item is not a number ({exc})") from None
    return items.to_numpy(zero_copy_only=False), lengths


def _array_items_numpy(texts: pd.Series, dtype: str) -> tuple:
    """:func:`array_items` without pyarrow: one C parse of every item."""
    import warnings

    import numpy as np

    inner = [t[1:-1] if t[:1] == "{" and t[-1:] == "}" else None for t in texts.astype(str)]
    if None in inner or "" in inner:
        raise ValueError("read_frame: not a one-dimensional, non-empty PostgreSQL number array")
    lengths = np.fromiter((x.count(",") + 1 for x in inner), dtype=np.int64, count=len(inner))
    joined = ",".join(inner)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at an item it cannot read
        try:
            flat = np.fromstring(joined, sep=",") if inner else np.zeros(0)
        except (ValueError, DeprecationWarning) as exc:
            raise ValueError(f"read_frame: an array item is not a number ({exc})") from None
    if len(flat) != int(lengths.sum()):
        raise ValueError("read_frame: an array item is not a number")
    if np.dtype(dtype).kind in "iu" and len(flat) and not np.abs(flat).max() < 2.0 ** 53:
        return np.array(joined.split(","), dtype=dtype), lengths  # beyond a double's exact integers
    return flat.astype(dtype), lengths
