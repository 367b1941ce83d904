"""PlanError: the one exception the planner raises for a view it will not create.

Invariant: every failure the planner can detect at view creation surfaces as a PlanError with a
stable ``code`` and, when the construct has a position in the SQL text, its 1-based line and
column. Nothing else escapes ``compile_view`` (a stray exception is wrapped as ``internal``).
"""

from __future__ import annotations


class PlanError(Exception):
    """A view definition the planner rejects.

    ``code`` is one of: syntax_error, unknown_table, unknown_column, ambiguous_column,
    type_error, grouping_error, unsupported, recursion_limit, internal.
    """

    def __init__(
        self, code: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{code}: {message}{where}")

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message, "line": self.line,
                "column": self.column}
