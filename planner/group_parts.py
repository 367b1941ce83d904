"""Many groups' MIN/MAX arguments sorted and counted together: the distinct values of each.

`sort_parts(vals, bounds, groups)` sorts each listed group's part `vals[bounds[g]:bounds[g+1]]`
in place (NumPy's sort, a call per part) and returns its distinct values with their counts,
all groups' one after another (`offsets[k]:offsets[k+1]` for `groups[k]`), found by one
compiled pass over all the parts, and a flag per group whose part the caller must take apart
itself: a float part holding a NaN (which `np.unique` folds into one value and comparison
does not) or both zeros (-0.0 and 0.0 are one value, and which of them stands for it depends
on the sort). Invariant: for every other group, the values and counts are exactly
`planner.aggregate_columns._distinct` of the part (tests compare the two), and the part is
sorted as `_distinct` leaves it (by the same NumPy sort). Why: a batch that changes thousands
of groups makes a state for each (`BuiltGroups.states`), and `_distinct`'s eight NumPy calls
per group were most of it.

Imported only where numba is loaded already (`planner.aggregate_columns`), as
`planner.float_sums` is.
"""

from __future__ import annotations

import math

import numba
import numpy as np


def sort_parts(vals: np.ndarray, bounds: np.ndarray, groups: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """See the module docstring. Each part is sorted by NumPy (its vectorised sort took 3 us
    for a group of 600 values where numba's took 34 us), then one compiled pass over all the
    sorted parts finds their distinct values."""
    starts, ends = bounds[groups].tolist(), bounds[groups + 1].tolist()
    for a, b in zip(starts, ends, strict=True):
        vals[a:b].sort()
    return _distinct_parts(vals, bounds, groups)


@numba.njit(cache=True)
def _distinct_parts(vals, bounds, groups):  # type: ignore[no-untyped-def]
    n = groups.shape[0]
    total = 0
    for k in range(n):
        total += bounds[groups[k] + 1] - bounds[groups[k]]
    uniq = np.empty(total, vals.dtype)
    counts = np.empty(total, np.int64)
    offsets = np.empty(n + 1, np.int64)
    apart = np.zeros(n, np.bool_)
    offsets[0] = 0
    w = 0
    for k in range(n):
        a, b = bounds[groups[k]], bounds[groups[k] + 1]
        zeros = 0
        for i in range(a, b):
            v = vals[i]
            if v != v:
                apart[k] = True
            elif v == 0:
                zeros |= 2 if math.copysign(1.0, v) < 0 else 1
            if i > a and v == vals[i - 1]:
                counts[w - 1] += 1
            else:
                uniq[w] = v
                counts[w] = 1
                w += 1
        if zeros == 3:
            apart[k] = True
        offsets[k + 1] = w
    return uniq[:w], counts[:w], offsets, apart
