"""Top-k states of every group built from whole Arrow columns (a view's hydration).

`build_topk(plan, table, key)` groups `table`'s rows by its columns `key` with one sort
(`planner.aggregate_columns._group`) and builds each group's `TopKState` from the group's rows
and the NumPy values of the first ORDER BY column (`TopKState.build`): no dict lookup per row
to group them, no `(row, diff)` pair per row, and the rows past the window's first value go
to the state's reserve by one `argsort` of values already in an array.

Invariant: each group's state is the state a new `plan(key)` has after `apply` of the group's
rows with diff 1 (the per-row path: same counts, same output, and the same outputs after any
later changes; tests/test_columns_kernels.py compares them), and `outputs()` gives each
group's `output()`. It returns None (the caller then builds from rows) without a LIMIT or an
ORDER BY, for a group key type `_group` leaves to rows, and unless the first ORDER BY column is
integer, or float64 without NaN, with no NULL.

Unlike the aggregates' `BuiltGroups`, every state is made here: a top-k state holds its
group's rows (any of them can enter the window), so there is nothing cheaper to keep until
a group first changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.sources import rows_of
from planner.aggregate import IncrementalTopK, TopKState
from planner.aggregate_columns import _group, _numeric


class BuiltTopK:
    """Every group's `TopKState`, made from columns (the engine's `BuiltStates` whose states
    are all made and whose keys' outputs are lists of rows: `outputs()`)."""

    __slots__ = ("keys", "states")

    def __init__(self, keys: list[Any], states: list[TopKState]) -> None:
        self.keys = keys
        self.states = states

    def state(self, i: int) -> TopKState:
        return self.states[i]

    def outputs(self) -> tuple[list[list[tuple[Any, int]]], int]:
        """Each group's output `[(row, multiplicity)]`, in `keys` order, and the records read."""
        outs: list[list[tuple[Any, int]]] = []
        read = 0
        for st in self.states:
            out, r = st.output()
            outs.append(out)
            read += r
        return outs, read


def build_topk(plan: IncrementalTopK, table: Any, key: tuple[int, ...]) -> BuiltTopK | None:
    """The states of the groups of `table`'s rows keyed by its columns `key` (see the module
    doc), or None for what this module leaves to rows."""
    if plan.first is None or plan.limit is None:
        return None
    n = table.num_rows
    if not n:
        return BuiltTopK([], [])
    col, _ = plan.first
    first = _numeric(table.column(col))
    if first is None:
        return None
    vals, valid, kind = first
    if valid is not None or kind not in ("int", "float") or (
            kind == "float" and np.isnan(vals).any()):
        return None
    grouping = _group(table, key)
    if grouping is None:
        return None
    order, starts, keys = grouping
    rows = list(rows_of(table, table.num_columns))
    bounds = np.append(starts, n).tolist()
    pick = rows.__getitem__
    states = []
    for g in range(len(keys)):
        pos = order[bounds[g]:bounds[g + 1]]
        st = TopKState(plan)
        st.build(list(map(pick, pos.tolist())), vals[pos])
        states.append(st)
    return BuiltTopK(keys, states)
