"""Table statistics for the planner's join ordering, read from DuckDB on demand.

`TableStatistics.of(con, tables)` answers `planner.catalog.Statistics`: a table's rows are
``count(*)`` (DuckDB keeps it, so it costs nothing) and a column's distinct values are
``approx_count_distinct`` (HyperLogLog; one scan of the column, about 10 ms per 6M rows here).
Each answer is read once, when the planner first asks, and only for the key columns of joins
of three or more inputs. A `DistinctCache` (the server keeps one) keeps a column's distinct
count for later statements while its table's row count stays within a tenth of the count it
was read at. Planning bench/views.py's six views over TPC-H at sf 1 (a count is 2-3 ms over
lineitem's 6M rows; Q5 alone asks for 12) took 104-122 ms with a count read for every view,
75-80 ms with them kept; a recovery plans every view again in one process, and reads each
count once.

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

from server.store import FLAT_TYPE, TableRecord, fetch_one
from server.values import quote_ident


class DistinctCache:
    """Distinct counts read before, by table and column, each with the table's row count when
    it was read. A count is reused while the table's row count differs from that by at most a
    tenth (as PostgreSQL re-analyzes a table once a tenth of it changed): statistics only
    order joins, so a stale count can cost a worse order, never a wrong result. Keyed by the
    table's id where known, so a table dropped and created again under its name starts over.
    Safe to share between threads (one dict operation each)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[Any, str], tuple[int, int]] = {}

    def get(self, key: tuple[Any, str], rows: int) -> int | None:
        hit = self._counts.get(key)
        if hit is None or abs(rows - hit[0]) * 10 > hit[0]:
            return None
        return hit[1]

    def put(self, key: tuple[Any, str], rows: int, distinct: int) -> None:
        self._counts[key] = (rows, distinct)


class TableStatistics:
    """Row and distinct counts of the tables of `types` (table -> column -> DuckDB type),
    read through `con` (see the module doc); distinct counts kept in `cache` when given, the
    tables known there by `ids` (table -> its id; by name otherwise)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, types: Mapping[str, Mapping[str, Any]],
                 cache: DistinctCache | None = None, ids: Mapping[str, Any] | None = None):
        self.con = con
        self.types = types
        self.cache = cache
        self.ids = ids or {}

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection, tables: Mapping[str, TableRecord],
           cache: DistinctCache | None = None) -> TableStatistics:
        """The statistics of the catalog's tables."""
        return cls(con, {n: {c["name"]: c.get("type") for c in t.columns}
                         for n, t in tables.items()},
                   cache, {n: t.table_id for n, t in tables.items()})

    def rows(self, table: str) -> int | None:
        if table not in self.types:
            return None
        got = fetch_one(self.con, f"SELECT count(*) FROM main.{quote_ident(table)}")
        return None if got is None else int(got[0])

    def distinct(self, table: str, column: str) -> int | None:
        ty = self.types.get(table, {}).get(column)
        if not isinstance(ty, str) or not FLAT_TYPE.fullmatch(ty):  # every one of them hashes
            return None
        rows = key = None
        if self.cache is not None:
            rows = self.rows(table)
            key = (self.ids.get(table, table), column)
            if rows is not None:
                hit = self.cache.get(key, rows)
                if hit is not None:
                    return hit
        got = fetch_one(self.con, f"SELECT approx_count_distinct({quote_ident(column)}) "
                        f"FROM main.{quote_ident(table)}")
        if got is None:
            return None
        if self.cache is not None and rows is not None and key is not None:
            self.cache.put(key, rows, int(got[0]))
        return int(got[0])
