"""One error hierarchy for the whole server, mapped to one JSON shape:

    {"error": {"code": "...", "message": "...", "line": L | null, "column": C | null}}

Every failure a client can cause is an `ApiError` with an HTTP status in the 4xx range; the
app's exception handlers (see `app.py`) render this shape for these, for FastAPI's own request
validation errors and for unknown routes, so a client never sees another error format.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb


class ApiError(Exception):
    """Base class: an error reported to the client."""

    status: int = 400
    code: str = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        line: int | None = None,
        column: int | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.line = line
        self.column = column

    def to_json(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "line": self.line,
                "column": self.column,
            }
        }


class BadRequest(ApiError):
    status, code = 400, "bad_request"


class SqlError(ApiError):
    """The SQL text is wrong: syntax, unknown names, types, unsupported constructs."""

    status, code = 400, "sql_error"


class Forbidden(ApiError):
    """A query tried something a read-only sandboxed query may not do."""

    status, code = 400, "forbidden"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class NotFound(ApiError):
    status, code = 404, "not_found"


class Conflict(ApiError):
    status, code = 409, "conflict"


class Timeout(ApiError):
    status, code = 408, "timeout"


class Gone(ApiError):
    status, code = 410, "history_unavailable"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class ConfigError(Exception):
    """Bad server configuration (raised at start-up, never to a client)."""


_LINE = re.compile(r"LINE (\d+):")

_DUCKDB_CODES: list[tuple[type[BaseException], str, int]] = [
    (duckdb.ParserException, "syntax_error", 400),
    (duckdb.CatalogException, "unknown_object", 400),
    (duckdb.BinderException, "binder_error", 400),
    (duckdb.ConversionException, "type_error", 400),
    (duckdb.ConstraintException, "constraint_violation", 409),
    (duckdb.OutOfRangeException, "out_of_range", 400),
    (duckdb.PermissionException, "forbidden", 400),
    (duckdb.InterruptException, "timeout", 408),
    (duckdb.NotImplementedException, "unsupported", 400),
    (duckdb.InvalidInputException, "invalid_input", 400),
    (duckdb.TypeMismatchException, "type_error", 400),
    (duckdb.OutOfMemoryException, "out_of_memory", 400),
]


def from_duckdb(
    exc: duckdb.Error, *, line: int | None = None, column: int | None = None
) -> ApiError:
    """Translate a DuckDB error raised by a client's statement into an `ApiError`.

    `line`/`column` locate the statement in the request; DuckDB's own caret refers to the text
    it was given, which is the statement itself when that is what ran.
    """
    code, status = "sql_error", 400
    for cls, c, s in _DUCKDB_CODES:
        if isinstance(exc, cls):
            code, status = c, s
            break
    message = str(exc).split("\n\nLINE")[0].strip()
    m = _RANGE_CHECK.search(message)
    if isinstance(exc, duckdb.ConstraintException) and m:
        col = m.group(1).strip('"').replace('""', '"')
        table = _CHECK_TABLE.search(message)
        where = f" of table {table.group(1)}" if table else ""
        message = (
            f"a value in column {col}{where} is outside the DATE/TIMESTAMP range diffsql keeps "
            "exactly: finite values from 0001-01-01 to 9999-12-31 ('infinity', '-infinity' and "
            "other years are refused, never changed)"
        )
        code, status = "value_out_of_range", 400
    return SqlError(message, code=code, line=line, column=column, status=status)


# The constraint server.store puts on DATE and TIMESTAMP columns, as DuckDB prints it.
_RANGE_CHECK = re.compile(r'CHECK\(\(\(("(?:[^"]|"")*"|\w+) IS NULL\) OR \(isfinite\(')
_CHECK_TABLE = re.compile(r'on table "((?:[^"]|"")*)"')
