"""Times packed into one int64, so that integer order is a linear extension of the product order.

A time of `dims` coordinates `(epoch, i1, ..., i_{d-1})` is packed into `bits = 63 // dims`
bit fields. The innermost coordinate takes the highest field and the epoch the lowest, so the
integer order is the lexicographic order on `(i_{d-1}, ..., i1, epoch)`: a linear extension of
the product order (if `s <= t` coordinate-wise then `pack(s) <= pack(t)`). Sorting a run by
packed time therefore lists every time after all the times it dominates, which is what a reduce
needs to evaluate times in order.

Why the epoch goes low: the usual compaction frontier inside a loop is `{(e, 0)}` (epochs before
`e` are complete). Advancing by it maps `(x, i) -> (max(x, e), i)`, which is monotone in the
packed order, so a run sorted by time stays sorted and compaction can happen inside a merge
without a re-sort. For general frontiers the kernels check sortedness and re-sort when needed.

Invariant: every coordinate is in `[0, 2**bits)`; `pack` raises `OverflowError` otherwise, so no
time is ever silently wrapped. Lattice operations (`le`, `join`, `meet`, `advance`, `floor`) work on
the packed form field by field; they are numba-compiled and callable from other kernels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numba
import numpy as np

from engine.lattice import Time


def field_bits(dims: int) -> int:
    if dims < 1 or dims > 7:
        raise ValueError("packed times support 1 to 7 coordinates, not %d" % dims)
    return 63 // dims


def pack(t: Sequence[int], dims: int | None = None) -> int:
    """The int64 for time `t` (a tuple of non-negative ints)."""
    if len(t) == 2 and dims == 2:
        # A loop's time, the common case, unrolled.
        a, b = t
        if 0 <= a < _LIMIT2 and 0 <= b < _LIMIT2:
            return int(a) | int(b) << _BITS2
    d = len(t) if dims is None else dims
    if len(t) != d:
        raise ValueError("time %r does not have %d coordinates" % (tuple(t), d))
    bits = field_bits(d)
    limit = 1 << bits
    out = 0
    for j, c in enumerate(t):
        if c < 0 or c >= limit:
            raise OverflowError("time coordinate %d of %r does not fit in %d bits" % (j, tuple(t), bits))
        out |= int(c) << (bits * j)
    return out


def unpack(p: int, dims: int) -> Time:
    p = int(p)
    if dims == 2:
        return (p & _MASK2, (p >> _BITS2) & _MASK2)
    bits = field_bits(dims)
    mask = (1 << bits) - 1
    return tuple((p >> (bits * j)) & mask for j in range(dims))


# Two coordinates, a loop's times, unrolled in `pack` and `unpack` (they run per time).
_BITS2 = field_bits(2)
_LIMIT2 = 1 << _BITS2
_MASK2 = _LIMIT2 - 1


def pack_many(times: Iterable[Sequence[int]], dims: int) -> np.ndarray:
    return np.fromiter((pack(t, dims) for t in times), dtype=np.int64)


def unpack_many(packed: np.ndarray, dims: int) -> list[Time]:
    return [unpack(p, dims) for p in packed.tolist()]


def pack_frontier(elements: Iterable[Sequence[int]], dims: int) -> np.ndarray:
    """An antichain's elements as a packed int64 array (empty for the empty antichain)."""
    return np.array([pack(t, dims) for t in elements], dtype=np.int64)


@numba.njit(cache=True, inline="always")
def le(s: int, t: int, dims: int, bits: int) -> bool:
    """The product order on packed times."""
    if s == t:
        return True
    if dims == 1:
        return s <= t
    mask = (np.int64(1) << bits) - 1
    if dims == 2:
        # A loop's times, the common case: two fields, the high one unmasked (bit 63 is
        # never set), without the loop a runtime `dims` keeps the compiler from unrolling.
        return (s & mask) <= (t & mask) and (s >> bits) <= (t >> bits)
    for j in range(dims):
        sh = bits * j
        if (s >> sh) & mask > (t >> sh) & mask:
            return False
    return True


@numba.njit(cache=True, inline="always")
def join(s: int, t: int, dims: int, bits: int) -> int:
    """Least upper bound: the field-wise max."""
    if dims == 1:
        return s if s >= t else t
    mask = (np.int64(1) << bits) - 1
    if dims == 2:
        lo = max(s & mask, t & mask)
        return max(s >> bits, t >> bits) << bits | lo
    out = np.int64(0)
    for j in range(dims):
        sh = bits * j
        a = (s >> sh) & mask
        b = (t >> sh) & mask
        out |= (a if a >= b else b) << sh
    return out


@numba.njit(cache=True, inline="always")
def meet(s: int, t: int, dims: int, bits: int) -> int:
    """Greatest lower bound: the field-wise min."""
    if dims == 1:
        return s if s <= t else t
    mask = (np.int64(1) << bits) - 1
    out = np.int64(0)
    for j in range(dims):
        sh = bits * j
        a = (s >> sh) & mask
        b = (t >> sh) & mask
        out |= (a if a <= b else b) << sh
    return out


@numba.njit(cache=True, inline="always")
def advance(t: int, frontier: np.ndarray, dims: int, bits: int) -> int:
    """`advance_by`: the meet over the frontier of `join(t, f)`; `t` for an empty frontier."""
    if frontier.shape[0] == 0:
        return t
    r = join(t, frontier[0], dims, bits)
    for i in range(1, frontier.shape[0]):
        r = meet(r, join(t, frontier[i], dims, bits), dims, bits)
    return r


@numba.njit(cache=True, inline="always")
def floor(frontier: np.ndarray, dims: int, bits: int) -> int:
    """The meet of a non-empty frontier's elements: `advance(t, frontier)` is
    `join(t, floor(frontier))`. In the product order both are taken coordinate by coordinate,
    and for each coordinate the least over `f` of `max(t_j, f_j)` is `max(t_j, min over f of
    f_j)`. So a run is advanced with one join per time against this one element, where
    `advance` takes a join and a meet per frontier element (a loop's frontier holds several,
    one per epoch in flight)."""
    m = frontier[0]
    for i in range(1, frontier.shape[0]):
        m = meet(m, frontier[i], dims, bits)
    return m


@numba.njit(cache=True, inline="always")
def beyond(t: int, frontier: np.ndarray, dims: int, bits: int) -> bool:
    """True when some frontier element is `<= t`."""
    for i in range(frontier.shape[0]):
        if le(frontier[i], t, dims, bits):
            return True
    return False
