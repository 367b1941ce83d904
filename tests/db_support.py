"""Helpers for tests of the server's `Database` in process against a DuckDB oracle: rows as
order-free multisets of their JSON forms, the same tables and views made in both, and a
record of the batches the views' GROUP BY states absorb as columns. Nothing here replaces a
component of the server."""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb

from server.core import Database
from server.values import row_to_json


def bag(rows: list[Any]) -> Counter[str]:
    """Rows (a view's or a query's JSON rows) as a multiset."""
    return Counter(repr(tuple(r)) for r in rows)


def oracle_bag(con: duckdb.DuckDBPyConnection, sql: str) -> Counter[str]:
    """DuckDB's answer to `sql`, as `bag` of the JSON forms the server gives."""
    return bag([row_to_json(r) for r in con.execute(sql).fetchall()])


def create_both(db: Database, oracle: duckdb.DuckDBPyConnection, ddl: list[str],
                views: dict[str, str], oracle_views: bool = False) -> None:
    """Run `ddl` in both, then create `views` in the server (and as DuckDB views in the
    oracle too, with `oracle_views`: for views over views)."""
    for stmt in ddl:
        db.execute(stmt)
        oracle.execute(stmt)
    for name, sql in views.items():
        db.execute(f"CREATE VIEW {name} AS {sql}")
        if oracle_views:
            oracle.execute(f"CREATE VIEW {name} AS {sql}")


def record_absorbs(monkeypatch: Any) -> list[int]:
    """Wrap `AggregateState.absorb` so that every call appends the rows it absorbs, signed
    (insertions positive, retractions negative), to the returned list."""
    from planner.aggregate import AggregateState

    absorbed: list[int] = []
    real = AggregateState.absorb

    def spy(self: AggregateState, other: AggregateState, sign: int = 1) -> int:
        absorbed.append(sign * other.rows)
        return real(self, other, sign)

    monkeypatch.setattr(AggregateState, "absorb", spy)
    return absorbed
