"""The sorted distinct values of an integer array, by one sort and one comparison of neighbours.

Why not `np.unique`: NumPy 2.4 finds a plain array's distinct values through a hash table
before sorting them, and for int64 values spread over a wide range that costs far more than
the sort alone (1,000,000 ids below 10**9: 0.8 s against 0.05 s; 167,000 pairs of a COUNT
(DISTINCT): 40 ms against 8 ms). Invariant: `unique_ints(x)` equals `np.unique(x)` for every
integer array `x` (a test compares them on seeded random arrays).
"""

from __future__ import annotations

import numpy as np


def unique_ints(x: np.ndarray) -> np.ndarray:
    """`np.unique(x)` of an integer array `x` (`x` itself is not changed)."""
    if len(x) < 2:
        return np.array(x, copy=True)
    s = np.sort(x)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
