"""Updates at one time with one diff: a bulk insert (or delete) kept as its list of rows.

`RowsAt(rows, time, diff)` denotes the updates `(row, time, diff)` for every row of `rows`; with
`key` (column indices of the rows) it denotes `((key columns of row, row), time, diff)`, the
keyed form an arrangement indexes. Iterating it yields exactly those updates, so code that only
iterates a payload sees the same multiset whichever form it receives.

Why: a hydration or a large write enters the dataflow as many rows at one time. Kept as the
list of rows, the steps between the input and the arrangements (filter, project, key) run as
one comprehension over the rows, and the arrangement can index the rows themselves
(`engine.rows_batch`) instead of an `(update, time, diff)` tuple and a `(key, row)` pair being
built for every row. The in-process executor makes and reads this form; nothing else needs to
know it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

import numpy as np

from engine.lattice import Time

# From this many rows `rows_by_key` groups a one-column int key by a NumPy sort.
GROUP_SORT_MIN_ROWS = 4096


def key_getter(cols: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """row -> the tuple of its columns `cols` (the key of an arranged row)."""
    if len(cols) == 1:
        i = cols[0]
        return lambda row: (row[i],)
    if not cols:
        return lambda row: ()
    return itemgetter(*cols)  # a tuple already, for two or more columns


class RowsAt:
    """`(row, time, diff)` for each of `rows`, or with `key`, `((row's key, row), time, diff)`.

    `rows` is never mutated after construction (payloads are shared between readers)."""

    __slots__ = ("rows", "time", "diff", "key")

    def __init__(self, rows: list[Any], time: Time, diff: int,
                 key: tuple[int, ...] | None = None) -> None:
        self.rows = rows
        self.time = time
        self.diff = diff
        self.key = key

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[tuple[Any, Time, int]]:
        return iter(self.updates())

    def updates(self) -> list[tuple[Any, Time, int]]:
        """The updates as a list of `(data, time, diff)`."""
        t, r = self.time, self.diff
        if self.key is None:
            return [(row, t, r) for row in self.rows]
        kf = key_getter(self.key)
        return [((kf(row), row), t, r) for row in self.rows]

    def __repr__(self) -> str:
        return "RowsAt(%d rows, time=%s, diff=%d, key=%s)" % (
            len(self.rows), self.time, self.diff, self.key)


def rows_by_key_reference(rows: list[Any], key: tuple[int, ...]) -> dict[Any, list[Any]]:
    """Each key's rows, in the order of `rows`; keys in order of first appearance."""
    out: dict[Any, list[Any]] = {}
    get = out.get
    kf = key_getter(key)
    for row in rows:
        k = kf(row)
        vals = get(k)
        if vals is None:
            out[k] = [row]
        else:
            vals.append(row)
    return out


def rows_by_key(rows: list[Any], key: tuple[int, ...]) -> dict[Any, list[Any]]:
    """`rows_by_key_reference`, by one stable NumPy sort when the key is one column of int64
    ints (a hydration's group-by column): then the Python work is a slice per group, not a
    dict lookup and append per row."""
    if len(key) != 1 or len(rows) < GROUP_SORT_MIN_ROWS:
        return rows_by_key_reference(rows, key)
    col = list(map(itemgetter(key[0]), rows))
    if set(map(type, col)) != {int}:  # exact ints (a bool or a float may equal an int key)
        return rows_by_key_reference(rows, key)
    try:
        arr = np.array(col, dtype=np.int64)
    except OverflowError:
        return rows_by_key_reference(rows, key)
    order = np.argsort(arr, kind="stable")
    cuts = (np.flatnonzero(arr[order][1:] != arr[order][:-1]) + 1).tolist()
    starts, ends = [0, *cuts], [*cuts, len(rows)]
    picks = order.tolist()
    # Groups in order of first appearance, as the reference: a stable sort puts each group's
    # first row first.
    groups = sorted(zip(starts, ends, strict=True), key=lambda g: picks[g[0]])
    return {(col[picks[a]],): [rows[j] for j in picks[a:b]] for a, b in groups}
