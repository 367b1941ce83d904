"""`/query` over a view reads exactly the view's rows: as Arrow columns for a view of
`ARROW_VIEW_ROWS` rows or more whose every column type Arrow holds exactly, as Python rows
otherwise. Oracle: DuckDB running the view's own SELECT over the tables, compared as
multisets of the JSON rows (NULLs, NaN, repeated rows, empty and non-ASCII strings, the
extremes of each type), with each column's type as DuckDB reports it. Also `/query` over
tables read as Python rows and as Arrow together, and `store.fetch_one`, which leaves no
result open on a connection."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import duckdb
import pytest

from server.core import Database
from server.executors import InProcessExecutor
from server.queries import ARROW_VIEW_ROWS, table_relation, view_relation
from server.settings import Settings
from server.store import Store, arrow_of, fetch_one
from server.values import to_json_value

VIEWS = {
    # every type exact: Arrow
    "exact": "SELECT i, b, d, s, dt, ts, f FROM x WHERE i % 7 <> 3",
    # a DECIMAL column: Python rows
    "decimal": "SELECT i, m FROM x",
    # fewer rows than ARROW_VIEW_ROWS: Python rows
    "small": "SELECT i, s, d FROM x WHERE i BETWEEN 0 AND 4",
    # a GROUP BY with repeated rows out of a projection
    "projected": "SELECT f, s FROM x",
}


def _bag(rows: list) -> Counter:
    return Counter(json.dumps(r) for r in rows)


def test_query_over_views_equals_duckdb() -> None:
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE x (i INTEGER, b BIGINT, d DOUBLE, s VARCHAR, dt DATE,"
                   " ts TIMESTAMP, f BOOLEAN, m DECIMAL(10,2))")
        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        strings = ["", "ä€😀", "a'b", None, "x" * 40]
        doubles = ["'nan'::DOUBLE", "'inf'::DOUBLE", "-0.0", "1e308", "NULL", "0.1"]
        values = []
        for k in range(3 * ARROW_VIEW_ROWS):
            i = "NULL" if k % 11 == 0 else str(k % 400 - 200 if k % 13 else 2147483647)
            b = str(-9223372036854775808 if k % 17 == 0 else k * 1_000_003)
            s = strings[k % len(strings)]
            s = "NULL" if s is None else "'" + s.replace("'", "''") + "'"
            dt = "NULL" if k % 19 == 0 else f"DATE '0001-01-01' + {k * 977 % 3_000_000}"
            ts = "NULL" if k % 23 == 0 else f"TIMESTAMP '2024-02-29 12:34:56.789012' + INTERVAL {k} HOUR"
            f = ["true", "false", "NULL"][k % 3]
            values.append(f"({i}, {b}, {doubles[k % len(doubles)]}, {s}, {dt}, {ts}, {f},"
                          f" {k % 50}.25)")
        db.execute("INSERT INTO x VALUES " + ", ".join(values))
        db.execute("INSERT INTO x SELECT * FROM x WHERE i % 5 = 0")  # repeated rows
        for name, sql in VIEWS.items():
            got = db.query(f"SELECT * FROM {name}")
            want = db.query(f"SELECT * FROM ({sql}) q")
            assert _bag(got["rows"]) == _bag(want["rows"]), name
            cols = ", ".join(f"typeof({c})" for c in got["columns"])
            assert db.query(f"SELECT DISTINCT {cols} FROM {name}")["rows"] == \
                db.query(f"SELECT DISTINCT {cols} FROM ({sql}) q")["rows"], name
        arrow = {n: view_relation(v.columns, v.items()).arrow is not None
                 for n, v in db.views.items()}
        assert arrow == {"exact": True, "decimal": False, "small": False, "projected": True}
    finally:
        db.close()


def test_query_over_a_real_column_with_nan_reads_arrow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every supported column type is exact through Arrow, REAL (FLOAT, as the user spelt
    it) too, so `/query` hands DuckDB every table as Arrow, NaN and all, and reads none as
    Python rows."""
    read_as_rows: list[str] = []
    original = Store.read_table

    def spy(con: Any, name: str) -> Any:
        read_as_rows.append(name)
        return original(con, name)

    monkeypatch.setattr(Store, "read_table", staticmethod(spy))
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE a (id INTEGER, r REAL, x DOUBLE); "
                   "CREATE TABLE b (id INTEGER, y INTEGER)")
        db.execute("INSERT INTO a VALUES (1, 1.5, 'NaN'::DOUBLE), (2, 2.5, 1.0); "
                   "INSERT INTO b VALUES (1, 10), (3, 30)")
        got = db.query("SELECT a.id, a.r, a.x, b.y FROM a JOIN b ON a.id = b.id")
        assert got["rows"] == [[1, 1.5, "NaN", 10]]
        assert read_as_rows == []
    finally:
        db.close()


