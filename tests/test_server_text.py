"""Values as DuckDB prints them: a DECIMAL in a view's rows, its `/query` answer and any text
made of it is fixed-point at its scale (Python's str gave 1.000E-7 and 0E-10); a TIMESTAMP
as text drops its fraction's trailing zeros; a REAL as text is its shortest single-precision
digits; DECIMAL has no -0.00. Each checked against DuckDB's own text for the same expression
(`CAST(... AS VARCHAR)` there), by the rows (a view made before the data) and over columns
(a view made after it). A view holds no -0.0 (`engine.canonical`): where DuckDB prints
'-0.0' the view gives '0.0'."""

from __future__ import annotations

import duckdb
import pytest

from server.core import Database
from server.executors import create_executor
from server.settings import Settings

DDL = ("CREATE TABLE t (i INTEGER, e DECIMAL(18,10), d DECIMAL(10,2), r REAL, "
       "ts TIMESTAMP, f DOUBLE)")
ROWS = ("INSERT INTO t VALUES "
        "(1, 0.0000001, -0.001, 0.1, TIMESTAMP '2020-01-31 10:00:00.5', -1e-7), "
        "(2, 0, 1.5, -1e30, TIMESTAMP '2020-01-31 10:00:00', -0.0), "
        "(3, -0.0000000001, NULL, 123456789, TIMESTAMP '2020-01-31 10:00:00.00012', 2.5), "
        "(4, 12345678.5, 0, 1.5e-7, TIMESTAMP '0021-01-31 10:00:00.1', 1e16), "
        "(5, NULL, -0.004, NULL, NULL, NULL)")
# each view's columns are all text in DuckDB once cast to VARCHAR: `WANT` casts every one
VIEWS = [
    "SELECT i, e, d FROM t",
    "SELECT i, CAST(e AS VARCHAR), e || '', concat(e, 'x'), CAST(d AS VARCHAR) FROM t",
    "SELECT i, CAST(r AS VARCHAR), r || '', concat(r, 'x'), concat_ws(',', r, i), "
    "CAST(0.1::REAL AS VARCHAR) FROM t",
    "SELECT i, CAST(ts AS VARCHAR), ts || '', concat('', ts) FROM t",
    "SELECT i, CAST(i * -0.0001 AS DECIMAL(10,2)), TRY_CAST(' -0 ' AS DECIMAL(10,2)), "
    "round(d, 1) FROM t",
    "SELECT i, ceil(f), floor(f), ceil(-0.5::DOUBLE) FROM t",
]


def _text(v: object) -> object:
    """A JSON value of ours as text to compare with DuckDB's VARCHAR of the same value."""
    return v if v is None or isinstance(v, str) else str(v)


def _no_negative_zero(v: object) -> object:
    return "0.0" if v == "-0.0" else v


@pytest.fixture(scope="module")
def db() -> Database:
    s = Settings(memory=True)
    d = Database(s, create_executor(s))
    d.execute(DDL)
    for k, sql in enumerate(VIEWS):
        d.execute(f"CREATE VIEW before{k} AS {sql}")
    d.execute(ROWS)
    for k, sql in enumerate(VIEWS):
        d.execute(f"CREATE VIEW after{k} AS {sql}")
    return d


@pytest.mark.parametrize("k", range(len(VIEWS)))
def test_decimals_timestamps_and_reals_read_as_duckdb_prints_them(db: Database, k: int) -> None:
    con = duckdb.connect()
    con.execute(DDL)
    con.execute(ROWS)
    sql = VIEWS[k]
    n = len(con.execute(sql).description)
    want = sorted((tuple(map(_no_negative_zero, r)) for r in con.execute(
        f"SELECT {', '.join(f'CAST(c{j} AS VARCHAR)' for j in range(n))} "
        f"FROM ({sql}) q({', '.join(f'c{j}' for j in range(n))})").fetchall()), key=str)
    for name in (f"before{k}", f"after{k}"):
        got = sorted((tuple(_text(v) for v in r) for r in db.view_rows(name, None)["rows"]),
                     key=str)
        assert got == want, name
    # /query is DuckDB's own answer over the tables: -0.0 as DuckDB prints it
    got = sorted((tuple(_no_negative_zero(_text(v)) for v in r) for r in db.query(sql)["rows"]),
                 key=str)
    assert got == want


def test_query_prints_intervals_as_duckdb(db: Database) -> None:
    """`/query` gives an INTERVAL as DuckDB's text (its Python conversion is a timedelta, so a
    month read as 30 days and 25 hours as '1 day, 1:00:00')."""
    texts = ["1 year", "2 years 1 month", "13 months", "-13 months", "1 day", "-2 days",
             "1 month -1 day", "00:00:00.000001", "-00:00:01.5", "100 hours",
             "1 day 1 microsecond", "-1 year -2 months -3 days -04:05:06", "3 days -1 hour",
             "0 seconds"]
    got = db.query("SELECT " + ", ".join(f"INTERVAL '{t}'" for t in texts) + ", NULL::INTERVAL")
    want = duckdb.connect().execute(
        "SELECT " + ", ".join(f"CAST(INTERVAL '{t}' AS VARCHAR)" for t in texts)).fetchone()
    assert got["rows"] == [[*want, None]]  # type: ignore[misc]
