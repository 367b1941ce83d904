"""Per-group computations shared by the naive evaluator and the engine lowering.

Invariant: ``reduce_group`` and ``topk_rows`` are pure functions of a group's accumulated
contents (rows with positive counts), so recomputing a group from scratch after any update is
correct; this is the "basic" aggregation strategy (no accumulable/hierarchical tricks), which
also makes MIN/MAX correct when the current extreme is deleted. A group whose SUM leaves the
range of its SQL type, or whose ``single`` (a scalar subquery's value) has several rows, raises
EvaluationError, as DuckDB raises for the same data.

The reference strategy above is what the general reduce runs (inside WITH RECURSIVE loops,
where times are partially ordered). Where times are totally ordered, the lowering uses the
incremental states at the end of this module (`IncrementalAggregates`, `IncrementalTopK`):
after any sequence of changes a state's output equals ``reduce_group`` / ``topk_rows`` of the
group's accumulated rows (floats: exactly rounded sums, see there), at O(1) or O(log n) per
change; tests/test_reduce_total.py checks one against the other.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction
from itertools import repeat
from operator import countOf, itemgetter, ne
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from engine.canonical import canonical
from engine.operators.reduce_total import APPROX_BYTES_PER_RECORD
from planner.errors import EvaluationError
from planner.ir import Agg, SortKey
from planner.scalar import DECIMAL_CONTEXT, INT_RANGE, decimal_ps, norm_type, row_key, sort_key
from planner.sorted_counts import SortedCounts

SUBQUERY_ROWS = "more than one row returned by a subquery used as an expression"


def reduce_group(aggs: tuple[Agg, ...], rows: Iterable[tuple[tuple[Any, ...], int]]) -> tuple:
    rows = list(rows)
    out: list[Any] = []
    for a in aggs:
        if a.func == "count_star":
            out.append(sum(c for _, c in rows))
            continue
        if a.func == "single":
            # the value of a scalar subquery for one outer key: NULLs count as rows here
            if sum(c for _, c in rows) != 1:
                raise EvaluationError(SUBQUERY_ROWS, a.label or None)
            assert a.arg is not None
            out.append(rows[0][0][a.arg])
            continue
        assert a.arg is not None
        if a.func in STATISTICS:
            out.append(_statistic(a, rows))
            continue
        if a.distinct:
            vals = [(v, 1) for v in {r[a.arg] for r, _ in rows if r[a.arg] is not None}]
        else:
            vals = [(r[a.arg], c) for r, c in rows if r[a.arg] is not None]
        if a.func == "count":
            out.append(sum(c for _, c in vals))
        elif not vals:
            out.append(None)
        elif a.func == "sum":
            out.append(_finish_sum(a, _sum(vals)))
        elif a.func == "avg":
            out.append(_finish_avg(a, _sum(vals), sum(c for _, c in vals)))
        elif a.func == "min":
            out.append(min((v for v, _ in vals), key=sort_key))
        elif a.func == "max":
            out.append(max((v for v, _ in vals), key=sort_key))
        else:
            raise AssertionError(a.func)
    return tuple(out)


STATISTICS = {"var_pop", "var_samp", "stddev_pop", "stddev_samp", "covar_pop", "covar_samp",
              "corr"}


def _statistic(a: Agg, rows: list[tuple[tuple[Any, ...], int]]) -> Any:
    """A statistical aggregate from the group's sums of powers (n, sum x, sum y, sum x^2,
    sum y^2, sum xy), kept exactly as Fractions so that no cancellation error enters before
    the one rounding to DOUBLE (DuckDB uses Welford's streaming update; both agree to within
    float rounding). Rows where an argument is NULL do not count."""
    x, y = a.arg, a.arg2
    assert x is not None
    if y is None:
        if a.distinct:
            pairs = [((v, v), 1) for v in {r[x] for r, _ in rows if r[x] is not None}]
        else:
            pairs = [((r[x], r[x]), c) for r, c in rows if r[x] is not None]
    else:
        pairs = [((r[x], r[y]), c) for r, c in rows if r[x] is not None and r[y] is not None]
    n = sum(c for _, c in pairs)
    samp = a.func.endswith("_samp")
    if n == 0 or (samp and n == 1):
        return None
    if any(isinstance(v, float) and not math.isfinite(v) for (p, q), _ in pairs for v in (p, q)):
        return math.nan
    sx = sy = sxx = syy = sxy = Fraction(0)
    for (p, q), c in pairs:
        fp, fq = Fraction(p), Fraction(q)
        sx += c * fp
        sy += c * fq
        sxx += c * fp * fp
        syy += c * fq * fq
        sxy += c * fp * fq
    return _finish_statistic(a, n, 0, sx, sy, sxx, syy, sxy)


def _finish_statistic(a: Agg, n: int, nonfinite: int, sx: Fraction, sy: Fraction,
                      sxx: Fraction, syy: Fraction, sxy: Fraction) -> Any:
    """The statistic from the sums of powers of the `n` rows that count (`nonfinite` of them
    hold an infinity or NaN, which make the result NaN)."""
    samp = a.func.endswith("_samp")
    if n == 0 or (samp and n == 1):
        return None
    if nonfinite:
        return math.nan
    # n^2 times the population (co)variances
    cxy, cxx, cyy = n * sxy - sx * sy, n * sxx - sx * sx, n * syy - sy * sy
    div = n * (n - 1) if samp else n * n
    if a.func == "corr":
        if cxx == 0 or cyy == 0:
            return math.nan
        try:
            return float(cxy) / math.sqrt(float(cxx)) / math.sqrt(float(cyy))
        except OverflowError:  # sums past the doubles: the ratio, exact, then its root
            r = math.sqrt(float(cxy * cxy / (cxx * cyy)))
            return r if cxy >= 0 else -r
    if a.func.startswith("covar"):
        return _double(cxy / div)
    var = cxx / div
    # (a variance past the doubles is infinite, and so is its root, as DuckDB's)
    return math.sqrt(_double(var)) if a.func.startswith("stddev") else _double(var)


def _double(x: Fraction) -> float:
    """`x` as a double: past their range an infinity, as DuckDB's statistics give (float()
    raises OverflowError there, which failed the view)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _finish_sum(a: Agg, total: Any) -> Any:
    """SUM's result: the total, checked against the range of its integer type, or the digits
    of its DECIMAL type (DECIMAL(38,s): DuckDB's "Overflow in SUM of DECIMAL")."""
    if isinstance(total, decimal.Decimal):
        p, s = decimal_ps(a.type)
        if total.is_finite() and total.copy_abs() >= decimal.Decimal(10) ** (p - s):
            raise EvaluationError(f"overflow in SUM: the result {total} does not fit "
                                  f"{norm_type(a.type)}", a.label or None)
        return total
    if not isinstance(total, int):
        return total
    t = norm_type(a.type)
    if t in INT_RANGE and not (INT_RANGE[t][0] <= total <= INT_RANGE[t][1]):
        raise EvaluationError(f"integer overflow in SUM: the result {total} is out of "
                              f"range for {t}", a.label or None)
    return total