def test_relation_read_as_rows_then_another_on_one_cursor() -> None:
    """A table of a type not exact through Arrow (INTERVAL: not a column type users can
    declare today, so called directly) is read as Python rows, with its NaN check, and then
    another table is read on the same cursor, as `/query` reads every table it names through
    one cursor of its snapshot. The NaN check once left that cursor's result open, and DuckDB
    2 refused to read the second table on it."""
    con = duckdb.connect()
    con.execute("CREATE TABLE a (id INTEGER, i INTERVAL, x DOUBLE); "
                "CREATE TABLE b (id INTEGER, y INTEGER); "
                "INSERT INTO a VALUES (1, INTERVAL 2 DAY, 'NaN'::DOUBLE); "
                "INSERT INTO b VALUES (1, 10), (3, 30)")
    rel_a = table_relation(con, "a", [("id", "INTEGER"), ("i", "INTERVAL"), ("x", "DOUBLE")])
    rel_b = table_relation(con, "b", [("id", "INTEGER"), ("y", "INTEGER")])
    assert rel_a.arrow is None and len(rel_a.rows) == 1  # the path under test: rows
    assert rel_a.rows[0][0] == 1 and rel_a.rows[0][2] != rel_a.rows[0][2]
    assert sorted(rel_b.arrow.to_pylist(), key=str) == [{"id": 1, "y": 10},
                                                       {"id": 3, "y": 30}]


def test_fetch_one_leaves_no_result_open() -> None:
    """`store.fetch_one` reads its result to the end, so the connection can read a relation
    next (DuckDB 2 refuses one after a `fetchone` that left a result open)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM range(3) r(x)")
    assert fetch_one(con, "SELECT count(*) FROM t") == (3,)
    assert fetch_one(con, "SELECT x FROM t WHERE x = ?", [7]) is None
    assert fetch_one(con, "SELECT max(x) FROM t WHERE x < ?", [2]) == (1,)
    assert arrow_of(con.sql("SELECT x FROM t ORDER BY x")).column(0).to_pylist() == [0, 1, 2]


def test_view_with_repeated_column_names() -> None:
    """A view whose SELECT names a column twice (`a.k, b.k`) has its columns named as DuckDB
    names a view's (`k`, `k_1`), so `/query`, a SELECT in a write and a view over it read
    it (its repeated names once made the sandbox's copy fail with a 500)."""
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE a (k INTEGER); CREATE TABLE b (k INTEGER); "
                   "INSERT INTO a VALUES (1), (2); INSERT INTO b VALUES (2), (3)")
        db.execute("CREATE VIEW d AS SELECT a.k, b.k, a.k + 1 AS K FROM a, b WHERE a.k < b.k")
        want = duckdb.connect()
        want.execute("CREATE TABLE a (k INTEGER); CREATE TABLE b (k INTEGER); "
                     "INSERT INTO a VALUES (1), (2); INSERT INTO b VALUES (2), (3); "
                     "CREATE VIEW d AS SELECT a.k, b.k, a.k + 1 AS K FROM a, b WHERE a.k < b.k")
        names = [r[0] for r in want.execute("DESCRIBE d").fetchall()]
        assert names == ["k", "k_1", "K_2"]
        rows = sorted(map(list, want.execute("SELECT * FROM d").fetchall()))
        got = db.view_rows("d", None)
        assert got["columns"] == names and sorted(got["rows"]) == rows
        got = db.query("SELECT * FROM d")
        assert got["columns"] == names and sorted(got["rows"]) == rows
        assert sorted(db.query("SELECT k_1 FROM d WHERE k = 1")["rows"]) == [[2], [3]]
        out = db.execute("SELECT count(*) FROM d")["results"][0]
        assert out["rows"] == [[len(rows)]]
        db.execute("CREATE VIEW e AS SELECT k_1, K_2 FROM d")
        assert sorted(db.view_rows("e", None)["rows"]) == sorted([r[1], r[2]] for r in rows)
    finally:
        db.close()


