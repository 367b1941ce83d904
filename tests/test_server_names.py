"""Names are matched as DuckDB matches identifiers: ASCII letters without regard to case,
every other character exactly ("Ñame" and "ÑAME" are one table, "ñame" another), in the
server's catalog, the planner and the SQL DuckDB runs, before and after a restart.

Oracle: a plain DuckDB connection given the same statements accepts and refuses the same
ones, and answers the same rows."""

from __future__ import annotations

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
