"""Consolidation: sum the diffs of equal `(data, time)` pairs and drop the zeros.

A collection is a multiset of updates `(data, time, diff)` with integer diffs. Consolidation is
the canonical form: after it, each `(data, time)` appears at most once and no diff is zero.
Every operator that feeds a loop's feedback edge, or that stores updates, consolidates first,
because updates that cancel but circulate separately would keep a loop from converging.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

from engine.lattice import Time

Update = tuple[Any, Time, int]

_ONE = {1}
_data = itemgetter(0)
_time = itemgetter(1)
_diff = itemgetter(2)


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


# A hydration or a bulk load hands an operator a million insertions at one time. Those are
# recognised and counted with C-level passes (`set(map(...))`, `Counter(map(...))`) instead of
# a Python loop over the updates: the fast paths of `engine.trace.arrange_updates` and
# `Capture.drain_by_time` share these three.


def one_time(updates: Sequence[Update]) -> Time | None:
    """The time of every update of `updates` when they all have one (None when they have
    several, or none)."""
    times = set(map(_time, updates))
    return next(iter(times)) if len(times) == 1 else None


def insertions_only(updates: Sequence[Update]) -> bool:
    """Whether every update of `updates` has diff 1."""
    return set(map(_diff, updates)) == _ONE


def count_data(updates: Sequence[Update]) -> Counter[Any]:
    """`{data: count}` of updates that are insertions at one time (`one_time` and
    `insertions_only`): their consolidation, with no zero."""
    return Counter(map(_data, updates))