def _finish_avg(a: Agg, total: Any, n: int) -> float:
    """AVG's result from its exact total and count, as DuckDB rounds it. An ungrouped,
    non-DISTINCT AVG of a DECIMAL or an integer is the total's double over the count (`avg(x)`
    of 1.12, 1.12, 1.12 is 1.1199999999999999; of three 2**53 + 1 BIGINTs 2**53 + 2); a grouped
    or DISTINCT one is its hash aggregate's finalize: of a DECIMAL the unscaled sum over `count
    * 10**scale` in extended precision (1.12), of an integer the exact quotient, rounded once
    (2**53 + 1)."""
    if a.decimal is not None and (a.grouped or a.distinct):
        width, scale = a.decimal
        unscaled = int(DECIMAL_CONTEXT.scaleb(decimal.Decimal(total), scale))
        return decimal_average(unscaled, n, width, scale)
    if isinstance(total, int) and (a.grouped or a.distinct):
        return total / n
    return float(total) / n


_U64 = 2**64 - 1


def _hugeint_to(x: int, real: Any) -> Any:
    """DuckDB's cast of a HUGEINT to a floating type `real`: its high 64 bits times 2**64 - 1
    (not 2**64: exact in 80-bit long double, where it differs) plus its low 64 bits."""
    upper, lower = x >> 64, x & _U64
    if upper == -1:
        return -real(_U64 - lower) - real(1)
    return real(lower) + real(upper) * real(_U64)


def decimal_average(unscaled: int, n: int, width: int, scale: int) -> float:
    """DuckDB's grouped AVG of a DECIMAL(width, scale) from the sum of its unscaled values and
    their count (`AverageDecimalBindData`): the divisor `n * 10**scale` with 10**scale as its
    double; a width up to 4 (SMALLINT storage) sums in BIGINT and divides in double, a wider one
    sums in HUGEINT and divides in long double (80-bit on x86-64, NumPy's `longdouble`)."""
    ten = _hugeint_to(10**scale, float)
    if width <= 4:
        return float(unscaled) / (float(n) * ten)
    wide = np.longdouble
    return float(_hugeint_to(unscaled, wide) / (wide(n) * wide(ten)))


def as_grouped(group: tuple[int, ...], aggs: tuple[Agg, ...]) -> tuple[Agg, ...]:
    """The aggregates of a Reduce by `group`, each AVG marked grouped when the Reduce has keys
    (after decorrelation: a correlated subquery's AVG is grouped by its outer columns, as
    DuckDB's plan of it is)."""
    if not group or not any(a.func == "avg" for a in aggs):
        return aggs
    return tuple(replace(a, grouped=True) if a.func == "avg" else a for a in aggs)


def _sum(vals: list[tuple[Any, int]]) -> Any:
    if isinstance(vals[0][0], float):
        terms = [float(v) * c for v, c in vals]
        if all(math.isfinite(x) for x in terms):
            return math.fsum(terms)
        # fsum raises on inf + -inf; IEEE (and DuckDB) give NaN, or the infinity.
        return sum(x for x in terms if not math.isfinite(x))
    total: Any = 0
    for v, c in vals:
        if isinstance(v, decimal.Decimal):  # no rounding to Python's default 28 digits
            total = DECIMAL_CONTEXT.add(total, DECIMAL_CONTEXT.multiply(v, c))
        else:
            total += v * c
    return total


def topk_rows(rows: Iterable[tuple[tuple[Any, ...], int]], order: tuple[SortKey, ...],
              limit: int | None, offset: int) -> list[tuple[tuple[Any, ...], int]]:
    """The rows ranked [offset, offset+limit) under SQL ORDER BY (ties broken canonically)."""
    rs = sorted(rows, key=lambda rc: row_key(rc[0]))
    for k in reversed(order):
        c = k.col
        # with reverse=True the larger null rank sorts first: choose ranks accordingly
        nr_null = 0 if k.nulls_first != k.desc else 1
        rs.sort(key=lambda rc, c=c, nr=nr_null: (nr if rc[0][c] is None else 1 - nr,
                                                  sort_key(rc[0][c])), reverse=k.desc)
    out: list[tuple[tuple[Any, ...], int]] = []
    skip = offset
    left = limit if limit is not None else math.inf
    for r, cnt in rs:
        if left <= 0:
            break
        if skip >= cnt:
            skip -= cnt
            continue
        take = min(cnt - skip, left)
        skip = 0
        left -= take
        out.append((r, int(take)))
    return out


# -- incremental state per group, for reduces over totally ordered times ----------------------
#
# `engine.operators.reduce_total` keeps one state per group and hands it each time's changes.
# The states below give, after any sequence of changes, exactly what `reduce_group` and
# `topk_rows` give for the group's accumulated rows, using the same final formulas, at O(1)
# (COUNT, SUM, AVG and the statistics: abelian sums) or O(log n) (MIN, MAX, DISTINCT through a
# value -> count map and a sorted index; top-k: a sorted index walked to the window) per change.
#
# Sums are kept exactly, so removing a value leaves no residue: integers as ints, DECIMALs in
# DECIMAL_CONTEXT (100 digits: exact for DuckDB's 38), and finite floats as integers scaled by
# 2**1074 (every finite double is a multiple of 2**-1074), rounded once to a double at output
# (int / int is correctly rounded, as math.fsum is); infinities and NaNs are counted. The
# statistics keep Fractions, as `_statistic` does.

_FLOAT_SCALE_BITS = 1074
# A new group's first batch larger than this builds its sorted indexes by one sort.
BULK_BUILD = 32
# `AggregateState.absorb` merges a MIN/MAX argument's arrays (O(both) in C) rather than count
# the batch's values one by one (O(batch) in Python, O(log n) each) from this many distinct
# values in the batch, when they are at least a MERGE_ARRAYS_RATIO-th of the group's.
MERGE_ARRAYS = 64
MERGE_ARRAYS_RATIO = 16
# A large batch puts rows in a top-k group's reserve when they are at least 1/RESERVE_MERGE of
# it: merging is a NumPy sort and a list of the reserve's rows, about what indexing one row in
# every RESERVE_MERGE reserved rows costs (an order key and a SortedList insertion each).
RESERVE_MERGE = 64
_FLOAT_SCALE = 1 << _FLOAT_SCALE_BITS
# Column kinds of the bulk paths, and the smallest float column worth NumPy's overhead.
_INT_KIND = {int}
_FLOAT_KIND = {float}
_DECIMAL_KIND = {decimal.Decimal}
_DATE_KIND = {datetime.date}
_BULK_FLOATS = 64
_ONE = {1}
_row = itemgetter(0)
_diff = itemgetter(1)


