"""One error hierarchy for the whole server, mapped to one JSON shape:

    {"error": {"code": "...", "message": "...", "line": L | null, "column": C | null}}

Every failure a client can cause is an `ApiError` with an HTTP status in the 4xx range; the
app's exception handlers (see `app.py`) render this shape for these, for FastAPI's own request
validation errors and for unknown routes, so a client never sees another error format.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import duckdb
import regex


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


# DuckDB's error types as its messages name them ("Conversion Error: ..."); the class of
# each is named after it (`ConversionException`), but for these.
_ERROR_PREFIX = re.compile(r"^([A-Za-z][A-Za-z ]*?) Error: ")
_ERROR_CLASSES = {"Mismatch Type": "TypeMismatchException", "IO": "IOException",
                  "HTTP": "HTTPException", "TransactionContext": "TransactionException"}


def duckdb_error(message: str) -> duckdb.Error:
    """The DuckDB error of the class `message` names (`Conversion Error: ...` a
    `ConversionException`, `INTERRUPT Error: ...` an `InterruptException`), for a DuckDB
    error that reached us as something else; `duckdb.Error` where it names no class."""
    m = _ERROR_PREFIX.match(message)
    if m is not None:
        name = _ERROR_CLASSES.get(m.group(1)) or (
            "".join(w.capitalize() for w in m.group(1).split()) + "Exception")
        cls = getattr(duckdb, name, None)
        if isinstance(cls, type) and issubclass(cls, duckdb.Error):
            return cls(message)
    return duckdb.Error(message)


def undecodable_duckdb_error(e: UnicodeDecodeError) -> duckdb.Error | None:
    """The DuckDB error whose message DuckDB's Python client could not decode (it quotes a
    value cut inside a UTF-8 sequence: `CAST('é' AS BIT)`), so that the client raised
    `UnicodeDecodeError` instead; the cut sequence is replaced. None for a decode error of
    anything else."""
    raw = e.object if isinstance(e.object, bytes) else bytes(e.object)
    message = raw.decode("utf-8", errors="replace")
    return duckdb_error(message) if _ERROR_PREFIX.match(message) else None


def position(text: str, offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of character `offset` of `text` (lines end at LF)."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def inside(line: int, column: int, at_line: int, at_column: int) -> tuple[int, int]:
    """The place (`at_line`, `at_column`) of a statement's own text, in the request where the
    statement starts at (`line`, `column`)."""
    if at_line == 1:
        return line, at_column + column - 1
    return line + at_line - 1, at_column


def from_duckdb(
    exc: duckdb.Error, *, line: int | None = None, column: int | None = None,
    text: str | None = None,
) -> ApiError:
    """Translate a DuckDB error raised by a client's statement into an `ApiError`.

    `line`/`column` locate the statement in the request. Where DuckDB points at a place in
    the statement (its `LINE n:` context and caret) and `text`, the statement's text as
    DuckDB ran it (or followed by more, such as a `RETURNING`), holds the line it quotes
    there, the error is located at that place instead (`duckdb_position`).
    """
    code, status = "sql_error", 400
    for cls, c, s in _DUCKDB_CODES:
        if isinstance(exc, cls):
            code, status = c, s
            break
    full = str(exc)
    if text is not None and line is not None and column is not None:
        at = duckdb_position(full, text)
        if at is not None:
            line, column = inside(line, column, *at)
    message = full.split("\n\nLINE")[0].strip()
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


# DuckDB's error context (`QueryErrorContext::Format`): the message, then `LINE n: ` and at
# most about 80 columns of the statement's line n, cut with `...` on either side, then a
# caret under the place, indented by its render width. DuckDB's lines end at CR LF, CR or LF.
_CONTEXT = re.compile(r"\nLINE (\d+): ([^\n]*)\n( *)\^+\s*$")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


# Characters whose width in DuckDB's count (utf8proc) is 0: control and format characters
# (a tab among them), line and paragraph separators, unassigned code points.
_ZERO_WIDTH = ("Cc", "Cf", "Zl", "Zp", "Cn")


def _render_width(cluster: str) -> int:
    """A grapheme cluster's width in a terminal, as DuckDB counts it (utf8proc: its first
    character's): two for East Asian wide and full-width characters, none for those of
    `_ZERO_WIDTH`, one for any other."""
    if unicodedata.category(cluster[0]) in _ZERO_WIDTH:
        return 0
    return 2 if unicodedata.east_asian_width(cluster[0]) in ("W", "F") else 1


def duckdb_position(message: str, text: str) -> tuple[int, int] | None:
    """The 1-based (line, column) in `text` that DuckDB's error `message` points at, where it
    points at one: its context quotes part of line n of the text it ran and puts a caret
    under a place in it. The part up to the caret must be in `text`'s line n (at its start,
    unless DuckDB cut it there), and what follows it must agree with the rest of that line
    as far as both go (DuckDB may have run `text` followed by more, such as a RETURNING).
    None when the message has no context, when the part is not in `text` (DuckDB ran a
    text of our own) or is there more than once (it cannot tell which), or when it holds a
    combining mark (where `regex` and DuckDB's utf8proc may split graphemes apart)."""
    m = _CONTEXT.search(message)
    if m is None:
        return None
    n, shown = int(m.group(1)), m.group(2)
    caret = len(m.group(3)) - len(f"LINE {m.group(1)}: ")
    starts = [0] + [b.end() for b in _LINE_BREAK.finditer(text)]
    if not 1 <= n <= len(starts) or caret < 0:
        return None
    brk = _LINE_BREAK.search(text, starts[n - 1])
    source = text[starts[n - 1]:brk.start() if brk else len(text)]
    for cut in (False, True) if shown.startswith("...") else (False,):
        part = shown[3:] if cut else shown
        # the characters of the part before the caret
        width = 0
        before = 0
        clusters = regex.findall(r"\X", part)
        for cluster in clusters:
            if width >= caret - (3 if cut else 0) and _render_width(cluster):
                break  # (the caret is under a character that takes room, never a tab)
            width += _render_width(cluster)
            before += len(cluster)
        if width != caret - (3 if cut else 0):
            continue
        head, rest = part[:before], part[before:]
        if any(unicodedata.category(ch).startswith("M") for ch in head):
            return None
        tails = (rest, rest[:-3]) if rest.endswith("...") else (rest,)
        found = []
        at = 0 if not cut else source.find(head)
        while at >= 0:
            after = source[at + before:]
            if source.startswith(head, at) and any(
                after.startswith(t) or t.startswith(after) for t in tails
            ):
                found.append(starts[n - 1] + at + before)
            if not cut:
                break
            at = source.find(head, at + 1)
        if len(found) == 1:
            return position(text, found[0])
        if found:
            return None
    return None
