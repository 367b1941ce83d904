"""One group's MIN/MAX argument built from columns: value -> count and its sorted index, over
NumPy arrays instead of a dict entry and an index tuple per distinct value.

`SortedCounts(values, counts, kind, nulls)` holds the group's distinct non-NULL values at its
hydration (`values` ascending, int64 or float64 without NaN, dates as days since 1970, or
Decimals as their unscaled int64 values at the column's `scale`) with
their counts (None: each once), and later values that are not among them in an overlay (a dict
and a `SortedList` of `_value_entry`s, exactly the per-row state). Neither array is copied or
written: `values` may be a view of the group's part of a hydration's column (see
`planner.aggregate_columns.BuiltGroups.state`), and a base value's changed count goes to a
dict (`changed`), so a state costs its group's values once however many groups a batch
touches. The base values whose count fell
to 0 are kept in a sorted list while they are few (`DEAD_LIST_MAX`): the k-th present value is
found by stepping over them. Past that, a Fenwick tree over "count > 0" of the base values
finds it in O(log n), so MIN, MAX and the value below MAX cost O(log n) whatever was deleted
before (no scan over dead values). Most groups see a few changes after they are built (a
batch touching thousands of groups makes thousands of states), and the tree cost more to
build than the rest of the state.

It plays both parts `AggregateState` gives a MIN/MAX argument: `counts` (the value -> count
map: `get`, item assignment and deletion, `len`, iteration; NULL's count included) and
`index` (the sorted index of present values: `add`/`remove` of entries, `len`, `first`,
`last_tied`). Invariant: both answer exactly what the dict and the `SortedList` of the
per-row state answer after the same changes, keys compared by Python's rules (1 == 1.0 == True,
-0.0 == 0.0, a NaN only itself, a date never equal to a datetime); tests compare the two.
"""

from __future__ import annotations

import datetime
import decimal
import math
from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from planner.scalar import DECIMAL_CONTEXT

_EPOCH = datetime.date(1970, 1, 1).toordinal()
# The most dead base values listed before a Fenwick tree replaces the list.
DEAD_LIST_MAX = 32
_I64 = (-(1 << 63), (1 << 63) - 1)


