"""How a view's failure is described: one error object for a view whose dataflow raised.

Invariant: whatever a dataflow raises (a recursion over its iteration limit, an evaluation
error such as an overflow, a budget overrun, an engine bug) becomes the same JSON error shape
as every other error (`code`, `message`, `line`, `column`), with a stable `code` per cause, so
`failed_views` in a write's response and a view's `error` read the same everywhere.
"""

from __future__ import annotations

from typing import Any

from engine.executors.spark.arrow import worker_error

# each engine error's code, for an error without one of its own
_CODES = {"IterationLimitExceeded": "iteration_limit", "BudgetExceeded": "budget_exceeded",
          "EvaluationError": "evaluation_error", "DataflowPoisoned": "evaluation_error"}


def error_json(message: str | None, code: str = "view_failed") -> dict[str, Any]:
    """The error object of a view that failed for `message`."""
    return {"code": code, "message": message or "failed", "line": None, "column": None}


def failure(e: BaseException) -> dict[str, Any]:
    """The error object of a view whose evaluation failed (anything its dataflow raised); an
    error raised on a Spark worker reads as the worker's exception (its type and message), as
    the same error in process does, not as the worker's traceback."""
    carried = worker_error(e)
    if carried is not None:
        name = str(carried.get("type") or "EvaluationError")
        code = carried.get("code")
        if not isinstance(code, str) or not code:
            code = _CODES.get(name, "evaluation_error")
        return {"code": code, "message": f"{name}: {carried.get('message') or name}",
                "line": None, "column": None}
    name = type(e).__name__
    code = getattr(e, "code", None)
    if not isinstance(code, str) or not code:
        code = _CODES.get(name, "evaluation_error")
    message = str(getattr(e, "message", None) or e) or name
    return {"code": code, "message": f"{name}: {message}", "line": None, "column": None}
