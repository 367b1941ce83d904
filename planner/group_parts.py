"""Many groups' MIN/MAX arguments sorted and counted together: the distinct values of each.

`sort_parts(vals, bounds, groups)` sorts each listed group's part `vals[bounds[g]:bounds[g+1]]`
in place (NumPy's sort, a call per part) and, by one compiled pass over all the parts, finds
which hold a repeated value; a second pass writes the distinct values and their counts of those
parts only, one after another (`offsets[k]:offsets[k+1]` for `groups[k]`). A part whose values
are all distinct (`whole[k]`) has an empty span: its sorted part is its distinct values, each
once. A flag per group marks a part the caller must take apart itself (also an empty span): a
float part holding a NaN (which `np.unique` folds into one value and comparison does not) or
both zeros (-0.0 and 0.0 are one value, and which of them stands for it depends on the sort).
Invariant: for every other group, the part's values and counts (or, when `whole`, the sorted
part with a count of 1 each) are exactly `planner.aggregate_columns._distinct` of the part
(tests compare the two), and the part is sorted as `_distinct` leaves it (by the same NumPy
sort). Why: a batch that changes thousands of groups makes a state for each
(`BuiltGroups.states`), and `_distinct`'s eight NumPy calls per group were most of it. Why two
passes: the arrays are sized to the parts with repeated values alone, and the states keep views
of them (no copy per group); a single pass wrote every part's values into arrays sized for all
of them, fresh pages that on this machine cost more than the pass (a batch of 10,000 changed
rows into a MIN/MAX view by supplier: 58 MB of them, then 46 MB of copies).

Imported only where numba is loaded already (`planner.aggregate_columns`), as
`planner.float_sums` is.
"""

from __future__ import annotations

import math

import numba
import numpy as np


def sort_parts(vals: np.ndarray, bounds: np.ndarray, groups: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """See the module docstring: `(uniq, counts, offsets, apart, whole)`. Each part is sorted
    by NumPy (its vectorised sort took 3 us for a group of 600 values where numba's took
    34 us), then two compiled passes over the sorted parts find their distinct values."""
    starts, ends = bounds[groups].tolist(), bounds[groups + 1].tolist()
    for a, b in zip(starts, ends, strict=True):
        vals[a:b].sort()
    return _distinct_parts(vals, bounds, groups)  # type: ignore[no-any-return]


@numba.njit(cache=True)
def _distinct_parts(vals, bounds, groups):  # type: ignore[no-untyped-def]
    n = groups.shape[0]
    offsets = np.empty(n + 1, np.int64)
    apart = np.zeros(n, np.bool_)
    whole = np.zeros(n, np.bool_)
    offsets[0] = 0
    # First pass: each part's distinct values (a NaN is never equal to the value before it),
    # its zeros and NaNs; only a part with a repeated value gets a span.
    for k in range(n):
        a, b = bounds[groups[k]], bounds[groups[k] + 1]
        zeros = 0
        distinct = 0
        for i in range(a, b):
            v = vals[i]
            if v != v:
                apart[k] = True
            elif v == 0:
                zeros |= 2 if math.copysign(1.0, v) < 0 else 1
            if i == a or not v == vals[i - 1]:
                distinct += 1
        if zeros == 3:
            apart[k] = True
        whole[k] = not apart[k] and distinct == b - a
        offsets[k + 1] = offsets[k] + (0 if apart[k] or whole[k] else distinct)
    uniq = np.empty(offsets[n], vals.dtype)
    counts = np.empty(offsets[n], np.int64)
    # Second pass: the distinct values and counts of the parts with a span.
    for k in range(n):
        if offsets[k + 1] == offsets[k]:
            continue
        a, b = bounds[groups[k]], bounds[groups[k] + 1]
        w = offsets[k]
        for i in range(a, b):
            v = vals[i]
            if i > a and v == vals[i - 1]:
                counts[w - 1] += 1
            else:
                uniq[w] = v
                counts[w] = 1
                w += 1
    return uniq, counts, offsets, apart, whole