def _log2_cost(n: int) -> int:
    """Records a binary search over `n` entries reads (for the work counters)."""
    return n.bit_length() + 1


class _ExactSum:
    """A SUM over values that may be added and removed, exactly (see above)."""

    __slots__ = ("n", "n_float", "scaled", "pinf", "ninf", "nan", "exact")

    def __init__(self) -> None:
        self.n = 0  # non-null values
        self.n_float = 0
        self.scaled = 0
        self.pinf = self.ninf = self.nan = 0
        self.exact: Any = 0

    def add(self, v: Any, c: int) -> None:
        self.n += c
        if v.__class__ is float:
            self.n_float += c
            if v - v == 0.0:
                num, den = v.as_integer_ratio()
                scaled = num << (_FLOAT_SCALE_BITS + 1 - den.bit_length())
                self.scaled += scaled if c == 1 else scaled * c
            elif v != v:
                self.nan += c
            elif v > 0:
                self.pinf += c
            else:
                self.ninf += c
        elif isinstance(v, decimal.Decimal) or isinstance(self.exact, decimal.Decimal):
            # c = +-1 (almost every change) needs no product: v has far fewer digits than the
            # context's precision, so multiplying by one is exact
            if c == 1:
                self.exact = DECIMAL_CONTEXT.add(self.exact, v)
            elif c == -1:
                self.exact = DECIMAL_CONTEXT.subtract(self.exact, v)
            else:
                self.exact = DECIMAL_CONTEXT.add(self.exact, DECIMAL_CONTEXT.multiply(v, c))
        else:
            self.exact += v * c

    def add_ones(self, values: list[Any]) -> None:
        """`add(v, 1)` for every v of `values` (no NULLs), in bulk: exact ints by one `sum`,
        and a float column (NumPy) by scaling every finite value by one power of two to an
        integer-valued double, exactly, so one integer `sum` adds them all. Anything else
        (DECIMALs, mixed types, ranges too wide for one scale) takes `add` per value."""
        kinds = set(map(type, values))
        if kinds == _INT_KIND and not isinstance(self.exact, decimal.Decimal):
            self.n += len(values)
            self.exact += sum(values)
            return
        if kinds == _FLOAT_KIND and len(values) >= _BULK_FLOATS and self.add_floats(
                np.array(values, dtype=np.float64)):
            return
        for v in values:
            self.add(v, 1)

    def add_floats(self, arr: np.ndarray) -> bool:
        """`add(v, 1)` for every float64 of `arr` (no NULLs), in bulk, by scaling every finite
        value by one power of two to an integer-valued double, exactly, so one integer `sum`
        adds them all. Returns False, having added nothing, when the values' exponents are too
        far apart for one scale (then add them one by one)."""
        finite = np.isfinite(arr)
        nonfinite = arr[~finite]
        x = arr[finite] if len(nonfinite) else arr
        if len(x):
            _, exps = np.frexp(x)
            # v = M * 2**(e - 53) with an integer M < 2**53: scaled by 2**shift, every
            # value is an integer below 2**(max e + shift), which must stay a finite double
            shift = min(_FLOAT_SCALE_BITS, 53 - int(exps.min()))
            if int(exps.max()) + shift >= 1024:
                return False
            ints = sum(map(int, np.ldexp(x, shift).tolist()))
            self.scaled += ints << (_FLOAT_SCALE_BITS - shift)
        self.n += len(arr)
        self.n_float += len(arr)
        if len(nonfinite):
            self.nan += int(np.isnan(nonfinite).sum())
            self.pinf += int((nonfinite == np.inf).sum())
            self.ninf += int((nonfinite == -np.inf).sum())
        return True

    def merge(self, other: _ExactSum, sign: int = 1) -> None:
        """`add(v, sign)` of every value `other` was given (once each)."""
        self.n += sign * other.n
        self.n_float += sign * other.n_float
        self.scaled += sign * other.scaled
        self.pinf += sign * other.pinf
        self.ninf += sign * other.ninf
        self.nan += sign * other.nan
        if isinstance(other.exact, decimal.Decimal) or isinstance(self.exact, decimal.Decimal):
            merge = DECIMAL_CONTEXT.add if sign == 1 else DECIMAL_CONTEXT.subtract
            self.exact = merge(self.exact, other.exact)
        else:
            self.exact += sign * other.exact

    def total(self) -> Any:
        if not self.n_float:
            return self.exact
        if self.nan or (self.pinf and self.ninf):
            return math.nan
        if self.pinf:
            return math.inf
        if self.ninf:
            return -math.inf
        if self.exact:
            value = Fraction(self.scaled, _FLOAT_SCALE) + Fraction(self.exact)
            num, den = value.numerator, value.denominator
        else:
            num, den = self.scaled, _FLOAT_SCALE
        try:
            return num / den
        except OverflowError:  # beyond DOUBLE's range: IEEE addition gives the infinity
            return math.inf if num > 0 else -math.inf


class _Moments:
    """n, the count of non-finite values, and the sums of powers a statistic needs."""

    __slots__ = ("n", "nonfinite", "sx", "sy", "sxx", "syy", "sxy")

    def __init__(self) -> None:
        self.n = self.nonfinite = 0
        self.sx = self.sy = self.sxx = self.syy = self.sxy = Fraction(0)

    def add(self, p: Any, q: Any, c: int) -> None:
        self.n += c
        if (p.__class__ is float and p - p != 0.0) or (q.__class__ is float and q - q != 0.0):
            self.nonfinite += c
            return
        fp, fq = Fraction(p), Fraction(q)
        self.sx += c * fp
        self.sy += c * fq
        self.sxx += c * fp * fp
        self.syy += c * fq * fq
        self.sxy += c * fp * fq

    def merge(self, other: _Moments, sign: int = 1) -> None:
        """`add(p, q, sign)` of every pair `other` was given (once each): every field is a
        sum over the pairs."""
        for f in self.__slots__:
            setattr(self, f, getattr(self, f) + sign * getattr(other, f))


