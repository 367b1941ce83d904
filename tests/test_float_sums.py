"""planner.float_sums (the compiled exact float sums of a hydration) against its references.

`aggregate_columns._float_sums_compiled` (numba; `_float_sums` uses it on large columns) must
give exactly what `_float_sums_reference` (NumPy, about fifteen passes) gives: the same counts
of values, NaNs and infinities, and the same exact sums, int64 or scaled by 2**1074, bit for
bit (an incremental retraction must cancel them exactly). Seeded random columns mix NaN, ±inf, -0.0,
subnormals, huge and tiny magnitudes, integer-valued doubles, random bit patterns and NULLs,
cut into one group, many small groups, or groups of random sizes (some all NULL, all NaN or
all zero). On small inputs both must also equal `_ExactSum.add` of each value, the per-row
definition.
"""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import numpy as np
import pytest

from planner.aggregate import _ExactSum
from planner.aggregate_columns import FloatSums, _float_sums_compiled, _float_sums_reference

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308,
           2.225073858507201e-308, 1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0,
           0.1, 2.0 ** 62, 2.0 ** 53 + 2, -(2.0 ** 61), 1e-300, 1e300]


def _value(kind: str, rng: random.Random) -> float:
    if rng.random() < 0.05:
        return rng.choice(SPECIAL)
    if kind == "integral":  # integer-valued doubles: the int64 path, unless one is too large
        return float(rng.randint(-(10 ** rng.randint(0, 12)), 10 ** rng.randint(0, 12)))
    if kind == "prices":  # two decimals, as TPC-H's prices and discounts
        return round(rng.uniform(-1e5, 1e5), rng.choice([0, 1, 2]))
    if kind == "bits":  # any double at all: every exponent, subnormals, NaN payloads
        return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
    if kind == "tiny":  # subnormals and the smallest normals
        return rng.choice([-1, 1]) * rng.randint(0, 2 ** 54) * 5e-324
    if kind == "huge":  # sums beyond DOUBLE's range
        return rng.choice([-1, 1]) * rng.uniform(1e306, 1.7976931348623157e308)
    if kind == "same":  # one exponent, mantissas near 2**53: int64 halves past 2**35
        return rng.uniform(1.99, 2.0)
    return rng.choice([-1, 1]) * rng.random() * 2.0 ** rng.randint(-1074, 1023)


def _starts(rng: random.Random, n: int) -> np.ndarray:
    shape = rng.choice(["one", "many", "random"])
    if shape == "one" or n == 1:
        return np.zeros(1, dtype=np.int64)
    if shape == "many":
        cuts = sorted(set(range(0, n, rng.randint(1, 3))))
    else:
        cuts = sorted({0} | set(rng.sample(range(1, n), rng.randint(0, min(n - 1, 40)))))
    return np.array(cuts, dtype=np.int64)


def _column(rng: random.Random) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    n = rng.choice([1, 2, 7, 50, 300, 3000, 20000])
    kind = rng.choice(["integral", "prices", "bits", "tiny", "huge", "same", "mixed"])
    vals = np.array([_value(kind, rng) for _ in range(n)], dtype=np.float64)
    starts = _starts(rng, n)
    ends = np.append(starts[1:], n)
    # some groups all NaN, all zero (of either sign) or all NULL
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        r = rng.random()
        if r < 0.05:
            vals[a:b] = math.nan
        elif r < 0.1:
            vals[a:b] = rng.choice([0.0, -0.0])
    valid = None
    if rng.random() < 0.5:
        valid = np.array([rng.random() > rng.choice([0.0, 0.1, 0.5, 1.0]) for _ in range(n)])
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            if rng.random() < 0.1:
                valid[a:b] = False
    return vals, valid, starts


def _same(a: FloatSums, b: FloatSums) -> None:
    for f in ("n", "nan", "pinf", "ninf"):
        x, y = getattr(a, f), getattr(b, f)
        # a count that is 0 in every group is held as None (by both)
        assert (x is None) == (y is None), f
        if f != "n" and x is None:
            continue
        assert x.dtype == y.dtype == np.int64 and np.array_equal(x, y), f
        assert f == "n" or x.any(), f
    assert (a.ints is None) == (b.ints is None)
    if a.ints is not None:
        assert np.array_equal(a.ints, b.ints)
    assert a.scaled == b.scaled
    if a.scaled is not None:
        assert all(type(s) is int for s in b.scaled)  # noqa: E721 (exactly int, not NumPy's)


