"""Values at the boundaries: SQL column types we accept, identifier quoting, and the JSON
encoding of row values.

Invariants: a row is a tuple of engine values (int, float, str, bool, None, Decimal,
datetime.date, datetime.datetime); JSON carries DECIMAL as a string, DATE/TIMESTAMP as
ISO-8601 strings, and a non-finite DOUBLE/REAL as the string "NaN", "Infinity" or "-Infinity"; an identifier that reaches generated SQL always goes through `quote_ident`.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
import uuid
from collections.abc import Iterable
from typing import Any

from planner.scalar import decimal_to_str
from server.errors import SqlError

# Accepted column type spellings -> canonical DuckDB type text.
_TYPE_ALIASES = {
    "INTEGER": "INTEGER",
    "INT": "INTEGER",
    "INT4": "INTEGER",
    "BIGINT": "BIGINT",
    "INT8": "BIGINT",
    "SMALLINT": "SMALLINT",
    "INT2": "SMALLINT",
    "DOUBLE": "DOUBLE",
    "FLOAT8": "DOUBLE",
    "DOUBLE PRECISION": "DOUBLE",
    "REAL": "REAL",
    "FLOAT4": "REAL",
    "FLOAT": "REAL",
    "VARCHAR": "VARCHAR",
    "TEXT": "VARCHAR",
    "STRING": "VARCHAR",
    "BOOLEAN": "BOOLEAN",
    "BOOL": "BOOLEAN",
    "DATE": "DATE",
    "TIMESTAMP": "TIMESTAMP",
    "DATETIME": "TIMESTAMP",
}
_DECIMAL = re.compile(r"^(?:DECIMAL|NUMERIC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
_VARCHAR_N = re.compile(r"^VARCHAR\s*\(\s*\d+\s*\)$")

SUPPORTED_TYPES = (
    "INTEGER, BIGINT, SMALLINT, DOUBLE, REAL, DECIMAL(p,s), VARCHAR/TEXT, BOOLEAN, DATE, TIMESTAMP"
)


def normalize_type(text: str) -> str:
    """Canonical DuckDB type text for a supported column type, else raise `SqlError`."""
    t = " ".join(text.strip().upper().split())
    if t in _TYPE_ALIASES:
        return _TYPE_ALIASES[t]
    if _VARCHAR_N.match(t):
        return "VARCHAR"
    m = _DECIMAL.match(t)
    if m:
        p = int(m.group(1) or 18)
        s = int(m.group(2) or (3 if m.group(1) is None else 0))
        if not 1 <= p <= 38 or not 0 <= s <= p:
            raise SqlError(f"invalid DECIMAL({p},{s})", code="type_error")
        return f"DECIMAL({p},{s})"
    raise SqlError(
        f"unsupported column type {text!r}; supported: {SUPPORTED_TYPES}", code="unsupported"
    )


def quote_ident(name: str) -> str:
    """A DuckDB identifier, always double-quoted with embedded quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def quote_str(text: str) -> str:
    """A SQL string literal with embedded quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def to_json_value(v: Any) -> Any:
    """One SQL value as a JSON-compatible value."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        # JSON has no NaN or Infinity. DuckDB's `to_json` spells them NaN, Infinity and
        # -Infinity; we send those spellings as strings (as PostgreSQL's `to_json` does), so
        # every body stays valid JSON and the string casts back to the same DOUBLE in SQL.
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, decimal.Decimal):
        return decimal_to_str(v) if v.is_finite() else str(v)
    if isinstance(v, datetime.datetime | datetime.date | datetime.time):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {str(k): to_json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [to_json_value(x) for x in v]
    return str(v)


def interval_text(months: int, days: int, micros: int) -> str:
    """An INTERVAL as DuckDB prints it: years and months, days, then a time of day whose hours
    may pass 24 ("1 year 2 months 3 days 04:05:06.5", "25:00:00", "-1 day", "00:00:00")."""
    parts = []
    years, mons = abs(months) // 12, abs(months) % 12
    sign = "-" if months < 0 else ""
    if years:
        parts.append(f"{sign}{years} year{'s' if years != 1 else ''}")
    if mons:
        parts.append(f"{sign}{mons} month{'s' if mons != 1 else ''}")
    if days:
        parts.append(f"{days} day{'s' if abs(days) != 1 else ''}")
    if micros or not parts:
        secs, frac = divmod(abs(micros), 1_000_000)
        text = f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
        if frac:
            text += f".{frac:06d}".rstrip("0")
        parts.append(("-" if micros < 0 else "") + text)
    return " ".join(parts)


def row_to_json(row: Iterable[Any]) -> list[Any]:
    return [to_json_value(v) for v in row]


def sort_key(row: tuple[Any, ...]) -> str:
    """A total, deterministic order for rows of mixed types (for stable output only)."""
    return json.dumps(row_to_json(row), sort_keys=True)
