"""Exact per-group sums of float64 columns: compiled passes over the values.

A SUM or AVG over DOUBLE is kept exactly (`planner.aggregate._ExactSum`) so that an
incremental retraction cancels its insertion bit for bit: the state holds the counts of
values, NaNs and infinities, and the exact sum of the finite values, scaled by 2**1074 (every
double is an integer multiple of 2**-1074) as a Python int. Invariant: `group_sums` returns,
for every group, exactly the fields that adding each of the group's values would leave (no
rounding anywhere); `planner.aggregate_columns._float_sums_reference` is its slow, obviously
correct NumPy twin, and tests/test_float_sums.py requires identical results on seeded random
columns.

How: rows arrive sorted by group, and each double is read by its bits: its class (NaN, ±inf,
zero, subnormal, normal), its 53-bit integer mantissa M and its exponent E (the value is
±M * 2**E, E >= -1074). A first pass (`_counts`) counts values, NaNs and infinities, and
checks whether every finite value is an integer below 2**62, summing them as int64: the
result when, as in the reference, max|x| * rows < 2**62 (quantities stored as DOUBLE). Else a
second pass (`_terms`) adds each signed M into int64 halves per (group, E): the high half
M >> 26 (|.| < 2**27) and the low half M & (2**26 - 1), each exact for 2**36 values. A
group's buckets live in one dense accumulator indexed by E + 1074; at the group's end the
touched ones are folded, in ascending E, into int64 terms, each kept below 2**62 (one for
a group of a few values) and reset. Only the terms become Python ints (object arrays, C
loops), shifted by their exponents and added per group.

`group_sums_by_code` takes each row's group as a code below a small radix instead of sorted
runs (a GROUP BY of a few flags over millions of rows): the same passes over the rows in their
own order, every (code, exponent) bucket live at once, folded per code at the end. Its
invariant is `group_sums`'s over the rows stably sorted by code (tests compare the two).
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np

I64 = np.int64
# doubles' exponents, shifted to start at 0: E + 1074 for E in -1074..971
_EXPONENTS = 2046
_LOW_BITS = 26
_LOW_MASK = (1 << _LOW_BITS) - 1
_FRACTION = (1 << 52) - 1
_INT_LIMIT = 2.0 ** 62
_HIGH_LIMIT = 1 << 35
_FOLD_LIMIT = 1 << 62


@numba.njit(cache=True)
def _grow(a, size):  # type: ignore[no-untyped-def]
    b = np.empty(size, I64)
    b[: a.shape[0]] = a
    return b


@numba.njit(cache=True)
def _ascending(a, k):  # type: ignore[no-untyped-def]
    """Sort a[:k] in place (an insertion sort: a group touches a few exponents)."""
    if k > 32:
        a[:k] = np.sort(a[:k])
        return
    for i in range(1, k):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@numba.njit(cache=True, inline="always")
def _split(b):  # type: ignore[no-untyped-def]
    """A finite double's bits -> (|M|, E + 1074) with the value +-M * 2**E, |M| < 2**53
    (M = 0 for ±0.0)."""
    biased = (b >> 52) & 0x7FF
    frac = b & _FRACTION
    if biased == 0:
        return frac, 0  # zero or subnormal: frac * 2**-1074
    return frac | (1 << 52), biased - 1  # (2**52 + frac) * 2**(biased - 1075)


@numba.njit(cache=True, inline="always")
def _integer(b):  # type: ignore[no-untyped-def]
    """A finite double's bits -> (whether it is an integer of magnitude below 2**62, that
    integer); ±0.0 is (True, 0)."""
    mant, e = _split(b)
    if mant == 0:
        return True, 0
    shift = 1074 - e  # |x| = mant * 2**-shift
    if shift <= 0:
        if shift < -9:
            return False, 0  # |x| >= 2**62
        return True, (-mant if b < 0 else mant) << -shift
    if shift > 52 or mant & ((1 << shift) - 1):
        return False, 0
    return True, (-mant if b < 0 else mant) >> shift


@numba.njit(cache=True, inline="always")
def _count_arrays(size):  # type: ignore[no-untyped-def]
    """Zeroed per-group n, nan, pinf, ninf and int sums."""
    return (np.zeros(size, I64), np.zeros(size, I64), np.zeros(size, I64), np.zeros(size, I64),
            np.zeros(size, I64))


@numba.njit(cache=True)
def _counts(vals, bits, valid, starts):  # type: ignore[no-untyped-def]
    """Per group: counts (n, nan, pinf, ninf) and the int64 sums of the values, the latter
    meaningful only if the returned flag says every finite value is an integer and
    max|x| * rows < 2**62. `bits` is `vals` viewed as int64; `valid` is empty when every value
    is present."""
    rows = vals.shape[0]
    groups = starts.shape[0]
    checked = valid.shape[0] != 0
    n, nan, pinf, ninf, ints = _count_arrays(groups)
    integral = True
    top = 0.0
    for g in range(groups):
        end = starts[g + 1] if g + 1 < groups else rows
        cn = cnan = cpinf = cninf = 0
        isum = 0
        for i in range(starts[g], end):
            if checked and not valid[i]:
                continue
            cn += 1
            b = bits[i]
            if (b >> 52) & 0x7FF == 0x7FF:
                if b & _FRACTION != 0:
                    cnan += 1
                elif b < 0:
                    cninf += 1
                else:
                    cpinf += 1
                continue
            a = abs(vals[i])
            if a > top:
                top = a
            if integral:
                integral, v = _integer(b)
                isum += v
        n[g], nan[g], pinf[g], ninf[g], ints[g] = cn, cnan, cpinf, cninf, isum
    return n, nan, pinf, ninf, ints, integral and top * rows < _INT_LIMIT


@numba.njit(cache=True)
def _fold(acc_hi, acc_lo, order, k, g, out_g, out_s, out_v, m):  # type: ignore[no-untyped-def]
    """Group g's buckets `order[:k]` (ascending exponents) appended as terms at `m` and
    reset to 0; returns the (maybe grown) term arrays and the new count. The buckets are
    folded into one int64 while the sum stays below 2**62 (a group of a few values is then
    one term); a bucket too large for an int64 (|high| >= 2**35) is two terms."""
    if m + 2 * k > out_g.shape[0]:
        size = max(2 * out_g.shape[0], m + 2 * k)
        out_g, out_s, out_v = _grow(out_g, size), _grow(out_s, size), _grow(out_v, size)
    base = -1
    acc = 0
    for j in range(k):
        e = order[j]
        hi, lo = acc_hi[e], acc_lo[e]
        acc_hi[e] = acc_lo[e] = 0
        if abs(hi) >= _HIGH_LIMIT or lo >= _HIGH_LIMIT:
            out_g[m], out_s[m], out_v[m] = g, e + _LOW_BITS, hi
            out_g[m + 1], out_s[m + 1], out_v[m + 1] = g, e, lo
            m += 2
            continue
        v = (hi << _LOW_BITS) + lo  # |v| < 2**61 + 2**35
        if base >= 0:
            d = e - base
            if d < 62 and abs(v) <= (_FOLD_LIMIT - abs(acc)) >> d:
                acc += v << d
                continue
            out_g[m], out_s[m], out_v[m] = g, base, acc
            m += 1
        base, acc = e, v
    if base >= 0:
        out_g[m], out_s[m], out_v[m] = g, base, acc
        m += 1
    return out_g, out_s, out_v, m


@numba.njit(cache=True)
def _terms(bits, valid, starts):  # type: ignore[no-untyped-def]
    """Per group, terms (group, shift, value): the group's exact sum of its finite values
    times 2**1074 is the sum of its terms' value << shift; the first `m` of the returned
    arrays. `valid` is empty when every value is present."""
    rows = bits.shape[0]
    groups = starts.shape[0]
    checked = valid.shape[0] != 0
    acc_hi = np.zeros(_EXPONENTS, I64)
    acc_lo = np.zeros(_EXPONENTS, I64)
    touched = np.zeros(_EXPONENTS, np.bool_)
    order = np.empty(_EXPONENTS, I64)
    cap = min(rows, 1024 + 2 * groups)
    out_g = np.empty(cap, I64)
    out_s = np.empty(cap, I64)
    out_v = np.empty(cap, I64)
    m = 0
    for g in range(groups):
        end = starts[g + 1] if g + 1 < groups else rows
        k = 0
        for i in range(starts[g], end):
            if checked and not valid[i]:
                continue
            b = bits[i]
            if (b >> 52) & 0x7FF == 0x7FF:
                continue  # NaN, ±inf: counted by `_counts`
            mant, e = _split(b)
            if mant == 0:
                continue  # ±0.0 adds nothing
            if b < 0:
                mant = -mant
            acc_hi[e] += mant >> _LOW_BITS
            acc_lo[e] += mant & _LOW_MASK
            if not touched[e]:
                touched[e] = True
                order[k] = e
                k += 1
        for j in range(k):
            touched[order[j]] = False
        _ascending(order, k)
        out_g, out_s, out_v, m = _fold(acc_hi, acc_lo, order, k, g, out_g, out_s, out_v, m)
    return out_g, out_s, out_v, m


@numba.njit(cache=True, nogil=True)
def _counts_by_code(vals, bits, valid, codes, radix):  # type: ignore[no-untyped-def]
    """`_counts` with row i in group `codes[i]` (< radix) instead of runs: per code, in one
    pass over the rows in their own order (no sort, no gather)."""
    rows = vals.shape[0]
    checked = valid.shape[0] != 0
    n, nan, pinf, ninf, ints = _count_arrays(radix)
    integral = True
    top = 0.0
    for i in range(rows):
        if checked and not valid[i]:
            continue
        c = codes[i]
        n[c] += 1
        b = bits[i]
        if (b >> 52) & 0x7FF == 0x7FF:
            if b & _FRACTION != 0:
                nan[c] += 1
            elif b < 0:
                ninf[c] += 1
            else:
                pinf[c] += 1
            continue
        a = abs(vals[i])
        if a > top:
            top = a
        if integral:
            integral, v = _integer(b)
            ints[c] += v
    return n, nan, pinf, ninf, ints, integral and top * rows < _INT_LIMIT


@numba.njit(cache=True, nogil=True)
def _terms_by_code(bits, valid, codes, radix):  # type: ignore[no-untyped-def]
    """`_terms` with row i in group `codes[i]` (< radix): one pair of buckets per (code,
    exponent), all live at once (radix * 32 KiB), folded per code at the end; the terms'
    groups are codes."""
    rows = bits.shape[0]
    checked = valid.shape[0] != 0
    acc_hi = np.zeros((radix, _EXPONENTS), I64)
    acc_lo = np.zeros((radix, _EXPONENTS), I64)
    for i in range(rows):
        if checked and not valid[i]:
            continue
        b = bits[i]
        if (b >> 52) & 0x7FF == 0x7FF:
            continue
        mant, e = _split(b)
        if mant == 0:
            continue
        if b < 0:
            mant = -mant
        c = codes[i]
        acc_hi[c, e] += mant >> _LOW_BITS
        acc_lo[c, e] += mant & _LOW_MASK
    order = np.empty(_EXPONENTS, I64)
    cap = 1024 + 2 * radix
    out_g = np.empty(cap, I64)
    out_s = np.empty(cap, I64)
    out_v = np.empty(cap, I64)
    m = 0
    for c in range(radix):
        hi_c, lo_c = acc_hi[c], acc_lo[c]
        k = 0
        for e in range(_EXPONENTS):
            # a bucket whose values cancelled adds nothing: skipping it changes no sum
            if hi_c[e] != 0 or lo_c[e] != 0:
                order[k] = e
                k += 1
        out_g, out_s, out_v, m = _fold(hi_c, lo_c, order, k, c, out_g, out_s, out_v, m)
    return out_g, out_s, out_v, m


def group_sums(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                          np.ndarray | None, list[Any] | None]:
    """Per group of `vals` (float64, sorted by group; `starts`: each group's first position,
    strictly ascending from 0, every group non-empty), over the values where `valid` (None:
    all): the counts of values, NaNs, +inf and -inf, and the exact sum of the finite values,
    either as int64 (`ints`, when every finite value is an integer and max|x| * rows < 2**62)
    or as Python ints scaled by 2**1074 (`scaled`); the other is None."""
    vals = np.ascontiguousarray(vals, dtype=np.float64)
    valid_arg = np.zeros(0, np.bool_) if valid is None else np.ascontiguousarray(valid, np.bool_)
    bits, starts = vals.view(I64), np.ascontiguousarray(starts, dtype=I64)
    n, nan, pinf, ninf, ints, fast = _counts(vals, bits, valid_arg, starts)
    if fast:
        return n, nan, pinf, ninf, ints, None
    g_of, shift, value, m = _terms(bits, valid_arg, starts)
    groups = len(starts)
    if not m:
        return n, nan, pinf, ninf, None, [0] * groups
    g_of = g_of[:m]
    total = value[:m].astype(object) << shift[:m].astype(object)
    firsts = np.flatnonzero(np.concatenate(([True], g_of[1:] != g_of[:-1])))
    per_group = np.zeros(groups, dtype=object)
    per_group[g_of[firsts]] = np.add.reduceat(total, firsts)
    return n, nan, pinf, ninf, None, per_group.tolist()


def group_sums_by_code(vals: np.ndarray, valid: np.ndarray | None, codes: np.ndarray,
                       radix: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                            np.ndarray | None, list[Any] | None]:
    """`group_sums` with row i in group `codes[i]` (int64, 0 <= code < radix) instead of
    rows sorted by group: the same fields, per code (a code without rows has zero counts and
    sum). For few codes (its buckets take radix * 32 KiB): a GROUP BY of a few flags over
    millions of rows is summed in one pass over the rows as they are."""
    vals = np.ascontiguousarray(vals, dtype=np.float64)
    valid_arg = np.zeros(0, np.bool_) if valid is None else np.ascontiguousarray(valid, np.bool_)
    bits, codes = vals.view(I64), np.ascontiguousarray(codes, dtype=I64)
    n, nan, pinf, ninf, ints, fast = _counts_by_code(vals, bits, valid_arg, codes, radix)
    if fast:
        return n, nan, pinf, ninf, ints, None
    g_of, shift, value, m = _terms_by_code(bits, valid_arg, codes, radix)
    per_code = np.zeros(radix, dtype=object)
    if m:
        g_of = g_of[:m]
        total = value[:m].astype(object) << shift[:m].astype(object)
        firsts = np.flatnonzero(np.concatenate(([True], g_of[1:] != g_of[:-1])))
        per_code[g_of[firsts]] = np.add.reduceat(total, firsts)
    return n, nan, pinf, ninf, None, per_code.tolist()
