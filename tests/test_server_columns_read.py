"""A view is hydrated from only the columns it reads (`CompiledView.columns_read`).

Invariant checked: `Store.read_columns(rec, read)` gives the table's rows with every column
outside `read` NULL (of Arrow's null type), and views created over a populated table, then
maintained through writes that change read and unread columns, and rebuilt by a restart's
recovery, equal DuckDB running their SELECT after every write.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from server.core import Database
from server.executors import InProcessExecutor
from server.settings import Settings

VIEWS = {
    "by_name": "SELECT name, sum(price) AS total, count(*) AS n FROM w GROUP BY name",
    "how_many": "SELECT count(*) AS n FROM w",
    "late": "SELECT id, d FROM w WHERE d > DATE '2024-01-20'",
    "whole": "SELECT * FROM w WHERE id % 7 = 0",
}


def _bag(rows: list[Any]) -> Counter[str]:
    return Counter(repr(tuple(r)) for r in rows)


def _check(db: Database) -> None:
    for name, sql in VIEWS.items():
        got = _bag(db.view_rows(name, None)["rows"])
        want = _bag(db.query(sql)["rows"])
        assert got == want, (name, got - want, want - got)


def test_views_read_only_their_columns_and_equal_duckdb(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    db = Database(settings, InProcessExecutor())
    try:
        db.execute("CREATE TABLE w (id INTEGER, name VARCHAR, price DOUBLE, d DATE, note VARCHAR)")
        values = ", ".join(
            f"({i}, 'n{i % 9}', {i % 13 + 0.5}, DATE '2024-01-01' + {i % 31}, 'note {i}')"
            for i in range(400))
        db.execute(f"INSERT INTO w VALUES {values}")

        rec = db.tables["w"]
        some = db.store.read_columns(rec, {2})
        assert some.num_rows == 400 and some.column_names == ["id", "name", "price", "d", "note"]
        assert [pa.types.is_null(c.type) for c in some.columns] == [True, True, False, True, True]
        assert sorted(some.column(2).to_pylist()) == sorted(i % 13 + 0.5 for i in range(400))
        none = db.store.read_columns(rec, set())
        assert none.num_rows == 400 and all(pa.types.is_null(c.type) for c in none.columns)

        for name, sql in VIEWS.items():
            db.execute(f"CREATE VIEW {name} AS {sql}")
        _check(db)
        for change in (
            "UPDATE w SET note = 'changed' WHERE id % 3 = 0",  # a column no view but one reads
            "UPDATE w SET price = price + 1 WHERE id % 4 = 0",
            "DELETE FROM w WHERE id % 5 = 0",
            "INSERT INTO w VALUES (1000, 'n1', 2.5, DATE '2024-02-01', NULL)",
            "UPDATE w SET d = d + 10, name = 'moved' WHERE id % 6 = 1",
        ):
            db.execute(change)
            _check(db)
    finally:
        db.close()
    # a restart rebuilds the views from the tables (recovery: the same columns NULL)
    db = Database(settings, InProcessExecutor())
    try:
        _check(db)
        db.execute("DELETE FROM w WHERE name = 'moved'; UPDATE w SET note = 'x', price = 0.5")
        _check(db)
    finally:
        db.close()
