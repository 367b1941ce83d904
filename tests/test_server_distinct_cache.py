"""Distinct counts for join ordering kept between statements (`server.statistics.DistinctCache`).

Invariants checked against DuckDB's own `approx_count_distinct`: a count is reused while its
table's row count stays within a tenth of the count it was read at (an UPDATE that changes
the values but not the rows is not seen: the cache is for join order only), and read again
once the table grew past that; a table known by another id (dropped and created again) never
reuses the old table's counts; a catalog without a cache reads every time. And through the
server: join views created after their tables grew, and a restart that re-plans them, equal
DuckDB.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings
from server.statistics import DistinctCache, TableStatistics

TYPES = {"t": {"k": "INTEGER", "v": "INTEGER"}}


def _truth(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT approx_count_distinct(k) FROM t").fetchone()[0])


def test_counts_are_reused_within_a_tenth_of_the_rows() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (k INTEGER, v INTEGER)")
    con.execute("INSERT INTO t SELECT i % 1000, i FROM range(20000) r(i)")
    cache = DistinctCache()
    first = TableStatistics(con, TYPES, cache, {"t": 7}).distinct("t", "k")
    assert first == _truth(con)
    # Values change, rows do not: the count read before is kept (stale on purpose).
    con.execute("UPDATE t SET k = v")
    assert _truth(con) > 10 * first
    assert TableStatistics(con, TYPES, cache, {"t": 7}).distinct("t", "k") == first
    # Without a cache, or under another id (a new table of the same name), it is read again.
    assert TableStatistics(con, TYPES).distinct("t", "k") == _truth(con)
    assert TableStatistics(con, TYPES, cache, {"t": 8}).distinct("t", "k") == _truth(con)
    # Up to a tenth more rows: still kept; past that: read again, then kept at the new count.
    con.execute("INSERT INTO t SELECT i, i FROM range(20000, 22000) r(i)")  # 22,000 rows
    assert TableStatistics(con, TYPES, cache, {"t": 7}).distinct("t", "k") == first
    con.execute("INSERT INTO t SELECT i, i FROM range(22000, 22001) r(i)")  # 22,001
    fresh = TableStatistics(con, TYPES, cache, {"t": 7}).distinct("t", "k")
    assert fresh == _truth(con) != first
    con.execute("DELETE FROM t WHERE v < 2000")  # 20,001 rows: within a tenth of 22,001
    assert TableStatistics(con, TYPES, cache, {"t": 7}).distinct("t", "k") == fresh


VIEWS = {
    "three": "SELECT a.k, count(*) AS n, sum(c.v) AS s FROM a JOIN b ON a.k = b.k "
             "JOIN c ON b.j = c.j GROUP BY a.k",
    "four": "SELECT a.k, c.j, d.w FROM a, b, c, d WHERE a.k = b.k AND b.j = c.j "
            "AND c.j = d.j AND d.w < 40",
}


def _bag(rows: list[Any]) -> Counter[str]:
    return Counter(repr(tuple(r)) for r in rows)


def _check(db: Database) -> None:
    for name, sql in VIEWS.items():
        assert _bag(db.view_rows(name, None)["rows"]) == _bag(db.query(sql)["rows"]), name


def test_join_views_planned_with_kept_counts_equal_duckdb(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, InProcessExecutor())
    try:
        db.execute("CREATE TABLE a (k INTEGER, x INTEGER); CREATE TABLE b (k INTEGER, j INTEGER);"
                   "CREATE TABLE c (j INTEGER, v INTEGER); CREATE TABLE d (j INTEGER, w INTEGER)")
        for t, n in (("a", 300), ("b", 600), ("c", 200), ("d", 900)):
            db.execute(f"INSERT INTO {t} SELECT i % 97, i % 53 FROM range({n}) r(i)")
        db.execute(f"CREATE VIEW three AS {VIEWS['three']}")
        assert db.distinct_cache._counts, "the first join view's counts are kept"
        kept = dict(db.distinct_cache._counts)
        # The tables grow past a tenth: the next view reads their counts again.
        for t in ("a", "b", "c", "d"):
            db.execute(f"INSERT INTO {t} SELECT i % 89 + 100, i % 31 FROM range(400) r(i)")
        db.execute(f"CREATE VIEW four AS {VIEWS['four']}")
        assert any(db.distinct_cache._counts[k] != v for k, v in kept.items()
                   if k in db.distinct_cache._counts)
        _check(db)
        db.execute("DELETE FROM b WHERE j % 3 = 0; UPDATE d SET w = w + 7")
        _check(db)
    finally:
        db.close()
    db = Database(settings, InProcessExecutor())  # recovery plans both again
    try:
        _check(db)
        db.execute("INSERT INTO c SELECT i % 97, i FROM range(50) r(i)")
        _check(db)
    finally:
        db.close()