class SortedCounts:
    """See the module docstring. `kind` is "int", "float", "date" or "decimal" (with the
    values' `scale`)."""

    __slots__ = ("base", "counts", "changed", "kind", "scale", "tree", "dead", "live", "nulls",
                 "extra", "extra_index", "index", "last", "ends")

    def __init__(self, values: np.ndarray, counts: np.ndarray | None, kind: str,
                 nulls: int, scale: int = 0) -> None:
        self.base = values
        self.counts = counts
        # base position -> its count, where it changed since the build
        self.changed: dict[int, int] = {}
        self.kind = kind
        self.scale = scale
        self.nulls = nulls
        self.extra: dict[Any, int] = {}
        self.extra_index: SortedList = SortedList()
        self.live = len(values) if counts is None else int(np.count_nonzero(counts > 0))
        # the dead base positions, ascending, or (past DEAD_LIST_MAX of them) the tree
        self.dead: list[int] = [] if counts is None else np.flatnonzero(counts <= 0).tolist()
        self.tree: np.ndarray | None = None
        if len(self.dead) > DEAD_LIST_MAX:
            self._grow_tree()
        self.index = _Index(self)
        self.last: tuple[Any, int] | None = None
        self.ends: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None

    # -- positions in the base -------------------------------------------------------------
    def _find(self, v: Any) -> int:
        """The base position of a value equal to `v` by Python's rules, or -1. A change asks
        for one value several times in a row (its count, then its index entry): the last
        answer is kept for that value object (until a base value's count falls to 0).

        A base value whose count is 0 is absent from the per-row state's dict, which then
        keys an equal value by the object inserted: it comes back to the base only as a value
        that prints as the base's does (1.00 among DECIMAL(15,2)'s, not 1.0 or -0.00; 1, not
        1.0), and only while the overlay holds no value equal to it; else -1 (the overlay)."""
        last = self.last
        if last is not None and last[0] is v:
            return last[1]
        i = self._search(v)
        if i >= 0 and self._count(i) <= 0:
            b = self._value(i)
            if v.__class__ is not b.__class__ or repr(v) != repr(b) or v in self.extra:
                i = -1
        self.last = (v, i)
        return i

    def _search(self, v: Any) -> int:
        c = v.__class__
        kind = self.kind
        if kind == "date":
            if c is not datetime.date:
                return -1
            x: Any = v.toordinal() - _EPOCH
        elif kind == "decimal":
            x = self._unscaled(v)
            if x is None:
                return -1
        elif c is int or c is bool or c is float:
            if kind == "int":
                if c is float and not (math.isfinite(v) and v.is_integer()):
                    return -1
                x = int(v)
                if not _I64[0] <= x <= _I64[1]:
                    return -1
            else:
                if c is float:
                    if v != v:
                        return -1  # a NaN equals only itself: the overlay's dict decides
                    x = v
                else:
                    x = float(v)
                    if x != v:
                        return -1
        else:
            return -1
        i = int(np.searchsorted(self.base, x))
        return i if i < len(self.base) and self.base[i] == x else -1

    def _unscaled(self, v: Any) -> int | None:
        """The unscaled int64 of a decimal base value equal to number `v` by Python's rules
        (a Decimal at any exponent, an int, a float: compared exactly), or None when no base
        value can equal it (another class, NaN, a fraction finer than the scale, past int64)."""
        c = v.__class__
        if c is decimal.Decimal:
            d = v
        elif c is int or c is bool or c is float:
            d = decimal.Decimal(v)  # exact, as Decimal == int and Decimal == float compare
        else:
            return None
        if not d.is_finite():
            return None
        scaled = d.scaleb(self.scale, DECIMAL_CONTEXT)
        if scaled != scaled.to_integral_value():
            return None
        x = int(scaled)
        return x if _I64[0] <= x <= _I64[1] else None

    def _value(self, i: int) -> Any:
        x = self.base[i].item()
        if self.kind == "date":
            return datetime.date.fromordinal(x + _EPOCH)
        if self.kind == "decimal":
            # as `aggregate_columns._python_values` makes a built group's Decimals
            return decimal.Decimal(x).scaleb(-self.scale, DECIMAL_CONTEXT)
        return x

    def _count(self, i: int) -> int:
        c = self.changed.get(i)
        if c is None:
            return 1 if self.counts is None else int(self.counts[i])
        return c

    def present(self) -> np.ndarray:
        """Whether each base value's count is above 0."""
        flags = np.ones(len(self.base), dtype=bool) if self.counts is None else self.counts > 0
        for i, c in self.changed.items():
            flags[i] = c > 0
        return flags

    def _set_base(self, i: int, c: int) -> None:
        was = self._count(i) > 0
        self.changed[i] = c
        if was and c <= 0:
            self.last = None  # the value's next insertion decides afresh (`_find`)
        if was != (c > 0):
            d = 1 if c > 0 else -1
            self.live += d
            self.ends = None
            if self.tree is not None:
                _add(self.tree, i, d)
            elif c > 0:
                del self.dead[bisect_left(self.dead, i)]
            else:
                insort(self.dead, i)
                if len(self.dead) > DEAD_LIST_MAX:
                    self._grow_tree()

    def merged(self, other: SortedCounts, sign: int = 1) -> SortedCounts | None:
        """A new map holding this one's counts plus `sign` times `other`'s, built from both
        arrays and overlays by one sort (neither map is changed), or None when the kinds
        differ, an overlay value is not of the kind, or a count is below 0 before or after
        (then the values are counted one by one)."""
        if self.kind != other.kind or self.scale != other.scale:
            return None
        mine, theirs = self._present_counts(), other._present_counts()
        nulls = self.nulls + sign * other.nulls
        if mine is None or theirs is None or nulls < 0:
            return None
        values = np.concatenate((mine[0], theirs[0]))
        counts = np.concatenate((mine[1], sign * theirs[1]))
        order = np.argsort(values, kind="stable")
        values, counts = values[order], counts[order]
        # equal by Python's rules: -0.0 and 0.0 are one value, as they are one dict key
        starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
        summed = np.add.reduceat(counts, starts) if len(starts) else counts
        if len(summed) and int(summed.min()) < 0:
            return None
        present = summed > 0
        return SortedCounts(values[starts][present], summed[present], self.kind, nulls,
                            self.scale)

    def _present_counts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The values present, base and overlay, and their counts, in one pair of arrays of
        the base's kind (unsorted); None if a count is below 0 or an overlay value is not of
        the kind (a NaN, a float among ints, a datetime among dates: they stay overlaid)."""
        n = len(self.base)
        counts = np.ones(n, dtype=np.int64) if self.counts is None else \
            self.counts.astype(np.int64)
        for i, c in self.changed.items():
            counts[i] = c
        if n and int(counts.min()) < 0:
            return None
        present = counts > 0
        values, counts = self.base[present], counts[present]
        if not self.extra:
            return values, counts
        extra = self._as_base(list(self.extra))
        more = np.fromiter(self.extra.values(), dtype=np.int64, count=len(self.extra))
        if extra is None or int(more.min()) < 0:
            return None
        return np.concatenate((values, extra)), np.concatenate((counts, more))

    def _as_base(self, values: list[Any]) -> np.ndarray | None:
        """Python values as an array of the base's kind and dtype, or None unless every one
        is exactly of the kind (a NaN never is: the base holds none)."""
        kinds = set(map(type, values))
        try:
            if self.kind == "date":
                if kinds != {datetime.date}:
                    return None
                days = [v.toordinal() - _EPOCH for v in values]
                return np.asarray(days, dtype=self.base.dtype)
            if self.kind == "int":
                return np.asarray(values, dtype=np.int64) if kinds == {int} else None
            if self.kind == "decimal":
                # Decimals at the base's exponent only: another one (1.5 among 1.50s) is
                # equal, but the per-row state would keep the first object it saw
                # (and no -0.00: the array would make it 0.00)
                if kinds != {decimal.Decimal} or any(
                        v.as_tuple().exponent != -self.scale or (v.is_signed() and not v)
                        for v in values):
                    return None
                unscaled = [self._unscaled(v) for v in values]
                if None in unscaled:
                    return None
                return np.asarray(unscaled, dtype=np.int64)
            if kinds != {float} or any(v != v for v in values):
                return None
            return np.asarray(values, dtype=np.float64)
        except OverflowError:  # an int past int64
            return None

    def _grow_tree(self) -> None:
        self.tree = _fenwick(self.present().astype(np.int64))
        self.dead = []

    def _kth(self, k: int) -> int:
        """The position of the k-th (from 0) present base value."""
        if self.live == len(self.base):
            return k  # every base value present (as built): no descent of the tree
        if self.tree is not None:
            return _find_kth(self.tree, k)
        pos = k
        for d in self.dead:  # ascending: each dead position at or before it moves it on
            if d > pos:
                break
            pos += 1
        return pos

    def _ends(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The entries of the smallest and the largest present base value (some must be
        present), kept until a base value appears or disappears."""
        e = self.ends
        if e is None:
            e = self.ends = (self.index._entry(self._kth(0)),
                             self.index._entry(self._kth(self.live - 1)))
        return e

    # -- the value -> count map ------------------------------------------------------------
    def get(self, v: Any, default: Any = None) -> Any:
        if v is None:
            return self.nulls if self.nulls else default
        i = self._find(v)
        if i >= 0:
            c = self._count(i)
            return c if c else default
        return self.extra.get(v, default)

    def __getitem__(self, v: Any) -> int:
        c = self.get(v)
        if c is None:
            raise KeyError(v)
        return c  # type: ignore[no-any-return]

    def __setitem__(self, v: Any, c: int) -> None:
        if v is None:
            self.nulls = c
            return
        i = self._find(v)
        if i >= 0:
            self._set_base(i, c)
        else:
            self.extra[v] = c

    def __delitem__(self, v: Any) -> None:
        if v is None:
            if not self.nulls:
                raise KeyError(v)
            self.nulls = 0
            return
        i = self._find(v)
        if i >= 0:
            if self._count(i) <= 0:
                raise KeyError(v)
            self._set_base(i, 0)
        else:
            del self.extra[v]

    def __len__(self) -> int:
        return self.live + len(self.extra) + (1 if self.nulls else 0)

    def approx_bytes(self, per_record: int) -> int:
        """The arrays' bytes, and the overlay's entries (a dict slot and an index entry each)
        at `per_record` bytes a record."""
        tree = self.tree.nbytes if self.tree is not None else 8 * len(self.dead)
        counts = self.counts.nbytes if self.counts is not None else 0
        return self.base.nbytes + counts + tree + per_record * len(self.changed) \
            + 2 * per_record * len(self.extra)

    def __iter__(self) -> Iterator[Any]:
        if self.nulls:
            yield None
        for i in np.flatnonzero(self.present()).tolist():
            yield self._value(i)
        yield from self.extra

    def keys(self) -> Iterator[Any]:
        return iter(self)


