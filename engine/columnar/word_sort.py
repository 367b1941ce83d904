"""Consolidation by sorting one machine word per update.

Invariant: when the spans of a batch's keys, vals, times and diffs (each column's maximum minus
its minimum) need at most 63 bits together, each update packs into one non-negative int64 word,
`(key - kmin, val - vmin, time - tmin, diff - dmin)` from the high bits down, and the order of
the words is the order of `(key, val, time)` (diff last, which only sorts equal triples among
themselves). Sorting the words and summing the diffs of each run of equal `(key, val, time)`
bits is then exactly `kernels.consolidate`: sorted by `(key, val, time)`, equal triples summed,
zeros dropped.

Why: NumPy sorts int64 with a vectorised (AVX-512/AVX2) quicksort at about 12 ns per value on
this machine, where moving four columns through radix passes costs 90-150 ns per update. Most
large batches fit the word: a loop round's updates share one time and one val (an arrangement
of a collection by itself), and ids span far fewer than 64 bits.

Where the times' span is too wide but the batch holds at most `RANKED_TIMES` distinct times (a
loop with many epochs in flight: pair-id keys of 40 bits, times of 32 bits, and a hundred
distinct times), each time is replaced in the word by its rank among them (`time_ranks`: the
same order, a few bits) and mapped back after the sort. Batches that fit neither way are left
to the radix or comparison sort (`None`).
"""

from __future__ import annotations

import numba
import numpy as np

from engine.columnar import parallel

I64 = np.int64


@numba.njit(cache=True, inline="always")
def _widen(x, lo, hi):  # type: ignore[no-untyped-def]
    return min(x, lo), max(x, hi)


@numba.njit(cache=True, nogil=True)
def spans(k, v, t, d):  # type: ignore[no-untyped-def]
    """Minimum and maximum of each of the four columns, in one pass (`n >= 1`)."""
    k0, k1, v0, v1, t0, t1, d0, d1 = k[0], k[0], v[0], v[0], t[0], t[0], d[0], d[0]
    for i in range(1, k.shape[0]):
        k0, k1 = _widen(k[i], k0, k1)
        v0, v1 = _widen(v[i], v0, v1)
        t0, t1 = _widen(t[i], t0, t1)
        d0, d1 = _widen(d[i], d0, d1)
    return k0, k1, v0, v1, t0, t1, d0, d1


@numba.njit(cache=True, nogil=True)
def pack_words(k, v, t, d, kmin, vmin, tmin, dmin, sk, sv, st, out):  # type: ignore[no-untyped-def]
    """Each update's word into `out` (shifts `sk > sv > st`, the diff in the lowest bits)."""
    for i in range(k.shape[0]):
        out[i] = ((k[i] - kmin) << sk) | ((v[i] - vmin) << sv) | ((t[i] - tmin) << st) | (d[i] - dmin)


@numba.njit(cache=True, nogil=True)
def unpack_sums(w, kmin, vmin, tmin, dmin, sk, sv, st, mv, mt, md, ok, ov, ot, od):  # type: ignore[no-untyped-def]
    """Sorted words back to columns `o*`, each run of equal `(key, val, time)` one update with
    the sum of its diffs, zero sums dropped; returns the count written."""
    n = w.shape[0]
    m = 0
    i = 0
    while i < n:
        triple = w[i] >> st
        s = (w[i] & md) + dmin
        j = i + 1
        while j < n and (w[j] >> st) == triple:
            s += (w[j] & md) + dmin
            j += 1
        if s != 0:
            ok[m] = (w[i] >> sk) + kmin
            ov[m] = ((w[i] >> sv) & mv) + vmin
            ot[m] = (triple & mt) + tmin
            od[m] = s
            m += 1
        i = j
    return m


@numba.njit(cache=True, nogil=True)
def merge_unpack_sums(a, b, kmin, vmin, tmin, dmin, sk, sv, st, mv, mt, md, ok, ov, ot, od):  # type: ignore[no-untyped-def]
    """`unpack_sums` of the merge of two sorted word arrays, without making the merge: runs
    of equal `(key, val, time)` may span both."""
    na, nb = a.shape[0], b.shape[0]
    i = j = m = 0
    while i < na or j < nb:
        w = a[i] if j == nb or (i < na and a[i] <= b[j]) else b[j]
        triple = w >> st
        s = 0
        while i < na and (a[i] >> st) == triple:
            s += (a[i] & md) + dmin
            i += 1
        while j < nb and (b[j] >> st) == triple:
            s += (b[j] & md) + dmin
            j += 1
        if s != 0:
            ok[m] = (w >> sk) + kmin
            ov[m] = ((w >> sv) & mv) + vmin
            ot[m] = (triple & mt) + tmin
            od[m] = s
            m += 1
    return m


# The most distinct times a batch's times are ranked for (`time_ranks`).
RANKED_TIMES = 1024
_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _slot(x, shift):  # type: ignore[no-untyped-def]
    # Fibonacci hashing: the high bits of the product spread packed times (which differ in
    # a few middle bits) over the table.
    return np.int64((np.uint64(x) * _FIBONACCI) >> np.uint64(shift))