class _Desc:
    """A sort key in reverse order (for ORDER BY ... DESC inside a composite key)."""

    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k

    def __eq__(self, o: object) -> bool:
        return isinstance(o, _Desc) and self.k == o.k

    def __hash__(self) -> int:
        return hash(self.k)

    def __lt__(self, o: _Desc) -> bool:
        return o.k < self.k

    def __gt__(self, o: _Desc) -> bool:
        return self.k < o.k

    def __le__(self, o: _Desc) -> bool:
        return o.k <= self.k

    def __ge__(self, o: _Desc) -> bool:
        return self.k <= o.k


def _value_key(v: Any) -> tuple[float, Any, int]:
    """A total order on SQL values: ``sort_key``'s (rank, value), then a refinement that orders
    its ties (a DATE before the TIMESTAMP at its midnight) as the engine's order does, which is
    the order reduce_group sees rows in. A flat tuple, cheap to compare. NaN is above every
    other number, +inf included, and tied with none (DuckDB's order: max(inf, NaN) is NaN)."""
    c = v.__class__
    if c is int or c is float:
        if v != v:
            return _NAN_KEY
        return 2, v, 0
    if c is str:
        return 3, v, 0
    if v is None:
        return 0, 0, 0
    if c is bool:
        return 1, int(v), 0
    r, x = sort_key(v)
    if isinstance(v, float) and v != v:
        return _NAN_KEY
    return r, x, 1 if isinstance(v, datetime.datetime) else 0


# NaN's `_value_key`: `sort_key`'s rank for it, after every number's
_NAN_KEY = (2.5, 0, 0)


@functools.lru_cache(maxsize=1 << 16)
def _midnight(d: datetime.date) -> datetime.datetime:
    """`sort_key`'s datetime for a date (cached: a table has few distinct dates, each met in
    many groups)."""
    return datetime.datetime(d.year, d.month, d.day)


def _value_entry(v: Any) -> tuple[int, Any, int, Any]:
    """A value's entry in a sorted index. Entries are tuples so that the engine's one NaN
    object finds itself on removal (tuple equality tries identity; ``nan == nan`` is false)."""
    return _value_key(v) + (v,)


