"""Hydration reads only the rows a view's filters on a table keep (`planner.ir.scan_filters`,
`server.scan_filters.where_clause`).

Invariants checked: `scan_filters` lists, per table read only through Mfps, the filters on
the table's own columns that every reader applies (their intersection; none when a reader
applies none, and never a filter on a computed column); `where_clause` renders exactly the
comparisons DuckDB decides as the Mfp does (ints, strings without a collation, dates,
booleans, IS [NOT] NULL; a literal on either side) and leaves out the rest (floats,
decimals, timestamps, casts, a collated string, an int beyond int64); and through the
server, views over populated tables created with those reads, then maintained through writes
that move rows across their filters, and rebuilt by a restart, equal DuckDB, while the reads
hold only the rows DuckDB's own WHERE keeps.
"""

from __future__ import annotations

import datetime
from collections import Counter
from pathlib import Path
from typing import Any

from planner import Catalog, Column, TableSchema, compile_view
from planner.ir import Call, Col, Lit
from server.core import Database
from server.executors import InProcessExecutor
from server.scan_filters import where_clause
from server.settings import Settings
from server.store import TableRecord

COLUMNS = [("k", "INTEGER"), ("s", "VARCHAR"), ("d", "DATE"), ("x", "DOUBLE"),
           ("b", "BOOLEAN"), ("e", "DECIMAL(10,2)"), ("ts", "TIMESTAMP"),
           ("c", "VARCHAR COLLATE NOCASE")]
REC = TableRecord("t", 1, [{"name": n, "type": ty, "nullable": True} for n, ty in COLUMNS], [], 0)
CATALOG = Catalog(tables={"t": TableSchema("t", [Column(n, ty) for n, ty in COLUMNS[:7]]),
                          "u": TableSchema("u", [Column("k", "INTEGER"), Column("w", "INTEGER")])})


def _cmp(op: str, a: Any, b: Any) -> Call:
    return Call(op, (a, b), "BOOLEAN")


def test_where_clause_renders_only_what_duckdb_decides_alike() -> None:
    day = datetime.date(2024, 2, 29)
    assert where_clause(REC, [_cmp("lt", Col(0), Lit(5, "INTEGER"))]) == '("k" < 5)'
    # a literal on the left: the comparison seen from the column
    assert where_clause(REC, [_cmp("lt", Lit(5, "INTEGER"), Col(0))]) == '("k" > 5)'
    assert where_clause(REC, [_cmp("ge", Lit(5, "INTEGER"), Col(0))]) == '("k" <= 5)'
    assert where_clause(REC, [_cmp("ne", Col(1), Lit("it's", "VARCHAR")),
                              _cmp("gt", Col(2), Lit(day, "DATE"))]) == \
        "(\"s\" <> 'it''s') AND (\"d\" > DATE '2024-02-29')"
    assert where_clause(REC, [_cmp("eq", Col(4), Lit(True, "BOOLEAN"))]) == '("b" = TRUE)'
    assert where_clause(REC, [Call("is_null", (Col(3),), "BOOLEAN"),
                              Call("not", (Call("is_null", (Col(5),), "BOOLEAN"),), "BOOLEAN")]) \
        == '("x" IS NULL) AND ("e" IS NOT NULL)'
    left_out = [
        _cmp("lt", Col(3), Lit(1.5, "DOUBLE")),  # NaN orders differently
        _cmp("eq", Col(5), Lit(1, "INTEGER")),  # a decimal column
        _cmp("lt", Col(6), Lit(datetime.datetime(2024, 1, 1), "TIMESTAMP")),
        _cmp("eq", Col(7), Lit("a", "VARCHAR")),  # collated: not byte order
        _cmp("eq", Col(0), Lit(2 ** 70, "HUGEINT")),
        _cmp("lt", Col(4), Lit(True, "BOOLEAN")),
        _cmp("eq", Col(0), Lit(True, "BOOLEAN")),  # a bool is not an int here
        _cmp("eq", Col(1), Lit("a\x00b", "VARCHAR")),
        _cmp("eq", Col(2), Lit(datetime.datetime(2024, 1, 1), "TIMESTAMP")),
        _cmp("eq", Call("cast", (Col(0),), "BIGINT"), Lit(1, "BIGINT")),
        _cmp("eq", Col(0), Col(0)),
        Call("or", (_cmp("eq", Col(0), Lit(1, "INTEGER")), _cmp("eq", Col(0), Lit(2, "INTEGER"))),
             "BOOLEAN"),
    ]
    for f in left_out:
        assert where_clause(REC, [f]) is None, f


