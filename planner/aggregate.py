"""Per-group computations shared by the naive evaluator and the engine lowering.

Invariant: ``reduce_group`` and ``topk_rows`` are pure functions of a group's accumulated
contents (rows with positive counts), so recomputing a group from scratch after any update is
correct; this is the "basic" aggregation strategy (no accumulable/hierarchical tricks), which
also makes MIN/MAX correct when the current extreme is deleted. A group whose SUM leaves the
range of its SQL type, or whose ``single`` (a scalar subquery's value) has several rows, raises
EvaluationError, as DuckDB raises for the same data.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from planner.errors import EvaluationError
from planner.ir import Agg, SortKey
from planner.scalar import DECIMAL_CONTEXT, INT_RANGE, norm_type, row_key, sort_key

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
            total = _sum(vals)
            t = norm_type(a.type)
            if isinstance(total, int) and t in INT_RANGE and not (
                    INT_RANGE[t][0] <= total <= INT_RANGE[t][1]):
                raise EvaluationError(f"integer overflow in SUM: the result {total} is out of "
                                      f"range for {t}", a.label or None)
            out.append(total)
        elif a.func == "avg":
            total = _sum(vals)
            n = sum(c for _, c in vals)
            out.append(float(total) / n if not isinstance(total, int) else total / n)
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
    # n^2 times the population (co)variances
    cxy, cxx, cyy = n * sxy - sx * sy, n * sxx - sx * sx, n * syy - sy * sy
    div = n * (n - 1) if samp else n * n
    if a.func == "corr":
        if cxx == 0 or cyy == 0:
            return math.nan
        return float(cxy) / math.sqrt(float(cxx)) / math.sqrt(float(cyy))
    if a.func.startswith("covar"):
        return float(cxy / div)
    var = cxx / div
    return math.sqrt(var) if a.func.startswith("stddev") else float(var)


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
