"""A batch by self of distinct rows with their counts at one time, kept as columns.

`CountedRowsBatch(table, counts, time, ...)` is the batch of an arrangement by self (the input
of a DISTINCT, a UNION, an EXISTS's keys) whose updates are `(row, (), time, counts[i])` for
the i-th row of the Arrow table `table`; its rows are distinct and its counts non-zero. It is
what a by-self arrangement seals from a table's columns (`ColumnsAt.counted`: equal rows summed
by Arrow's hash aggregation) and what a counting reduce (distinct, threshold) outputs on its
first round over such a batch (`counted_round`), so that a hydration's DISTINCT never makes a
Python tuple per row: the rows are made, with the dict form `{row: [((), time, count)]}`, only
when something reads the batch by key (a merge) or, at the latest, when the run that made it
ends (`settle`: a later write's lookup must not stall on them), and the collection read back
from it in that run (`as_collection` of its rows) is columns again (`as_columns`).

Invariant: the batch denotes exactly `Batch({row: [((), time, count)]})` over its rows and
counts; `updates`, `lookup` and `get_many` answer what that dict answers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.columns_at import ColumnsAt
from engine.lattice import Antichain, Time
from engine.sources import rows_of
from engine.trace import Batch, Entry


class CountedRowsBatch(Batch):
    """The distinct rows of `table` by self, the i-th with diff `counts[i]` at `time`."""

    __slots__ = ("table", "counts", "time", "_dict")

    def __init__(self, table: Any, counts: np.ndarray, time: Time, lower: Antichain,
                 upper: Antichain, since: Antichain, seq: int = 0) -> None:
        self.table = table
        self.counts = counts
        self.time = time
        self.lower = lower
        self.upper = upper
        self.since = since
        self.seq = seq
        self.records = int(len(counts))
        self._dict: dict[Any, list[Entry]] | None = None

    @property  # type: ignore[override]
    def updates(self) -> dict[Any, list[Entry]]:
        d = self._dict
        if d is None:
            t = self.time
            d = self._dict = {row: [((), t, c)] for row, c in zip(
                rows_of(self.table, self.table.num_columns), self.counts.tolist(), strict=True)}
        return d

    def with_upper(self, upper: Antichain, seq: int) -> Batch:
        # The trace extends its last batch so at every write that leaves it empty: the dict
        # goes with it (made again from the table, it cost every single-row write a pass).
        out = CountedRowsBatch(self.table, self.counts, self.time, self.lower, upper,
                               self.since, seq)
        out._dict = self._dict
        return out

    def lookup(self) -> Callable[[Any], list[Entry] | None]:
        return self.updates.get

    def get_many(self, keys: list[Any]) -> list[list[Entry] | None]:
        return list(map(self.updates.get, keys))

    def key_count(self) -> int:
        return self.records

    def settle(self) -> bool:
        """After the run that made it (`Dataflow._settle`): the dict made now, and the table
        dropped (the rows are the dict's keys); made by a later write's first lookup, it would
        stall that write. True if the representation changed."""
        if self.table is None:
            return False
        _ = self.updates
        self.table = None
        return True

    def approx_bytes(self) -> int:
        """The table's buffers while there is no dict; else the dict's rows (sampled), their
        entries and slots."""
        if not self.records:
            return 0
        if self._dict is None:
            return int(self.table.nbytes) + int(self.counts.nbytes)
        row = next(iter(self._dict))
        per_row = sys.getsizeof(row) + sum(sys.getsizeof(x) for x in row) + 72 + 150
        return self.records * per_row + (int(self.table.nbytes) if self.table is not None
                                          else 0)

    def as_columns(self) -> ColumnsAt | None:
        """The batch's rows as a collection (each row with its count), as columns: when every
        count is one value and the table is still held, else None."""
        if not self.records or self.table is None:
            return None
        c = self.counts
        if not bool((c == c[0]).all()):
            return None
        return ColumnsAt(self.table, self.time, int(c[0]))

    def __repr__(self) -> str:
        return "CountedRowsBatch(seq=%d, records=%d, time=%s)" % (self.seq, self.records,
                                                                   self.time)


def counted_round(batch: CountedRowsBatch, counting: Callable[[int], list[tuple[Any, int]]],
                  lower: Antichain, upper: Antichain, since: Antichain
                  ) -> CountedRowsBatch | None:
    """The first round of a reduce by self whose logic reads only each row's total count and
    outputs at most `((), m)` (distinct, threshold), over `batch`, the whole input: each row's
    output count `m` at the batch's time, as a batch of the rows with a non-zero `m`. None when
    `counting` outputs another value (a count's `(n, 1)`). `counting` is called once for each
    distinct count, not per row. None also for a batch settled by an earlier run."""
    if batch.table is None:
        return None  # settled by an earlier run (an imported trace): the dict way
    counts = batch.counts
    values, inverse = np.unique(counts, return_inverse=True)
    out = np.zeros(len(values), dtype=np.int64)
    for i, n in enumerate(values.tolist()):
        res = counting(n)
        if len(res) > 1 or any(v != () for v, _ in res):
            return None
        out[i] = res[0][1] if res else 0
    per_row = out[inverse]
    keep = np.flatnonzero(per_row)
    table = batch.table if len(keep) == len(per_row) else batch.table.take(keep)
    return CountedRowsBatch(table, per_row[keep], batch.time, lower, upper, since)