class AggregateState:
    """One group's state for `aggs` (made by `IncrementalAggregates`); see `KeyState` in
    engine.operators.reduce_total. Output: `[(row of aggregate values, 1)]`, or nothing for an
    empty group."""

    __slots__ = ("plan", "rows", "values", "index", "accs")

    def __init__(self, plan: IncrementalAggregates) -> None:
        self.plan = plan
        self.rows = 0
        self.values: dict[int, dict[Any, int]] = {a: {} for a in plan.value_args}
        self.index: dict[int, SortedList] = {a: SortedList() for a in plan.indexed_args}
        self.accs: list[Any] = [
            _ExactSum() if kind == "sum" else _Moments() if kind == "stat" else [0]
            for kind, *_ in plan.accs]

    def apply(self, changes: list[tuple[Any, int]]) -> int:
        # Column by column: one pass over the changes per value map and per accumulator.
        plan = self.plan
        if (len(changes) > BULK_BUILD and not self.rows
                and set(map(_diff, changes)) == _ONE and not any(self.values.values())):
            return self._build(changes)
        self.rows += sum(d for _, d in changes)
        touched = len(changes)
        for arg in self.values:
            touched += self._count_values(arg, [(row[arg], d) for row, d in changes])
        for i in plan.direct:
            kind, x, y, _ = plan.accs[i]
            acc = self.accs[i]
            if kind == "count":
                acc[0] += sum(d for row, d in changes if row[x] is not None)
            elif kind == "sum":
                add = acc.add
                for row, d in changes:
                    p = row[x]
                    if p is not None:
                        add(p, d)
            else:
                yy = x if y is None else y
                for row, d in changes:
                    p, q = row[x], row[yy]
                    if p is not None and q is not None:
                        acc.add(p, q, d)
        return touched

    def _count_values(self, arg: int, pairs: list[tuple[Any, int]]) -> int:
        """Count `(value, diff)` pairs into argument `arg`'s value -> count map, keeping its
        sorted index and its DISTINCT accumulators in step with the values present. Returns
        the records touched beyond the pairs themselves."""
        counts = self.values[arg]
        idx = self.index.get(arg)
        feeds = self.plan.distinct_feeds.get(arg, ())
        if len(pairs) > 1 and any(d < 0 for _, d in pairs):
            # Summed per value first: a time's changes come unconsolidated (a self-join's
            # retraction of 44 copies, then one more and an insertion), and taken one by one
            # a value's count could pass below 0, which the arrays of many values
            # (`sorted_counts.SortedCounts`) do not hold
            summed: dict[Any, int] = {}
            for v, d in pairs:
                summed[v] = summed.get(v, 0) + d
            pairs = [(v, d) for v, d in summed.items() if d]
        # A group's first large batch (hydration) builds its index by one sort.
        bulk = idx is not None and not counts and len(pairs) > BULK_BUILD
        touched = 0
        for v, d in pairs:
            c0 = counts.get(v, 0)
            c1 = c0 + d
            if c1:
                counts[v] = c1
            else:
                del counts[v]
            if v is None or (c0 == 0) == (c1 == 0):
                continue
            sign = 1 if c0 == 0 else -1
            if idx is not None and not bulk:
                touched += _log2_cost(len(idx))
                if sign > 0:
                    idx.add(_value_entry(v))
                else:
                    idx.remove(_value_entry(v))
            for i in feeds:
                self._feed(i, v, v, sign)
        if bulk:
            assert idx is not None
            idx.update([_value_entry(v) for v in counts if v is not None])
            touched += len(idx)
        return touched

    def absorb(self, other: AggregateState, sign: int = 1) -> int:
        """`apply` of every row `other` holds, each with diff `sign` (1: insertions, -1:
        retractions of rows this state holds): `other` is this group's state built from a
        batch's rows (`BuiltGroups.states`) and owned by no one else. An empty state takes
        `other`'s insertions as they are; otherwise counts and sums add up, and a MIN/MAX,
        DISTINCT or scalar subquery argument takes `other`'s distinct values one by one, or,
        for many values held in arrays on both sides, by one merge of the arrays
        (`SortedCounts.merged`). Returns the records touched."""
        if sign == 1 and self.empty():
            self.rows, self.values, self.index, self.accs = \
                other.rows, other.values, other.index, other.accs
            return other.size()
        plan = self.plan
        self.rows += sign * other.rows
        touched = 1
        for arg, theirs in other.values.items():
            mine = self.values[arg]
            if (mine.__class__ is SortedCounts and theirs.__class__ is SortedCounts
                    and arg in self.index and arg not in plan.distinct_feeds
                    and len(theirs) >= MERGE_ARRAYS
                    and len(theirs) * MERGE_ARRAYS_RATIO >= len(mine)):
                merged = mine.merged(theirs, sign)
                if merged is not None:
                    self.values[arg] = merged
                    self.index[arg] = merged.index
                    touched += len(merged)
                    continue
            touched += len(theirs) + self._count_values(
                arg, [(v, sign * theirs[v]) for v in theirs])
        for i in plan.direct:
            mine_acc, their_acc = self.accs[i], other.accs[i]
            if plan.accs[i][0] == "count":
                mine_acc[0] += sign * their_acc[0]
            else:
                mine_acc.merge(their_acc, sign)
        return touched

    def apply_vals(self, rows: list[Any], diff: int) -> int:
        """`apply` of `(row, diff)` for every row (a hydration's rows, one diff for all)."""
        if (diff == 1 and len(rows) > BULK_BUILD and not self.rows
                and not any(self.values.values())):
            return self._build_rows(rows)
        return self.apply([(row, diff) for row in rows])

    def _build(self, changes: list[tuple[Any, int]]) -> int:
        return self._build_rows(list(map(_row, changes)))

    def _build_rows(self, rows: list[Any]) -> int:
        """`apply` for a new group's first batch of insertions (a hydration), column by
        column at C speed where it can be: the value -> count maps by `Counter`, a sorted
        index of plain numbers by one sort of the bare values, counts and exact int and
        float sums in bulk (`_ExactSum.add_ones`). Same state as `apply`."""
        plan = self.plan
        self.rows = len(rows)
        touched = len(rows)
        for arg, counts in self.values.items():
            counts.update(Counter(map(itemgetter(arg), rows)))
            present = [v for v in counts if v is not None]
            idx = self.index.get(arg)
            if idx is not None:
                kinds = set(map(type, present))
                if (kinds == _INT_KIND or kinds == _FLOAT_KIND or kinds == _DECIMAL_KIND) and not any(
                        map(ne, present, present)):
                    # numbers without NaN: _value_entry(v) is (2, v, 0, v), in v's order
                    present.sort()
                    idx.update(list(zip(repeat(2), present, repeat(0), present)))
                elif kinds == _DATE_KIND:
                    # dates: _value_entry(v) is (4, v's midnight, 0, v), in v's order
                    present.sort()
                    idx.update([(4, _midnight(v), 0, v) for v in present])
                else:
                    idx.update([_value_entry(v) for v in present])
                touched += len(idx)
            for i in plan.distinct_feeds.get(arg, ()):
                for v in present:
                    self._feed(i, v, v, 1)
        for i in plan.direct:
            kind, x, y, _ = plan.accs[i]
            acc = self.accs[i]
            col = list(map(itemgetter(x), rows))
            if kind == "count":
                acc[0] += len(col) - countOf(col, None)
            elif kind == "sum":
                acc.add_ones([v for v in col if v is not None] if None in col else col)
            else:
                yy = x if y is None else y
                for row in rows:
                    p, q = row[x], row[yy]
                    if p is not None and q is not None:
                        acc.add(p, q, 1)
        return touched

    def _feed(self, i: int, p: Any, q: Any, c: int) -> None:
        acc = self.accs[i]
        kind = self.plan.accs[i][0]
        if kind == "sum":
            acc.add(p, c)
        elif kind == "stat":
            acc.add(p, q, c)
        else:
            acc[0] += c

    def output(self) -> tuple[list[tuple[Any, int]], int]:
        if not self.rows:
            return [], 0
        out: list[Any] = []
        read = 0
        for a, slot in zip(self.plan.aggs, self.plan.slots, strict=True):
            f = a.func
            if f == "count_star":
                out.append(self.rows)
            elif f == "single":
                if self.rows != 1:
                    raise EvaluationError(SUBQUERY_ROWS, a.label or None)
                assert a.arg is not None
                out.append(next(iter(self.values[a.arg])))
                read += 1
            elif f in ("min", "max"):
                assert a.arg is not None
                idx = self.index[a.arg]
                read += 1
                if not idx:
                    out.append(None)
                elif idx.__class__ is not SortedList:  # built from columns (sorted_counts)
                    read += _log2_cost(len(idx))
                    out.append((idx.first() if f == "min" else idx.last_tied())[3])
                elif f == "min":
                    out.append(idx[0][3])
                else:
                    # the first of the values tied for the SQL maximum, as max() returns
                    top = idx[-1]
                    if len(idx) > 1 and idx[-2][:2] == top[:2]:  # a DATE, the TIMESTAMP at its midnight
                        read += _log2_cost(len(idx))
                        top = idx[idx.bisect_left(top[:2])]
                    out.append(top[3])
            elif f == "count" and a.distinct:
                assert a.arg is not None
                counts = self.values[a.arg]
                out.append(len(counts) - (None in counts))
            else:
                acc = self.accs[slot]
                read += 1
                if f == "count":
                    out.append(acc[0])
                elif f in STATISTICS:
                    out.append(_finish_statistic(a, acc.n, acc.nonfinite, acc.sx, acc.sy,
                                                 acc.sxx, acc.syy, acc.sxy))
                elif not acc.n:
                    out.append(None)
                elif f == "sum":
                    out.append(_finish_sum(a, acc.total()))
                elif f == "avg":
                    out.append(_finish_avg(a, acc.total(), acc.n))
                else:
                    raise AssertionError(f)
        return [(canonical(tuple(out)), 1)], read

    def empty(self) -> bool:
        return self.rows == 0 and not any(self.values.values())

    def size(self) -> int:
        if not self.values:  # counts and sums only: the state is its accumulators
            return 1
        return 1 + sum(len(v) for v in self.values.values()) + sum(
            len(i) for i in self.index.values())

    def approx_bytes(self) -> int:
        """About the bytes held: `per_record` a record (`size()`), but a value map held in
        arrays (planner.sorted_counts, with its index) at the arrays' size."""
        per_record = APPROX_BYTES_PER_RECORD
        total = per_record
        for x, v in self.values.items():
            if v.__class__ is SortedCounts:
                total += v.approx_bytes(per_record)
            else:
                total += per_record * (len(v) + len(self.index.get(x, ())))
        return total


