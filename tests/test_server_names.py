"""Names are matched as DuckDB matches identifiers: ASCII letters without regard to case,
every other character exactly ("Ñame" and "ÑAME" are one table, "ñame" another), in the
server's catalog, the planner and the SQL DuckDB runs, before and after a restart.

Oracle: a plain DuckDB connection given the same statements accepts and refuses the same
ones, and answers the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from server.core import Database
from server.errors import ApiError
from server.executors import InProcessExecutor
from server.settings import Settings

SETUP = [
    'CREATE TABLE "Ñame" ("Ärger" INTEGER, "Plain" INTEGER, "ünï" VARCHAR)',
    'INSERT INTO "Ñame" VALUES (1, 2, \'a\'), (3, 4, \'b\')',
    'INSERT INTO "ÑAME" ("ÄRGER", "PLAIN", "ÜNÏ") VALUES (5, 6, \'c\')',
    'UPDATE "Ñame" SET "Plain" = 0 WHERE "Ärger" = 1',
    'DELETE FROM "ÑaMe" WHERE "ärger" = 3',  # "ärger" is not "Ärger": refused by both
    'DELETE FROM "ÑaMe" WHERE "ÄrGeR" = 3',
    'CREATE VIEW "Vüe" AS SELECT "Ärger", "ünï" FROM "Ñame" WHERE "Plain" < 5',
    'INSERT INTO ñame VALUES (7, 8, \'d\')',  # another table: refused by both
    'INSERT INTO "ñame" VALUES (7, 8, \'d\')',
    'INSERT INTO "Ñame" VALUES (9, 1, \'e\')',
]


def outcome(run: Any, sql: str) -> tuple[str, Any]:
    try:
        return "ok", run(sql)
    except (ApiError, duckdb.Error):
        return "error", None


def test_names_match_as_duckdb_matches_them(tmp_path: Path) -> None:
    con = duckdb.connect()
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        for sql in SETUP:
            want, _ = outcome(con.execute, sql)
            got, _ = outcome(db.execute, sql)
            assert got == want, sql
        check(db, con)
    finally:
        db.close()
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        check(db, con)
        db.execute('INSERT INTO "Ñame" VALUES (11, 2, \'f\')')
        con.execute('INSERT INTO "Ñame" VALUES (11, 2, \'f\')')
        check(db, con)
    finally:
        db.close()


def check(db: Database, con: duckdb.DuckDBPyConnection) -> None:
    con.execute('CREATE OR REPLACE VIEW "Vüe" AS SELECT "Ärger", "ünï" FROM "Ñame" '
                'WHERE "Plain" < 5')
    want = sorted(map(list, con.execute('SELECT * FROM "Vüe"').fetchall()))
    assert sorted(db.view_rows("vüe", None)["rows"]) == want
    for sql in ('SELECT * FROM "Vüe"', 'SELECT * FROM "VüE"', 'SELECT "ärger" FROM "Vüe"',
                'SELECT * FROM "ñame"', 'SELECT "ÄRGER", "ÜNÏ" FROM "ÑAME"'):
        status, rows = outcome(lambda q: con.execute(q).fetchall(), sql)
        got_status, got = outcome(db.query, sql)
        assert got_status == status, sql
        if status == "ok":
            assert sorted(got["rows"]) == sorted(map(list, rows)), sql
    with pytest.raises(ApiError):
        db.view_rows("vÜe", None)  # Ü is not folded: another name


def test_views_stored_with_older_column_names_take_the_current_ones(tmp_path: Path) -> None:
    """A database written by an earlier version holds views' columns as it named them: a
    repeated name (`SELECT a.k, b.k` stored as `k`, `k`, which made `/query` over the view
    fail) or one lowercased where DuckDB keeps case. At the next start each view's columns
    take the names the planner gives them now (DuckDB's: `k`, `k_1`), views over them too,
    and are stored so. Oracle: DuckDB's DESCRIBE of the same views, and their rows."""
    data = tmp_path / "data"
    views = {
        "d": "SELECT a.k, b.k FROM a, b WHERE a.k < b.k",
        "e": "SELECT * FROM d",
        "c": 'SELECT * FROM (SELECT k AS "Big" FROM a) s',
    }
    tables = ("CREATE TABLE a (k INTEGER); CREATE TABLE b (k INTEGER); "
              "INSERT INTO a VALUES (1), (2); INSERT INTO b VALUES (2), (3)")
    con = duckdb.connect()
    con.execute(tables)
    for name, sql in views.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    want = {n: [r[0] for r in con.execute(f"DESCRIBE {n}").fetchall()] for n in views}
    assert want["d"] == ["k", "k_1"] and want["c"] == ["Big"]
    db = Database(Settings(data_dir=data), InProcessExecutor())
    try:
        db.execute(tables)
        for name, sql in views.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
    finally:
        db.close()
    # the names an earlier version stored
    old = {"d": ["k", "k"], "e": ["k", "k"], "c": ["big"]}
    with duckdb.connect(str(data / "store.duckdb")) as store:
        for name, names in old.items():
            (text,) = store.execute("SELECT columns FROM diffsql.views WHERE name = ?",
                                    [name]).fetchone()
            cols = [dict(c, name=n) for c, n in zip(json.loads(text), names, strict=True)]
            store.execute("UPDATE diffsql.views SET columns = ? WHERE name = ?",
                          [json.dumps(cols), name])
    for _ in range(2):
        db = Database(Settings(data_dir=data), InProcessExecutor())
        try:
            for name in views:
                rows = sorted(map(list, con.execute(f"SELECT * FROM {name}").fetchall()))
                got = db.view_rows(name, None)
                assert got["columns"] == want[name] and sorted(got["rows"]) == rows, name
                got = db.query(f"SELECT * FROM {name}")
                assert got["columns"] == want[name] and sorted(got["rows"]) == rows, name
            assert [c["name"] for c in db.view_info("e")["columns"]] == want["e"]
            db.execute("CREATE VIEW f AS SELECT k_1 FROM e WHERE k = 1")
            assert sorted(db.view_rows("f", None)["rows"]) == [[2], [3]]
            db.execute("DROP VIEW f")
        finally:
            db.close()
    with duckdb.connect(str(data / "store.duckdb")) as store:
        for name in views:
            (text,) = store.execute("SELECT columns FROM diffsql.views WHERE name = ?",
                                    [name]).fetchone()
            assert [c["name"] for c in json.loads(text)] == want[name], name


VIEWS_OVER_ALIASES = [
    'SELECT "Q" FROM a1', "SELECT q FROM a1", "SELECT Q, z FROM a1", "SELECT x.q FROM a1 x",
    "SELECT q FROM (SELECT * FROM a1)", "SELECT (q) FROM a1", "SELECT q, count(*) FROM a1 GROUP BY q",
    "SELECT b, a1.q + 1 FROM a1", "SELECT q FROM a1 JOIN t ON t.a = a1.q", "SELECT * FROM a1",
]


def test_a_column_named_by_itself_keeps_its_sources_name(tmp_path: Path) -> None:
    """`SELECT q FROM a1`, where view a1's column is "Q" (an alias keeps its case), is "Q" in
    DuckDB, as `SELECT * FROM a1` is (it was "q"); also after a restart."""
    con = duckdb.connect()
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        for sql in ("CREATE TABLE t (a INTEGER, b INTEGER)",
                    'CREATE VIEW a1 AS SELECT a AS "Q", a AS "Z", b FROM t',
                    "INSERT INTO t VALUES (1, 2)"):
            db.execute(sql)
            con.execute(sql)
        for i, sql in enumerate(VIEWS_OVER_ALIASES):
            db.execute(f"CREATE VIEW w{i} AS {sql}")
    finally:
        db.close()
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    try:
        for i, sql in enumerate(VIEWS_OVER_ALIASES):
            want = [d[0] for d in con.execute(sql).description]
            assert [c["name"] for c in db.view_info(f"w{i}")["columns"]] == want, sql
            assert db.query(sql)["columns"] == want, sql
    finally:
        db.close()