@pytest.mark.parametrize("seed", range(60))
def test_compiled_float_sums_equal_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    vals, valid, starts = _column(rng)
    fast = _float_sums_compiled(vals, valid, starts)
    ref = _float_sums_reference(vals, valid, starts)
    assert ref is not None and fast is not None
    _same(ref, fast)
    if len(vals) <= 300:
        ends = np.append(starts[1:], len(vals))
        totals = _totals(fast)
        for g, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            acc = _ExactSum()
            for i in range(a, b):
                if valid is None or valid[i]:
                    acc.add(float(vals[i]), 1)
            want = (acc.n, acc.n_float, acc.scaled, acc.nan, acc.pinf, acc.ninf)
            assert fast.fields(g) == want
            # a group of NULLs only totals NULL, one with a NaN or an infinity as IEEE adds
            assert totals[g] == repr(acc.total())
        assert totals == _totals(ref)


def _totals(s: FloatSums) -> list[Any]:
    return [repr(t) for t in s.totals()]


@pytest.mark.parametrize("case", ["integral", "fraction", "too large", "nan only", "one value"])
def test_compiled_float_sums_choose_the_int64_path_as_the_reference(case: str) -> None:
    vals = {"integral": [1.0, -3.0, 2.0 ** 40, 0.0, -0.0, math.nan, math.inf, 7.0],
            "fraction": [1.0, 2.5, 3.0, 4.0],
            "too large": [1.0, 2.0 ** 61, 3.0, 4.0],
            "nan only": [math.nan, math.nan, -math.inf, math.inf],
            "one value": [0.1]}[case]
    arr = np.array(vals, dtype=np.float64)
    starts = np.array([0, 2], dtype=np.int64)[: 1 if len(arr) < 2 else 2]
    fast, ref = _float_sums_compiled(arr, None, starts), _float_sums_reference(arr, None, starts)
    assert ref is not None and fast is not None
    _same(ref, fast)
    assert (fast.ints is not None) == (case in ("integral", "nan only"))


def test_compiled_float_sums_on_a_large_column() -> None:
    """A column large enough for the reference's sort path and the kernel's sorted exponents
    (more than 32 per group), groups of very different sizes."""
    rng = np.random.default_rng(7)
    n = 200_000
    vals = rng.standard_normal(n) * np.exp2(rng.integers(-1074, 1000, n).astype(np.float64))
    vals[rng.integers(0, n, 100)] = np.nan
    vals[rng.integers(0, n, 100)] = -0.0
    starts = np.unique(np.concatenate(([0], rng.integers(1, n, 5000), [n - 1]))).astype(np.int64)
    valid = rng.random(n) > 0.2
    for v in (None, valid):
        fast, ref = _float_sums_compiled(vals, v, starts), _float_sums_reference(vals, v, starts)
        assert ref is not None and fast is not None
        _same(ref, fast)


@pytest.mark.parametrize("seed", range(40))
def test_float_sums_by_code_equal_the_sums_of_sorted_runs(seed: int) -> None:
    """`group_sums_by_code` (rows in their own order, group = code) gives per code exactly
    what `group_sums` gives per run once the rows are stably sorted by code; a code without
    rows has zero counts and sum."""
    from planner.float_sums import group_sums, group_sums_by_code

    rng = random.Random(seed)
    vals, valid, _ = _column(rng)
    n = len(vals)
    radix = rng.choice([1, 2, 5, 40, 256])
    codes = np.array([rng.randrange(radix) for _ in range(n)], dtype=np.int64)
    if rng.random() < 0.3:
        codes[:] = rng.randrange(radix)  # every row in one code, the others empty
    got = FloatSums(*group_sums_by_code(vals, valid, codes, radix))
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_codes[1:] != sorted_codes[:-1])))
    runs = FloatSums(*group_sums(vals[order], None if valid is None else valid[order], starts))
    present = sorted_codes[starts].tolist()
    for c in range(radix):
        fields = got.fields(c)
        if c in present:
            assert fields == runs.fields(present.index(c)), c
        else:
            assert fields == (0, 0, 0, 0, 0, 0), c
