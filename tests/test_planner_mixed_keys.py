"""Equalities between values of different types match as DuckDB matches them, on every executor.

Invariant: a join, semi-join or correlated equality between DECIMALs of different scales, or an
integer and a DECIMAL or DOUBLE, gives DuckDB's answer on the in-process and the columnar
executor. The columnar executor matches keys by row id, and its row dictionary keeps 2, 2.00,
2.000 and 2.0 apart (they print differently), so both sides of an equality must take the
common type first, exactly as DuckDB compares them.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

import duckdb
import pytest

import engine
from engine.executors.columnar import ColumnarExecutor
from engine.executors.inprocess import InProcessExecutor
from planner import compile_view
from planner.catalog import Catalog, Column, TableSchema

TABLES = {
    "a": [("x", "DECIMAL(10,2)"), ("i", "INTEGER"), ("f", "DOUBLE")],
    "b": [("y", "DECIMAL(12,3)"), ("j", "BIGINT"), ("z", "DECIMAL(8,1)")],
}
DATA: dict[str, list[tuple[Any, ...]]] = {
    "a": [(Decimal("1.50"), 1, 1.0), (Decimal("2.00"), 2, 2.5), (Decimal("3.10"), 3, 20.0),
          (None, 20, None)],
    "b": [(Decimal("1.500"), 1, Decimal("2.0")), (Decimal("2.000"), 20, Decimal("2.5")),
          (Decimal("3.105"), 3, Decimal("20.0")), (Decimal("20.000"), 2, None)],
}
QUERIES = [
    "SELECT a.i, b.j, a.x, b.y FROM a JOIN b ON a.x = b.y",
    "SELECT a.i, b.y FROM a JOIN b ON a.i = b.y",
    "SELECT a.i, b.z FROM a JOIN b ON a.i = b.z",
    "SELECT a.f, b.z FROM a JOIN b ON a.f = b.z",
    "SELECT a.x, b.z FROM a JOIN b ON a.x = b.z",
    "SELECT a.i, b.j FROM a JOIN b ON a.i = b.j",
    "SELECT a.i FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.y = a.x)",
    "SELECT a.i FROM a WHERE a.i IN (SELECT z FROM b)",
    "SELECT count(*) FROM a LEFT JOIN b ON a.x = b.y GROUP BY a.x",
    "SELECT x FROM a INTERSECT SELECT y FROM b",
]


def _catalog() -> Catalog:
    return Catalog(tables={n: TableSchema(n, [Column(c, t) for c, t in cols])
                           for n, cols in TABLES.items()})


@pytest.mark.parametrize("executor", ["inprocess", "columnar"])
@pytest.mark.parametrize("sql", QUERIES)
def test_mixed_type_equalities_match_duckdb(sql: str, executor: str) -> None:
    con = duckdb.connect()
    for n, cols in TABLES.items():
        con.execute(f"CREATE TABLE {n} (" + ", ".join(f"{c} {t}" for c, t in cols) + ")")
        con.executemany(f"INSERT INTO {n} VALUES (?, ?, ?)", [list(r) for r in DATA[n]])
    want = Counter(con.execute(sql).fetchall())
    df = engine.Dataflow(executor=ColumnarExecutor() if executor == "columnar"
                         else InProcessExecutor())
    handles, sources = {}, {}
    for n in TABLES:
        handles[n], sources[n] = df.new_input(n)
    cap = compile_view(sql, _catalog()).build(df, sources).capture()
    for n, rows in DATA.items():
        handles[n].send([(r, 1) for r in rows])
        handles[n].advance_to(1)
    df.run()
    got = Counter(cap.current())
    assert got == want
    # the values keep their types and scales exactly (Decimal('1.50') == Decimal('1.500'))
    assert sorted(map(repr, got.elements())) == sorted(map(repr, want.elements()))
