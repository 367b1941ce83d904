"""A view's filters on a table, applied by DuckDB as hydration scans the table.

`where_clause(rec, filters)` renders, as one SQL condition on `rec`'s columns, the filters of
`CompiledView.scan_filters` that DuckDB decides exactly as the view's Mfp does, and leaves out
the rest (the Mfp still applies every filter to the rows read, so leaving one out only reads
more rows). A view that keeps a part of a large table then reads only that part: fewer rows
to convert, hold and filter (TPC-H Q3 at sf 1 reads 54% of lineitem, 48% of orders and 20%
of customer; its hydration took a quarter less time).

Rendered exactly, and nothing else:
- `column <op> literal` (either side; =, <>, <, <=, >, >=) for integer columns with an integer
  literal in int64's range (compared exactly by both), VARCHAR columns without a collation
  with a string (UTF-8 byte order is code point order, Python's), DATE columns with a date,
  BOOLEAN columns with a boolean (= and <> only). A NULL compares to NULL in both: the row
  is rejected.
- `column IS NULL` and `NOT (column IS NULL)` for a column of any type.
Never floats (NaN orders differently), decimals, timestamps, casts or calls: the Mfp alone
decides those.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from planner.ir import Call, Col, Lit, Scalar
from server.store import TableRecord
from server.values import quote_ident, quote_str

_OPS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# the comparison seen from the other side: `lit < col` is `col > lit`
_FLIP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_INTS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                   "UINTEGER", "UBIGINT"})


def where_clause(rec: TableRecord, filters: Sequence[Scalar]) -> str | None:
    """The SQL condition of the `filters` DuckDB decides exactly (see the module doc), ANDed;
    None when there is none."""
    parts = [sql for sql in (_render(rec, f) for f in filters) if sql is not None]
    return " AND ".join(f"({p})" for p in parts) if parts else None


def _render(rec: TableRecord, f: Scalar) -> str | None:
    if not isinstance(f, Call):
        return None
    if f.func == "is_null" and len(f.args) == 1 and isinstance(f.args[0], Col):
        return f"{_column(rec, f.args[0])} IS NULL"
    if f.func == "not" and len(f.args) == 1 and isinstance(f.args[0], Call):
        inner = f.args[0]
        if inner.func == "is_null" and len(inner.args) == 1 and isinstance(inner.args[0], Col):
            return f"{_column(rec, inner.args[0])} IS NOT NULL"
        return None
    if f.func not in _OPS or len(f.args) != 2:
        return None
    a, b = f.args
    op = f.func
    if isinstance(a, Lit) and isinstance(b, Col):
        a, b, op = b, a, _FLIP[op]
    if not (isinstance(a, Col) and isinstance(b, Lit)):
        return None
    literal = _literal(rec.columns[a.index]["type"], b.value, op)
    return None if literal is None else f"{_column(rec, a)} {_OPS[op]} {literal}"


def _column(rec: TableRecord, c: Col) -> str:
    return quote_ident(rec.columns[c.index]["name"])


def _literal(column_type: str, v: object, op: str) -> str | None:
    """`v` as a SQL literal DuckDB compares with a column of `column_type` exactly as Python
    compares it with the column's values; None where that is not certain."""
    ty = column_type.strip().upper()
    if ty in _INTS and isinstance(v, int) and not isinstance(v, bool):
        return str(v) if -(2 ** 63) <= v < 2 ** 63 else None
    if ty == "VARCHAR" and isinstance(v, str):
        return None if "\x00" in v else quote_str(v)
    if ty == "DATE" and isinstance(v, datetime.date) and not isinstance(v, datetime.datetime):
        return f"DATE '{v.isoformat()}'"
    if ty == "BOOLEAN" and isinstance(v, bool) and op in ("eq", "ne"):
        return "TRUE" if v else "FALSE"
    return None
