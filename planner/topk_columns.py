"""Top-k states of every group built from whole Arrow columns (a view's hydration).

`build_topk(plan, table, key)` groups `table`'s rows by its columns `key` with one sort
(`planner.aggregate_columns._group`) and ranks each large group by the NumPy values of the
first ORDER BY column (`split_reserve`): only the copies up to the cut (the window's
candidates) and a small group's rows become tuples, all in one conversion; the rest of a
large group stays in the table as its state's reserve (`TableRows`: positions, made into rows
only when a refill reaches them). No dict lookup per row to group them, no `(row, diff)` pair
per row, and no tuple for most rows.

Invariant: each group's state is the state a new `plan(key)` has after `apply` of the group's
rows with diff 1 (the per-row path: same counts, index, bound and reserved rows, same output,
and the same outputs after any later changes; tests/test_columns_kernels.py compares them),
and `outputs()` gives each group's `output()`. It returns None (the caller then builds from
rows) without a LIMIT or an ORDER BY, for a group key type `_group` leaves to rows, and
unless the first ORDER BY column is integer, float64 without NaN, or a DECIMAL of 18 digits
at most (ranked by its unscaled ints), with no NULL.

Unlike the aggregates' `BuiltGroups`, every state is made here: a top-k state can need any of
its group's rows (after deletions from the window), so each keeps its reserve.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.sources import rows_of
from planner.aggregate import IncrementalTopK, TopKState, split_reserve
from planner.aggregate_columns import DECIMAL, _group, _numeric


class TableRows:
    """The rows of an Arrow table at `positions`, in that order, made as tuples only when
    sliced (`rows[i:j]` is a list): a large group's reserve, whose rows are mostly never
    read (TopKState)."""

    __slots__ = ("table", "positions")

    def __init__(self, table: Any, positions: np.ndarray) -> None:
        self.table = table
        self.positions = positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, part: slice) -> list[tuple[Any, ...]]:
        pos = self.positions[part]
        if not len(pos):
            return []
        taken = self.table.take(pos)
        return list(rows_of(taken, taken.num_columns))


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
    col, desc = plan.first
    first = _numeric(table.column(col))
    if first is None:
        return None
    vals, valid, kind = first
    if valid is not None or kind not in ("int", "float", DECIMAL) or (
            kind == "float" and np.isnan(vals).any()):
        return None
    # a DECIMAL ranked by its unscaled ints, exact at the column's one scale (the reserve
    # keeps the scale: TopKState.reserve_scale)
    scale = table.column(col).type.scale if kind == DECIMAL else None
    grouping = _group(table, key)
    if grouping is None:
        return None
    order, starts, keys = grouping
    if desc:
        vals = -vals if kind == "float" else ~vals  # best first, as TopKState ranks them
    need = plan.offset + plan.limit
    # a large group's reserve stays in the table, one entry per copy, unless a float column
    # holds -0.0: the per-row path keeps one of the equal rows 0.0 and -0.0 (the first) for
    # all their copies, which only made rows can find
    small = 4 * need + 64 if not any(map(_negative_zero, table.columns)) else n
    bounds = np.append(starts, n).tolist()
    # per group: the positions whose rows are made now (all of a small group's; a large
    # group's up to its cut), and a large group's reserve
    made: list[np.ndarray] = []
    reserves: list[tuple[np.ndarray, np.ndarray, Any] | None] = []
    for g in range(len(keys)):
        pos = (np.arange(bounds[g], bounds[g + 1]) if order is None else
               order[bounds[g]:bounds[g + 1]])
        if len(pos) <= small:
            made.append(pos)
            reserves.append(None)
            continue
        ranked = vals[pos]
        by, cut = split_reserve(ranked, need)
        if cut == len(pos):
            # every copy past the window ties with its last (or LIMIT 0: the cut is past the
            # worst): nothing to reserve, the state is built as a small group's is
            made.append(pos)
            reserves.append(None)
            continue
        made.append(pos[by[:cut]])
        ranked = ranked[by]
        reserves.append((pos[by[cut:]], ranked[cut:], ranked[cut - 1]))
    taken = table.take(np.concatenate(made))
    rows = list(rows_of(taken, taken.num_columns))
    states = []
    at = 0
    for part, reserve in zip(made, reserves, strict=True):
        st = TopKState(plan)
        head = rows[at:at + len(part)]
        at += len(part)
        if reserve is None:
            st.build(head)
        else:
            positions, reserve_vals, bound_val = reserve
            st.build_reserved(head, TableRows(table, positions), reserve_vals, bound_val,
                              scale)
        states.append(st)
    return BuiltTopK(keys, states)


def _negative_zero(col: Any) -> bool:
    """Whether a column holds a float -0.0."""
    import pyarrow as pa

    if not pa.types.is_floating(col.type):
        return False
    vals = col.to_numpy()  # NULLs as NaN
    return bool((np.signbit(vals) & (vals == 0)).any())
