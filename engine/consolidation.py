"""Consolidation: sum the diffs of equal `(data, time)` pairs and drop the zeros.

A collection is a multiset of updates `(data, time, diff)` with integer diffs. Consolidation is
the canonical form: after it, each `(data, time)` appears at most once and no diff is zero.
Every operator that feeds a loop's feedback edge, or that stores updates, consolidates first,
because updates that cancel but circulate separately would keep a loop from converging.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.lattice import Time

Update = tuple[Any, Time, int]


def consolidate(updates: Iterable[Update]) -> list[Update]:
    acc: dict[tuple[Any, Time], int] = {}
    get = acc.get
    for data, time, diff in updates:
        k = (data, time)
        acc[k] = get(k, 0) + diff
    return [(d, t, r) for (d, t), r in acc.items() if r]


def consolidate_values(pairs: Iterable[tuple[Any, int]]) -> dict[Any, int]:
    """Accumulate `(value, diff)` pairs into `{value: count}` without zeros."""
    acc: dict[Any, int] = {}
    get = acc.get
    for v, r in pairs:
        acc[v] = get(v, 0) + r
    return {v: r for v, r in acc.items() if r}
