"""The read-only query walls, checked directly (fast): AST validation and the sandbox."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
import sqlglot

from server.errors import ApiError
from server.sandbox import Relation, check_relations, run_query
from server.sqltext import parse_script, split
from server.values import normalize_type, quote_ident, to_json_value

KNOWN = {"t", "v"}


def parse(sql: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one(sql, read="duckdb")


@pytest.mark.parametrize(
    "sql,used",
    [
        ("SELECT * FROM t JOIN v USING (a)", ["t", "v"]),
        ("WITH x AS (SELECT * FROM t) SELECT * FROM x", ["t"]),
        ("SELECT * FROM range(3)", []),
        ("SELECT (SELECT max(a) FROM v) FROM T", ["t", "v"]),
        ("WITH x AS (SELECT 1) SELECT * FROM t WHERE a IN (SELECT * FROM x)", ["t"]),
        ("WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r) SELECT * FROM r", []),
        ("WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b", []),
    ],
)
def test_allowed(sql: str, used: list[str]) -> None:
    assert check_relations(parse(sql), KNOWN) == used


@pytest.mark.parametrize(
    "sql,code",
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "forbidden"),
        ("SELECT * FROM read_parquet('x')", "forbidden"),
        ("SELECT * FROM glob('/*')", "forbidden"),
        ("SELECT * FROM query('select 1')", "forbidden"),
        ("SELECT * FROM main.t", "forbidden"),
        ("SELECT * FROM other.main.t", "forbidden"),
        ("SELECT getenv('HOME')", "forbidden"),
        ("SELECT nextval('s')", "forbidden"),
        ("SELECT * FROM '/etc/passwd'", "unknown_table"),
        ("SELECT * FROM nope", "unknown_table"),
        ("COPY t TO 'x'", "forbidden"),
        # A CTE only hides names in its own scope, never in a sibling or an earlier CTE.
        (
            'SELECT * FROM "/etc/passwd", (WITH "/etc/passwd" AS (SELECT 1) SELECT 1)',
            "unknown_table",
        ),
        ("WITH a AS (SELECT * FROM sqlite_master) SELECT * FROM a", "unknown_table"),
        ("WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a", "unknown_table"),
        ("WITH sqlite_master AS (SELECT * FROM sqlite_master) SELECT 1", "unknown_table"),
        ("SELECT * FROM duckdb_tables", "unknown_table"),
        ("SELECT * FROM information_schema.tables", "forbidden"),
    ],
)
def test_rejected(sql: str, code: str) -> None:
    with pytest.raises(ApiError) as e:
        check_relations(parse(sql), KNOWN)
    assert e.value.code == code


def test_sandbox_has_no_external_access_and_is_read_only() -> None:
    rel = Relation([("a", "INTEGER"), ("d", "DECIMAL(10,2)")], [(1, decimal.Decimal("1.50"))])
    res = run_query("SELECT a, d FROM t", {"t": rel}, timeout=5, memory_limit="256MB", max_rows=10)
    assert res.rows == [(1, decimal.Decimal("1.50"))]
    import pyarrow as pa

    arrow = Relation([("a", "INTEGER")], (), pa.table({"a": pa.array([1], pa.int32())}))
    for sql in [
        "SELECT * FROM read_csv('/etc/passwd')",
        "INSERT INTO t VALUES (2, 1)",
        "UPDATE t SET a = 2",
        "DELETE FROM t",
        "INSERT INTO __diffsql_arrow_t VALUES (2, 1)",  # where t's rows are: a temp table
        "INSERT INTO u VALUES (2)",
        "SET threads = 4",
        "ATTACH '/tmp/x.duckdb'",
    ]:
        with pytest.raises(ApiError):
            run_query(sql, {"t": rel, "u": arrow}, timeout=5, memory_limit="256MB",
                      max_rows=10)
    # run_query is the second wall (no check_relations here): none of them changed a thing
    got = run_query("SELECT a, d, (SELECT count(*) FROM u) FROM t", {"t": rel, "u": arrow},
                    timeout=5, memory_limit="256MB", max_rows=10)
    assert got.rows == [(1, decimal.Decimal("1.50"), 1)]


def test_sandbox_limits() -> None:
    with pytest.raises(ApiError) as e:
        run_query(
            "SELECT count(*) FROM range(1000000000000) a",
            {},
            timeout=0.3,
            memory_limit="256MB",
            max_rows=10,
        )
    assert e.value.code == "timeout"
    with pytest.raises(ApiError) as e:
        run_query("SELECT * FROM range(20)", {}, timeout=5, memory_limit="256MB", max_rows=10)
    assert e.value.code == "result_too_large"


def test_pooled_sandboxes_hold_only_their_query_relations() -> None:
    """Sandboxes are reused across queries: a query sees only the relations it was given,
    whatever ran before it (failed, refused, interrupted, or over the row limit), and the
    locked settings still hold."""
    from server import sandbox

    a = Relation([("x", "INTEGER")], [(1,), (2,)])
    b = Relation([("y", "VARCHAR")], [("s",)])
    kw: dict = {"timeout": 5, "memory_limit": "256MB", "max_rows": 10}
    for _ in range(3):
        assert run_query("SELECT sum(x) FROM a", {"a": a}, **kw).rows == [(3,)]
        with pytest.raises(ApiError):
            run_query("SELECT * FROM a", {"b": b}, **kw)  # a was dropped after its query
        with pytest.raises(ApiError):
            run_query("SELECT * FROM a, nope", {"a": a}, **kw)
        with pytest.raises(ApiError):
            run_query("SELECT * FROM range(20)", {"a": a}, **kw)
        assert run_query("SELECT count(*) FROM duckdb_tables()", {"b": b}, **kw).rows == [(1,)]
        with pytest.raises(ApiError):
            run_query("SET threads = 4", {}, **kw)
    assert sandbox._idle.get("256MB"), "sandboxes go back to the pool"
    pooled = list(sandbox._idle["256MB"])
    with pytest.raises(ApiError) as e:
        run_query("SELECT count(*) FROM range(1000000000000) r", {"a": a}, timeout=0.3,
                  memory_limit="256MB", max_rows=10)
    assert e.value.code == "timeout"
    # the interrupted sandbox was closed, not pooled
    assert len(sandbox._idle["256MB"]) == len(pooled) - 1
    assert run_query("SELECT count(*) FROM duckdb_tables()", {}, **kw).rows == [(0,)]


def test_arrow_relations_are_read_in_place_and_leave_nothing_behind() -> None:
    """An Arrow relation is a view over the registered table (no copy), with its declared
    types; after the query the pooled sandbox holds no table, view or registration."""
    import pyarrow as pa

    from server import sandbox

    kw: dict = {"timeout": 5, "memory_limit": "256MB", "max_rows": 10}
    arrow = pa.table({"x": pa.array([1, 2, None], pa.int32()), "d": pa.array([0.5, 1.5, 2.5])})
    a = Relation([("x", "INTEGER"), ("d", "DOUBLE")], (), arrow)
    rows = Relation([("y", "VARCHAR")], [("s",)])
    for _ in range(3):
        got = run_query("SELECT any_value(typeof(x)), sum(x), sum(d), (SELECT y FROM r) FROM a",
                        {"a": a, "r": rows}, **kw)
        assert got.rows == [("INTEGER", 3, 4.5, "s")]
        with pytest.raises(ApiError):
            run_query("SELECT * FROM a", {"r": rows}, **kw)  # gone after its query
        assert run_query("SELECT count(*) FROM duckdb_views() WHERE NOT internal", {},
                         **kw).rows == [(0,)]
    assert sandbox._idle.get("256MB"), "sandboxes go back to the pool"
    with pytest.raises(ApiError):
        run_query("SELECT 1", {"__diffsql_arrow_a": a}, **kw)


def test_decimals_of_scale_38_reach_the_sandbox_exactly() -> None:
    """Python rows of a DECIMAL(38,38) column (a small view's) are the values themselves, equal
    to the same values given as Arrow (a table's), so a join of the two finds them: DuckDB binds
    a list of scale-38 decimals as DOUBLE[], which read 0.08 as 0.08000000000000000339..."""
    import pyarrow as pa

    kw: dict = {"timeout": 5, "memory_limit": "256MB", "max_rows": 10}
    t = "DECIMAL(38,38)"
    values = [decimal.Decimal(v) for v in
              ("0.08", "-0.99999999999999999999999999999999999999", "0E-38", "1E-38")]
    view = Relation([("v", t), ("i", "INTEGER")], [(v, i) for i, v in enumerate(values)]
                    + [(None, 9)])
    table = Relation([("w", t)], (), pa.table({"w": pa.array(values, pa.decimal128(38, 38))}))
    got = run_query("SELECT v, i FROM view ORDER BY i", {"view": view}, **kw)
    assert got.rows == [(v, i) for i, v in enumerate(values)] + [(None, 9)]
    joined = run_query("SELECT count(*) FROM view JOIN t ON v = w", {"view": view, "t": table},
                       **kw)
    assert joined.rows == [(len(values),)]
    mixed = Relation([("v", "DECIMAL(38,37)")], [(decimal.Decimal("0.08"),)])
    assert run_query("SELECT v FROM m", {"m": mixed}, **kw).rows == [(decimal.Decimal("0.08"),)]


def test_statement_splitting_keeps_positions() -> None:
    sql = "CREATE TABLE t (a INTEGER);\n  INSERT INTO t VALUES (';');  -- c\nSELECT 1;;"
    assert [(p[1], p[2]) for p in split(sql)] == [(1, 1), (2, 3), (3, 1)]
    assert [s.kind for s in parse_script(sql, 10)] == ["CREATE TABLE", "INSERT", "SELECT"]
    assert split(sql)[1][0] == "INSERT INTO t VALUES (';')"


def test_values_and_types() -> None:
    assert normalize_type("int") == "INTEGER"
    assert normalize_type("text") == "VARCHAR"
    assert normalize_type("numeric(12, 3)") == "DECIMAL(12,3)"
    with pytest.raises(ApiError):
        normalize_type("BLOB")
    assert quote_ident('a"b') == '"a""b"'
    assert to_json_value(decimal.Decimal("1.10")) == "1.10"
    assert to_json_value(datetime.date(2024, 1, 2)) == "2024-01-02"
    assert to_json_value(datetime.datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02T03:04:05"


def test_tables_stream_to_the_sandbox_from_one_snapshot(tmp_path: Any) -> None:
    """A table reaches the sandbox as an Arrow stream when it is all a query reads (one
    cursor per table, every cursor's transaction begun under the write lock): a query over
    two tables, or naming one twice, reads them whole; a plan DuckDB scans twice (a recursive
    step's subquery) runs again over whole tables; several SELECTs of one request each stream
    afresh (also after a LIMIT stopped a scan early). Every answer equals DuckDB over the same
    rows, and a write committed while the snapshot is open is seen by none of its queries,
    streamed or not."""
    import duckdb

    import server.sandbox as sandbox
    from server import queries
    from server.core import Database
    from server.executors import InProcessExecutor
    from server.settings import Settings

    db = Database(Settings(data_dir=tmp_path), InProcessExecutor())
    con = duckdb.connect()
    schema = ("CREATE TABLE t (k INTEGER, v DOUBLE, s VARCHAR, d DATE);"
              "CREATE TABLE u (k INTEGER, w BIGINT)")
    fill = ("INSERT INTO t SELECT i % 97, i * 0.25, 's' || (i % 13),"
            " DATE '2020-01-01' + CAST(i % 400 AS INTEGER) FROM range(200000) r(i);"
            "INSERT INTO u SELECT i, i * i FROM range(120) r(i)")
    calls: list[Any] = []
    real = sandbox._run_query

    def spy(*args: Any, **kw: Any) -> Any:
        # the relations this attempt streams
        calls.append(sorted(n for n, r in args[1].items()
                            if r.stream is not None and n not in kw["whole"]))
        return real(*args, **kw)

    try:
        db.execute(schema + ";" + fill)
        con.execute(schema + ";" + fill)
        sandbox._run_query = spy  # type: ignore[assignment]
        cases = [
            ("SELECT t.k, count(*), sum(v), sum(w), min(s), max(d) FROM t JOIN u ON t.k = u.k "
             "GROUP BY t.k", [[]]),  # two tables: both read whole
            ("SELECT count(*), sum(a.v) FROM t a JOIN t b ON a.k = b.k AND a.v = b.v "
             "JOIN u ON u.k = a.k", [[]]),
            ("SELECT count(*) FROM t a JOIN t b ON a.k = b.k AND a.v = b.v",
             [[]]),  # t named twice: read whole
            ("SELECT k, count(*), sum(v), min(s), max(d) FROM t WHERE v > 7 GROUP BY k",
             [["t"]]),  # streams
            ("WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r "
             "WHERE n < (SELECT max(k) FROM t) AND n < 5) SELECT * FROM r",
             [["t"], []]),  # t scanned at each step: refused as a stream, run over t whole
        ]
        for sql, expected in cases:
            calls.clear()
            got = sorted(map(tuple, db.query(sql)["rows"]), key=repr)
            want = sorted((tuple(to_json_value(x) for x in r)
                           for r in con.execute(sql).fetchall()), key=repr)
            assert got == want, sql
            assert calls == expected, (sql, calls)
        out = db.execute("SELECT count(*) FROM (SELECT k FROM t LIMIT 5); "
                         "SELECT count(*), sum(v) FROM t; SELECT sum(w) FROM u")["results"]
        assert out[0]["rows"] == [[5]]  # the scan stopped early, and t streams again next
        assert out[1]["rows"] == [list(con.execute("SELECT count(*), sum(v) FROM t").fetchone())]
        assert out[2]["rows"] == [[con.execute("SELECT sum(w) FROM u").fetchone()[0]]]
        # A write committed while the snapshot is open: its queries still see the snapshot.
        joined = "SELECT count(*), sum(v), sum(w) FROM t JOIN u USING (k)"
        alone = "SELECT count(*), sum(v) FROM t"
        before = [list(con.execute(q).fetchone()) for q in (joined, alone)]
        with queries.snapshot(db, ["t", "u"], {"t"}) as (ts, rels):  # t streams, u whole
            db.execute("INSERT INTO t VALUES (1, 1000, 'new', NULL); DELETE FROM u WHERE k < 50")
            got = [queries.run_select(db, parse_script(q, 1)[0],
                                      {n: rels[n] for n in ("t", "u") if f" {n}" in q})["rows"]
                   for q in (joined, alone)]
        assert got == [[before[0]], [before[1]]]
        assert db.last_ts == ts + 1
        assert db.query(joined)["rows"] != [before[0]]
        assert db.query(alone)["rows"] != [before[1]]
    finally:
        sandbox._run_query = real  # type: ignore[assignment]
        db.close()
