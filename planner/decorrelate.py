"""Decorrelation: evaluate a correlated subquery once per distinct outer value, as a join.

``apply(q, d, m)`` turns a plan ``q`` that reads ``OuterRef(0..m-1)`` into a plan with no
OuterRef whose rows are ``(d-row + q-row)`` for every row of ``d`` (the distinct parameter
values, m columns): it computes q for every parameter tuple at once. Subtrees that do not read a
parameter are cross-joined with ``d`` at the highest point possible, so the join that realises
the correlation sits as low as the predicates allow (Materialize's ``branch``).

Invariant: ``apply(q, d, m)`` equals the union over rows p of d of ``{p} x q[outer := p]``;
the D columns come first and are matched null-safely (a NULL parameter is a value here).
"""

from __future__ import annotations

from dataclasses import replace

from planner.errors import PlanError
from planner.ir import (
    ArrangeBy,
    Col,
    Constant,
    FlatMap,
    Get,
    Join,
    Let,
    LetRec,
    Mfp,
    Negate,
    Reduce,
    Rel,
    SortKey,
    Threshold,
    TopK,
    Union,
    has_outer,
    map_cols,
    map_outer,
    walk,
)


def correlated(r: Rel, applied: frozenset[str]) -> bool:
    for n in walk(r):
        if isinstance(n, Mfp) and any(has_outer(e) for e in (*n.map, *n.filter)):
            return True
        if isinstance(n, FlatMap) and any(has_outer(e) for e in n.args):
            return True
        if isinstance(n, Get) and n.local and n.name in applied:
            return True
    return False


def apply(r: Rel, d: Rel, m: int, applied: frozenset[str] = frozenset()) -> Rel:
    if not correlated(r, applied):
        return Join(d, r, ())

    def sh(i: int) -> int:
        return i + m

    def sub(e):  # type: ignore[no-untyped-def]
        return map_outer(map_cols(e, sh), lambda o: Col(o.index))

    head = tuple(range(m))
    if isinstance(r, Get):
        # an applied binding already carries the parameter columns
        return Get(r.name, r.arity + m, True)
    if isinstance(r, Mfp):
        return Mfp(apply(r.input, d, m, applied), tuple(sub(e) for e in r.map),
                   tuple(sub(e) for e in r.filter), head + tuple(p + m for p in r.project))
    if isinstance(r, FlatMap):
        return FlatMap(apply(r.input, d, m, applied), r.func, tuple(sub(e) for e in r.args),
                       r.out_arity)
    if isinstance(r, Join):
        cl, cr = correlated(r.left, applied), correlated(r.right, applied)
        nl, nr = r.left.arity, r.right.arity
        if cl and not cr:
            return Join(apply(r.left, d, m, applied), r.right,
                        tuple((a + m, b) for a, b in r.keys))
        if cr and not cl:
            j = Join(r.left, apply(r.right, d, m, applied), tuple((a, b + m) for a, b in r.keys))
            proj = tuple(range(nl, nl + m)) + tuple(range(nl)) + tuple(
                range(nl + m, nl + m + nr))
            return Mfp(j, (), (), proj)
        keys = tuple((i, i) for i in range(m)) + tuple((a + m, b + m) for a, b in r.keys)
        j = Join(apply(r.left, d, m, applied), apply(r.right, d, m, applied), keys)
        proj = head + tuple(range(m, m + nl)) + tuple(range(2 * m + nl, 2 * m + nl + nr))
        return Mfp(j, (), (), proj)
    if isinstance(r, Reduce):
        return Reduce(apply(r.input, d, m, applied), head + tuple(g + m for g in r.group),
                      tuple(replace(a, arg=None if a.arg is None else a.arg + m,
                                    arg2=None if a.arg2 is None else a.arg2 + m)
                            for a in r.aggs))
    if isinstance(r, TopK):
        return TopK(apply(r.input, d, m, applied), head + tuple(g + m for g in r.group),
                    tuple(SortKey(k.col + m, k.desc, k.nulls_first) for k in r.order),
                    r.limit, r.offset)
    if isinstance(r, Negate):
        return Negate(apply(r.input, d, m, applied))
    if isinstance(r, Threshold):
        return Threshold(apply(r.input, d, m, applied))
    if isinstance(r, Union):
        return Union(tuple(apply(x, d, m, applied) for x in r.inputs))
    if isinstance(r, ArrangeBy):
        return ArrangeBy(apply(r.input, d, m, applied), head + tuple(k + m for k in r.keys))
    if isinstance(r, Let):
        if correlated(r.value, applied):
            return Let(r.id, apply(r.value, d, m, applied),
                       apply(r.body, d, m, applied | {r.id}))
        return Let(r.id, r.value, apply(r.body, d, m, applied))
    if isinstance(r, (LetRec, Constant)):
        raise PlanError("unsupported", "a recursive CTE inside a correlated subquery that "
                        "references the outer query is not supported")
    raise AssertionError(f"apply: unexpected node {type(r).__name__}")