class IncrementalAggregates:
    """The per-group state factory for `aggs` (a plain callable for the engine): which
    arguments need a value -> count map (DISTINCT, MIN, MAX, a scalar subquery's value), which
    a sorted index (MIN, MAX), and one accumulator per distinct (kind, arguments, DISTINCT),
    shared by the aggregates that read it (SUM(x) and AVG(x) share one exact sum)."""

    def __init__(self, aggs: tuple[Agg, ...]) -> None:
        self.aggs = aggs
        value_args: set[int] = set()
        indexed: set[int] = set()
        accs: list[tuple[str, int, int | None, bool]] = []
        slots: list[int] = []
        for a in aggs:
            slot = -1
            if a.func in ("min", "max"):
                assert a.arg is not None
                value_args.add(a.arg)
                indexed.add(a.arg)
            elif a.func == "single":
                assert a.arg is not None
                value_args.add(a.arg)
            elif a.func == "count" and a.distinct:
                assert a.arg is not None
                value_args.add(a.arg)
            elif a.func != "count_star":
                assert a.arg is not None
                kind = "stat" if a.func in STATISTICS else "sum" if a.func in (
                    "sum", "avg") else "count"
                # reduce_group ignores DISTINCT for the two-argument statistics
                distinct = a.distinct and a.arg2 is None
                spec = (kind, a.arg, a.arg2, distinct)
                if spec not in accs:
                    accs.append(spec)
                slot = accs.index(spec)
                if distinct:
                    value_args.add(a.arg)
            slots.append(slot)
        self.value_args = sorted(value_args)
        self.indexed_args = sorted(indexed)
        self.accs = accs
        self.slots = slots
        self.direct = [i for i, (_, _, _, distinct) in enumerate(accs) if not distinct]
        feeds: dict[int, list[int]] = {}
        for i, (_, x, _, distinct) in enumerate(accs):
            if distinct:
                feeds.setdefault(x, []).append(i)
        self.distinct_feeds = feeds

    # its states `absorb` the states `build_columns` makes (engine.operators.reduce_total)
    absorbs = True

    def __call__(self, key: Any) -> AggregateState:
        return AggregateState(self)

    def build_columns(self, table: Any, key: tuple[int, ...]) -> Any:
        """Every group's state from an Arrow table's rows keyed by `key`, held as arrays until
        a group changes (`planner.aggregate_columns.BuiltGroups`), or None to build them from
        rows."""
        from planner.aggregate_columns import build_groups

        return build_groups(self, table, key)


