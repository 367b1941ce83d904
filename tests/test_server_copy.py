"""Bulk load (`COPY t FROM 'file' (...)` in POST /sql), through the real server.

Invariants checked, each against an independent oracle:
- after COPY, a table holds exactly what DuckDB's own `COPY ... FROM` of the same file gives
  (an in-test DuckDB connection with file access), and every view (join + aggregate,
  WITH RECURSIVE, views created in the same request) equals DuckDB running the view's query on
  that oracle; INSERT/UPDATE/DELETE afterwards keep them equal, and a change feed accumulated
  alongside equals the rows at every timestamp;
- a request is atomic: an error anywhere in it undoes its COPYs too;
- COPY reads only under the import directory (403 `forbidden_path`), and every bad COPY is a 4xx
  in the one error shape, with nothing changed and the server still serving;
- a restart on the same data directory gives the same tables, views and resumable history;
- load files are transport only: none is left in `loads/` after a write.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from server_harness import SSE, Feed, Server, multiset

from server.values import row_to_json

DDL = [
    "CREATE TABLE orders (id INTEGER NOT NULL, cust BIGINT, item VARCHAR, qty INTEGER, "
    "price DECIMAL(10,2), weight DOUBLE, day DATE, paid BOOLEAN)",
    "CREATE TABLE custs (id BIGINT, name VARCHAR, region VARCHAR)",
    "CREATE TABLE edges (src INTEGER, dst INTEGER)",
]
VIEWS = {
    "by_region": "SELECT c.region, count(*) AS n, sum(o.qty) AS q, min(o.price) AS lo, "
    "max(o.price) AS hi, count(o.day) AS days, max(o.day) AS last_day "
    "FROM orders o JOIN custs c ON o.cust = c.id WHERE o.paid GROUP BY c.region",
    "orphans": "SELECT o.id, o.item, o.weight, o.day, o.paid FROM orders o "
    "LEFT JOIN custs c ON o.cust = c.id WHERE c.id IS NULL",
    "reach": "WITH RECURSIVE r(node) AS (SELECT 1 UNION SELECT e.dst FROM r "
    "JOIN edges e ON r.node = e.src) SELECT node FROM r",
}


def oracle_rows(con: duckdb.DuckDBPyConnection, sql: str) -> Counter[str]:
    return multiset([row_to_json(r) for r in con.execute(sql).fetchall()])


def check(s: Server, con: duckdb.DuckDBPyConnection, views: dict[str, str]) -> int:
    """Every table equals the oracle's, every view equals DuckDB's answer; returns the ts."""
    ts = s.http.get("/health").json()["timestamp"]
    for t in ("orders", "custs", "edges"):
        got = s.query(f"SELECT * FROM {t}")["rows"]
        assert multiset(got) == oracle_rows(con, f"SELECT * FROM {t}"), t
    for name, sql in views.items():
        got = s.rows(name)
        assert got["timestamp"] == ts
        assert multiset(got["rows"]) == oracle_rows(con, sql), name
    return ts


def assert_error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"code", "message", "line", "column"}
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and err["message"]
    return err  # type: ignore[no-any-return]


def no_load_files(s: Server) -> None:
    loads = s.data_dir / "loads"
    assert loads.is_dir() and list(loads.iterdir()) == []


# -- data files ------------------------------------------------------------------------------


def write_orders(path: Path, rng: random.Random, ids: range) -> None:
    """A Parquet file whose types differ from the table's where DuckDB can cast (int64 ids into
    INTEGER, price as text into DECIMAL), with NULLs in every nullable column."""
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.1 else v

    n = len(ids)
    pq.write_table(
        pa.table(
            {
                "id": pa.array(list(ids), pa.int64()),
                "cust": pa.array([maybe(rng.randint(1, 12)) for _ in range(n)], pa.int64()),
                "item": pa.array([maybe(rng.choice(["nut", "bolt", "", "ünï"])) for _ in range(n)]),
                "qty": pa.array([maybe(rng.randint(-5, 50)) for _ in range(n)], pa.int32()),
                "price": pa.array(
                    [maybe(f"{rng.randint(0, 99999) / 100:.2f}") for _ in range(n)], pa.string()
                ),
                "weight": pa.array([maybe(rng.random() * 100) for _ in range(n)], pa.float64()),
                "day": pa.array(
                    [maybe(datetime.date(2024, 1, 1) + datetime.timedelta(rng.randint(0, 400)))
                     for _ in range(n)],
                    pa.date32(),
                ),
                "paid": pa.array([maybe(rng.random() < 0.7) for _ in range(n)], pa.bool_()),
            }
        ),
        path,
    )


def write_custs(path: Path) -> None:
    """CSV with a header and '|', quoted fields holding the delimiter and doubled quotes, and
    NULLs (an empty field, quoted or not, as DuckDB reads it)."""

    def region(i: int) -> str:
        if i % 5 == 0:
            return ""
        if i % 5 == 1:
            return '""'
        if i == 8:
            return '"south|east"'
        return "north" if i % 2 else " west "

    lines = ["id|name|region"]
    lines += [f'{i}|"cust ""{i}"""|{region(i)}' for i in range(1, 11)]
    path.write_text("\n".join(lines) + "\n")


