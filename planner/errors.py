"""PlanError: the one exception the planner raises for a view it will not create;
EvaluationError: the one exception a view's evaluation raises for data DuckDB would reject.

Invariant: every failure the planner can detect at view creation surfaces as a PlanError with a
stable ``code`` and, when the construct has a position in the SQL text, its 1-based line and
column. Nothing else escapes ``compile_view`` (a stray exception is wrapped as ``internal``).

A runtime error (integer overflow, division by zero in ``//`` or ``%``, a failed CAST, a scalar
subquery returning several rows) depends on the data, so it cannot be reported when the view is
created. We follow Materialize rather than silently producing NULL: the operator that meets the
bad row raises EvaluationError, which escapes the engine's ``df.run()`` (and the naive
``CompiledView.evaluate``). That dataflow is poisoned from then on; the server reports the view
failed with this message and rebuilds it from the tables later (README, "Failing views"). The
error is not raised at creation unless the creating write's own data triggers it.
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


class EvaluationError(Exception):
    """A view's evaluation met data on which DuckDB raises (code ``evaluation_error``).

    ``detail`` says what went wrong, ``expression`` is the SQL text of the offending expression
    (when known); the message combines both.
    """

    code = "evaluation_error"

    def __init__(self, detail: str, expression: str | None = None) -> None:
        self.detail = detail
        self.expression = expression
        self.message = detail + (f" (in expression {expression})" if expression else "")
        super().__init__(self.message)

    def __reduce__(self) -> tuple[object, ...]:
        # the default pickling would call __init__(message): keep both fields across processes
        return (EvaluationError, (self.detail, self.expression))

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message, "line": None, "column": None}