def test_infinite_dates_and_timestamps_read_as_duckdb_prints_them() -> None:
    """`/query` gives an infinite DATE or TIMESTAMP as DuckDB prints it (`infinity`,
    `-infinity`), where DuckDB's Python conversion gives `9999-12-31` / `0001-01-01`, the same
    as a real first or last date; every other value keeps its ISO text. The expected values
    come from DuckDB: its text of each infinite value, its Python value of any other."""
    exprs = ["'infinity'::DATE", "'-infinity'::DATE", "DATE '9999-12-31'", "NULL::DATE",
             "'infinity'::TIMESTAMP", "'-infinity'::TIMESTAMP",
             "TIMESTAMP '9999-12-31 23:59:59.999999'", "'infinity'::TIMESTAMP_NS",
             "'-infinity'::TIMESTAMPTZ", "DATE '0001-01-01'"]
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'UTC'")
    want = []
    for e in exprs:
        text, infinite = duck.execute(f"SELECT CAST({e} AS VARCHAR), NOT isfinite({e})").fetchone()
        (value,) = duck.execute(f"SELECT {e}").fetchone()
        want.append(text if infinite else to_json_value(value))
    assert want[:2] == ["infinity", "-infinity"] and want[2] == "9999-12-31"
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        sql = "SELECT " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs))
        assert db.query(sql)["rows"] == [want]
        # in a column of many rows, among finite values and NULLs
        got = db.query("SELECT CASE WHEN i % 3 = 0 THEN 'infinity'::DATE WHEN i % 3 = 1 "
                       "THEN DATE '2024-02-29' END AS d FROM range(3000) r(i) ORDER BY i")
        assert got["rows"] == [[["infinity", "2024-02-29", None][i % 3]] for i in range(3000)]
        # inside a LIST, STRUCT, MAP or ARRAY a query builds (DuckDB's text of each nested
        # infinity, checked below, is the same word), a real last date staying one
        nested = ("[DATE 'infinity', DATE '2020-01-01', NULL], "
                  "{'a': '-infinity'::TIMESTAMP, 'b': [DATE '9999-12-31']}, "
                  "MAP([DATE 'infinity', DATE '2021-02-03'], ['-infinity'::DATE, NULL]), "
                  "[[DATE 'infinity']], array_value('-infinity'::DATE, DATE '2020-01-01'), NULL::DATE[], "
                  "MAP([1], ['infinity'::TIMESTAMP])")
        text = duck.execute(f"SELECT CAST(ROW({nested}) AS VARCHAR)").fetchone()[0]
        assert text.count("-infinity") == 3 and text.count("infinity") == 7, text
        sql = f"SELECT UNNEST(x) FROM (SELECT ROW({nested}) AS x)"
        assert db.query(sql)["rows"] == [[
            ["infinity", "2020-01-01", None], {"a": "-infinity", "b": ["9999-12-31"]},
            {"infinity": "-infinity", "2021-02-03": None}, [["infinity"]],
            ["-infinity", "2020-01-01"], None, {"1": "infinity"}]]
        many = db.query("SELECT CASE WHEN i % 2 = 0 THEN ['infinity'::DATE, DATE '2024-02-29'] END "
                        "AS l FROM range(3000) r(i) ORDER BY i")
        assert many["rows"] == [[["infinity", "2024-02-29"] if i % 2 == 0 else None]
                                for i in range(3000)]
    finally:
        db.close()


def test_a_select_in_a_write_reads_a_tables_negative_zero() -> None:
    """A SELECT inside a write request reads the tables as `/query` does: a stored -0.0 keeps
    its sign (it read the canonical Python rows, where -0.0 is 0.0), as in DuckDB."""
    db = Database(Settings(memory=True), InProcessExecutor())
    try:
        db.execute("CREATE TABLE z (i INTEGER, f DOUBLE)")
        out = db.execute("INSERT INTO z VALUES (1, '-0.0'::DOUBLE), (2, 0.0), (3, NULL); "
                         "SELECT i, signbit(f) AS neg FROM z ORDER BY i")
        want = [[1, True], [2, False], [3, None]]
        assert out["results"][1]["rows"] == want
        assert db.query("SELECT i, signbit(f) AS neg FROM z ORDER BY i")["rows"] == want
    finally:
        db.close()