def test_scan_filters_are_what_every_reader_applies() -> None:
    one = compile_view("SELECT k, x * 2 AS y FROM t WHERE k > 3 AND s = 'a' AND x * 2 > 1",
                       CATALOG).scan_filters()
    rendered = where_clause(REC, one["t"])
    # the simple comparisons evaluated first are taken; the computed one is not
    assert rendered is not None and '"k" > 3' in rendered and "\"s\" = 'a'" in rendered
    assert len(one["t"]) == 2 and not any("mul" in repr(f) for f in one["t"])
    # nothing after a conjunct that could raise: a row it would have failed on is still read
    assert "t" not in compile_view("SELECT k FROM t WHERE k / (k - 3) > 1 AND k > 3",
                                   CATALOG).scan_filters()
    after = compile_view("SELECT k FROM t WHERE k > 3 AND k / (k - 3) > 1 AND s = 'a'",
                         CATALOG).scan_filters()
    assert where_clause(REC, after["t"]) == '("k" > 3)'
    # two readers: only what both apply (k > 3); a reader without filters: nothing
    two = compile_view("SELECT a.k, b.s FROM t a JOIN t b ON a.k = b.k "
                       "WHERE a.k > 3 AND b.s = 'a'", CATALOG).scan_filters()
    assert "\"s\" = 'a'" not in (where_clause(REC, two.get("t", ())) or "")
    bare = compile_view("SELECT k FROM t UNION ALL SELECT k FROM t WHERE k > 3",
                        CATALOG).scan_filters()
    assert "t" not in bare
    assert "u" not in compile_view("SELECT * FROM u", CATALOG).scan_filters()


DDL = ("CREATE TABLE t (k INTEGER, s VARCHAR, d DATE, x DOUBLE, b BOOLEAN);"
       "CREATE TABLE u (k INTEGER, w INTEGER)")
VIEWS = {
    "recent": "SELECT k, s, x FROM t WHERE d >= DATE '2024-01-20' AND k <> 7",
    "named": "SELECT s, count(*) AS n, sum(x) AS sx FROM t WHERE s > 'n3' AND s <> 'it''s' "
             "GROUP BY s",
    "flags": "SELECT k, d FROM t WHERE b = true AND 40 > k",
    "joined": "SELECT t.k, u.w, t.s FROM t JOIN u ON t.k = u.k WHERE t.k < 50 AND u.w >= 3 "
              "AND t.x > 0.5",
    "nulls": "SELECT k, s FROM t WHERE d IS NULL OR s IS NULL",
    "pair": "SELECT a.k, b.s FROM t a JOIN t b ON a.k = b.k WHERE a.d > DATE '2024-01-25' "
            "AND b.s < 'n5'",
}


def _row(i: int) -> str:
    """Row i of t as SQL: NULLs in every column, a string with a quote, days over 40 dates."""
    s = "NULL" if i % 13 == 0 else ("'it''s'" if i % 17 == 0 else f"'n{i % 9}'")
    day = datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 40)
    d = "NULL" if i % 11 == 0 else f"DATE '{day.isoformat()}'"
    b = "NULL" if i % 5 == 0 else ("true" if i % 2 else "false")
    return f"({i % 61}, {s}, {d}, {i % 7 / 4}, {b})"


def _bag(rows: list[Any]) -> Counter[str]:
    return Counter(repr(tuple(r)) for r in rows)


def _check(db: Database) -> None:
    for name, sql in VIEWS.items():
        got, want = _bag(db.view_rows(name, None)["rows"]), _bag(db.query(sql)["rows"])
        assert got == want, (name, got - want, want - got)


def test_views_hydrated_from_filtered_reads_equal_duckdb(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, InProcessExecutor())
    try:
        db.execute(DDL)
        values = ", ".join(_row(i) for i in range(900))
        db.execute(f"INSERT INTO t VALUES {values}")
        db.execute("INSERT INTO u SELECT i % 70, i % 9 FROM range(300) r(i)")
        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        _check(db)
        # The reads really were filtered: each view's read of t holds DuckDB's WHERE count.
        rec = db.tables["t"]
        for name in ("recent", "named", "flags"):
            compiled = db.views[name].compiled
            where = where_clause(rec, compiled.scan_filters()["t"])
            assert where is not None, name
            got = db.store.read_columns(rec, compiled.columns_read()["t"], where)
            want = db.query(f"SELECT count(*) FROM t WHERE {where}")["rows"][0][0]
            assert got.num_rows == want < 900, name
        for change in (
            "UPDATE t SET d = DATE '2024-01-30' WHERE k % 4 = 0",  # into 'recent', 'pair'
            "UPDATE t SET s = 'n8' WHERE s = 'n1'",  # into 'named'
            "UPDATE t SET b = NOT b WHERE k % 3 = 0",
            "DELETE FROM t WHERE k = 12",
            "INSERT INTO t VALUES (7, 'zz', DATE '2024-02-01', 1.0, true), "
            "(8, NULL, NULL, 2.0, NULL)",
            "UPDATE u SET w = w + 3 WHERE k % 5 = 0",
        ):
            db.execute(change)
            _check(db)
    finally:
        db.close()
    db = Database(settings, InProcessExecutor())  # recovery reads whole tables
    try:
        _check(db)
        db.execute("UPDATE t SET k = k + 1 WHERE s = 'n2'")
        _check(db)
    finally:
        db.close()
