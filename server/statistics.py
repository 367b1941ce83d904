"""Table statistics for the planner's join ordering, read from DuckDB on demand.

`TableStatistics.of(con, tables)` answers `planner.catalog.Statistics`: a table's rows are
``count(*)`` (DuckDB keeps it, so it costs nothing) and a column's distinct values are
``approx_count_distinct`` (HyperLogLog; one scan of the column, about 10 ms per 6M rows here).
Each answer is read once, when the planner first asks, and only for the key columns of joins
of three or more inputs.

Invariants: the statistics read what `con` sees, so inside a write they include the write's
own changes (a table created and loaded in the same transaction); a question that cannot be
answered safely is answered None (a table it was not given, a column of a nested type), never
by running a statement that could fail, because a failed statement would abort the write's
DuckDB transaction. Statistics only choose the order of joins, never a result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb

from server.store import FLAT_TYPE, TableRecord
from server.values import quote_ident


class TableStatistics:
    """Row and distinct counts of the tables of `types` (table -> column -> DuckDB type),
    read through `con` (see the module doc)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, types: Mapping[str, Mapping[str, Any]]):
        self.con = con
        self.types = types

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection,
           tables: Mapping[str, TableRecord]) -> TableStatistics:
        """The statistics of the catalog's tables."""
        return cls(con, {n: {c["name"]: c.get("type") for c in t.columns}
                         for n, t in tables.items()})

    def rows(self, table: str) -> int | None:
        if table not in self.types:
            return None
        got = self.con.execute(f"SELECT count(*) FROM main.{quote_ident(table)}").fetchone()
        return None if got is None else int(got[0])

    def distinct(self, table: str, column: str) -> int | None:
        ty = self.types.get(table, {}).get(column)
        if not isinstance(ty, str) or not FLAT_TYPE.fullmatch(ty):  # every one of them hashes
            return None
        got = self.con.execute(
            f"SELECT approx_count_distinct({quote_ident(column)}) "
            f"FROM main.{quote_ident(table)}"
        ).fetchone()
        return None if got is None else int(got[0])
