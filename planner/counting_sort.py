"""The stable sorting permutation of small integer codes, by a compiled counting sort.

A `GROUP BY` built from columns (`planner.aggregate_columns._group`) sorts each row's group
code to lay the groups out one after another. Below 2**16 distinct codes NumPy's stable sort
is a radix sort of two byte-wide passes, each with its own histogram and scatter over all rows;
one counting pass and one scatter, compiled, cost about a third of that (a GROUP BY of 6M rows
into 10,000 groups: 0.185 s by NumPy). Invariant: `counting_order(codes, radix)` equals
`np.argsort(codes, kind="stable")` for non-negative codes below `radix`; tests compare the two
on seeded random codes.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _counting_order(codes, radix):  # type: ignore[no-untyped-def]
    starts = np.zeros(radix + 1, np.int64)
    for i in range(codes.shape[0]):
        starts[codes[i] + 1] += 1
    for c in range(radix):
        starts[c + 1] += starts[c]
    order = np.empty(codes.shape[0], np.int64)
    for i in range(codes.shape[0]):
        c = codes[i]
        order[starts[c]] = i
        starts[c] += 1
    return order


def counting_order(codes: np.ndarray, radix: int) -> np.ndarray:
    """The stable sorting permutation of `codes` (non-negative ints below `radix`), as int64."""
    return _counting_order(np.ascontiguousarray(codes, dtype=np.int64), radix)
