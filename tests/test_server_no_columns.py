"""Views that read no column of a table (`count(*)`, a constant per row) over bulk changes.

Such a view's rows are empty tuples until it counts them, and an Arrow table of no columns
loses its rows in Arrow's `take` and `concat_tables`: a `count(*)` view over a table loaded
by COPY once read 0 (the reduce built its groups from such a table). In process on a real
DuckDB file, each view is checked against DuckDB running its SELECT after every write: bulk
loads (COPY, a large `INSERT ... SELECT`, a large DELETE and UPDATE), single rows, a view
created over loaded tables, and a restart.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from server_harness import views_equal_duckdb

from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings

VIEWS = {
    "n": "SELECT count(*) AS c FROM t",
    "n_small": "SELECT count(*) AS c FROM t WHERE k < 3",
    "n_by_k": "SELECT k, count(*) AS c FROM t GROUP BY k",
    "n_join": "SELECT count(*) AS c FROM t JOIN u ON t.k = u.k",
    "n_cross": "SELECT count(*) AS c FROM t, u",
    "any_rows": "SELECT count(*) > 0 AS e FROM t",
    "ones": "SELECT DISTINCT 1 AS one FROM t",
}


def _check(db: Database, step: str) -> None:
    views_equal_duckdb(db, VIEWS, step)


def test_views_of_no_columns_equal_duckdb(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = Database(Settings(data_dir=data), InProcessExecutor())
    try:
        duckdb.connect().execute(
            f"COPY (SELECT x::BIGINT AS id, (x % 5)::INTEGER AS k FROM range(6000) r(x)) "
            f"TO '{data / 'import' / 't.parquet'}' (FORMAT parquet)")
        db.execute("CREATE TABLE t (id BIGINT, k INTEGER); CREATE TABLE u (k INTEGER)")
        db.execute("INSERT INTO u VALUES (1), (2), (2)")
        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        _check(db, "empty")
        db.execute("COPY t FROM 't.parquet'")
        _check(db, "copy")
        db.execute("INSERT INTO t SELECT x, x % 7 FROM range(10000, 15000) r(x)")
        _check(db, "insert select")
        db.execute("DELETE FROM t WHERE id % 3 = 0")
        _check(db, "delete")
        db.execute("UPDATE t SET k = k + 1 WHERE id % 2 = 0")
        _check(db, "update")
        db.execute("INSERT INTO t VALUES (99999, 2)")
        _check(db, "one row")
        db.execute("CREATE VIEW later AS SELECT count(*) AS c FROM t")  # over loaded rows
        assert db.view_rows("later", None)["rows"] == db.query(VIEWS["n"])["rows"]
        db.execute("COPY t FROM 't.parquet'; DELETE FROM u WHERE k = 1")
        _check(db, "copy and delete")
    finally:
        db.close()
    db = Database(Settings(data_dir=data), InProcessExecutor())
    try:
        _check(db, "restart")
        db.execute("DELETE FROM t")
        _check(db, "all deleted")
    finally:
        db.close()
