"""DISTINCT, set operations and EXISTS over a table's columns (engine.counted_batch: the
distinct rows and their counts kept as columns, settled into a dict when the run ends), and
views over such a view, which import its settled batches: every view equals DuckDB after its
hydration, after single-row writes and after bulk writes of thousands of rows."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import duckdb

from engine.counted_batch import CountedRowsBatch
from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings

VIEWS = {
    "d": "SELECT DISTINCT a % 50 AS k, b FROM t",
    "dd": "SELECT DISTINCT k FROM d",
    "dn": "SELECT k, count(*) AS n FROM d GROUP BY k",
    "ex": "SELECT id FROM t WHERE id < 300 AND EXISTS (SELECT 1 FROM t t2 WHERE t2.a = t.id % 7)",
    "un": "SELECT a % 10 AS x FROM t UNION SELECT id % 4 FROM t WHERE b = 'q'",
    "nt": "SELECT count(*) AS n FROM t WHERE a % 13 NOT IN (SELECT a FROM t WHERE id < 5000)",
}


def _rows(rows: list) -> Counter:
    return Counter(tuple(round(v, 6) if isinstance(v, float) and math.isfinite(v) else v
                         for v in r) for r in rows)


def test_distinct_views_kept_as_columns_equal_duckdb(tmp_path: Path) -> None:
    db = Database(Settings(data_dir=tmp_path / "data"), InProcessExecutor())
    duck = duckdb.connect()

    def both(sql: str) -> None:
        db.execute(sql)
        duck.execute(sql)

    def check(step: str) -> None:
        for name, sql in VIEWS.items():
            got = _rows(db.view_rows(name, None)["rows"])
            want = _rows(duck.execute(sql).fetchall())
            assert got == want, (name, step)

    try:
        both("CREATE TABLE t (id INTEGER, a INTEGER, b VARCHAR)")
        both("INSERT INTO t SELECT i, (i * 7) % 400, CASE WHEN i % 3 = 0 THEN NULL "
             "ELSE chr(CAST(97 + i % 20 AS INTEGER)) END FROM range(6000) r(i)")
        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
            duck.execute(f"CREATE VIEW {name} AS {sql}")
        counted = [b for v in db.views.values() for t in v.df.traces
                   if hasattr(t, "existing_batches")
                   for b in t.existing_batches() if isinstance(b, CountedRowsBatch)]
        assert counted, "no arrangement was built from counted columns"
        assert all(b.table is None for b in counted), "batches settle when the run ends"
        check("hydration")
        for i, sql in enumerate([
                "INSERT INTO t VALUES (7000, 5, 'zz')",
                "DELETE FROM t WHERE id = 14",
                "UPDATE t SET a = a + 1 WHERE id = 21",
                "INSERT INTO t VALUES (7001, NULL, 'q')",
                "DELETE FROM t WHERE a = 0"]):
            both(sql)
            check(f"write {i}")
        both("INSERT INTO t SELECT 10000 + i, i % 60, 'q' FROM range(5000) r(i)")
        check("bulk insert")
        both("DELETE FROM t WHERE id % 5 = 1")
        check("bulk delete")
    finally:
        db.close()
