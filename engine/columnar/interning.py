"""Row interning: arbitrary rows to stable int64 ids, so the data plane holds only integers.

An integer row (a Python `int` in `[-2**62, 2**62)`) is its own id: graphs and integer keys
cost no table at all. A pair of small non-negative integers `(a, b)` (each below `2**30`, the
reachability dataflow's `(root, node)`) is packed directly into the range `[2**62, 2**62 +
2**60)`. Any other row (tuples, strings, floats, None, ...) is given an id from a separate
range, `>= 2**62 + 2**60`, looked up by the row's Python equality and hash together with the
types of its values (`_typed`), so that decoding gives back exactly the row encoded: Python
holds `True == 1 == 1.0 == Decimal(1)`, but they are different SQL values (a BOOLEAN is not an
INTEGER, and code that tests `x is True` must see `True`); a DECIMAL's scale counts too (1.50 and
1.500 print differently). Only rows of exact `int`s take the
direct and pair ranges. Two rows get the same id exactly when they are equal and their values
have the same types.

Ids are stable while referenced: `retain(ids, counts)` adds references (one per held update)
and `release` removes them; an interned id whose count drops to zero is retired, its row
forgotten and the id reused for a later new row. Callers that never release keep every id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np

DIRECT_LIMIT = 1 << 62
PAIR_BASE = 1 << 62
PAIR_BITS = 30
INTERNED_BASE = PAIR_BASE + (1 << (2 * PAIR_BITS))
_PAIR_LIMIT = 1 << PAIR_BITS
_PAIR_MASK = _PAIR_LIMIT - 1
_TUPLE = {tuple}
_INT = {int}


def pair_ids(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The ids of the rows `(first[i], second[i])`, all in `[0, 2**PAIR_BITS)`: what `encode`
    gives each such pair of exact ints, computed on the columns."""
    return PAIR_BASE + (first << PAIR_BITS) + second  # type: ignore[no-any-return]


class RowInterner:
    """The two-way map between rows and ids (see the module docstring)."""

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}
        self._rows: list[Any] = []
        self._refs: list[int] = []
        self._free: list[int] = []

    def __len__(self) -> int:
        """The number of interned (non-integer) rows alive."""
        return len(self._ids)

    def encode(self, row: Any) -> int:
        if type(row) is int and -DIRECT_LIMIT <= row < DIRECT_LIMIT:
            return row
        if type(row) is tuple and len(row) == 2:
            a, b = row
            if type(a) is int and type(b) is int and 0 <= a < _PAIR_LIMIT and 0 <= b < _PAIR_LIMIT:
                return PAIR_BASE + (a << PAIR_BITS) + b
        key = _typed(row)
        i = self._ids.get(key)
        if i is not None:
            return i
        if self._free:
            slot = self._free.pop()
            self._rows[slot] = row
            self._refs[slot] = 0
        else:
            slot = len(self._rows)
            self._rows.append(row)
            self._refs.append(0)
        i = INTERNED_BASE + slot
        self._ids[key] = i
        return i

    def encode_many(self, rows: Iterable[Any]) -> np.ndarray:
        rows = rows if isinstance(rows, list) else list(rows)
        if rows and type(rows[0]) is tuple and len(rows[0]) == 2:
            # Pairs of small integers in bulk: NumPy builds an (n, 2) int64 array only when every
            # row is a pair of integers (bools and ints; floats or anything else fall through).
            try:
                a = np.array(rows)
            except (ValueError, OverflowError):
                a = None
            if (
                a is not None
                and a.dtype == np.int64
                and a.ndim == 2
                and a.shape[1] == 2
                # Exactly ints (NumPy also turns bools into int64): type checks at C speed.
                and set(map(type, rows)) == _TUPLE
                and set(map(type, itertools.chain.from_iterable(rows))) == _INT
                and a.min() >= 0
                and a.max() < _PAIR_LIMIT
            ):
                return pair_ids(a[:, 0], a[:, 1])
        enc = self.encode
        return np.fromiter((enc(r) for r in rows), dtype=np.int64, count=len(rows))

    def decode(self, i: int) -> Any:
        if i < PAIR_BASE:
            return int(i)
        if i < INTERNED_BASE:
            p = int(i) - PAIR_BASE
            return (p >> PAIR_BITS, p & _PAIR_MASK)
        row = self._rows[i - INTERNED_BASE]
        if self._refs[i - INTERNED_BASE] < 0:
            raise KeyError("row id %d was retired" % i)
        return row

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[Any]:
        ids_list = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        rows = self._rows
        pb, ib, sh, mask = PAIR_BASE, INTERNED_BASE, PAIR_BITS, _PAIR_MASK
        return [
            i if i < pb else rows[i - ib] if i >= ib else ((i - pb) >> sh, (i - pb) & mask)
            for i in ids_list
        ]

    def retain(self, ids: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Add references to interned ids (integer ids need none)."""
        self._adjust(ids, counts, 1)

    def release(self, ids: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Drop references; an id left with none is retired and may be reused."""
        self._adjust(ids, counts, -1)

    def _adjust(self, ids: np.ndarray, counts: np.ndarray | None, sign: int) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        mask = ids >= INTERNED_BASE
        if not mask.any():
            return
        slots = ids[mask] - INTERNED_BASE
        c = np.ones(slots.shape[0], np.int64) if counts is None else np.asarray(counts, np.int64)[mask]
        uniq, inv = np.unique(slots, return_inverse=True)
        sums = np.zeros(uniq.shape[0], np.int64)
        np.add.at(sums, inv, c)
        for slot, n in zip(uniq.tolist(), sums.tolist(), strict=True):
            left = self._refs[slot] + sign * n
            if left < 0:
                raise ValueError("row id %d released more often than retained" % (INTERNED_BASE + slot))
            self._refs[slot] = left
            if left == 0 and sign < 0:
                del self._ids[_typed(self._rows[slot])]
                self._rows[slot] = None
                self._refs[slot] = -1
                self._free.append(slot)


def _types(x: Any) -> Any:
    t = type(x)
    if t is tuple:
        # A flat row of plain values (the common case): its types at C speed.
        ts = tuple(map(type, x))
        if tuple in ts or Decimal in ts:
            return tuple(_types(y) for y in x)
        return ts
    if t is Decimal:
        # 1.50 == 1.500, but they print differently (DECIMAL(p, 2) and DECIMAL(p, 3) values):
        # a row dictionary shared by views of both scales must give each back as encoded.
        return x.as_tuple().exponent
    return t


def _typed(row: Any) -> Any:
    """The interning key of `row`: the row with the types of its values (see the module
    docstring). Strings and None are common and never equal a value of another type."""
    t = type(row)
    if t is str or row is None:
        return row
    return (row, _types(row))