class _Index:
    """The sorted index part of a `SortedCounts` (see there)."""

    __slots__ = ("sc",)

    def __init__(self, sc: SortedCounts) -> None:
        self.sc = sc

    def _entry(self, i: int) -> tuple[Any, ...]:
        v = self.sc._value(i)
        if self.sc.kind == "date":
            return (4, datetime.datetime(v.year, v.month, v.day), 0, v)
        return (2, v, 0, v)

    def add(self, entry: tuple[Any, ...]) -> None:
        # a base value's presence follows its count, set just before
        if self.sc._find(entry[3]) < 0:
            self.sc.extra_index.add(entry)

    def remove(self, entry: tuple[Any, ...]) -> None:
        # the overlay's own entry if it has one (never one equal to a base value present);
        # not by `_find`, whose answer the count just set to 0 may have changed
        if entry in self.sc.extra_index:
            self.sc.extra_index.remove(entry)

    def update(self, entries: list[tuple[Any, ...]]) -> None:
        for e in entries:
            self.add(e)

    def __len__(self) -> int:
        return self.sc.live + len(self.sc.extra_index)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        base = [self._entry(i) for i in np.flatnonzero(self.sc.present()).tolist()]
        return iter(sorted(base + list(self.sc.extra_index)))

    def first(self) -> tuple[Any, ...]:
        """The smallest entry (MIN)."""
        sc = self.sc
        if not sc.extra_index:
            return sc._ends()[0]
        if not sc.live:
            return sc.extra_index[0]  # type: ignore[no-any-return]
        return min(sc._ends()[0], sc.extra_index[0])

    def last_tied(self) -> tuple[Any, ...]:
        """The first of the entries tied with the largest on (rank, value) (MAX: the value
        `max()` returns, e.g. inf before a NaN)."""
        sc = self.sc
        ex = sc.extra_index
        if not ex:
            return sc._ends()[1]  # distinct base values never tie on (rank, value)
        if sc.live:
            top = sc._ends()[1]
            if top >= ex[-1]:
                return top  # tied overlay entries sort after it
        top = ex[-1]
        tied = []
        if ex:
            j = ex.bisect_left(top[:2])
            if j < len(ex) and ex[j][:2] == top[:2]:
                tied.append(ex[j])
        if sc.live:
            x = top[1]
            v = x.date() if sc.kind == "date" and x == datetime.datetime(
                x.year, x.month, x.day) else x
            i = sc._find(v) if sc.kind != "date" or v.__class__ is datetime.date else -1
            if i >= 0 and sc._count(i) > 0 and self._entry(i)[:2] == top[:2]:
                # (a NaN's entry holds 0 for its value: the base's 0.0 is no tie of it)
                tied.append(self._entry(i))
        return min(tied)


def _fenwick(flags: np.ndarray) -> np.ndarray:
    """A Fenwick tree (1-based, in an array of len + 1) of `flags`, built in one pass:
    node i sums flags over (i - lowbit(i), i]."""
    n = len(flags)
    csum = np.concatenate(([0], np.cumsum(flags)))
    idx = np.arange(1, n + 1)
    low = idx & -idx
    tree = np.zeros(n + 1, dtype=np.int64)
    tree[1:] = csum[idx] - csum[idx - low]
    return tree


def _add(tree: np.ndarray, i: int, d: int) -> None:
    n = len(tree) - 1
    j = i + 1
    while j <= n:
        tree[j] += d
        j += j & -j


def _find_kth(tree: np.ndarray, k: int) -> int:
    """The 0-based position whose prefix count first exceeds k (the k-th present)."""
    n = len(tree) - 1
    pos = 0
    step = 1 << (n.bit_length() - 1) if n else 0
    rem = k + 1
    while step:
        nxt = pos + step
        if nxt <= n and tree[nxt] < rem:
            pos = nxt
            rem -= int(tree[nxt])
        step >>= 1
    return pos  # 1-based pos + 1 is the answer; 0-based it is pos
