"""Estimated cardinalities of plan nodes, from the tables' row counts and distinct counts.

`Estimator(catalog).estimate(rel)` returns an `Estimate`: how many rows `rel` is expected to
hold and, for each output column, the (table, column) it passes through unchanged, if any, so
that `distinct(est, i)` can ask the catalog's `Statistics` for that column's distinct count
(capped by the rows). The rules are System R's, as every cost-based optimiser starts from:

- an equality with a constant keeps 1/distinct of the rows, a range comparison a third, any
  other predicate a quarter; AND multiplies, OR adds (inclusion-exclusion), NOT complements;
- an equi-join of L and R keeps |L|·|R| / max(distinct(L.k), distinct(R.k)) per key (each
  value of the smaller domain is assumed to occur in the larger: the containment assumption);
- a GROUP BY yields the product of its keys' distinct counts, at most its input's rows.

Invariant: an estimate only chooses among plans that denote the same multiset
(`planner.joins.order_joins`); it never changes a result, so a wrong or missing statistic
costs time, never correctness. A table without statistics counts as `DEFAULT_ROWS` rows whose
columns are all distinct. The statistics are asked for lazily, one column at a time, because
the server reads them from DuckDB (a count and an `approx_count_distinct` scan each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from planner.catalog import Catalog
from planner.ir import (
    ArrangeBy,
    Call,
    Col,
    Constant,
    DeltaJoin,
    Get,
    Join,
    Lit,
    Mfp,
    Reduce,
    Rel,
    Scalar,
    TopK,
    Union,
    children,
)

DEFAULT_ROWS = 1000.0
_RANGE = {"lt", "le", "gt", "ge"}

Origin = tuple[str, str] | None  # (table, column) a column passes through unchanged


@dataclass(frozen=True)
class Estimate:
    rows: float
    origins: tuple[Origin, ...]


class Estimator:
    """Estimates over one catalog; each statistic is asked for once."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        stats = catalog.statistics
        self._rows = cache(stats.rows) if stats is not None else (lambda t: None)
        self._distinct = cache(stats.distinct) if stats is not None else (lambda t, c: None)

    @property
    def informed(self) -> bool:
        """The catalog has statistics (without them every estimate is a default)."""
        return self.catalog.statistics is not None

    def distinct(self, est: Estimate, i: int) -> float:
        """Distinct values of column i, between 1 and the rows."""
        cap = max(est.rows, 1.0)
        o = est.origins[i]
        if o is None:
            return cap
        d = self._distinct(*o)
        return cap if d is None else max(1.0, min(float(d), cap))

    def estimate(self, r: Rel) -> Estimate:
        if isinstance(r, Get):
            schema = None if r.local else self.catalog.tables.get(r.name)
            if schema is None:
                return Estimate(DEFAULT_ROWS, (None,) * r.arity)
            n = self._rows(r.name)
            return Estimate(DEFAULT_ROWS if n is None else float(n),
                            tuple((r.name, c.name) for c in schema.columns))
        if isinstance(r, Constant):
            return Estimate(float(len(r.rows)), (None,) * r.arity)
        if isinstance(r, ArrangeBy):
            return self.estimate(r.input)
        if isinstance(r, Mfp):
            e = self.estimate(r.input)
            cols = Estimate(e.rows, e.origins + tuple(
                _origin(m, e.origins) for m in r.map))
            s = 1.0
            for p in r.filter:
                s *= self.selectivity(p, cols)
            return Estimate(e.rows * s, tuple(cols.origins[i] for i in r.project))
        if isinstance(r, Join):
            left, right = self.estimate(r.left), self.estimate(r.right)
            rows = left.rows * right.rows
            for a, b in r.keys:
                rows /= max(self.distinct(left, a), self.distinct(right, b))
            return Estimate(rows, left.origins + right.origins)
        if isinstance(r, DeltaJoin):
            es = [self.estimate(x) for x in r.inputs]
            both = Estimate(1.0, tuple(o for e in es for o in e.origins))
            cols = [(e, i) for e in es for i in range(len(e.origins))]
            rows = math.prod(e.rows for e in es)
            for a, b in r.keys:
                rows /= max(self.distinct(*cols[a]), self.distinct(*cols[b]))
            return Estimate(rows, both.origins)
        if isinstance(r, Reduce):
            e = self.estimate(r.input)
            groups = min(e.rows, math.prod(self.distinct(e, g) for g in r.group))
            return Estimate(max(groups, 1.0) if not r.group else groups,
                            tuple(e.origins[g] for g in r.group) + (None,) * len(r.aggs))
        if isinstance(r, TopK):
            e = self.estimate(r.input)
            groups = min(e.rows, math.prod(self.distinct(e, g) for g in r.group))
            rows = e.rows if r.limit is None else min(e.rows, groups * r.limit)
            return Estimate(rows, e.origins)
        if isinstance(r, Union):
            es = [self.estimate(x) for x in r.inputs]
            return Estimate(sum(e.rows for e in es), (None,) * r.arity)
        kids = children(r)
        rows = max((self.estimate(k).rows for k in kids), default=DEFAULT_ROWS)
        return Estimate(rows, (None,) * r.arity)

    def selectivity(self, p: Scalar, est: Estimate) -> float:
        """The fraction of est's rows for which p is true."""
        if isinstance(p, Lit):
            return 1.0 if p.value is True else 0.0
        if not isinstance(p, Call):
            return 0.25
        f, args = p.func, p.args
        if f == "and":
            return math.prod(self.selectivity(a, est) for a in args)
        if f == "or":
            s = 0.0
            for a in args:
                x = self.selectivity(a, est)
                s = s + x - s * x
            return s
        if f == "not":
            a = args[0]
            if isinstance(a, Call) and a.func == "is_null":
                return 1.0  # the NOT NULL checks of join keys: NULLs are assumed rare
            return 1.0 - self.selectivity(a, est)
        if f == "is_null":
            return 0.0
        if f in ("eq", "ne") and len(args) == 2:
            x, y = (_column(a) for a in args)
            if x is not None and y is not None:
                eq = 1.0 / max(self.distinct(est, x), self.distinct(est, y))
            elif x is not None or y is not None:
                eq = 1.0 / self.distinct(est, x if x is not None else y)
            else:
                eq = 0.1
            return eq if f == "eq" else 1.0 - eq
        if f in _RANGE:
            return 1.0 / 3.0
        return 0.25


def _column(e: Scalar) -> int | None:
    """The column e reads, if it is that column (under casts)."""
    while isinstance(e, Call) and e.func == "cast" and len(e.args) == 1:
        e = e.args[0]
    return e.index if isinstance(e, Col) else None


def _origin(e: Scalar, origins: tuple[Origin, ...]) -> Origin:
    i = _column(e)
    return origins[i] if i is not None else None
