"""Compiled kernels over columnar runs: consolidate, merge with compaction, join, counting reduce.

Every kernel works on whole int64 arrays (see `layout` for the run invariant and `times` for the
packed times) and is numba-compiled with `cache=True`; the Python functions here only choose a
kernel and allocate. Each has a plain per-record twin in `reference`, and the property tests
(`tests/test_engine_kernels*.py`) require identical output on seeded random updates at random
1-, 2- and 3-coordinate times under random batchings.

- `consolidate`: sort by `(key, val, time)`, sum equal triples, drop zeros. An unsorted batch of
  at least `WORD_MIN` updates whose columns' spans fit 63 bits together is sorted as one word
  per update by NumPy (`word_sort`); any other batch of at least `RADIX_MIN` updates by
  most-significant-digit radix over the bits that vary among its keys, in NumPy-allocated
  buffers (first-touch page faults on a kernel's own large allocations cost as much as the sort).
- `merge`: two runs into one, every time advanced by a frontier first (`advance_by`: logical
  compaction happens inside the merge). When advancing keeps both runs sorted (the usual
  `{(e, 0)}` frontier, see `times`), it is one linear merge; otherwise a re-sort.
- `join`: the keys of a new run found in another run by galloping search; every pair of updates
  with equal keys yields `(index in new, index in other, join(t1, t2), d1 * d2)`.
- `reduce_counting`: for logic that depends only on a key's total count (distinct, count,
  threshold), the corrections that make the output at every interesting time (the closure under
  join of the new times with the key's stored times, split at `upper`) equal the logic at that
  time. Fast path: a key with one new time that every stored time precedes has just that time.
  `reduce_fused` runs a whole round of it (seeds, histories, corrections, pending times) in one
  call, each spine passed as one `run_table` array: a loop round touches a few keys, and ten
  calls' dispatch and glue cost more than their work. A distinct's round where nearly every key
  changed at one time (a hydration's) sums the histories of the keys whose history all
  precedes that time straight from the runs and gathers only the others (`_distinct_round`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from engine.columnar import memory, parallel, word_sort
from engine.columnar import run_table as RT
from engine.columnar import times as T

I64 = np.int64
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

memory.advise_hugepages(memory.HUGEPAGE)
memory.one_malloc_arena()


@numba.njit(cache=True, inline="always")
def _columns4(n):  # type: ignore[no-untyped-def]
    """Four uninitialised int64 columns of length `n` (keys, vals, times, diffs)."""
    return np.empty(n, I64), np.empty(n, I64), np.empty(n, I64), np.empty(n, I64)


# -- consolidation ----------------------------------------------------------------------------
@numba.njit(cache=True)
def _sorted(keys: np.ndarray, vals: np.ndarray, times: np.ndarray) -> bool:
    for i in range(1, keys.shape[0]):
        k0, k1 = keys[i - 1], keys[i]
        if k0 < k1:
            continue
        if k0 > k1:
            return False
        v0, v1 = vals[i - 1], vals[i]
        if v0 < v1:
            continue
        if v0 > v1 or times[i - 1] > times[i]:
            return False
    return True


@numba.njit(cache=True)
def _consolidate_in_place(k, v, t, d):  # type: ignore[no-untyped-def]
    """Sorted columns: sum equal triples and drop zeros in place; returns the count kept (the
    write position never passes the read position)."""
    m = 0
    for i in range(k.shape[0]):
        kk, vv, tt, dd = k[i], v[i], t[i], d[i]
        if m > 0 and k[m - 1] == kk and v[m - 1] == vv and t[m - 1] == tt:
            d[m - 1] += dd
            continue
        if m > 0 and d[m - 1] == 0:
            m -= 1
        k[m], v[m], t[m], d[m] = kk, vv, tt, dd
        m += 1
    if m > 0 and d[m - 1] == 0:
        m -= 1
    return m


@numba.njit(cache=True)
def _consolidate_ordered(keys, vals, times, diffs, order):  # type: ignore[no-untyped-def]
    """Take the updates in `order` (a sorting permutation), sum equal triples, drop zeros."""
    k, v, t, d = keys[order], vals[order], times[order], diffs[order]
    m = _consolidate_in_place(k, v, t, d)
    return k[:m].copy(), v[:m].copy(), t[:m].copy(), d[:m].copy()


@numba.njit(cache=True, inline="always")
def _before(vals, times, a, b):  # type: ignore[no-untyped-def]
    return vals[a] < vals[b] or (vals[a] == vals[b] and times[a] < times[b])


@numba.njit(cache=True)
def _order_within_keys(keys, vals, times, order):  # type: ignore[no-untyped-def]
    """`order` sorts by key; sort each group of equal keys by `(val, time)` in place.

    Groups are small in practice (a key's updates in one batch), so insertion sort; a large
    group falls back to two stable sorts of its own slice."""
    n = order.shape[0]
    i = 0
    while i < n:
        e = i + 1
        k = keys[order[i]]
        while e < n and keys[order[e]] == k:
            e += 1
        if e - i <= 32:
            for a in range(i + 1, e):
                x = order[a]
                b = a - 1
                while b >= i and _before(vals, times, x, order[b]):
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = x
        else:
            g = order[i:e].copy()
            g = g[np.argsort(times[g], kind="mergesort")]
            g = g[np.argsort(vals[g], kind="mergesort")]
            order[i:e] = g
        i = e
    return order


RADIX_BITS = 8
# From this many updates an unsorted batch whose columns fit one word per update is sorted as
# words (`word_sort`): below it one compiled call's comparison sort costs less than the five
# calls of the word path.
WORD_MIN = 384
# From this many updates a batch is sorted by radix passes instead of a comparison sort: below
# it the comparison sort's single pass over a few cache lines wins.
RADIX_MIN = 1 << 14
# Segments of at most this many updates are finished by a comparison sort in cache (a radix
# pass costs a fixed 2**RADIX_BITS of bookkeeping), and at most INSERTION by insertion sort.
RADIX_LEAF = 64
INSERTION = 32


@numba.njit(cache=True, inline="always")
def _ordered_bits(x):  # type: ignore[no-untyped-def]
    """`x` as an unsigned int with the same order (the sign bit flipped)."""
    return np.uint64(x) ^ np.uint64(1 << 63)


@numba.njit(cache=True)
def _radix_scatter(sk, sv, st, sd, dk, dv, dt, dd, lo, hi, shift, starts, cursor):  # type: ignore[no-untyped-def]
    """Move `s*[lo:hi]` to `d*[lo:hi]` grouped by the digit at `shift` of the key (bucket order
    is key order); `starts[b]:starts[b + 1]` is bucket `b` afterwards (`cursor` is scratch)."""
    mask = np.uint64((1 << RADIX_BITS) - 1)
    sh = np.uint64(shift)
    starts[:] = 0
    for i in range(lo, hi):
        starts[np.int64((_ordered_bits(sk[i]) >> sh) & mask) + 1] += 1
    starts[0] = lo
    for b in range(1 << RADIX_BITS):
        starts[b + 1] += starts[b]
    cursor[:] = starts[: 1 << RADIX_BITS]
    for i in range(lo, hi):
        b = np.int64((_ordered_bits(sk[i]) >> sh) & mask)
        p = cursor[b]
        cursor[b] = p + 1
        dk[p] = sk[i]
        dv[p] = sv[i]
        dt[p] = st[i]
        dd[p] = sd[i]


@numba.njit(cache=True)
def _insertion(k, v, t, d, lo, hi):  # type: ignore[no-untyped-def]
    """Insertion sort of `[lo, hi)` by `(key, val, time)`: no allocation, for a few updates."""
    for a in range(lo + 1, hi):
        xk, xv, xt, xd = k[a], v[a], t[a], d[a]
        b = a - 1
        while b >= lo and (xk < k[b] or (xk == k[b] and (xv < v[b] or (xv == v[b] and xt < t[b])))):
            k[b + 1], v[b + 1], t[b + 1], d[b + 1] = k[b], v[b], t[b], d[b]
            b -= 1
        k[b + 1], v[b + 1], t[b + 1], d[b + 1] = xk, xv, xt, xd


@numba.njit(cache=True)
def _sort_groups(k, v, t, d, lo, hi):  # type: ignore[no-untyped-def]
    """`[lo, hi)` holds one key: sort it by `(val, time)` in place."""
    if hi - lo <= INSERTION:
        _insertion(k, v, t, d, lo, hi)
        return
    g = np.argsort(t[lo:hi], kind="mergesort")
    g = g[np.argsort(v[lo:hi][g], kind="mergesort")]
    v[lo:hi], t[lo:hi], d[lo:hi] = v[lo:hi][g], t[lo:hi][g], d[lo:hi][g]


@numba.njit(cache=True)
def _sort_leaf(k, v, t, d, lo, hi):  # type: ignore[no-untyped-def]
    """Sort `[lo, hi)` by `(key, val, time)` in place: insertion sort when short, otherwise a
    sort by key and then each key's updates by `(val, time)`."""
    if hi - lo <= INSERTION:
        _insertion(k, v, t, d, lo, hi)
        return
    g = np.argsort(k[lo:hi])
    k[lo:hi], v[lo:hi], t[lo:hi], d[lo:hi] = k[lo:hi][g], v[lo:hi][g], t[lo:hi][g], d[lo:hi][g]
    i = lo
    while i < hi:
        e = i + 1
        while e < hi and k[e] == k[i]:
            e += 1
        if e - i > 1:
            _sort_groups(k, v, t, d, i, e)
        i = e


# Pending radix segments: depth-first, so at most 2**RADIX_BITS - 1 per level of 64 / RADIX_BITS
# levels wait (plus the segments a call starts from).
_STACK = (1 << RADIX_BITS) * (64 // RADIX_BITS + 1) + 1


@numba.njit(cache=True)
def _radix_step(k, v, t, d, ok, ov, ot, od, lo, hi, where, stack, top, starts, cursor):  # type: ignore[no-untyped-def]
    """Sort the segment `[lo, hi)` (its data in `k..d` when `where` is 0, in `o*` when 1; 2 or
    3 the same for a segment known to hold one key) if it is a leaf, or split it by one digit
    and push its buckets on `stack` from `top`. Returns the new `top`."""
    if where >= 2:
        if where == 3:
            k[lo:hi], v[lo:hi], t[lo:hi], d[lo:hi] = ok[lo:hi], ov[lo:hi], ot[lo:hi], od[lo:hi]
        _sort_groups(k, v, t, d, lo, hi)
        return top
    sk = ok if where == 1 else k
    if hi - lo <= RADIX_LEAF:
        if where == 1:
            k[lo:hi], v[lo:hi], t[lo:hi], d[lo:hi] = ok[lo:hi], ov[lo:hi], ot[lo:hi], od[lo:hi]
        _sort_leaf(k, v, t, d, lo, hi)
        return top
    first = _ordered_bits(sk[lo])
    varying = np.uint64(0)
    for i in range(lo, hi):
        varying |= _ordered_bits(sk[i]) ^ first
    if varying == 0:
        if where == 1:
            k[lo:hi], v[lo:hi], t[lo:hi], d[lo:hi] = ok[lo:hi], ov[lo:hi], ot[lo:hi], od[lo:hi]
        _sort_groups(k, v, t, d, lo, hi)
        return top
    high = 63
    while (varying >> np.uint64(high)) & np.uint64(1) == 0:
        high -= 1
    low = 0
    while (varying >> np.uint64(low)) & np.uint64(1) == 0:
        low += 1
    shift = max(0, high - RADIX_BITS + 1)
    if where == 1:
        _radix_scatter(ok, ov, ot, od, k, v, t, d, lo, hi, shift, starts, cursor)
    else:
        _radix_scatter(k, v, t, d, ok, ov, ot, od, lo, hi, shift, starts, cursor)
    # When the digit covered every varying bit, each bucket holds a single key.
    child = (1 - where) + (2 if shift <= low else 0)
    for b in range((1 << RADIX_BITS) - 1, -1, -1):
        if starts[b + 1] > starts[b]:
            stack[top, 0], stack[top, 1], stack[top, 2] = starts[b], starts[b + 1], child
            top += 1
    return top


@numba.njit(cache=True, nogil=True)
def _radix_segments(k, v, t, d, ok, ov, ot, od, segments):  # type: ignore[no-untyped-def]
    """Sort each of `segments` (rows `(lo, hi, where)`, see `_radix_step`) in place by
    `(key, val, time)`, with `o*` as scratch: every segment's result ends in `k..d`.

    Most-significant-digit radix sort: a segment is split by the highest `RADIX_BITS` of the
    bits that vary among its keys, and each bucket is split again, until it holds one key (then
    sorted by `(val, time)`) or few updates (insertion sort). Segments soon fit in cache, and a
    sparse key space (pair ids whose high half takes a few values) costs passes only for the
    bits that vary within a segment, where least-significant-digit passes cost every bit.
    Disjoint segments touch disjoint ranges, so two calls may sort two sets of them at once."""
    stack = np.empty((_STACK + segments.shape[0], 3), I64)
    top = 0
    for i in range(segments.shape[0] - 1, -1, -1):
        stack[top, 0], stack[top, 1], stack[top, 2] = segments[i, 0], segments[i, 1], segments[i, 2]
        top += 1
    starts = np.empty((1 << RADIX_BITS) + 1, I64)
    cursor = np.empty(1 << RADIX_BITS, I64)
    while top > 0:
        top -= 1
        top = _radix_step(k, v, t, d, ok, ov, ot, od, stack[top, 0], stack[top, 1], stack[top, 2],
                          stack, top, starts, cursor)


@numba.njit(cache=True)
def _radix_first(k, v, t, d, ok, ov, ot, od):  # type: ignore[no-untyped-def]
    """The first level of `_radix_segments` over all of `k..d`: the segments left to sort, in
    key order (none when that level finished the sort)."""
    stack = np.empty((_STACK, 3), I64)
    top = _radix_step(k, v, t, d, ok, ov, ot, od, 0, k.shape[0], 0, stack,
                      0, np.empty((1 << RADIX_BITS) + 1, I64), np.empty(1 << RADIX_BITS, I64))
    return stack[:top][::-1].copy()


@numba.njit(cache=True)
def _radix_consolidate(k, v, t, d, ok, ov, ot, od):  # type: ignore[no-untyped-def]
    """Sort (unless sorted) and consolidate `k, v, t, d` in place; returns the count kept."""
    if not _sorted(k, v, t):
        whole = np.empty((1, 3), I64)
        whole[0, 0], whole[0, 1], whole[0, 2] = 0, k.shape[0], 0
        _radix_segments(k, v, t, d, ok, ov, ot, od, whole)
    return _consolidate_in_place(k, v, t, d)


@numba.njit(cache=True)
def _consolidate(keys, vals, times, diffs):  # type: ignore[no-untyped-def]
    if _sorted(keys, vals, times):
        order = np.arange(keys.shape[0])
    else:
        # One sort by key, then each key's few updates by (val, time): much cheaper than a
        # three-column sort (`np.lexsort` costs tens of microseconds on the small batches of a
        # loop round).
        order = _order_within_keys(keys, vals, times, np.argsort(keys))
    return _consolidate_ordered(keys, vals, times, diffs, order)


@numba.njit(cache=True)
def _resort_times(keys, vals, times, diffs):  # type: ignore[no-untyped-def]
    """A run sorted by `(key, val)` whose times were advanced: sort each `(key, val)` group by
    time again (advancing never moves keys or vals, so the rest of the order holds)."""
    n = keys.shape[0]
    order = np.arange(n)
    i = 0
    while i < n:
        e = i + 1
        while e < n and keys[e] == keys[i] and vals[e] == vals[i]:
            e += 1
        if e - i > 64:
            order[i:e] = i + np.argsort(times[i:e], kind="mergesort")
            i = e
            continue
        # Advanced times were sorted before, so the group is nearly sorted: insertion sort.
        for a in range(i + 1, e):
            x = order[a]
            b = a - 1
            while b >= i and times[x] < times[order[b]]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        i = e
    return keys[order], vals[order], times[order], diffs[order]


@numba.njit(cache=True)
def trimmed(k, v, t, d, m):  # type: ignore[no-untyped-def]
    """The first `m` updates of full-length columns: views while they keep most of the memory
    they hold (no second copy of a large result is ever made), copies otherwise."""
    if 4 * m >= 3 * k.shape[0]:
        return k[:m], v[:m], t[:m], d[:m]
    return k[:m].copy(), v[:m].copy(), t[:m].copy(), d[:m].copy()


@numba.njit(cache=True)
def _constant(a):  # type: ignore[no-untyped-def]
    for i in range(1, a.shape[0]):
        if a[i] != a[0]:
            return False
    return True


def _sort_buffers(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A copy of the column `a` to sort in place, and its scratch column: one array for both
    when every value is the same (a batch's single time, the unit value, diffs of 1). Every
    move of the radix sort then writes that value where it reads it, so sharing is exact, and
    two cores sort disjoint ranges; a capture's five million ids with constant vals and times
    held four columns less."""
    if _constant(a):
        c = np.full(a.shape[0], a[0], I64)
        return c, c
    return a.copy(), np.empty(a.shape[0], I64)


def consolidate(
    keys: np.ndarray, vals: np.ndarray, times: np.ndarray, diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sorted by `(key, val, time)`, equal triples summed, zeros dropped."""
    n = keys.shape[0]
    if n < WORD_MIN:
        return _consolidate(keys, vals, times, diffs)  # type: ignore[no-any-return]
    if not _sorted(keys, vals, times):
        # One int64 word per update, sorted by NumPy, where the columns' spans fit one.
        words = word_sort.consolidate_words(keys, vals, times, diffs)
        if words is not None:
            return trimmed(*words)  # type: ignore[no-any-return]
    if n < RADIX_MIN:
        return _consolidate(keys, vals, times, diffs)  # type: ignore[no-any-return]
    # Large columns are allocated by NumPy, not inside the kernel, and never twice: first
    # touches of fresh memory cost as much as the sort itself (see `columnar.memory`).
    pairs = [_sort_buffers(c) for c in (keys, vals, times, diffs)]
    cols = tuple(c for c, _ in pairs)
    scratch = tuple(s for _, s in pairs)
    if n < parallel.MIN_SORTED or parallel.THREADS < 2 or _sorted(keys, vals, times):
        m = _radix_consolidate(*cols, *scratch)
        return trimmed(*cols, m)  # type: ignore[no-any-return]
    # Two cores: the first digit's buckets, in key order, split in two halves of about equal
    # size, each sorted by one thread.
    segments = _radix_first(*cols, *scratch)
    if segments.shape[0] < 2:
        _radix_segments(*cols, *scratch, segments)
    else:
        ends = np.cumsum(segments[:, 1] - segments[:, 0])
        cut = min(max(1, int(np.searchsorted(ends, n // 2))), segments.shape[0] - 1)
        parallel.both(
            lambda: _radix_segments(*cols, *scratch, segments[:cut]),
            lambda: _radix_segments(*cols, *scratch, segments[cut:]),
        )
    return trimmed(*cols, _consolidate_in_place(*cols))  # type: ignore[no-any-return]


@numba.njit(cache=True)
def within(a, lo, hi):  # type: ignore[no-untyped-def]
    """Every element in `[lo, hi)`: one pass that stops at the first outside (where NumPy's
    `min` and `max` are two passes and two calls)."""
    for i in range(a.shape[0]):
        if a[i] < lo or a[i] >= hi:
            return False
    return True


@numba.njit(cache=True)
def pair_fields(data, first, second, base, end, bits):  # type: ignore[no-untyped-def]
    """Fields of rows that are all packed pairs (`interning`: the id of `(a, b)` is
    `base + (a << bits) + b`, in `[base, end)`): field `first` (0 or 1) of each row, or with
    `second >= 0` the pair of fields `(first, second)` packed again. Returns `(out, ok)`; `ok`
    is False, and `out` unusable, when some row is not a packed pair. One pass where the same in
    NumPy was six (each a call and a temporary on a loop round's few updates)."""
    n = data.shape[0]
    out = np.empty(n, I64)
    mask = (np.int64(1) << bits) - 1
    for i in range(n):
        p = data[i]
        if p < base or p >= end:
            return out, False
        p -= base
        a, b = p >> bits, p & mask
        x = a if first == 0 else b
        if second < 0:
            out[i] = x
        else:
            out[i] = base + (x << bits) + (a if second == 0 else b)
    return out, True


@numba.njit(cache=True)
def pair_halves(data, base, end, bits):  # type: ignore[no-untyped-def]
    """Both fields of rows that are all packed pairs (see `pair_fields`): `(a, b, ok)`."""
    n = data.shape[0]
    a = np.empty(n, I64)
    b = np.empty(n, I64)
    mask = (np.int64(1) << bits) - 1
    for i in range(n):
        p = data[i]
        if p < base or p >= end:
            return a, b, False
        p -= base
        a[i] = p >> bits
        b[i] = p & mask
    return a, b, True


@numba.njit(cache=True)
def beyond_all(times, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """For each packed time, whether it is beyond `frontier`."""
    out = np.empty(times.shape[0], np.bool_)
    for i in range(times.shape[0]):
        out[i] = T.beyond(times[i], frontier, dims, bits)
    return out


@numba.njit(cache=True)
def count_beyond(times, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """How many packed `times` are beyond `frontier`: a tenth of `split_beyond`'s call when
    none or all are (most splits in a loop round), which returns no columns to box."""
    nb = 0
    for i in range(times.shape[0]):
        nb += T.beyond(times[i], frontier, dims, bits)
    return nb


@numba.njit(cache=True)
def split_beyond(data, times, diffs, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """Updates `(data, times, diffs)` split at `frontier` (packed): `(n_beyond, ready, rest,
    rest_lower)` with `ready` the updates not beyond it and `rest` those beyond, each three
    columns in their order, and `rest_lower` the minimal times of `rest` (`minimal_times`).
    When all or none are beyond, the input columns are returned as they are (no copy). One
    call for what took a mask, a count, six takes and the antichain of the rest."""
    n = times.shape[0]
    beyond = np.empty(n, np.bool_)
    nb = 0
    for i in range(n):
        b = T.beyond(times[i], frontier, dims, bits)
        beyond[i] = b
        nb += b
    empty = np.empty(0, I64)
    if nb == 0:
        return nb, (data, times, diffs), (empty, empty, empty), empty
    if nb == n:
        return nb, (empty, empty, empty), (data, times, diffs), minimal_times(times, dims, bits)
    rd, rt, rr = np.empty(n - nb, I64), np.empty(n - nb, I64), np.empty(n - nb, I64)
    bd, bt, br = np.empty(nb, I64), np.empty(nb, I64), np.empty(nb, I64)
    r = 0
    b = 0
    for i in range(n):
        if beyond[i]:
            bd[b], bt[b], br[b] = data[i], times[i], diffs[i]
            b += 1
        else:
            rd[r], rt[r], rr[r] = data[i], times[i], diffs[i]
            r += 1
    return nb, (rd, rt, rr), (bd, bt, br), minimal_times(bt, dims, bits)


@numba.njit(cache=True)
def dedup_pairs(keys, times):  # type: ignore[no-untyped-def]
    """Distinct `(key, time)` pairs, sorted by key then time."""
    n = keys.shape[0]
    grouped = True
    for j in range(1, n):
        if keys[j] < keys[j - 1]:
            grouped = False
            break
    if grouped:
        # Keys already in order (a reduce's deferred times come per key in key order): only
        # each key's few times need sorting, not the whole of both columns twice.
        ok = keys.copy()
        ot = times.copy()
        i = 0
        while i < n:
            j = i + 1
            while j < n and ok[j] == ok[i]:
                j += 1
            if j - i > 16:
                ot[i:j] = np.sort(ot[i:j])
            else:
                for a in range(i + 1, j):  # insertion sort: no allocation for a few times
                    x = ot[a]
                    b = a - 1
                    while b >= i and ot[b] > x:
                        ot[b + 1] = ot[b]
                        b -= 1
                    ot[b + 1] = x
            i = j
    else:
        order = np.argsort(times, kind="mergesort")
        order = order[np.argsort(keys[order], kind="mergesort")]
        ok = keys[order]
        ot = times[order]
    # sorted: keep the first of each run of equal pairs, in place
    m = 0
    for j in range(n):
        if m > 0 and ok[m - 1] == ok[j] and ot[m - 1] == ot[j]:
            continue
        ok[m] = ok[j]
        ot[m] = ot[j]
        m += 1
    return ok[:m].copy(), ot[:m].copy()


@numba.njit(cache=True)
def merge_pairs(ak, at, bk, bt):  # type: ignore[no-untyped-def]
    """The distinct union of two lists of `(key, time)` pairs, each sorted and distinct."""
    na, nb = ak.shape[0], bk.shape[0]
    ok = np.empty(na + nb, I64)
    ot = np.empty(na + nb, I64)
    i = j = m = 0
    while i < na or j < nb:
        if j >= nb or (i < na and (ak[i] < bk[j] or (ak[i] == bk[j] and at[i] <= bt[j]))):
            k, t = ak[i], at[i]
            i += 1
        else:
            k, t = bk[j], bt[j]
            j += 1
        if m > 0 and ok[m - 1] == k and ot[m - 1] == t:
            continue
        ok[m] = k
        ot[m] = t
        m += 1
    return ok[:m].copy(), ot[:m].copy()


def union_pairs(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct union of `(keys, times)` parts, each with its keys in order (a run's
    keys, a reduce's deferred times per key): each part is deduplicated by the cheap grouped
    path of `dedup_pairs`, then merged, instead of sorting the concatenation."""
    parts = [(k, t) for k, t in parts if k.shape[0]]
    if len(parts) > 4:
        # Many parts (the reference tactic's one per key): pairwise merges would be quadratic.
        return dedup_pairs(np.concatenate([k for k, _ in parts]), np.concatenate([t for _, t in parts]))
    acc: tuple[np.ndarray, np.ndarray] | None = None
    for k, t in parts:
        part = dedup_pairs(k, t)
        acc = part if acc is None else merge_pairs(acc[0], acc[1], part[0], part[1])
    if acc is None:
        return np.zeros(0, I64), np.zeros(0, I64)
    return acc


# -- merge with compaction --------------------------------------------------------------------
@numba.njit(cache=True)
def _advance_all(times, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """Every time advanced by `frontier` (packed, not empty), and whether any moved (when
    none did, the column is `times` itself).

    Each time is joined with the frontier's `floor` (`times.floor`: the same as `advance`,
    with one join per time instead of a join and a meet per frontier element). A time the
    floor is already below does not move, and in a merge most runs are all such times (the
    newer run's are recent): those are returned as they are, without a new column. Advancing
    was most of a merge's time at the reachability loop's batch 100 (34 -> 21 ns a record,
    on recorded merges)."""
    m = T.floor(frontier, dims, bits)
    n = times.shape[0]
    i = 0
    while i < n and T.le(m, times[i], dims, bits):
        i += 1
    if i == n:
        return times, False
    out = np.empty_like(times)
    out[:i] = times[:i]
    for j in range(i, n):
        out[j] = T.join(times[j], m, dims, bits)
    return out, True


@numba.njit(cache=True, inline="always")
def _merge_loop(ak, av, at, ad, bk, bv, bt, bd, ok, ov, ot, od, w):  # type: ignore[no-untyped-def]
    """Merge two sorted runs into the `o*` columns from position `w`, summing equal triples
    (within and across runs) and dropping zeros. Returns the position after the last written.

    Every key of both runs must be above the keys before `w` (a fueled merge writes key
    ranges in order), so nothing before `w` is summed into. Inlined into each caller, so that
    where the caller allocated the columns the compiler knows they alias nothing (a separate
    function writing into columns passed in ran 10-20% slower)."""
    na, nb = ak.shape[0], bk.shape[0]
    w0 = w
    i = 0
    j = 0
    while i < na or j < nb:
        take_a = False
        if j >= nb:
            take_a = True
        elif i < na:
            if ak[i] != bk[j]:
                take_a = ak[i] < bk[j]
            elif av[i] != bv[j]:
                take_a = av[i] < bv[j]
            else:
                take_a = at[i] <= bt[j]
        if take_a:
            k, v, t, d = ak[i], av[i], at[i], ad[i]
            i += 1
        else:
            k, v, t, d = bk[j], bv[j], bt[j], bd[j]
            j += 1
        if w > w0 and ok[w - 1] == k and ov[w - 1] == v and ot[w - 1] == t:
            od[w - 1] += d
            continue
        if w > w0 and od[w - 1] == 0:
            w -= 1
        ok[w] = k
        ov[w] = v
        ot[w] = t
        od[w] = d
        w += 1
    if w > w0 and od[w - 1] == 0:
        w -= 1
    return w


@numba.njit(cache=True, inline="always")
def _advanced(ak, av, at, ad, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """A run with every time advanced by `frontier` (packed; may be empty), re-sorted where
    advancing reordered a `(key, val)` group's times."""
    if frontier.shape[0]:
        at, moved = _advance_all(at, frontier, dims, bits)
        if moved and not _sorted(ak, av, at):
            ak, av, at, ad = _resort_times(ak, av, at, ad)
    return ak, av, at, ad


@numba.njit(cache=True)
def _merge_advanced(ak, av, at, ad, bk, bv, bt, bd, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """`merge` in one compiled call, into columns it allocates (trimmed by `trimmed`: a large
    merge returns views, and the copy it made before took as long as the merge itself)."""
    ak, av, at, ad = _advanced(ak, av, at, ad, frontier, dims, bits)
    bk, bv, bt, bd = _advanced(bk, bv, bt, bd, frontier, dims, bits)
    ok, ov, ot, od = _columns4(ak.shape[0] + bk.shape[0])
    m = _merge_loop(ak, av, at, ad, bk, bv, bt, bd, ok, ov, ot, od, 0)
    return trimmed(ok, ov, ot, od, m)


@numba.njit(cache=True, nogil=True)
def _merge_advanced_into(ak, av, at, ad, bk, bv, bt, bd, frontier, dims, bits, ok, ov, ot, od, w):  # type: ignore[no-untyped-def]
    ak, av, at, ad = _advanced(ak, av, at, ad, frontier, dims, bits)
    bk, bv, bt, bd = _advanced(bk, bv, bt, bd, frontier, dims, bits)
    return _merge_loop(ak, av, at, ad, bk, bv, bt, bd, ok, ov, ot, od, w)


def merge_into(a: Arrays, b: Arrays, frontier: np.ndarray, dims: int, out: Arrays, w: int) -> int:
    """`merge` written into the columns `out` from position `w`; returns the position after
    the last update written. `out` needs room for both runs, and every key of both must be
    above the keys before `w`. A large fueled merge writes each piece in place: a piece in
    fresh columns, copied, cost twice the merge in first-touch page faults."""
    return _merge_advanced_into(*a, *b, frontier, dims, T.field_bits(dims), *out, w)  # type: ignore[no-any-return]


def merge(a: Arrays, b: Arrays, frontier: np.ndarray, dims: int) -> Arrays:
    """Two runs merged into one, every time advanced by `frontier` (packed; may be empty).

    One compiled call: advancing, re-sorting a `(key, val)` group whose times it reordered, and
    the linear merge that sums equal triples."""
    return _merge_advanced(*a, *b, frontier, dims, T.field_bits(dims))  # type: ignore[no-any-return]


@numba.njit(cache=True)
def _merge_all(k, v, t, d, starts, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """The sorted runs `[starts[r], starts[r + 1])` of the columns merged into one, times
    advanced by `frontier`: adjacent runs merged in pairs (`_merge_loop`, which sums equal
    triples and drops zeros), pass after pass, between two sets of columns. A run that
    advancing left out of order within a `(key, val)` group (possible under a frontier of
    several elements) makes the whole a sort instead."""
    n_runs = starts.shape[0] - 1
    if frontier.shape[0]:
        t, moved = _advance_all(t, frontier, dims, bits)
        if moved:
            for r in range(n_runs):
                lo, hi = starts[r], starts[r + 1]
                if not _sorted(k[lo:hi], v[lo:hi], t[lo:hi]):
                    return _consolidate(k, v, t, d)
    src = (k, v, t, d)
    dst = _columns4(k.shape[0])
    bounds = starts.copy()
    while True:
        sk, sv, st, sd = src
        ok, ov, ot, od = dst
        nb = 0
        w = 0
        for p in range(0, n_runs, 2):
            lo, mid = bounds[p], bounds[p + 1]
            hi = bounds[p + 2] if p + 1 < n_runs else mid
            bounds[nb] = w
            nb += 1
            # A pair, or the last run alone (merged with nothing: still summed and trimmed
            # of zeros, which advancing may have made).
            w = _merge_loop(sk[lo:mid], sv[lo:mid], st[lo:mid], sd[lo:mid],
                            sk[mid:hi], sv[mid:hi], st[mid:hi], sd[mid:hi], ok, ov, ot, od, w)
        bounds[nb] = w
        n_runs = nb
        src, dst = dst, src
        if n_runs <= 1:
            return trimmed(src[0], src[1], src[2], src[3], w)


@numba.njit(cache=True)
def _merge_table(runs, frontier, dims, bits):  # type: ignore[no-untyped-def]
    """`_merge_all` of the runs of a table, copied into one set of columns first (advancing
    rewrites their times, and the merge passes need a second set anyway)."""
    n_runs = runs.shape[0]
    starts = np.zeros(n_runs + 1, I64)
    for r in range(n_runs):
        starts[r + 1] = starts[r] + runs[r, RT.RECORDS]
    k, v, t, d = _columns4(starts[n_runs])
    for r in range(n_runs):
        rk, rv, rt, rd = RT.run(runs, r)
        lo = starts[r]
        for x in range(rk.shape[0]):
            k[lo + x], v[lo + x], t[lo + x], d[lo + x] = rk[x], rv[x], rt[x], rd[x]
    return _merge_all(k, v, t, d, starts, frontier, dims, bits)


def merge_many(runs: list[Any], frontier: np.ndarray, dims: int) -> Arrays:
    """Several sorted runs (a trace's small tail: their columns, or runs that keep their
    `address_row`) merged into one, every time advanced by `frontier` (packed; may be empty),
    in one call: merged in pairs, pass after pass, inside it. Sorting their concatenation
    instead cost 170 ns a record at the reachability loop's batch 100 (a comparison sort: the
    packed columns are too wide for a word); concatenating them in NumPy first cost about as
    much as the kernel at batch 1."""
    return _merge_table(RT.table(runs), frontier, dims, T.field_bits(dims))  # type: ignore[no-any-return]


# -- join -------------------------------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _gallop(keys, lo, hi, key):  # type: ignore[no-untyped-def]
    """The first index in `[lo, hi)` whose key is `>= key` (keys sorted), by galloping search."""
    step = 1
    while lo + step < hi and keys[lo + step - 1] < key:
        lo += step
        step *= 2
    end = min(lo + step, hi)
    while lo < end:
        mid = (lo + end) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            end = mid
    return lo


@numba.njit(cache=True, inline="always")
def _matches(nk, ok, i, n, pos, m):  # type: ignore[no-untyped-def]
    """For the equal keys of `nk` from `i`: their end `e`, and the range `[lo, hi)` of that
    key in `ok` searched from `pos`."""
    k = nk[i]
    e = i + 1
    while e < n and nk[e] == k:
        e += 1
    lo = _gallop(ok, pos, m, k)
    hi = lo
    while hi < m and ok[hi] == k:
        hi += 1
    return e, lo, hi


@numba.njit(cache=True)
def _join(nk, nt, nd, ok, ot, od, dims, bits):  # type: ignore[no-untyped-def]
    n, m = nk.shape[0], ok.shape[0]
    # Pass 1: for each run of equal keys in `new`, its range in `other`; count the output.
    total = 0
    i = 0
    pos = 0
    while i < n:
        e, lo, pos = _matches(nk, ok, i, n, pos, m)
        total += (e - i) * (pos - lo)
        i = e
    ni, oi, tt, dd = _columns4(total)
    # Pass 2: fill.
    w = 0
    i = 0
    pos = 0
    while i < n:
        e, lo, pos = _matches(nk, ok, i, n, pos, m)
        for a in range(i, e):
            for b in range(lo, pos):
                ni[w] = a
                oi[w] = b
                tt[w] = T.join(nt[a], ot[b], dims, bits)
                dd[w] = nd[a] * od[b]
                w += 1
        i = e
    return ni, oi, tt, dd


def join(
    new: Arrays, other: Arrays, dims: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of updates with equal keys: `(index in new, index in other, join(t1, t2), d1 * d2)`.

    Both runs must be sorted by key."""
    return _join(new[0], new[2], new[3], other[0], other[2], other[3], dims, T.field_bits(dims))


# Lower bounds searched in lockstep, this many query keys at once (see `_lower_bounds`), in runs
# of at least SEARCH_MIN records that hold at least SEARCH_SPARSE records per query key. Denser
# queries are merged with the run: with a few records between them the merge reads memory in
# order, and in a run of 8.6M keys it was faster up to about 128 records per key (3x at 16),
# lockstep search beyond (2.6x at 4,096). However few the query keys: a gallop from the last
# match in a run of millions is a chain of dependent misses about twice as long as a binary
# search (a batch-1 loop round searches such runs for a dozen keys; with the caches flushed,
# 16 keys in a run of 6.3M took 3.2 us a key galloping, 1.4 us searched).
SEARCH_GROUP = 32
SEARCH_MIN = 1 << 16
SEARCH_SPARSE = 128


@numba.njit(cache=True, inline="always")
def _searched(m, nq):  # type: ignore[no-untyped-def]
    """Whether a run of `m` records is searched for `nq` query keys by `_lower_bounds`
    (otherwise they are merged with it)."""
    return m >= SEARCH_MIN and nq > 0 and SEARCH_SPARSE * nq <= m


@numba.njit(cache=True)
def _lower_bounds(rk, qkeys, out):  # type: ignore[no-untyped-def]
    """`out[i]`: the first index of sorted `rk` whose key is `>= qkeys[i]`.

    Branchless binary searches, SEARCH_GROUP query keys in lockstep: every search takes the
    same steps, so the loads of a step are independent and their cache misses overlap. A
    gallop per key is a chain of dependent misses; in a run of millions of records this is
    2-3x faster per key (and the top of the search is cached for the whole group)."""
    m, n = rk.shape[0], qkeys.shape[0]
    base = np.zeros(SEARCH_GROUP, I64)
    for g0 in range(0, n, SEARCH_GROUP):
        c = min(SEARCH_GROUP, n - g0)
        for g in range(c):
            base[g] = 0
        length = m
        while length > 1:
            half = length >> 1
            for g in range(c):
                b = base[g]
                base[g] = b + half if rk[b + half] < qkeys[g0 + g] else b
            length -= half
        for g in range(c):
            b = base[g]
            out[g0 + g] = b + 1 if m and rk[b] < qkeys[g0 + g] else b
    return out


@numba.njit(cache=True)
def _join_fused(nk, nv, nt, nd, others, dims, bits):  # type: ignore[no-untyped-def]
    n = nk.shape[0]
    n_others = others.shape[0]
    # Per run: the lower bound of each new key, searched in lockstep in a large run with many
    # records per new key (see `_lower_bounds`); a gallop from the last match otherwise.
    searched = np.zeros(n_others, np.bool_)
    lbs = np.empty((0, n), I64)
    for j in range(n_others):
        m = others[j, RT.RECORDS]
        searched[j] = _searched(m, n)
    if searched.any():
        lbs = np.empty((n_others, n), I64)
        for j in range(n_others):
            if searched[j]:
                _lower_bounds(RT.column(others, j, RT.KEYS), nk, lbs[j])
    total = 0
    for j in range(n_others):
        ok = RT.column(others, j, RT.KEYS)
        m = ok.shape[0]
        i = 0
        pos = 0
        while i < n:
            e, lo, pos = _matches(nk, ok, i, n, lbs[j, i] if searched[j] else pos, m)
            total += (e - i) * (pos - lo)
            i = e
    rk, rn, ro, rt, rd = _columns4(total) + (np.empty(total, I64),)
    w = 0
    for j in range(n_others):
        ok, ov, ot, od = RT.run(others, j)
        m = ok.shape[0]
        i = 0
        pos = 0
        while i < n:
            e, lo, pos = _matches(nk, ok, i, n, lbs[j, i] if searched[j] else pos, m)
            for a in range(i, e):
                for b in range(lo, pos):
                    rk[w] = nk[a]
                    rn[w] = nv[a]
                    ro[w] = ov[b]
                    rt[w] = T.join(nt[a], ot[b], dims, bits)
                    rd[w] = nd[a] * od[b]
                    w += 1
            i = e
    return rk, rn, ro, rt, rd


def join_fused(
    new: Arrays, others: list[Any], dims: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`join` of `new` with each of `others` (their columns, or runs that keep their
    `address_row`) in one call, matched pairs made into columns: `(key, new val, other val,
    join(t1, t2), d1 * d2)`, run by run in order."""
    return _join_fused(*new, RT.table(others), dims, T.field_bits(dims))  # type: ignore[no-any-return]


# -- reduce: gather histories -----------------------------------------------------------------
@numba.njit(cache=True)
def key_ranges(qkeys, keys):  # type: ignore[no-untyped-def]
    """For sorted distinct `qkeys`, the `[lo, hi)` range of each in sorted `keys`."""
    n, m = qkeys.shape[0], keys.shape[0]
    lo = np.empty(n, I64)
    hi = np.empty(n, I64)
    pos = 0
    for i in range(n):
        pos = _gallop(keys, pos, m, qkeys[i])
        q = pos
        while q < m and keys[q] == qkeys[i]:
            q += 1
        lo[i] = pos
        hi[i] = q
        pos = q
    return lo, hi


@numba.njit(cache=True)
def _fill(off, cursor, lo, hi, src_v, src_t, src_d, dst_v, dst_t, dst_d):  # type: ignore[no-untyped-def]
    for i in range(lo.shape[0]):
        w = off[i] + cursor[i]
        for j in range(lo[i], hi[i]):
            dst_v[w] = src_v[j]
            dst_t[w] = src_t[j]
            dst_d[w] = src_d[j]
            w += 1
        cursor[i] += hi[i] - lo[i]


@numba.njit(cache=True)
def _regrow4(ok, ov, ot, od, w, need):  # type: ignore[no-untyped-def]
    """Gather buffers with room for `need` updates, the first `w` kept (capacity doubles)."""
    k, v, t, d = _columns4(max(need, 2 * ok.shape[0]))
    k[:w] = ok[:w]
    v[:w] = ov[:w]
    t[:w] = ot[:w]
    d[:w] = od[:w]
    return k, v, t, d


@numba.njit(cache=True, inline="always")
def _put(ok, ov, ot, od, w, i, rv, rt, rd, x):  # type: ignore[no-untyped-def]
    """Gather record `x` of a run for query key `i` at buffer position `w`."""
    ok[w] = i
    ov[w] = rv[x]
    ot[w] = rt[x]
    od[w] = rd[x]


@numba.njit(cache=True)
def _gather_from(qkeys, rk, rv, rt, rd, ok, ov, ot, od, w, i, pos):  # type: ignore[no-untyped-def]
    """Append the updates of one run whose keys are in sorted distinct `qkeys` to the `o*`
    buffers from position `w` (`ok` gets the key's index in `qkeys`), starting at query key
    `i` and run position `pos`. Returns `(w, i, pos)`: `i == len(qkeys)` or `pos == len(rk)`
    when the run is done; otherwise the buffers are full and key `i`, whose updates start at
    `pos`, was not written (grow them and call again with these).

    A merge that gallops on whichever side is behind: a small run against many query keys
    costs O(run log), many run keys against few query keys O(queries log)."""
    n, m = qkeys.shape[0], rk.shape[0]
    cap = ok.shape[0]
    while i < n and pos < m:
        q = qkeys[i]
        r = rk[pos]
        if r < q:
            pos = _gallop(rk, pos, m, q)
        elif q < r:
            i = _gallop(qkeys, i, n, r)
        else:
            start, w0 = pos, w
            while pos < m and rk[pos] == q:
                if w == cap:
                    return w0, i, start
                _put(ok, ov, ot, od, w, i, rv, rt, rd, pos)
                w += 1
                pos += 1
            i += 1
    return w, n, m


@numba.njit(cache=True)
def _gather_buffers(n_keys, n_runs, records):  # type: ignore[no-untyped-def]
    """Gather buffers for `n_keys` query keys over `n_runs` runs of `records` updates.

    A few updates per query key and run (or every record of the runs, when fewer); they double
    when full (`_gather_into`). A round's few keys in a spine of millions of updates must not
    reserve the whole spine: first-touch faults on that reservation were a fifth of a
    batch-100 round at config a."""
    return _columns4(min(records, max(1024, 4 * n_keys * n_runs)))


# -- key filters: which query keys a large run may hold -----------------------------------------
# Bits per distinct key of a run's filter (about 1% false positives with FILTER_PROBES bits set
# in one 64-bit word per key).
FILTER_BITS = 16
FILTER_PROBES = 4
U64 = np.uint64
NO_FILTER = np.zeros(0, U64)


@numba.njit(cache=True, inline="always")
def _filter_word(h, shift):  # type: ignore[no-untyped-def]
    """The word of a filter of 2**(64 - shift) words that hash `h` sets bits in."""
    return h >> U64(shift) if shift < 64 else U64(0)


@numba.njit(cache=True, inline="always")
def _filter_bits(h):  # type: ignore[no-untyped-def]
    bits = U64(0)
    for p in range(FILTER_PROBES):
        bits |= U64(1) << ((h >> U64(6 * p)) & U64(63))
    return bits


@numba.njit(cache=True, inline="always")
def _filter_hash(key):  # type: ignore[no-untyped-def]
    return U64(key) * U64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _filter_shift(words):  # type: ignore[no-untyped-def]
    shift = 64
    while (1 << (64 - shift)) < words:
        shift -= 1
    return shift


@numba.njit(cache=True)
def key_filter(keys):  # type: ignore[no-untyped-def]
    """A blocked Bloom filter of the keys of a run (sorted `keys`): each key sets
    FILTER_PROBES bits of one 64-bit word, so a probe is one memory access. A key it was built
    from always passes (`_may_hold`); another passes with a chance of about 1%.

    Why: a round of a reduce searches each large run of a spine for its keys, and most of the
    runs do not hold most of them (at the reachability benchmark's config a, 78-93% of the
    keys of a batch-100 round are absent from the third to fifth largest runs). A search in
    a run of millions of records costs several cache and TLB misses; a probe costs one."""
    n = keys.shape[0]
    distinct = 0
    for i in range(n):
        if i == 0 or keys[i] != keys[i - 1]:
            distinct += 1
    words = 1
    while words * 64 < distinct * FILTER_BITS:
        words *= 2
    f = np.zeros(words, U64)
    shift = _filter_shift(words)
    for i in range(n):
        if i == 0 or keys[i] != keys[i - 1]:
            h = _filter_hash(keys[i])
            f[_filter_word(h, shift)] |= _filter_bits(h)
    return f


@numba.njit(cache=True)
def _may_hold(qkeys, f):  # type: ignore[no-untyped-def]
    """The indices of the `qkeys` that pass filter `f`, in order."""
    n = qkeys.shape[0]
    out = np.empty(n, I64)
    shift = _filter_shift(f.shape[0])
    m = 0
    for i in range(n):
        h = _filter_hash(qkeys[i])
        bits = _filter_bits(h)
        if f[_filter_word(h, shift)] & bits == bits:
            out[m] = i
            m += 1
    return out[:m]


@numba.njit(cache=True)
def _copy_found(qkeys, lb, rk, rv, rt, rd, ok, ov, ot, od, w, i):  # type: ignore[no-untyped-def]
    """`_gather_from` for a run whose lower bound for each query key is known (`lb`): appends
    from query key `i`; returns `(w, i)`, `i < len(qkeys)` when the buffers are full."""
    n, m = qkeys.shape[0], rk.shape[0]
    cap = ok.shape[0]
    while i < n:
        q = qkeys[i]
        p = lb[i]
        e = p
        while e < m and rk[e] == q:
            e += 1
        if w + e - p > cap:
            return w, i
        for x in range(p, e):
            _put(ok, ov, ot, od, w, i, rv, rt, rd, x)
            w += 1
        i += 1
    return w, n


@numba.njit(cache=True)
def _gather_into(qkeys, runs, ok, ov, ot, od, w):  # type: ignore[no-untyped-def]
    """Append the updates of the runs of the table `runs` whose keys are in `qkeys` to the
    buffers from `w`, in run order, growing them when full. Returns `(w, ok, ov, ot, od)`.

    A run with a key filter (see `key_filter`) is searched only for the query keys that pass
    it. A large run with many records per query key is searched in lockstep (`_lower_bounds`);
    any other is merged with the query keys (`_gather_from`). The search loops themselves
    never reallocate: they stop when full and resume (reassigning the buffers inside them made
    every round slower)."""
    lb = np.empty(0, I64)
    for j in range(runs.shape[0]):
        r = RT.run(runs, j)
        m = r[0].shape[0]
        q = qkeys
        index = np.empty(0, I64)
        filtered = runs[j, RT.FILTER_WORDS] > 0
        if filtered:
            index = _may_hold(qkeys, RT.key_filter(runs, j))
            q = qkeys[index]
        nq = q.shape[0]
        w_run = w
        i = 0
        if _searched(m, nq):
            if lb.shape[0] < nq:
                lb = np.empty(qkeys.shape[0], I64)
            _lower_bounds(r[0], q, lb[:nq])
            while True:
                w, i = _copy_found(q, lb, r[0], r[1], r[2], r[3], ok, ov, ot, od, w, i)
                if i >= nq:
                    break
                ok, ov, ot, od = _regrow4(ok, ov, ot, od, w, 2 * ok.shape[0])
        else:
            pos = 0
            while i < nq and pos < m:
                w, i, pos = _gather_from(q, r[0], r[1], r[2], r[3], ok, ov, ot, od, w, i, pos)
                if i >= nq or pos >= m:
                    break
                ok, ov, ot, od = _regrow4(ok, ov, ot, od, w, w + 1)
        if filtered:
            # Back from positions among the keys that passed to positions in `qkeys`.
            for x in range(w_run, w):
                ok[x] = index[ok[x]]
    return w, ok, ov, ot, od


@numba.njit(cache=True)
def _csr(nkeys, ok, ov, ot, od, w):  # type: ignore[no-untyped-def]
    """The first `w` gathered updates grouped by key index (stable: run order kept).

    A counting sort: key indices are dense in `[0, nkeys)`, so each update's place is its key's
    offset plus the updates of that key placed before it (O(w), where a sort is O(w log w))."""
    off = np.zeros(nkeys + 1, I64)
    for j in range(w):
        off[ok[j] + 1] += 1
    for i in range(nkeys):
        off[i + 1] += off[i]
    cursor = off[:nkeys].copy()
    k, v, t, d = _columns4(w)
    for j in range(w):
        i = ok[j]
        p = cursor[i]
        cursor[i] = p + 1
        k[p] = i
        v[p] = ov[j]
        t[p] = ot[j]
        d[p] = od[j]
    return off, k, v, t, d


def gather_runs(qkeys: np.ndarray, runs: list[Any]) -> tuple[np.ndarray, Arrays]:
    """As `gather`, in one compiled call over the runs (their columns, or runs that keep their
    `address_row`): the runs' matches appended in run order, then grouped."""
    off, k, v, t, d = _gather_tuple(qkeys, RT.table(runs))
    return off, (k, v, t, d)


def gather(qkeys: np.ndarray, runs: list[Arrays]) -> tuple[np.ndarray, Arrays]:
    """The history of each key of sorted distinct `qkeys` across `runs`, as CSR:
    `(offsets, (key_index, vals, times, diffs))` with `offsets[i]:offsets[i+1]` for key i."""
    ranges = [key_ranges(qkeys, r[0]) for r in runs]
    counts = np.zeros(qkeys.shape[0], I64)
    for lo, hi in ranges:
        counts += hi - lo
    off = np.zeros(qkeys.shape[0] + 1, I64)
    np.cumsum(counts, out=off[1:])
    n = int(off[-1])
    v = np.empty(n, I64)
    t = np.empty(n, I64)
    d = np.empty(n, I64)
    cursor = np.zeros(qkeys.shape[0], I64)
    for (lo, hi), r in zip(ranges, runs, strict=True):
        _fill(off, cursor, lo, hi, r[1], r[2], r[3], v, t, d)
    kidx = np.repeat(np.arange(qkeys.shape[0], dtype=I64), counts)
    return off, (kidx, v, t, d)


# -- reduce: interesting times and corrections for counting logic -----------------------------
@numba.njit(cache=True, inline="always")
def _insertion_sort(a, n):  # type: ignore[no-untyped-def]
    """Sort `a[:n]` in place: by insertion when short, by `np.sort` beyond 32 (a key's few
    interesting times: `ndarray.sort` on them cost as much as the rest of the closure, measured
    on the reachability loop's rounds). `planner.float_sums._ascending` is the same for a float
    group's exponents; the planner does not import this module, whose import sets the process's
    malloc arenas (`memory.one_malloc_arena`)."""
    if n > 32:
        a[:n] = np.sort(a[:n])
        return
    for x in range(1, n):
        v = a[x]
        y = x - 1
        while y >= 0 and a[y] > v:
            a[y + 1] = a[y]
            y -= 1
        a[y + 1] = v


# Callers grow a column only when it is full (`if n == a.shape[0]: a = _grow(a, n)`): an
# array assigned in a loop costs reference counting even when it is the same array, and
# done on every push that made a hydration's corrections 5x slower than the work.
@numba.njit(cache=True, inline="always")
def _grow(a, n):  # type: ignore[no-untyped-def]
    if n < a.shape[0]:
        return a
    b = np.empty(max(16, 2 * a.shape[0]), I64)
    b[: a.shape[0]] = a
    return b


@numba.njit(cache=True, inline="always")
def _contains(a, n, x):  # type: ignore[no-untyped-def]
    for i in range(n):
        if a[i] == x:
            return True
    return False


@numba.njit(cache=True, inline="always")
def _trimmed1(a, m):  # type: ignore[no-untyped-def]
    """The first `m` values of `a`: a view while it keeps most of the memory it holds (see
    `trimmed`), a copy otherwise."""
    if 4 * m >= 3 * a.shape[0]:
        return a[:m]
    return a[:m].copy()


@numba.njit(cache=True)
def _interesting(in_off, in_t, in_d, out_off, out_t, seed_off, seed_t, upper, dims, bits):  # type: ignore[no-untyped-def]
    """Per key: the interesting times not beyond `upper` (sorted) with the input's total count
    at each, and the deferred times beyond `upper`. CSR outputs."""
    nkeys = seed_off.shape[0] - 1
    t_off = np.zeros(nkeys + 1, I64)
    # Room for a time per seed from the start: a key usually has no other interesting time,
    # and growing by doubling touches twice the memory in fresh pages (a first touch costs
    # more than the closure itself on these machines, see `_corrections`).
    t_out = np.empty(seed_t.shape[0] + 16, I64)
    n_out = np.empty(seed_t.shape[0] + 16, I64)
    d_off = np.zeros(nkeys + 1, I64)
    d_out = np.empty(16, I64)
    nt = 0
    nd = 0
    ground = np.empty(16, I64)
    active = np.empty(16, I64)
    todo = np.empty(16, I64)
    deferred = np.empty(16, I64)
    for key in range(nkeys):
        s0, s1 = seed_off[key], seed_off[key + 1]
        i0, i1 = in_off[key], in_off[key + 1]
        o0, o1 = out_off[key], out_off[key + 1]
        # The ground set: the history's distinct times that some seed is not above. A time
        # below every seed is below every time the closure makes (each is above a seed), so
        # it never changes a join: with one seed, a few of a key's dozen times are left, and
        # none when the key changed at a single time after all of its history.
        ng = 0
        for j in range(i0, i1 + o1 - o0):
            g = in_t[j] if j < i1 else out_t[o0 + j - i1]
            below_all = True
            for k in range(s0, s1):
                if not T.le(g, seed_t[k], dims, bits):
                    below_all = False
                    break
            if below_all or _contains(ground, ng, g):
                continue
            if ng == ground.shape[0]:
                ground = _grow(ground, ng)
            ground[ng] = g
            ng += 1
        simple = ng == 0 and s1 - s0 == 1
        na = 0
        ndf = 0
        if simple:
            if na == active.shape[0]:
                active = _grow(active, na)
            active[0] = seed_t[s0]
            na = 1
        else:
            ntodo = 0
            for j in range(s0, s1):
                if ntodo == todo.shape[0]:
                    todo = _grow(todo, ntodo)
                todo[ntodo] = seed_t[j]
                ntodo += 1
            while ntodo > 0:
                ntodo -= 1
                t = todo[ntodo]
                if _contains(active, na, t):
                    continue
                if na == active.shape[0]:
                    active = _grow(active, na)
                active[na] = t
                na += 1
                for g_i in range(ng + na):
                    g = ground[g_i] if g_i < ng else active[g_i - ng]
                    if T.le(g, t, dims, bits):
                        continue
                    jt = T.join(t, g, dims, bits)
                    if _contains(active, na, jt) or _contains(deferred, ndf, jt):
                        continue
                    if T.beyond(jt, upper, dims, bits):
                        if ndf == deferred.shape[0]:
                            deferred = _grow(deferred, ndf)
                        deferred[ndf] = jt
                        ndf += 1
                    else:
                        if ntodo == todo.shape[0]:
                            todo = _grow(todo, ntodo)
                        todo[ntodo] = jt
                        ntodo += 1
            _insertion_sort(active, na)
        for a in range(na):
            t = active[a]
            total = 0
            for j in range(i0, i1):
                if T.le(in_t[j], t, dims, bits):
                    total += in_d[j]
            if nt == t_out.shape[0]:
                t_out = _grow(t_out, nt)
            if nt == n_out.shape[0]:
                n_out = _grow(n_out, nt)
            t_out[nt] = t
            n_out[nt] = total
            nt += 1
        t_off[key + 1] = nt
        for a in range(ndf):
            if nd == d_out.shape[0]:
                d_out = _grow(d_out, nd)
            d_out[nd] = deferred[a]
            nd += 1
        d_off[key + 1] = nd
    return t_off, _trimmed1(t_out, nt), _trimmed1(n_out, nt), d_off, _trimmed1(d_out, nd)


@numba.njit(cache=True)
def _corrections(t_off, t_out, want_v, want_m, out_off, out_v, out_t, out_d, dims, bits):  # type: ignore[no-untyped-def]
    """Per key and interesting time (in order): `want - (stored output + earlier corrections)`.
    `want_m[i] == 0` means the logic wants no output at that time. Returns (key, val, time, diff)."""
    nkeys = t_off.shape[0] - 1
    # At most one correction per interesting time and value, and a key's values are its
    # stored outputs' and the wanted ones: columns of that bound from the start (untouched
    # room costs nothing), so the loop does not reallocate them (each doubling is fresh pages,
    # and a first touch costs about 4 ns per value written on these virtual machines). The
    # bound is quadratic in a key's times, so it is capped (one key at many epochs at once).
    # Room for one correction per key of the first-round path below is kept free whatever the
    # rest writes (`fast_left`), so that path writes without a check (a possible reassignment
    # in it made it 3x slower).
    bound = 0
    fast_left = 0
    for key in range(nkeys):
        nt = t_off[key + 1] - t_off[key]
        no = out_off[key + 1] - out_off[key]
        if no == 0 and nt == 1:
            fast_left += 1
        else:
            bound += nt * (no + nt)
    ck, cv, ct, cd = _columns4(min(bound, 4 * t_out.shape[0] + 1024) + fast_left + 16)
    nc = 0
    vals = np.empty(16, I64)
    for key in range(nkeys):
        o0, o1 = out_off[key], out_off[key + 1]
        c_start = nc
        if o0 == o1 and t_off[key + 1] - t_off[key] == 1:
            # No stored output and one interesting time (a key's first round, as in every
            # key of a hydration): the correction is the wanted output itself. The general
            # path below cost 5x as much per key for the same answer.
            ti = t_off[key]
            fast_left -= 1
            if want_m[ti] != 0:
                ck[nc] = key
                cv[nc] = want_v[ti]
                ct[nc] = t_out[ti]
                cd[nc] = want_m[ti]
                nc += 1
            continue
        for ti in range(t_off[key], t_off[key + 1]):
            t = t_out[ti]
            # The candidate values: stored outputs, earlier corrections, and the wanted one.
            nv = 0
            for j in range(o0, o1):
                if not _contains(vals, nv, out_v[j]):
                    if nv == vals.shape[0]:
                        vals = _grow(vals, nv)
                    vals[nv] = out_v[j]
                    nv += 1
            for j in range(c_start, nc):
                if not _contains(vals, nv, cv[j]):
                    if nv == vals.shape[0]:
                        vals = _grow(vals, nv)
                    vals[nv] = cv[j]
                    nv += 1
            if want_m[ti] != 0 and not _contains(vals, nv, want_v[ti]):
                if nv == vals.shape[0]:
                    vals = _grow(vals, nv)
                vals[nv] = want_v[ti]
                nv += 1
            for x in range(nv):
                v = vals[x]
                have = 0
                for j in range(o0, o1):
                    if out_v[j] == v and T.le(out_t[j], t, dims, bits):
                        have += out_d[j]
                for j in range(c_start, nc):
                    if cv[j] == v and T.le(ct[j], t, dims, bits):
                        have += cd[j]
                want = want_m[ti] if want_v[ti] == v else 0
                d = want - have
                if d != 0:
                    if nc + fast_left >= ck.shape[0]:  # only past the cap on the bound
                        # Doubling suffices: the columns hold at least `fast_left` + nc + 1.
                        ck = _grow(ck, nc + fast_left)
                        cv = _grow(cv, nc + fast_left)
                        ct = _grow(ct, nc + fast_left)
                        cd = _grow(cd, nc + fast_left)
                    ck[nc] = key
                    cv[nc] = v
                    ct[nc] = t
                    cd[nc] = d
                    nc += 1
    return _trimmed1(ck, nc), _trimmed1(cv, nc), _trimmed1(ct, nc), _trimmed1(cd, nc)


Counting = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def distinct_logic(unit: int) -> Counting:
    """`(val, mult)` wanted for each total: `(unit, 1)` when the total is positive."""

    def f(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full(totals.shape[0], unit, I64), (totals > 0).astype(I64)

    return f


def count_logic(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(total, 1)` for each non-zero total (the count is its own value id)."""
    return totals.copy(), (totals != 0).astype(I64)


def threshold_logic(unit: int, g: Callable[[int], int]) -> Counting:
    """`(unit, g(total))` for each non-zero total; `g` runs once per distinct total."""

    def f(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        uniq, inv = np.unique(totals, return_inverse=True)
        ms = np.array([g(int(n)) if n != 0 else 0 for n in uniq.tolist()], dtype=I64)
        return np.full(totals.shape[0], unit, I64), ms[inv].astype(I64)

    return f


def reduce_counting(
    in_off: np.ndarray,
    ins: Arrays,
    out_off: np.ndarray,
    outs: Arrays,
    seed_off: np.ndarray,
    seed_t: np.ndarray,
    upper: np.ndarray,
    logic: Counting,
    dims: int,
) -> tuple[Arrays, np.ndarray, np.ndarray]:
    """One round of a counting reduce over CSR histories (see `gather`).

    `ins`/`outs` are `(key_index, vals, times, diffs)`; seeds are each key's new or now-ready
    times, distinct per key. Returns the corrections `(key_index, val, time, diff)` and the
    deferred times as CSR `(offsets, times)`."""
    bits = T.field_bits(dims)
    t_off, t_out, totals, d_off, d_out = _interesting(
        in_off, ins[2], ins[3], out_off, outs[2], seed_off, seed_t, upper, dims, bits
    )
    want_v, want_m = logic(totals)
    # The reference emits nothing at a time where the total is zero, whatever the logic says.
    want_m = np.where(totals != 0, want_m, 0).astype(I64)
    corr = _corrections(
        t_off, t_out, want_v.astype(I64), want_m, out_off, outs[1], outs[2], outs[3], dims, bits
    )
    return corr, d_off, d_out


# Counting logic the kernel evaluates itself (no Python call per round): the output at a time
# is a function of the key's total count there.
DISTINCT = 0  # (unit, 1) when the total is positive
COUNT = 1  # (total, 1) when the total is non-zero


@numba.njit(cache=True)
def _reduce_compiled(qkeys, in_off, in_t, in_d, out_off, out_v, out_t, out_d, seed_off, seed_t,
                     upper, mode, unit, dims, bits):  # type: ignore[no-untyped-def]
    t_off, t_out, totals, d_off, d_out = _interesting(
        in_off, in_t, in_d, out_off, out_t, seed_off, seed_t, upper, dims, bits
    )
    n = totals.shape[0]
    want_v = np.empty(n, I64)
    want_m = np.zeros(n, I64)
    for i in range(n):
        c = totals[i]
        if mode == DISTINCT:
            want_v[i] = unit
            if c > 0:
                want_m[i] = 1
        else:
            want_v[i] = c
            if c != 0:
                want_m[i] = 1
    ck, cv, ct, cd = _corrections(t_off, t_out, want_v, want_m, out_off, out_v, out_t, out_d, dims, bits)
    for j in range(ck.shape[0]):
        ck[j] = qkeys[ck[j]]
    dk = np.empty(d_out.shape[0], I64)
    for i in range(qkeys.shape[0]):
        for j in range(d_off[i], d_off[i + 1]):
            dk[j] = qkeys[i]
    return ck, cv, ct, cd, dk, d_out


def reduce_compiled(
    qkeys: np.ndarray,
    in_off: np.ndarray,
    ins: Arrays,
    out_off: np.ndarray,
    outs: Arrays,
    seed_off: np.ndarray,
    seed_t: np.ndarray,
    upper: np.ndarray,
    mode: int,
    unit: int,
    dims: int,
) -> tuple[Arrays, np.ndarray, np.ndarray]:
    """`reduce_counting` for the logic `mode` names (`DISTINCT`, `COUNT`), in one compiled call.

    Returns the corrections `(key id, val, time, diff)` and the deferred `(key id, time)` pairs."""
    ck, cv, ct, cd, dk, dt = _reduce_compiled(
        qkeys, in_off, ins[2], ins[3], out_off, outs[1], outs[2], outs[3], seed_off, seed_t,
        upper, mode, unit, dims, T.field_bits(dims),
    )
    return (ck, cv, ct, cd), dk, dt


@numba.njit(cache=True)
def seed_csr(keys, times):  # type: ignore[no-untyped-def]
    """Distinct `(key, time)` seeds grouped by key: `(qkeys, offsets, times)`, keys sorted."""
    k, t = dedup_pairs(keys, times)
    n = k.shape[0]
    nq = 0
    for j in range(n):
        if j == 0 or k[j] != k[j - 1]:
            nq += 1
    q = np.empty(nq, I64)
    off = np.empty(nq + 1, I64)
    i = 0
    for j in range(n):
        if j == 0 or k[j] != k[j - 1]:
            q[i] = k[j]
            off[i] = j
            i += 1
    off[nq] = n
    return q, off, t




@numba.njit(cache=True)
def _gather_tuple(qkeys, runs):  # type: ignore[no-untyped-def]
    """`gather_runs` over the runs of a table, inside one compiled call."""
    records = 0
    for j in range(runs.shape[0]):
        records += runs[j, RT.RECORDS]
    ok, ov, ot, od = _gather_buffers(qkeys.shape[0], runs.shape[0], records)
    w, ok, ov, ot, od = _gather_into(qkeys, runs, ok, ov, ot, od, 0)
    return _csr(qkeys.shape[0], ok, ov, ot, od, w)


@numba.njit(cache=True)
def _history_sums(qkeys, seed_off, seed_t, runs, sums, general, unit, outputs, dims, bits):  # type: ignore[no-untyped-def]
    """For each query key not yet `general`: add the diffs of its updates in the runs of the
    table `runs` to `sums`, or mark it `general` when one of them is at a time not `<=` its
    seed (or, in `outputs`, has a value other than `unit`). Runs are searched as `_gather_into` does:
    only for the keys that pass a run's key filter, in lockstep in a large run with many
    records per key, by galloping from the last match otherwise."""
    lb = np.empty(0, I64)
    for j in range(runs.shape[0]):
        rk, rv, rt, rd = RT.run(runs, j)
        m = rk.shape[0]
        if m == 0:
            continue
        q = qkeys
        filtered = runs[j, RT.FILTER_WORDS] > 0
        index = np.empty(0, I64)
        if filtered:
            index = _may_hold(qkeys, RT.key_filter(runs, j))
            q = qkeys[index]
        nq = q.shape[0]
        lockstep = _searched(m, nq)
        if lockstep:
            if lb.shape[0] < nq:
                lb = np.empty(qkeys.shape[0], I64)
            _lower_bounds(rk, q, lb[:nq])
        pos = 0
        for x in range(nq):
            i = index[x] if filtered else x
            key = q[x]
            p = lb[x] if lockstep else _gallop(rk, pos, m, key)
            if general[i]:
                while p < m and rk[p] == key:
                    p += 1
                pos = p
                continue
            seed = seed_t[seed_off[i]]
            s = 0
            while p < m and rk[p] == key:
                if not T.le(rt[p], seed, dims, bits) or (outputs and rv[p] != unit):
                    general[i] = True
                s += rd[p]
                p += 1
            sums[i] += s
            pos = p
    return sums


@numba.njit(cache=True)
def _distinct_round(qkeys, seed_off, seed_t, ins, outs, upper, unit, dims, bits):  # type: ignore[no-untyped-def]
    """`_reduce_compiled` of a distinct, where most keys changed at one time that all of
    their history precedes (every key of a hydration's rounds): such a key's only interesting
    time is its seed, where it wants `unit` once if its input's total is positive, so its
    correction is that minus its stored outputs' total, summed straight from the runs
    (`_history_sums`) with nothing gathered. Only the other keys' histories are gathered for
    the general closure; both kinds of corrections come out in key order."""
    nq = qkeys.shape[0]
    general = np.zeros(nq, np.bool_)
    for i in range(nq):
        general[i] = seed_off[i + 1] - seed_off[i] != 1
    totals = _history_sums(qkeys, seed_off, seed_t, ins, np.zeros(nq, I64), general, unit,
                           False, dims, bits)
    have = _history_sums(qkeys, seed_off, seed_t, outs, np.zeros(nq, I64), general, unit,
                         True, dims, bits)
    n_general = 0
    n_seeds = 0
    for i in range(nq):
        if general[i]:
            n_general += 1
            n_seeds += seed_off[i + 1] - seed_off[i]
    gq = np.empty(n_general, I64)
    g_off = np.empty(n_general + 1, I64)
    g_t = np.empty(n_seeds, I64)
    a = w = 0
    for i in range(nq):
        if general[i]:
            gq[a] = qkeys[i]
            g_off[a] = w
            for x in range(seed_off[i], seed_off[i + 1]):
                g_t[w] = seed_t[x]
                w += 1
            a += 1
    g_off[n_general] = w
    if n_general:
        in_off, _, _, in_t, in_d = _gather_tuple(gq, ins)
        out_off, _, out_v, out_t, out_d = _gather_tuple(gq, outs)
        gk, gv, gt, gd, dk, dt = _reduce_compiled(
            gq, in_off, in_t, in_d, out_off, out_v, out_t, out_d, g_off, g_t,
            upper, DISTINCT, unit, dims, bits,
        )
    else:
        gk, gv, gt, gd, dk, dt = _columns4(0) + (np.empty(0, I64), np.empty(0, I64))
    ck, cv, ct, cd = _columns4(nq - n_general + gk.shape[0])
    nc = 0
    g = 0
    for i in range(nq):
        if general[i]:
            while g < gk.shape[0] and gk[g] == qkeys[i]:
                ck[nc], cv[nc], ct[nc], cd[nc] = gk[g], gv[g], gt[g], gd[g]
                nc += 1
                g += 1
            continue
        d = (1 if totals[i] > 0 else 0) - have[i]
        if d != 0:
            ck[nc], cv[nc], ct[nc], cd[nc] = qkeys[i], unit, seed_t[seed_off[i]], d
            nc += 1
    return _trimmed1(ck, nc), _trimmed1(cv, nc), _trimmed1(ct, nc), _trimmed1(cd, nc), dk, dt


@numba.njit(cache=True, nogil=True)
def _reduce_fused(keys, times, ins, outs, left_k, left_t, upper, mode, unit, dims, bits):  # type: ignore[no-untyped-def]
    qkeys, seed_off, seed_t = seed_csr(keys, times)
    in_off, _, _, in_t, in_d = _gather_tuple(qkeys, ins)
    out_off, _, out_v, out_t, out_d = _gather_tuple(qkeys, outs)
    ck, cv, ct, cd, dk, dt = _reduce_compiled(
        qkeys, in_off, in_t, in_d, out_off, out_v, out_t, out_d, seed_off, seed_t,
        upper, mode, unit, dims, bits,
    )
    pk, pt = dedup_pairs(dk, dt)
    pk, pt = merge_pairs(left_k, left_t, pk, pt)
    return ck, cv, ct, cd, pk, pt


# A distinct's round of at least SIMPLE_MIN seeds takes `_reduce_fused_distinct`, which takes
# `_distinct_round` when at least SIMPLE_SHARE of its keys changed at a single time (all of a
# hydration's; two thirds of a batch-100 loop round's, where most keys' histories still reach
# past their seed, so a second search for them costs more than it saves). Smaller rounds keep
# `_reduce_fused` itself: compiled with the distinct path inside, it ran the loops' rounds
# about a tenth slower.
SIMPLE_MIN = 1024
SIMPLE_SHARE = 0.9


@numba.njit(cache=True, nogil=True)
def _reduce_fused_distinct(keys, times, ins, outs, left_k, left_t, upper, unit, dims, bits, simple_share):  # type: ignore[no-untyped-def]
    qkeys, seed_off, seed_t = seed_csr(keys, times)
    nq = qkeys.shape[0]
    if not nq or nq - (seed_off[nq] - nq) < simple_share * nq:
        return _reduce_fused(keys, times, ins, outs, left_k, left_t, upper, DISTINCT, unit, dims, bits)
    ck, cv, ct, cd, dk, dt = _distinct_round(qkeys, seed_off, seed_t, ins, outs, upper, unit, dims, bits)
    pk, pt = dedup_pairs(dk, dt)
    pk, pt = merge_pairs(left_k, left_t, pk, pt)
    return ck, cv, ct, cd, pk, pt


@numba.njit(cache=True)
def _round_seeds(new, pend_k, pend_t, upper, dims, bits):  # type: ignore[no-untyped-def]
    n = pend_k.shape[0]
    later = np.empty(n, np.bool_)
    n_later = 0
    for i in range(n):
        later[i] = T.beyond(pend_t[i], upper, dims, bits)
        n_later += later[i]
    left_k, left_t = np.empty(n_later, I64), np.empty(n_later, I64)
    ready_k, ready_t = np.empty(n - n_later, I64), np.empty(n - n_later, I64)
    a = r = 0
    for i in range(n):
        if later[i]:
            left_k[a], left_t[a] = pend_k[i], pend_t[i]
            a += 1
        else:
            ready_k[r], ready_t[r] = pend_k[i], pend_t[i]
            r += 1
    keys, times = ready_k, ready_t
    for j in range(new.shape[0]):
        if new[j, RT.RECORDS]:
            # a run's keys are in order: its pairs take `dedup_pairs`'s grouped path
            nk, nt = dedup_pairs(RT.column(new, j, RT.KEYS), RT.column(new, j, RT.TIMES))
            keys, times = merge_pairs(keys, times, nk, nt)
    return keys, times, left_k, left_t


def round_seeds(
    new: list[Any], pend_k: np.ndarray, pend_t: np.ndarray, upper: np.ndarray, dims: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A reduce round's seeds, in one call: the `(key, time)` pairs of the `new` runs (their
    columns, or runs that keep their `address_row`) and of the pending pairs (sorted
    distinct) not beyond `upper`, sorted distinct; and the pending pairs beyond it, which stay
    pending. Returns `(keys, times, left_k, left_t)`. What it replaced (a compiled test of
    the pending times, four NumPy masks, one deduplication per run and the merges of
    `union_pairs`) was 4-5% of the reachability loop's batch 100 at config b."""
    return _round_seeds(RT.table(new), pend_k, pend_t, upper, dims, T.field_bits(dims))  # type: ignore[no-any-return]


@numba.njit(cache=True)
def _reduce_whole(new, pend_k, pend_t, ins, outs, upper, mode, unit, dims, bits):  # type: ignore[no-untyped-def]
    keys, times, left_k, left_t = _round_seeds(new, pend_k, pend_t, upper, dims, bits)
    if keys.shape[0] == 0:
        z = np.empty(0, I64)
        return z, z, z, z, left_k, left_t, minimal_times(left_t, dims, bits)
    ck, cv, ct, cd, pk, pt = _reduce_fused(
        keys, times, ins, outs, left_k, left_t, upper, mode, unit, dims, bits
    )
    return ck, cv, ct, cd, pk, pt, minimal_times(pt, dims, bits)


def reduce_whole(
    new: list[Any],
    pend_k: np.ndarray,
    pend_t: np.ndarray,
    inputs: list[Any],
    outputs: list[Any],
    upper: np.ndarray,
    mode: int,
    unit: int,
    dims: int,
    in_filters: list[np.ndarray] | None,
    out_filters: list[np.ndarray] | None,
) -> tuple[Arrays, np.ndarray, np.ndarray, np.ndarray]:
    """A whole round of a compiled reduce in one call, from what the operator holds: the new
    runs and the pending pairs, made seeds as `round_seeds` makes them, then `reduce_fused`.
    Returns the corrections, the pending pairs after the round (sorted distinct) and their
    minimal times (the operator's capabilities). At the reachability
    loop's batch 1 the glue this replaces (splitting the pending pairs, uniting the seeds,
    the antichain of what stays pending: five calls and their NumPy) cost a third as much
    as the kernel."""
    ck, cv, ct, cd, pk, pt, mins = _reduce_whole(
        RT.table(new), pend_k, pend_t, RT.table(inputs, in_filters), RT.table(outputs, out_filters),
        upper, mode, unit, dims, T.field_bits(dims),
    )
    return (ck, cv, ct, cd), pk, pt, mins


def reduce_fused(
    keys: np.ndarray,
    times: np.ndarray,
    inputs: list[Any],
    outputs: list[Any],
    left_k: np.ndarray,
    left_t: np.ndarray,
    upper: np.ndarray,
    mode: int,
    unit: int,
    dims: int,
    in_filters: list[np.ndarray] | None = None,
    out_filters: list[np.ndarray] | None = None,
) -> tuple[Arrays, np.ndarray, np.ndarray]:
    """A whole round of a compiled reduce (`mode`) in one call: the seeds `(keys, times)`
    (sorted distinct, as `union_pairs` gives) grouped by key, each key's histories gathered
    from the input and output runs (their columns, or runs that keep their
    `address_row`, passed as a `run_table`; each searched only for the keys that pass its key
    filter, where `in_filters` / `out_filters` give one), `reduce_compiled`,
    and the deferred pairs united with `(left_k, left_t)` (sorted distinct). A loop round of a
    few updates made ten compiled calls and their Python glue before; this is one.

    Returns the corrections `(key id, val, time, diff)` and the pending `(key id, time)`
    pairs, sorted and distinct."""
    spines = (RT.table(inputs, in_filters), RT.table(outputs, out_filters))
    if mode == DISTINCT and keys.shape[0] >= SIMPLE_MIN:
        ck, cv, ct, cd, pk, pt = _reduce_fused_distinct(
            keys, times, *spines, left_k, left_t, upper, unit, dims, T.field_bits(dims),
            SIMPLE_SHARE,
        )
    else:
        ck, cv, ct, cd, pk, pt = _reduce_fused(
            keys, times, *spines, left_k, left_t, upper, mode, unit, dims, T.field_bits(dims),
        )
    return (ck, cv, ct, cd), pk, pt


@numba.njit(cache=True)
def minimal_times(times, dims, bits):  # type: ignore[no-untyped-def]
    """The minimal elements (an antichain) of packed `times` under the product order, sorted.

    One pass, keeping the antichain of the times so far: a time some kept time is `<=` to
    (itself, when repeated) is skipped; otherwise it evicts the kept times it is `<=` to and
    joins them. O(n * m) for an antichain of m: a reduce's pending times number thousands
    with a hundred epochs in flight in a loop, their antichain a handful, and sorting them
    first to dedupe (`np.unique`) cost more than the whole pass."""
    keep = np.empty(8, I64)
    m = 0
    for i in range(times.shape[0]):
        t = times[i]
        dominated = False
        for j in range(m):
            if T.le(keep[j], t, dims, bits):
                dominated = True
                break
        if dominated:
            continue
        w = 0
        for j in range(m):
            if not T.le(t, keep[j], dims, bits):
                keep[w] = keep[j]
                w += 1
        m = w
        if m == keep.shape[0]:
            keep = _grow(keep, m)
        keep[m] = t
        m += 1
    out = keep[:m].copy()
    _insertion_sort(out, m)
    return out


def warm_up() -> None:
    """Load (or compile) every kernel the executor calls once, so no timed call pays for it
    (`join`, `beyond_all` and `reduce_compiled` are now the fused kernels' step-by-step
    references in the tests, and left out)."""
    z = np.zeros(0, I64)
    one = np.ones(2, I64)
    # A large consolidate as words, and by radix (keys spread over two levels and a large
    # group, too wide for a word).
    big = np.arange(RADIX_MIN, dtype=I64)[::-1] // 40 << 9
    consolidate(big, big % 3, big % 5, np.ones(RADIX_MIN, I64))
    consolidate(big << 44, big % 3, big % 5, np.ones(RADIX_MIN, I64))
    # The merge of two sorted halves of words (a batch of parallel.MIN_SORTED or more).
    word_sort.merge_unpack_sums(one, one, 0, 0, 0, 0, 3, 2, 1, 1, 1, 1, *_columns4(4))
    # Too wide for a word until the times are ranked (`word_sort.time_ranks`).
    consolidate(big << 20, big % 3, (big % 5) << 40, np.ones(RADIX_MIN, I64))
    _radix_first(big.copy(), big % 3, big % 5, np.ones(RADIX_MIN, I64), *_columns4(RADIX_MIN))
    # A read-only column (an Arrow buffer's, or a NumPy view of one) is its own signature.
    frozen = np.ones(2, I64)
    frozen.flags.writeable = False
    within(frozen, 0, 2)
    # A run table's addresses, with a key filter.
    RT.table([(one, one, one, one)], [key_filter(one)])
    for dims in (1, 2, 3):
        f = np.zeros(1, I64)
        consolidate(one, one, one, one)
        consolidate(one[::-1].copy(), one, one, one)
        merge((one, one, one, one), (one, one, one, one), f, dims)
        merge((one, one, one, one), (one, one, one, one), z, dims)
        merge_many([(one, one, one, one)] * 2, f, dims)
        merge_many([(one, one, one, one)] * 2, z, dims)
        merge_into((one, one, one, one), (one, one, one, one), f, dims, _columns4(4), 0)
        join_fused((one, one, one, one), [(one, one, one, one)] * 2, dims)
        split_beyond(one, one, one, f, dims, T.field_bits(dims))
        within(one, 0, 2)
        count_beyond(one, f, dims, T.field_bits(dims))
        _may_hold(one, key_filter(one))
        pair_fields(one, 0, -1, 0, 2, 1)
        pair_halves(one, 0, 2, 1)
        dedup_pairs(one, one)
        union_pairs([(one, one), (one, one)])
        minimal_times(one, dims, T.field_bits(dims))
        off = np.array([0, 2], I64)
        reduce_counting(
            off, (z, one, one, one), off, (z, one, one, one), off, one, f, count_logic, dims
        )
        gather(np.array([1], I64), [(one, one, one, one)])
        q, so, st = seed_csr(one, one)
        gather_runs(q, [(one, one, one, one)])
        runs = [(one, one, one, one)] * 2
        for mode in (DISTINCT, COUNT):
            reduce_fused(q, st, runs, [], z, z, f, mode, 1, dims)
            if mode == DISTINCT:  # a hydration's large rounds
                _reduce_fused_distinct(q, st, RT.table(runs), RT.table([]), z, z, f, 1, dims,
                                       T.field_bits(dims), 0.0)
            reduce_whole(runs, z, z, runs, [], f, mode, 1, dims, [NO_FILTER] * 2, [])
        round_seeds(runs, one, one, f, dims)