class TopKState:
    """One group's rows with a sorted index in ORDER BY order (ties broken as `topk_rows`
    breaks them); the output is the window [offset, offset + limit), read by walking the index
    from its start: O(log n) per change plus O(offset + limit) per output.

    A large first batch (a hydration) with a LIMIT and a numeric first ORDER BY column indexes
    only the rows that can be in the window (their first value at least as good as the
    (offset + limit)-th best copy's); the others wait in the *reserve*, sorted by that value by
    NumPy, with no order key, no count and (built from columns: planner.topk_columns) not even
    a tuple each. Invariant: `counts` (row -> multiplicity) holds exactly the rows of the
    index, and the group's other copies are `reserve[next:]` (one entry per copy) less `dead`
    (row -> copies deleted before the refill reached them), `reserve_live` of them, whose keys
    are all above `bound` and whose first values are all strictly worse than `bound_val`. A
    deletion beyond a row's count in the index is a reserved copy's (the input never deletes
    what it has not inserted). When the window reaches past `bound`, the next few reserved
    entries (ties of the first value kept together) are indexed, so no change costs more than
    O((offset + limit) log n).

    A later row goes to the index, except in a large batch (a bulk INSERT or COPY): there a
    new row whose first value is strictly worse than `bound_val` joins the reserve, merged into
    its order by NumPy; a group without a reserve first takes the key some way down its index
    as `bound`. So a batch of m rows into a group costs O(m) plus O(log n) per row that can
    reach the window, not an order key and an index insertion per row; a batch of few such
    rows against a large reserve (`RESERVE_MERGE`) indexes them instead."""

    __slots__ = ("plan", "counts", "index", "rows", "bound", "bound_val", "reserve",
                 "reserve_vals", "next", "reserve_live", "dead", "reserve_scale")

    def __init__(self, plan: IncrementalTopK) -> None:
        self.plan = plan
        self.counts: dict[tuple[Any, ...], int] = {}
        # entries (row_order(row), row): each row's order key computed once per insertion
        # or removal (a key function would compute it twice in a bulk build)
        self.index = SortedList()
        self.rows = 0
        self.bound: tuple[Any, ...] | None = None  # None: everything is in the index
        # with `bound`: a first value (as in `reserve_vals`) at least that of bound's row
        self.bound_val: Any = None
        # a list of rows, or anything sliced into one (planner.topk_columns.TableRows)
        self.reserve: Any = []
        self.reserve_vals: np.ndarray | None = None
        # DECIMAL first values: the scale at which `reserve_vals` holds their unscaled ints
        # (None for ints and floats)
        self.reserve_scale: int | None = None
        self.next = 0
        self.reserve_live = 0
        self.dead: dict[tuple[Any, ...], int] = {}

    def apply(self, changes: list[tuple[Any, int]]) -> int:
        counts, index = self.counts, self.index
        if len(changes) > 1 and any(d < 0 for _, d in changes):
            # Summed per row first (as `AggregateState._count_values`): a time's changes come
            # unconsolidated (a join of two changed inputs retracts a row twice, then inserts
            # it), and taken one by one the second retraction would be charged to the reserve
            # and the insertion then kept a row that is gone
            summed: dict[Any, int] = {}
            for row, d in changes:
                summed[row] = summed.get(row, 0) + d
            changes = [(row, d) for row, d in summed.items() if d]
        if not counts and not self.reserve_live and len(changes) > BULK_BUILD:
            # a group's first large batch (hydration): one sort builds the index
            counts.update(changes)
            if len(counts) != len(changes) or not all(counts.values()):
                # a row twice (or a zero diff): added up change by change
                counts.clear()
                for row, d in changes:
                    c = counts.get(row, 0) + d
                    if c:
                        counts[row] = c
                    else:
                        del counts[row]
            self.rows += sum(map(_diff, changes))
            return len(changes) + self._index_bulk()
        touched = 0
        row_order = self.plan.row_order
        # a large batch: which new rows may wait in the reserve (their first values, and
        # whether each is strictly worse than `bound_val`)
        far = self._far(changes) if len(changes) > BULK_BUILD else None
        far_mask = far[1].tolist() if far is not None else None
        waiting: list[int] = []  # positions in `changes` of the rows put in the reserve
        dead = self.dead
        for i, (row, d) in enumerate(changes):
            self.rows += d
            touched += 1
            c0 = counts.get(row, 0)
            c1 = c0 + d
            if c1 < 0 and self.reserve_live:
                # reserved copies: skipped when the refill reaches them
                dead[row] = dead.get(row, 0) - c1
                self.reserve_live += c1
                c1 = 0
                if not self.reserve_live:
                    self._drop_reserve()
                    dead = self.dead
                    waiting.clear()  # every reserved row is gone: these too
            if c0 == 0 and c1 > 0 and far_mask is not None and far_mask[i] \
                    and self.bound is not None:
                waiting.extend(repeat(i, c1))
                self.reserve_live += c1
                continue
            if c1:
                counts[row] = c1
            elif c0:
                del counts[row]
            if (c0 == 0) != (c1 == 0):
                touched += _log2_cost(len(index))
                if c0 == 0:
                    index.add((row_order(row), row))
                else:
                    index.remove((row_order(row), row))
        if far is not None:
            if waiting:
                self._merge_reserve([changes[i][0] for i in waiting], far[0][waiting])
            elif not self.reserve_live:
                self._drop_reserve()  # `_far` set a bound, and no row went to the reserve
        return touched

    def _far(self, changes: list[tuple[Any, int]]) -> tuple[np.ndarray, np.ndarray] | None:
        """For a large batch: its rows' first ORDER BY values as in `reserve_vals` (best
        first, ascending) and whether each is strictly worse than `bound_val`, setting a
        bound from the index when there is none; None when that column is not all ints (within
        int64) or all floats without NaN, of the reserve's kind."""
        plan = self.plan
        need = plan.offset + plan.limit if plan.limit is not None else 0
        if plan.first is None or need <= 0:
            return None
        col, desc = plan.first
        vals = [row[col] for row, _ in changes]
        kinds = set(map(type, vals))
        if self.bound is None:
            at = 4 * need + 64
            if len(self.index) <= 2 * at:
                return None  # a small group: everything stays in the index
            key, row = self.index[at]
            kinds.add(type(row[col]))
            vals.append(row[col])
        ranked = _ranked_values(vals, kinds, desc)
        if ranked is None:
            return None
        arr, scale = ranked
        if self.bound is None:
            self.bound, self.bound_val, arr = key, arr[-1], arr[:-1]
            self.reserve_vals, self.reserve_scale = arr[:0], scale
        elif self.reserve_vals is None or arr.dtype != self.reserve_vals.dtype or \
                scale != self.reserve_scale:
            return None
        far = arr > self.bound_val
        if int(np.count_nonzero(far)) * RESERVE_MERGE < len(self.reserve) - self.next:
            # merging costs a pass over the reserve: for a few rows, indexing them costs less
            return None
        return arr, far

    def _merge_reserve(self, rows: list[tuple[Any, ...]], vals: np.ndarray) -> None:
        """Put `rows` (a copy each, already counted in `reserve_live`), whose first values
        `vals` are all worse than `bound_val`, into the reserve's order."""
        assert self.reserve_vals is not None
        old_rows, old_vals = self.reserve[self.next:], self.reserve_vals[self.next:]
        merged = np.concatenate((old_vals, vals))
        order = np.argsort(merged, kind="stable")
        both = old_rows + rows
        self.reserve = list(map(both.__getitem__, order.tolist()))
        self.reserve_vals = merged[order]
        self.next = 0

    def build(self, rows: list[tuple[Any, ...]]) -> int:
        """Make this new state that of `rows`, each with diff 1, as `apply` of them makes it
        (a small group's rows at hydration, from columns: planner.topk_columns). Returns the
        records touched."""
        counts = self.counts
        assert not counts and not self.reserve_live
        for row in rows:
            counts[row] = counts.get(row, 0) + 1
        self.rows += len(rows)
        return len(rows) + self._index_bulk()

    def build_reserved(self, rows: list[tuple[Any, ...]], reserve: Any,
                       reserve_vals: np.ndarray, bound_val: Any, scale: int | None = None
                       ) -> int:
        """Make this new state that of `rows` and the rows of `reserve`, each with diff 1, as
        `apply` of them makes it: `rows` are the copies `split_reserve` ranks up to its cut,
        the last of them ranked `bound_val`, and `reserve` (sliced into lists of rows) the
        others in its order, ranked `reserve_vals` (a large group's rows at hydration, from
        columns: planner.topk_columns; DECIMALs as their unscaled ints at `scale`). Returns
        the records touched."""
        counts, row_order = self.counts, self.plan.row_order
        assert not counts and not self.reserve_live and len(reserve)
        for row in rows:
            counts[row] = counts.get(row, 0) + 1
        self.rows += len(rows) + len(reserve)
        self.index.update(sorted(zip(map(row_order, counts), counts, strict=True)))
        self.reserve, self.reserve_vals, self.next = reserve, reserve_vals, 0
        self.reserve_scale = scale
        self.reserve_live = len(reserve)
        self.bound, self.bound_val = self.index[-1][0], bound_val
        return len(rows) + len(counts)

    def _index_bulk(self) -> int:
        """Index the rows of a group's first large batch, now in `counts` (see the class
        doc: the copies past the window's first value wait in the reserve). Returns the rows
        indexed."""
        index = self.index
        self._drop_reserve()
        rows = self._split_reserve()
        index.update(sorted(zip(map(self.plan.row_order, rows), rows, strict=True)))
        if self.reserve_live:
            self.bound = index[-1][0]
        return len(rows)

    def _split_reserve(self) -> list[tuple[Any, ...]]:
        """The rows of `counts` to index now; the other copies (when that leaves most out) go
        to the reserve and out of `counts`, ordered by their first ORDER BY value. Everything
        is indexed without a LIMIT, for few copies, or unless that column holds only ints
        (within int64) or only floats without NaN."""
        plan, counts = self.plan, self.counts
        rows = list(counts)
        need = plan.offset + plan.limit if plan.limit is not None else 0
        if plan.first is None or need <= 0 or self.rows <= 4 * need + 64:
            return rows
        reps = list(counts.values())
        if min(reps) < 1:
            return rows  # a row deleted more often than inserted: no reserve
        col, desc = plan.first
        vals = list(map(itemgetter(col), rows))
        ranked = _ranked_values(vals, set(map(type, vals)), desc)
        if ranked is None:
            return rows
        arr, self.reserve_scale = ranked
        if self.rows != len(rows):  # a row twice: an entry per copy, as from columns
            arr = np.repeat(arr, reps)
            rows = [r for r, c in zip(rows, reps, strict=True) for _ in range(c)]
        order, cut = split_reserve(arr, need)
        ranked = arr[order]
        self.bound_val = ranked[cut - 1]
        self.reserve = list(map(rows.__getitem__, order[cut:].tolist()))
        self.reserve_vals = ranked[cut:]
        self.reserve_live = len(self.reserve)
        for row in self.reserve:
            counts.pop(row, None)
        return [row for row in counts]

    def _refill(self) -> int:
        """Index the next reserved entries: at least offset + limit of them, with every entry
        tied with the last on the first value (so the rest stay strictly after them). Returns
        the records touched."""
        plan, counts, index, dead = self.plan, self.counts, self.index, self.dead
        assert self.reserve_vals is not None and plan.limit is not None
        start = self.next
        stop = min(start + plan.offset + plan.limit, len(self.reserve))
        stop = int(np.searchsorted(self.reserve_vals, self.reserve_vals[stop - 1], side="right"))
        touched = 0
        for row in self.reserve[start:stop]:
            touched += 1
            k = dead.get(row)
            if k:  # a copy deleted while reserved
                if k == 1:
                    del dead[row]
                else:
                    dead[row] = k - 1
                continue
            self.reserve_live -= 1
            c0 = counts.get(row, 0)
            counts[row] = c0 + 1
            entry = (plan.row_order(row), row)
            if not c0:
                index.add(entry)
                touched += _log2_cost(len(index))
            if self.bound is None or entry[0] > self.bound:
                self.bound = entry[0]
        self.bound_val = self.reserve_vals[stop - 1]
        self.next = stop
        if stop == len(self.reserve) or not self.reserve_live:
            self._drop_reserve()
        return touched

    def _drop_reserve(self) -> None:
        """No copy is reserved any more: the index holds them all."""
        self.bound, self.bound_val, self.reserve, self.reserve_vals = None, None, [], None
        self.reserve_scale = None
        self.next = self.reserve_live = 0
        self.dead = {}

    def contents(self) -> Counter[tuple[Any, ...]]:
        """The group's rows and their multiplicities, reserved ones included (for tests)."""
        out = Counter(self.counts)
        out.update(self.reserve[self.next:])
        out.subtract(self.dead)
        return +out

    def output(self) -> tuple[list[tuple[Any, int]], int]:
        read = 0
        while True:
            out, left, walked = self._window()
            read += walked
            if left <= 0 or self.bound is None:
                return out, read
            read += self._refill()  # the window reaches past `bound`

    def _window(self) -> tuple[list[tuple[Any, int]], Any, int]:
        """The window's rows from the index, up to `bound`; how many it still lacks (0 when
        full), and the entries read."""
        plan = self.plan
        out: list[tuple[Any, int]] = []
        skip = plan.offset
        left = plan.limit if plan.limit is not None else math.inf
        read = 0
        counts = self.counts
        bound = self.bound
        for key, row in self.index:
            if left <= 0:
                break
            if bound is not None and key > bound:
                break
            read += 1
            cnt = counts[row]
            if skip >= cnt:
                skip -= cnt
                continue
            take = min(cnt - skip, left)
            skip = 0
            left -= take
            out.append((row, int(take)))
        return out, left, read

    def empty(self) -> bool:
        return not self.counts and not self.reserve_live

    def size(self) -> int:
        return len(self.counts) + self.reserve_live