def write_edges(path: Path, pairs: list[tuple[int, int]], delimiter: str = ",") -> None:
    path.write_text("".join(f"{a}{delimiter}{b}\n" for a, b in pairs))


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "data").start()
    yield s
    s.stop()


def oracle_db() -> duckdb.DuckDBPyConnection:
    """The oracle: the same tables in an independent DuckDB, and the views as DuckDB views
    (so views over views are recomputed from the tables)."""
    con = duckdb.connect()
    for d in DDL:
        con.execute(d)
    for name, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    return con


def copy_both(s: Server, con: duckdb.DuckDBPyConnection, stmts: list[str]) -> int:
    """Run COPY statements (paths relative to the import dir) on the server, in one request,
    and with DuckDB's own COPY on the oracle (absolute paths)."""
    imp = s.data_dir / "import"
    res = s.sql("; ".join(stmts))
    for st in stmts:
        if st.startswith("COPY"):
            head, rest = st.split("'", 1)
            fname, tail = rest.split("'", 1)
            con.execute(f"{head}'{imp / fname}'{tail}")
        else:
            con.execute(st)
    return int(res[0]["timestamp"])


# -- tests -----------------------------------------------------------------------------------


def test_copy_parquet_and_csv_match_duckdb(server: Server) -> None:
    s, imp = server, server.data_dir / "import"
    assert imp.is_dir(), "the import directory is created at start-up"
    rng = random.Random(7)
    write_orders(imp / "orders.parquet", rng, range(1, 301))
    write_custs(imp / "custs.csv")
    write_edges(imp / "edges.tsv", [(i, i + 1) for i in range(1, 40)] + [(50, 51)], "\t")
    s.sql("; ".join(DDL) + "; " + "; ".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
    con = oracle_db()
    feed_sse, feed = SSE(s, "by_region", snapshot=True), Feed()
    reach_sse, reach_feed = SSE(s, "reach", snapshot=True), Feed()
    try:
        ts = copy_both(s, con, [
            "COPY orders FROM 'orders.parquet' (FORMAT parquet)",
            "COPY custs FROM 'custs.csv' (FORMAT csv, HEADER true, DELIMITER '|')",
        ])
        res = s.sql("COPY edges FROM 'edges.tsv' (FORMAT csv, DELIMITER '\\t')")
        assert res == [{"statement": "COPY", "rowcount": 40, "timestamp": ts + 1}]
        con.execute(f"COPY edges FROM '{imp / 'edges.tsv'}' (FORMAT csv, DELIMITER '\t')")
        assert check(s, con, VIEWS) == ts + 1
        # The data really has what the test claims to cover.
        orders = s.query("SELECT * FROM orders")["rows"]
        assert len(orders) == 300 and any(None in r for r in orders)
        custs = s.query("SELECT region FROM custs")["rows"]
        assert [None] in custs and [" west "] in custs and ["south|east"] in custs
        assert sorted(x for (x,) in s.rows("reach")["rows"]) == list(range(1, 41))
        info = s.http.get("/tables/orders").json()
        assert info["row_count"] == 300
        no_load_files(s)

        # A COPY in the same request as a new view: the view sees the loaded rows.
        write_edges(imp / "more.csv", [(40, 50), (51, 52), (1, 1)])
        views2 = dict(VIEWS, reach2="SELECT node, count(*) AS n FROM reach GROUP BY node",
                      deg="SELECT src, count(*) AS n FROM edges GROUP BY src")
        res = s.sql(
            "COPY edges FROM 'more.csv'; CREATE VIEW reach2 AS " + views2["reach2"]
            + "; CREATE VIEW deg AS " + views2["deg"]
        )
        con.execute(f"COPY edges FROM '{imp / 'more.csv'}'")
        con.execute(f"CREATE VIEW reach2 AS {views2['reach2']}")
        assert check(s, con, views2) == res[0]["timestamp"]
        assert sorted(x for (x,) in s.rows("reach")["rows"]) == [*range(1, 41), 50, 51, 52]

        # Ordinary writes afterwards keep everything equal to DuckDB.
        for stmt in [
            "UPDATE orders SET paid = NOT coalesce(paid, false) WHERE id % 3 = 0",
            "DELETE FROM orders WHERE qty < 0 OR price IS NULL",
            "INSERT INTO orders VALUES (1000, 3, 'new', 7, 12.50, 1.25, DATE '2025-01-01', true)",
            "UPDATE custs SET region = 'north' WHERE region IS NULL OR region = ''",
            "DELETE FROM edges WHERE src = 20",
            "INSERT INTO edges VALUES (20, 21)",
            "DELETE FROM custs WHERE id = 2",
        ]:
            s.sql(stmt)
            con.execute(stmt)
            ts = check(s, con, views2)
            feed.read_until(feed_sse, ts)
            assert feed.contents == multiset(s.rows("by_region")["rows"])
            reach_feed.read_until(reach_sse, ts)
            assert reach_feed.contents == multiset(s.rows("reach")["rows"])
        no_load_files(s)
    finally:
        feed_sse.close()
        reach_sse.close()


def test_values_equal_insert(server: Server) -> None:
    """The engine sees the same Python values from a load file as from an INSERT: deleting
    loaded rows by value, and inserting equal rows, cancel exactly in the views."""
    s, imp = server, server.data_dir / "import"
    s.sql(
        "CREATE TABLE t (a INTEGER, b BIGINT, c VARCHAR, d DOUBLE, e DECIMAL(12,3), f DATE, "
        "g BOOLEAN, h TIMESTAMP, i REAL, j SMALLINT);"
        "CREATE VIEW v AS SELECT * FROM t;"
        "CREATE VIEW n AS SELECT a, b, c, d, e, f, g, h, i, j, count(*) AS k FROM t "
        "GROUP BY a, b, c, d, e, f, g, h, i, j"
    )
    rows = [
        (1, 2**40, "x", 0.1, decimal.Decimal("1.500"), datetime.date(2024, 2, 29), True,
         datetime.datetime(2024, 1, 2, 3, 4, 5, 123456), 1.1, -3),
        (None, None, None, None, None, None, None, None, None, None),
        (-7, -1, "", -1e300, decimal.Decimal("-0.001"), datetime.date(1970, 1, 1), False,
         datetime.datetime(1999, 12, 31, 23, 59, 59), -0.5, 32767),
    ]
    cols = list(zip(*rows, strict=True))
    pq.write_table(
        pa.table(
            {
                "a": pa.array(cols[0], pa.int32()), "b": pa.array(cols[1], pa.int64()),
                "c": pa.array(cols[2], pa.string()), "d": pa.array(cols[3], pa.float64()),
                "e": pa.array(cols[4], pa.decimal128(12, 3)), "f": pa.array(cols[5], pa.date32()),
                "g": pa.array(cols[6], pa.bool_()), "h": pa.array(cols[7], pa.timestamp("us")),
                "i": pa.array(cols[8], pa.float32()), "j": pa.array(cols[9], pa.int16()),
            }
        ),
        imp / "t.parquet",
    )
    inserted = s.sql("INSERT INTO t SELECT * FROM t")  # nothing yet: a no-op write
    assert inserted[0]["rowcount"] == 0
    s.sql("COPY t FROM 't.parquet'")  # the format comes from the file name
    loaded = s.rows("v")["rows"]
    assert len(loaded) == 3
    # Insert the same rows with SQL: every group of `n` then counts 2.
    s.sql("INSERT INTO t SELECT * FROM t")
    assert sorted(r[-1] for r in s.rows("n")["rows"]) == [2, 2, 2]
    assert multiset(s.rows("v")["rows"]) == multiset(loaded + loaded)
    # Deleting by value retracts the loaded rows and the inserted ones alike.
    s.sql("DELETE FROM t WHERE a IS NULL OR a <> 12345")
    assert s.rows("v")["rows"] == [] and s.rows("n")["rows"] == []
    s.sql("COPY t FROM 't.parquet'; DELETE FROM t WHERE a = 1")
    assert multiset(s.rows("v")["rows"]) == multiset([r for r in loaded if r[0] != 1])
    assert s.http.get("/tables/t").json()["row_count"] == 2


def test_copy_is_atomic_with_the_rest_of_the_request(server: Server) -> None:
    s, imp = server, server.data_dir / "import"
    write_edges(imp / "e.csv", [(1, 2), (2, 3), (3, 4)])
    s.sql("CREATE TABLE edges (src INTEGER, dst INTEGER); INSERT INTO edges VALUES (9, 9);"
          f"CREATE VIEW reach AS {VIEWS['reach']}")
    con = duckdb.connect()
    con.execute("CREATE TABLE edges (src INTEGER, dst INTEGER); INSERT INTO edges VALUES (9, 9)")

    def state() -> tuple[Any, ...]:
        h = s.http.get("/health").json()["timestamp"]
        return (h, s.http.get("/tables/edges").json()["row_count"],
                multiset(s.query("SELECT * FROM edges")["rows"]), s.rows("reach")["rows"])

    before = state()
    for bad in [
        "COPY edges FROM 'e.csv'; INSERT INTO edges VALUES ('x', 1)",
        "INSERT INTO edges VALUES (5, 6); COPY edges FROM 'e.csv'; SELECT * FROM nope",
        "COPY edges FROM 'e.csv'; COPY edges FROM 'missing.csv'",
        "COPY edges FROM 'e.csv'; CREATE VIEW bad AS SELECT nope FROM edges",
    ]:
        r = s.http.post("/sql", json={"sql": bad})
        assert 400 <= r.status_code < 500, r.text
        assert state() == before, bad
    no_load_files(s)
    # Mixed, successfully: INSERT, COPY, UPDATE of loaded rows, a SELECT that sees the load.
    stmts = ["INSERT INTO edges VALUES (4, 5)", "COPY edges FROM 'e.csv'",
             "UPDATE edges SET dst = 30 WHERE dst = 3", "DELETE FROM edges WHERE src = 9"]
    res = s.sql("; ".join(stmts) + "; SELECT count(*) AS n FROM edges")
    assert [r["statement"] for r in res] == ["INSERT", "COPY", "UPDATE", "DELETE", "SELECT"]
    assert res[1]["rowcount"] == 3 and res[4]["rows"] == [[4]]
    assert len({r["timestamp"] for r in res}) == 1
    for st in stmts:
        if st.startswith("COPY"):
            st = f"COPY edges FROM '{imp / 'e.csv'}'"
        con.execute(st)
    assert multiset(s.query("SELECT * FROM edges")["rows"]) == oracle_rows(
        con, "SELECT * FROM edges")
    assert multiset(s.rows("reach")["rows"]) == oracle_rows(con, VIEWS["reach"])
    assert s.http.get("/tables/edges").json()["row_count"] == 4


def test_bad_copies_are_rejected_and_change_nothing(server: Server, tmp_path: Path) -> None:
    s, imp = server, server.data_dir / "import"
    s.sql("CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR, c DATE);"
          "CREATE VIEW v AS SELECT b, count(*) AS n FROM t GROUP BY b;"
          "INSERT INTO t VALUES (1, 'x', NULL)")
    (imp / "ok.csv").write_text("2,y,2024-01-01\n")
    (imp / "bad_int.csv").write_text("3,y,2024-01-01\nnot a number,z,\n")
    (imp / "bad_date.csv").write_text("3,y,2024-02-30\n")
    (imp / "two.csv").write_text("3,y\n")
    (imp / "ragged.csv").write_text("3,y,2024-01-01\n4,z\n")
    (imp / "nulls.csv").write_text("3,y,\n,z,\n")
    pq.write_table(pa.table({"a": [1], "b": ["q"]}), imp / "two.parquet")
    (imp / "garbage.parquet").write_bytes(b"not parquet at all")
    (imp / "sub").mkdir()
    secret = tmp_path / "secret.csv"
    secret.write_text("9,secret,\n")
    os.symlink(secret, imp / "link.csv")
    os.symlink(tmp_path, imp / "outdir")

    def state() -> tuple[Any, ...]:
        return (s.http.get("/health").json()["timestamp"],
                s.http.get("/tables/t").json()["row_count"],
                s.query("SELECT * FROM t")["rows"], s.rows("v")["rows"])

    before = state()
    cases = [
        (f"COPY t FROM '{secret}'", 403, "forbidden_path"),
        ("COPY t FROM '/etc/passwd'", 403, "forbidden_path"),
        ("COPY t FROM '../store.duckdb'", 403, "forbidden_path"),
        ("COPY t FROM 'sub/../../../secret.csv'", 403, "forbidden_path"),
        ("COPY t FROM '/nonexistent/x.csv'", 403, "forbidden_path"),
        ("COPY t FROM 'link.csv'", 403, "forbidden_path"),
        ("COPY t FROM 'outdir/secret.csv'", 403, "forbidden_path"),
        ("COPY t FROM 'outdir/*.csv'", 403, "forbidden_path"),
        ("COPY t FROM '../*'", 403, "forbidden_path"),
        ("COPY t FROM 'ok\x00.csv'", 400, "bad_copy_option"),
        ("COPY t FROM 'missing.csv'", 400, "file_not_found"),
        ("COPY t FROM 'nothing*.csv'", 400, "file_not_found"),
        ("COPY t FROM 'sub'", 400, "not_a_file"),
        ("COPY t FROM 'ok.csv' (FORMAT json)", 400, "bad_copy_option"),
        ("COPY t FROM 'ok.csv' (FORMAT csv, DELIMITER '||')", 400, "bad_copy_option"),
        ("COPY t FROM 'ok.csv' (FORMAT csv, HEADER maybe)", 400, "bad_copy_option"),
        ("COPY t FROM 'ok.csv' (FORMAT csv, COMPRESSION gzip)", 400, "bad_copy_option"),
        ("COPY t FROM 'two.parquet' (FORMAT parquet, HEADER true)", 400, "bad_copy_option"),
        ("COPY t FROM 'bad_int.csv'", 400, "type_error"),
        ("COPY t FROM 'bad_date.csv'", 400, "type_error"),
        ("COPY t FROM 'two.csv'", 400, "column_count_mismatch"),
        ("COPY t FROM 'two.parquet'", 400, "column_count_mismatch"),
        ("COPY t (a, nope) FROM 'two.csv'", 400, "unknown_column"),
        ("COPY t FROM 'ragged.csv'", 400, "invalid_file"),
        ("COPY t FROM 'garbage.parquet'", 400, "invalid_file"),
        ("COPY t FROM 'nulls.csv'", 409, "constraint_violation"),
        ("COPY t TO 'out.csv'", 400, "unsupported"),
        ("COPY (SELECT 1) TO 'out.csv'", 400, "unsupported"),
        ("COPY v FROM 'ok.csv'", 400, "read_only_view"),
        ("COPY nope FROM 'ok.csv'", 400, "unknown_table"),
    ]
    for sql, status, code in cases:
        text = "INSERT INTO t VALUES (5, 'w', NULL);\n  " + sql
        err = assert_error(s.http.post("/sql", json={"sql": text}), status, code)
        assert (err["line"], err["column"]) == (2, 3), (sql, err)
        assert "secret" not in err["message"] or "secret.csv" in sql, err
        if code == "type_error":  # the table's column, not the reader's name for it (f0)
            assert "column a" in err["message"] or "column c" in err["message"], err
        assert state() == before, sql
    # The sandbox keeps rejecting COPY in /query, in both directions.
    for sql in ("COPY t FROM 'ok.csv'", "COPY t TO 'out.csv'"):
        assert_error(s.http.post("/query", json={"sql": sql}), 400, "forbidden")
    assert state() == before
    assert not (imp / "out.csv").exists()
    no_load_files(s)
    # And a good COPY still works afterwards, including an absolute path inside the import
    # directory, a column list, and a glob.
    (imp / "parts").mkdir()
    (imp / "parts" / "1.csv").write_text("b,a\nq,10\n")
    (imp / "parts" / "2.csv").write_text("b,a\nr,11\n")
    res = s.sql(f"COPY t FROM '{imp / 'ok.csv'}'; "
                "COPY t (b, a) FROM 'parts/*.csv' (FORMAT csv, HEADER)")
    assert [r["rowcount"] for r in res] == [1, 2]
    assert multiset(s.query("SELECT * FROM t")["rows"]) == multiset(
        [[1, "x", None], [2, "y", "2024-01-01"], [10, "q", None], [11, "r", None]])
    assert multiset(s.rows("v")["rows"]) == multiset([["x", 1], ["y", 1], ["q", 1], ["r", 1]])
    # As DuckDB's: `**` crosses directories, and a pattern reads the files it matches, not
    # the directories (`parts/**` matched `parts/deep`: not_a_file; DuckDB reads all three)
    (imp / "parts" / "deep" / "er").mkdir(parents=True)
    (imp / "parts" / "deep" / "er" / "3.csv").write_text("b,a\ns,12\n")
    for pattern in ("parts/**", "parts/**/*.csv"):
        res = s.sql(f"DELETE FROM t WHERE a >= 10; COPY t (b, a) FROM '{pattern}' (FORMAT csv, HEADER)")
        assert res[1]["rowcount"] == 3, pattern
        assert multiset(s.query("SELECT a, b FROM t WHERE a >= 10")["rows"]) == multiset(
            [[10, "q"], [11, "r"], [12, "s"]]), pattern


def test_restart_keeps_loaded_rows_and_views(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    imp = s.data_dir / "import"
    try:
        write_orders(imp / "orders.parquet", random.Random(3), range(1, 201))
        write_custs(imp / "custs.csv")
        write_edges(imp / "edges.csv", [(i, i + 1) for i in range(1, 30)])
        s.sql("; ".join(DDL) + "; " + "; ".join(f"CREATE VIEW {n} AS {q}" for n, q in VIEWS.items()))
        con = oracle_db()
        t1 = copy_both(s, con, ["COPY orders FROM 'orders.parquet'",
                                "COPY custs FROM 'custs.csv' (FORMAT csv, HEADER, DELIMITER '|')"])
        copy_both(s, con, ["COPY edges FROM 'edges.csv'", "DELETE FROM orders WHERE id < 20"])
        ts = check(s, con, VIEWS)
        before = {n: s.rows(n)["rows"] for n in VIEWS}
        at_t1 = s.rows("by_region", as_of=t1)["rows"]
    finally:
        s.stop()
    # A crash mid-write may leave a load file behind: start-up removes it.
    (s.data_dir / "loads" / "999-1-0.parquet").write_bytes(b"stale")
    s.start()
    try:
        assert s.http.get("/health").json()["timestamp"] == ts
        assert check(s, con, VIEWS) == ts
        assert {n: s.rows(n)["rows"] for n in VIEWS} == before
        assert s.rows("by_region", as_of=t1)["rows"] == at_t1
        no_load_files(s)
        # A feed resumed from before the load replays it exactly once.
        sse, feed = SSE(s, "by_region", since=t1 - 1), Feed()
        try:
            feed.read_until(sse, ts)
            assert feed.seen[0] == t1
            assert feed.contents == multiset(before["by_region"])
        finally:
            sse.close()
        # Writes after the restart keep the views equal to DuckDB.
        for stmt in ["DELETE FROM custs WHERE id % 2 = 0", "UPDATE edges SET dst = 1 WHERE src = 29"]:
            s.sql(stmt)
            con.execute(stmt)
            check(s, con, VIEWS)
    finally:
        s.stop()


def test_import_dir_flag_and_memory_mode(tmp_path: Path) -> None:
    imp = tmp_path / "my imports"
    s = Server(tmp_path / "data", "--import-dir", str(imp)).start()
    try:
        assert imp.is_dir()
        write_edges(imp / "e.csv", [(1, 2)])
        (s.data_dir / "import").mkdir(exist_ok=True)
        write_edges(s.data_dir / "import" / "f.csv", [(3, 4)])
        s.sql("CREATE TABLE e (a INTEGER, b INTEGER); COPY e FROM 'e.csv'")
        assert s.query("SELECT * FROM e")["rows"] == [[1, 2]]
        # The default import directory is not readable once another one is configured.
        err = assert_error(s.http.post("/sql", json={"sql": "COPY e FROM '../data/import/f.csv'"}),
                           403, "forbidden_path")
        assert err["line"] == 1
    finally:
        s.stop()


def test_cli_sql_runs_copy(server: Server) -> None:
    from test_server_cli import run_cli

    write_edges(server.data_dir / "import" / "e.csv", [(1, 2), (2, 3)])
    r = run_cli("sql", "--url", server.url,
                "CREATE TABLE e (a INTEGER, b INTEGER); COPY e FROM 'e.csv' (FORMAT csv)")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][1] == {"statement": "COPY", "rowcount": 2,
                                                  "timestamp": 1}
    r = run_cli("sql", "--url", server.url, "COPY e FROM '/etc/hosts'")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "forbidden_path"


def test_int96_timestamps_load_as_duckdb_reads_them(server: Server) -> None:
    """Spark and Hive write timestamps as Parquet INT96; DuckDB reads them at microseconds, so
    years outside the nanoseconds' 1677-2262 load as written (not wrapped to another year)."""
    s, imp = server, server.data_dir / "import"
    stamps = [datetime.datetime(3000, 1, 1), datetime.datetime(1, 1, 1, 0, 0, 0, 1),
              datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
              datetime.datetime(1500, 6, 7, 8, 9, 10, 11), datetime.datetime(2024, 5, 6, 7, 8, 9),
              None]
    pq.write_table(pa.table({"id": pa.array(range(len(stamps)), pa.int32()),
                             "ts": pa.array(stamps, pa.timestamp("us"))}),
                   imp / "int96.parquet", use_deprecated_int96_timestamps=True)
    assert str(pq.ParquetFile(imp / "int96.parquet").schema.column(1).physical_type) == "INT96"
    view = "SELECT extract(year FROM ts) AS y, count(*) AS n FROM spark GROUP BY 1"
    s.sql(f"CREATE TABLE spark (id INTEGER, ts TIMESTAMP); CREATE VIEW years AS {view}")
    con = duckdb.connect()
    con.execute("CREATE TABLE spark (id INTEGER, ts TIMESTAMP)")
    copy_both(s, con, ["COPY spark FROM 'int96.parquet' (FORMAT parquet)"])
    got = s.query("SELECT * FROM spark")["rows"]
    assert multiset(got) == oracle_rows(con, "SELECT * FROM spark")
    assert [0, "3000-01-01T00:00:00"] in got, got
    assert multiset(s.rows("years")["rows"]) == oracle_rows(con, view)


def test_float16_and_interval_parquet_columns_load_as_duckdb_reads_them(server: Server) -> None:
    """A float16 column (pyarrow reads it; DuckDB's Arrow scan does not take it) loads as DuckDB
    reads it, FLOAT; a Parquet INTERVAL (pyarrow: 12 raw bytes) into VARCHAR is DuckDB's text
    of it, not the bytes."""
    import numpy as np

    s, imp = server, server.data_dir / "import"
    halves = np.array([1.5, -2.25, np.inf, -np.inf, np.nan, 65504, 6e-8, -0.0], np.float16)
    pq.write_table(pa.table({"h": pa.array(halves, mask=np.arange(len(halves)) == 1)}),
                   imp / "half.parquet")
    maker = duckdb.connect()
    maker.execute(
        f"COPY (SELECT * FROM (VALUES (1, INTERVAL '3 days'), (2, INTERVAL '1 month 1.5 seconds'),"
        " (3, INTERVAL '14 months 5 hours 0.123 seconds'), (4, INTERVAL '0 days'), (5, NULL),"
        " (6, INTERVAL '40 days 25 hours')) v(id, iv)) "
        f"TO '{imp / 'iv.parquet'}' (FORMAT parquet)")
    s.sql("CREATE TABLE half (h REAL); CREATE TABLE half_d (h DOUBLE); "
          "CREATE TABLE iv (id INTEGER, iv VARCHAR); "
          "CREATE VIEW signs AS SELECT sign(h) AS s, count(*) AS n FROM half GROUP BY 1")
    con = duckdb.connect()
    con.execute("CREATE TABLE half (h REAL); CREATE TABLE half_d (h DOUBLE); "
                "CREATE TABLE iv (id INTEGER, iv VARCHAR)")
    copy_both(s, con, ["COPY half FROM 'half.parquet'", "COPY half_d FROM 'half.parquet'",
                       "COPY iv FROM 'iv.parquet' (FORMAT parquet)"])
    for t in ("half", "half_d", "iv"):
        got = s.query(f"SELECT * FROM {t}")["rows"]
        assert multiset(got) == oracle_rows(con, f"SELECT * FROM {t}"), t
    assert [2, "1 month 00:00:01.5"] in s.query("SELECT * FROM iv")["rows"]
    assert multiset(s.rows("signs")["rows"]) == oracle_rows(
        con, "SELECT sign(h) AS s, count(*) AS n FROM half GROUP BY 1")


def test_a_csv_of_empty_lines_is_null_rows_as_duckdb_reads_it(server: Server) -> None:
    """A CSV file of only empty lines loads one NULL row per line (after a header line) into a
    one-column table, as DuckDB's COPY does (it was refused: pyarrow infers no column), and is
    refused for a wider table, as DuckDB refuses it."""
    s, imp = server, server.data_dir / "import"
    (imp / "blank.csv").write_bytes(b"\n\n\n")
    (imp / "blank_crlf.csv").write_bytes(b"\r\n\r\n")
    s.sql("CREATE TABLE one (x INTEGER); CREATE TABLE two (x INTEGER, y INTEGER); "
          "CREATE VIEW n AS SELECT count(*) AS rows, count(x) AS xs FROM one")
    con = duckdb.connect()
    con.execute("CREATE TABLE one (x INTEGER); CREATE TABLE two (x INTEGER, y INTEGER)")
    copy_both(s, con, ["COPY one FROM 'blank.csv'", "COPY one FROM 'blank_crlf.csv' (HEADER true)",
                       "COPY one FROM 'blank_crlf.csv'"])
    # with another NULL string, an empty line is no row
    copy_both(s, con, ["COPY one FROM 'blank.csv' (NULL 'x')",
                       "COPY one FROM 'blank_crlf.csv' (NULL 'x', HEADER true)"])
    assert multiset(s.query("SELECT * FROM one")["rows"]) == oracle_rows(con, "SELECT * FROM one")
    assert s.rows("n")["rows"] == [[6, 0]]
    with pytest.raises(duckdb.Error):
        con.execute(f"COPY two FROM '{imp / 'blank.csv'}'")
    assert_error(s.http.post("/sql", json={"sql": "COPY two FROM 'blank.csv'"}), 400,
                 "column_count_mismatch")


def test_a_csv_row_longer_than_a_read_block_loads(server: Server) -> None:
    """A CSV row longer than pyarrow's default 1 MiB read block (a 3 MB first row, a 5 MB
    quoted field with a newline among 20,000 short rows) loads like any other: it was refused
    with an error about blocks. DuckDB reads the same files with a large enough
    max_line_size."""
    s, imp = server, server.data_dir / "import"
    (imp / "first.csv").write_text("1," + "a" * 3_000_000 + "\n2,b\n")
    rows = [f"{i},row {i}" for i in range(20_000)]
    rows[12_345] = '12345,"' + "z" * 2_500_000 + "\n" + "y" * 2_500_000 + '"'
    (imp / "middle.csv").write_text("\n".join(rows) + "\n")
    s.sql("CREATE TABLE t (id INTEGER, s VARCHAR); "
          "CREATE VIEW sizes AS SELECT id, length(s) AS n FROM t WHERE length(s) > 100")
    s.sql("COPY t FROM 'first.csv'; COPY t FROM 'middle.csv'")
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, s VARCHAR)")
    for name in ("first.csv", "middle.csv"):
        con.execute(f"INSERT INTO t SELECT * FROM read_csv('{imp / name}', header = false, "
                    "max_line_size = 10000000, columns = {'id': 'INTEGER', 's': 'VARCHAR'})")
    assert multiset(s.rows("sizes")["rows"]) == oracle_rows(
        con, "SELECT id, length(s) FROM t WHERE length(s) > 100") == multiset(
        [[1, 3_000_000], [12345, 5_000_001]])
    assert s.query("SELECT count(*), sum(length(s)) FROM t")["rows"] == [
        list(con.execute("SELECT count(*), sum(length(s)) FROM t").fetchone())]