@numba.njit(cache=True)
def time_ranks(t, limit):  # type: ignore[no-untyped-def]
    """`(ranks, distinct)`: `distinct` the sorted distinct values of `t` and `ranks[i]` the
    index of `t[i]` in it (so rank order is time order), when `t` holds at most `limit`
    distinct values; two empty arrays otherwise. One pass through an open-addressing table of
    at least twice as many slots as values it may hold, then the few distinct values sorted."""
    bits = 4
    while (1 << bits) < 2 * min(t.shape[0], limit):
        bits += 1
    mask = (1 << bits) - 1
    shift = 64 - bits
    table = np.empty(1 << bits, I64)
    rank = np.full(1 << bits, -1, I64)  # -1: a free slot
    distinct = np.empty(limit, I64)
    m = 0
    for i in range(t.shape[0]):
        x = t[i]
        j = _slot(x, shift)
        while rank[j] >= 0 and table[j] != x:
            j = (j + 1) & mask
        if rank[j] < 0:
            if m == limit:
                return np.empty(0, I64), np.empty(0, I64)
            table[j] = x
            rank[j] = 0
            distinct[m] = x
            m += 1
    distinct = np.sort(distinct[:m])
    for r in range(m):
        j = _slot(distinct[r], shift)
        while table[j] != distinct[r]:
            j = (j + 1) & mask
        rank[j] = r
    ranks = np.empty(t.shape[0], I64)
    for i in range(t.shape[0]):
        j = _slot(t[i], shift)
        while table[j] != t[i]:
            j = (j + 1) & mask
        ranks[i] = rank[j]
    return ranks, distinct


def _width(span: int) -> int:
    return span.bit_length()


def consolidate_words(
    keys: np.ndarray, vals: np.ndarray, times: np.ndarray, diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Four columns of `len(keys)` whose first returned count are the consolidated updates
    (see the module docstring); None when the spans need more than 63 bits, even with the
    times ranked.

    From `parallel.MIN_SORTED` updates on two cores: each half's spans, words and sort on
    one (NumPy's sort lets go of the GIL), then the two sorted halves are cut at one triple
    and each part's merge unpacked on one; the second part's updates are moved up after the
    first's."""
    n = keys.shape[0]
    split = parallel.THREADS >= 2 and n >= parallel.MIN_SORTED
    h = n // 2 if split else n
    if split:
        lo, hi = parallel.both(lambda: spans(keys[:h], vals[:h], times[:h], diffs[:h]),
                               lambda: spans(keys[h:], vals[h:], times[h:], diffs[h:]))
        k0, k1, v0, v1, t0, t1, d0, d1 = (
            int(min(x, y)) if c % 2 == 0 else int(max(x, y))
            for c, (x, y) in enumerate(zip(lo, hi, strict=True))
        )
    else:
        k0, k1, v0, v1, t0, t1, d0, d1 = (int(x) for x in spans(keys, vals, times, diffs))
    wk, wv, wt, wd = _width(k1 - k0), _width(v1 - v0), _width(t1 - t0), _width(d1 - d0)
    distinct = None
    if wk + wv + wt + wd > 63:
        # The times by rank, where that fits (on one core: a batch of a loop round).
        if split or wk + wv + wd + _width(RANKED_TIMES - 1) > 63:
            return None
        ranks, distinct = time_ranks(times, RANKED_TIMES)
        if not distinct.shape[0] or wk + wv + wd + _width(distinct.shape[0] - 1) > 63:
            return None
        # The ranks are exactly 0 .. len(distinct) - 1.
        times, t0, wt = ranks, 0, _width(distinct.shape[0] - 1)
    st = wd
    sv = st + wt
    sk = sv + wv
    masks = ((1 << wv) - 1, (1 << wt) - 1, (1 << wd) - 1)
    words = np.empty(n, I64)
    ok, ov, ot, od = np.empty(n, I64), np.empty(n, I64), np.empty(n, I64), np.empty(n, I64)

    def sorted_words(lo: int, hi: int) -> None:
        pack_words(keys[lo:hi], vals[lo:hi], times[lo:hi], diffs[lo:hi], k0, v0, t0, d0,
                   sk, sv, st, words[lo:hi])
        words[lo:hi].sort()

    if not split:
        sorted_words(0, n)
        m = unpack_sums(words, k0, v0, t0, d0, sk, sv, st, *masks, ok, ov, ot, od)
        if distinct is not None:
            ot[:m] = distinct[ot[:m]]  # ranks back to times
        return ok, ov, ot, od, m
    parallel.both(lambda: sorted_words(0, h), lambda: sorted_words(h, n))
    a, b = words[:h], words[h:]
    # Cut both halves before the first word of the triple in the middle of `a`: every run
    # of equal triples then lies wholly in one part.
    cut_word = int(a[h // 2] >> st) << st
    i = int(np.searchsorted(a, cut_word, "left"))
    j = int(np.searchsorted(b, cut_word, "left"))
    first = i + j

    def part(a: np.ndarray, b: np.ndarray, at: int) -> int:
        return merge_unpack_sums(a, b, k0, v0, t0, d0, sk, sv, st, *masks,
                                 ok[at:], ov[at:], ot[at:], od[at:])

    m1, m2 = parallel.both(lambda: part(a[:i], b[:j], 0), lambda: part(a[i:], b[j:], first))
    if m1 < first:
        for c in (ok, ov, ot, od):
            c[m1:m1 + m2] = c[first:first + m2]
    return ok, ov, ot, od, m1 + m2
