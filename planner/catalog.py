"""Catalog types shared by the planner and the server.

Invariant: names are stored lower-case; a Column's ``type`` is DuckDB type text
(INTEGER, BIGINT, DOUBLE, DECIMAL(p,s), VARCHAR, BOOLEAN, DATE, TIMESTAMP, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True


@dataclass
class TableSchema:
    name: str
    columns: list[Column]
    primary_key: list[str] = field(default_factory=list)


@dataclass
class ViewDef:
    name: str
    sql: str
    columns: list[Column]


class Statistics(Protocol):
    """What the planner may know of a table's contents (None: not known). Only the order of
    joins depends on it (planner.cardinality), never a result."""

    def rows(self, table: str) -> int | None: ...

    def distinct(self, table: str, column: str) -> int | None: ...


@dataclass
class Catalog:
    tables: dict[str, TableSchema] = field(default_factory=dict)
    views: dict[str, ViewDef] = field(default_factory=dict)
    statistics: Statistics | None = None
