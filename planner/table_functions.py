"""Table functions in FROM: ``generate_series`` and ``range`` over integers, as DuckDB
defines them, and ``unnest`` of a list written out in the query (``[e1, e2, ...]``).

Invariant: ``expand(func, args)`` depends only on its argument values, so a ``FlatMap`` that
appends its rows to each input row is a linear operator (an input row's retraction retracts
exactly the rows it produced) and needs no state. ``range`` excludes its stop, and
``generate_series`` includes it; the one-argument forms start at 0; a NULL argument gives no
rows; a zero step raises EvaluationError (DuckDB's "interval cannot be 0"). ``unnest``'s
arguments are the list's elements, one output row each, NULL elements included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.canonical import canonical
from planner.errors import EvaluationError
from planner.ir import FlatMap
from planner.scalar import compile_scalar

TABLE_FUNCTIONS = ("generate_series", "range")


def expand(func: str, start: Any, stop: Any, step: Any) -> range:
    """The values ``func(start, stop, step)`` returns, in order."""
    if start is None or stop is None or step is None:
        return range(0)
    if step == 0:
        raise EvaluationError(f"{func}: interval cannot be 0")
    if func == "generate_series":
        stop = stop + (1 if step > 0 else -1)
    return range(start, stop, step)


def compile_flat_map(r: FlatMap) -> Callable[[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The row function of ``r``: each input row followed by each value the function yields."""
    args = [compile_scalar(a) for a in r.args]
    func = r.func
    if func == "unnest":
        def elements(row: tuple[Any, ...]) -> list[tuple[Any, ...]]:
            # an element can compute a NaN: it must be the engine's one NaN to retract
            return [(*row, canonical(a(row))) for a in args]

        return elements

    def rows(row: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        start, stop, step = (a(row) for a in args)
        return [(*row, v) for v in expand(func, start, stop, step)]

    return rows