def _ranked_values(vals: list[Any], kinds: set[type], desc: bool
                   ) -> tuple[np.ndarray, int | None] | None:
    """First ORDER BY values as an array that sorts best first, exactly (`~x = -x-1` for
    ints, `-x` for floats, when DESC), and for DECIMALs the scale at which the array holds
    their unscaled ints (else None); None unless all ints within int64, all floats without
    NaN, or all Decimals of one exponent (at most 0) within int64 unscaled."""
    if kinds == _INT_KIND or kinds == _DECIMAL_KIND:
        scale = None
        if kinds == _DECIMAL_KIND:
            exponents = {v.as_tuple().exponent for v in vals}
            if len(exponents) != 1:
                return None
            (exponent,) = exponents
            if not isinstance(exponent, int) or exponent > 0:
                return None
            scale = -exponent
            vals = [int(v.scaleb(scale, DECIMAL_CONTEXT)) for v in vals]
        try:
            arr = np.array(vals, dtype=np.int64)
        except OverflowError:
            return None
        return (~arr if desc else arr), scale
    if kinds == _FLOAT_KIND:
        arr = np.array(vals, dtype=np.float64)
        if np.isnan(arr).any():
            return None
        return (-arr if desc else arr), None
    return None


def split_reserve(ranked: np.ndarray, need: int) -> tuple[np.ndarray, int]:
    """For values that sort best first (one per copy), their stable sorting order and how
    many of it a top-k group indexes: the `need` best and every copy tied with the last of
    them; the rest go to the reserve (TopKState)."""
    order = np.argsort(ranked, kind="stable")
    cut = int(np.searchsorted(ranked[order], ranked[order[need - 1]], side="right"))
    return order, cut


class IncrementalTopK:
    """The per-group state factory for ORDER BY `order` LIMIT `limit` OFFSET `offset`."""

    def __init__(self, order: tuple[SortKey, ...], limit: int | None, offset: int) -> None:
        self.limit = limit
        self.offset = offset
        parts = [(k.col, k.desc, 0 if k.nulls_first != k.desc else 1) for k in order]
        # the first ORDER BY column and its direction: a hydration indexes only the rows
        # that can be in the window by it (TopKState._split_reserve)
        self.first = (order[0].col, order[0].desc) if order else None

        def row_order(row: tuple[Any, ...]) -> tuple[Any, ...]:
            # Per ORDER BY key (nulls rank, value rank, value), negated for DESC (numbers by
            # value, anything else wrapped); then topk_rows' ties: row_key, then the engine's
            # order (the refinements of _value_key), flattened.
            ks: list[Any] = []
            for col, desc, nr in parts:
                v = row[col]
                if v is None:
                    ks += (-nr, 0, 0) if desc else (nr, 0, 0)
                    continue
                r, x, _ = _value_key(v)
                if not desc:
                    ks += (1 - nr, r, x)
                elif r == 2 or r == 1:
                    ks += (nr - 1, -r, -x)
                else:
                    ks += (nr - 1, -r, _Desc(x))
            refine = []
            for v in row:
                r, x, f = _value_key(v)
                ks += (r, x)
                refine.append(f)
            ks += refine
            return tuple(ks)

        self.row_order = row_order

    def __call__(self, key: Any) -> TopKState:
        return TopKState(self)

    def build_columns(self, table: Any, key: tuple[int, ...]) -> Any:
        """Every group's state from an Arrow table's rows keyed by `key`
        (`planner.topk_columns.BuiltTopK`), or None to build them from rows."""
        from planner.topk_columns import build_topk

        return build_topk(self, table, key)
