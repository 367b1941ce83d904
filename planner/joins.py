"""Join ordering: a tree of inner joins and filters becomes a left-deep join along the join graph.

The binder writes ``FROM a, b, c WHERE ...`` as cross joins in FROM order with the whole WHERE
in one filter above them; planned as written, every intermediate result is a cross product.
``order_joins`` flattens each maximal tree of ``Join`` and map/filter/project nodes into
*leaves* (the inputs that are not inner joins: tables, Let bindings, aggregates, outer joins)
and *predicates* over the concatenation of the leaves' columns, then rebuilds it:

- every conjunct that reads one leaf filters that leaf (before it is joined or arranged);
- every conjunct ``x = y`` with ``x`` reading only leaf A and ``y`` only leaf B is a join key
  (an expression key becomes a map column of its leaf); SQL equality never matches NULL, so both
  key expressions get an ``IS NOT NULL`` filter, while keys the binder wrote as ``Join.keys``
  (which match NULL with NULL, used by decorrelation) stay null-matching;
- leaves join left-deep along equi-join edges (a cross product happens only when no remaining
  leaf shares an equality with the joined set). With table statistics (``Catalog.statistics``,
  read through ``planner.cardinality``) of three or more leaves the order is the one whose
  intermediate results, each arranged for the next join, have the fewest estimated rows;
  without them it is greedy: start at the most filtered leaf, then always join the most
  filtered linked leaf (FROM order among equals);
- every other conjunct applies right after the join that brings in the last leaf it reads.

``plan_delta_joins`` (the last rewrite) then turns a left-deep join of three or more inputs
into a ``DeltaJoin`` where that avoids arranging large intermediate results (see its
docstring); ``left_deep`` is the way back, used inside loops and as the tests' reference.

Invariant: the rebuilt plan denotes the same multiset. Inner joins and filters commute, so any
order of the leaves gives the same rows up to a permutation of columns, which the final
projection undoes. Outer joins are never flattened (the binder writes them as a union of an inner
join and the unmatched rows, so they are leaves here), hence nothing is reordered across them.
Filters on one leaf keep their relative order, so a guard like ``a <> 0`` still runs before
``10 // a`` (see ``lower.compile_mfp``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.cardinality import Estimator
from planner.ir import (
    ArrangeBy,
    Call,
    Col,
    DeltaJoin,
    Join,
    Lit,
    Mfp,
    Rel,
    Scalar,
    children,
    map_cols,
    scalar_cols,
    transform_up,
    with_children,
)


@dataclass(frozen=True)
class _KeyEq:
    """A null-matching equality of two concatenated columns (from ``Join.keys``)."""

    a: int
    b: int


Pred = Scalar | _KeyEq


class _Keep(Exception):
    """The join tree has a shape order_joins does not rebuild; it is left as written."""


def _joinish(r: Rel) -> bool:
    while isinstance(r, Mfp):
        r = r.input
    return isinstance(r, Join)


def _subst(e: Scalar, cols: list[Scalar]) -> Scalar:
    return map_cols(e, lambda i: cols[i])


def _flatten(r: Rel, leaves: list[Rel], preds: list[Pred],
             estimator: Estimator | None) -> list[Scalar]:
    """Leaves and predicates of r appended in place; returns r's columns as expressions over
    the concatenated leaf columns."""
    if isinstance(r, Join):
        lo = _flatten(r.left, leaves, preds, estimator)
        ro = _flatten(r.right, leaves, preds, estimator)
        for a, b in r.keys:
            la, rb = lo[a], ro[b]
            if not (isinstance(la, Col) and isinstance(rb, Col)):
                raise _Keep  # a key over a computed column (the binder never writes one)
            preds.append(_KeyEq(la.index, rb.index))
        return lo + ro
    if isinstance(r, Mfp) and _joinish(r.input):
        cols = list(_flatten(r.input, leaves, preds, estimator))
        for m in r.map:
            cols.append(_subst(m, cols))
        for p in r.filter:
            preds.append(_subst(p, cols))
        return [cols[i] for i in r.project]
    base = sum(x.arity for x in leaves)
    leaves.append(order_joins(r, estimator))
    return [Col(base + i) for i in range(r.arity)]


def _conjuncts(p: Scalar) -> list[Scalar]:
    if isinstance(p, Call) and p.func == "and":
        return [c for a in p.args for c in _conjuncts(a)]
    return [p]


def _not_null(e: Scalar) -> Scalar:
    return Call("not", (Call("is_null", (e,), "BOOLEAN"),), "BOOLEAN")


def _score(preds: list[Scalar]) -> int:
    """How selective a leaf's own filters look: an equality with a constant counts most."""
    s = 0
    for p in preds:
        if isinstance(p, Call) and p.func == "eq" and any(isinstance(a, Lit) for a in p.args):
            s += 4
        elif isinstance(p, Call) and p.func == "not" and isinstance(p.args[0], Call) and \
                p.args[0].func == "is_null":
            s += 0
        else:
            s += 1
    return s


Edge = tuple[int, int, int, int]  # (leaf A, column of A, leaf B, column of B): A.x = B.y


def _classes(edges: list[Edge]) -> list[list[tuple[int, int]]]:
    """The classes of (leaf, column) that the edges equate (union-find), each in first-seen
    order."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, ca, b, cb in edges:
        ra, rb = find((a, ca)), find((b, cb))
        if ra != rb:
            parent[ra] = rb
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for a, ca, b, cb in edges:
        for x in ((a, ca), (b, cb)):
            members = out.setdefault(find(x), [])
            if x not in members:
                members.append(x)
    return list(out.values())


def _implied(edges: list[Edge]) -> list[Edge]:
    """The equalities the edges imply between leaves they do not link directly: with
    ``c.x = s.y`` and ``s.y = n.z``, ``c.x = n.z`` lets the join start at c and n. Equality
    is transitive whether or not it matches NULL: a NULL-matching edge next to a SQL one meets
    a column filtered NOT NULL, so the implied edge matches as the SQL one does. An implied
    edge is implied by the others, so adding it never changes the joined rows."""
    out: list[Edge] = []
    for members in _classes(edges):
        cls = set(members)
        linked = {(a, b) for a, ca, b, cb in edges if (a, ca) in cls}
        linked |= {(b, a) for a, b in linked}
        for i, (a, ca) in enumerate(members):
            for b, cb in members[i + 1:]:
                if a != b and (a, b) not in linked:
                    out.append((a, ca, b, cb))
                    linked |= {(a, b), (b, a)}
    return out


def _greedy_order(score: list[int], adj: dict[int, set[int]]) -> list[int]:
    """Without statistics: start at the most filtered leaf, then always the most filtered leaf
    linked to the joined set (FROM order among equals)."""
    n = len(score)
    start = max(range(n), key=lambda i: (score[i], -i))
    order = [start]
    joined = {start}
    while len(order) < n:
        rest = [i for i in range(n) if i not in joined]
        linked = [i for i in rest if adj[i] & joined]
        pick = max(linked or rest, key=lambda i: (score[i], -i))
        order.append(pick)
        joined.add(pick)
    return order


# Up to this many leaves every connected left-deep order is costed (2^n subsets); beyond it the
# order is greedy on the same estimates.
_EXHAUSTIVE = 12


def joined_rows(inputs: list[Rel], edges: list[Edge],
                estimator: Estimator) -> Callable[[int], float]:
    """The estimated rows of joining a set of the inputs (a bit mask) along the edges among them.

    They do not depend on the order the set is joined in: the product of its inputs' rows
    divided, for each class of columns equated by the edges, by the distinct counts of all but
    the smallest-domain member (the containment assumption: joining on ``a.x = b.y = c.z``
    keeps one row per value of the smallest domain)."""
    n = len(inputs)
    est = [estimator.estimate(x) for x in inputs]
    classes: list[dict[int, float]] = []
    for members in _classes(edges):
        ds: dict[int, float] = {}
        for leaf, c in members:
            d = estimator.distinct(est[leaf], c)
            ds[leaf] = min(d, ds.get(leaf, d))
        classes.append(ds)

    def rows(mask: int) -> float:
        r = math.prod(est[i].rows for i in range(n) if mask >> i & 1)
        for members in classes:
            ds = sorted(d for leaf, d in members.items() if mask >> leaf & 1)
            for d in ds[1:]:
                r /= d
        return r

    return rows


def cheapest_order(inputs: list[Rel], edges: list[Edge], adj: dict[int, set[int]],
                   estimator: Estimator) -> list[int]:
    """The left-deep order whose intermediate results (every join's output except the last,
    each of which is arranged for the next join) have the fewest estimated rows in total
    (`joined_rows`). A set's rows do not depend on its order, so the search is over subsets
    (Selinger's dynamic programme), extending a set only by an input linked to it unless none
    is (a cross product is the last resort, as in the greedy order)."""
    n = len(inputs)
    rows = joined_rows(inputs, edges, estimator)
    full = (1 << n) - 1
    if n > _EXHAUSTIVE:
        order = [min(range(n), key=lambda i: (rows(1 << i), i))]
        mask = 1 << order[0]
        while mask != full:
            rest = [j for j in range(n) if not mask >> j & 1]
            linked = [j for j in rest if any(mask >> k & 1 for k in adj[j])]
            j = min(linked or rest, key=lambda j: (rows(mask | 1 << j), j))
            order.append(j)
            mask |= 1 << j
        return order
    best: dict[int, tuple[float, tuple[int, ...]]] = {1 << i: (0.0, (i,)) for i in range(n)}
    for mask in sorted(range(1, full), key=lambda m: (m.bit_count(), m)):
        if mask not in best:
            continue
        cost, order = best[mask]
        rest = [j for j in range(n) if not mask >> j & 1]
        linked = [j for j in rest if any(mask >> k & 1 for k in adj[j])]
        for j in linked or rest:
            nxt = mask | 1 << j
            c = cost + (rows(nxt) if nxt != full else 0.0)
            cand = (c, (*order, j))
            if nxt not in best or cand < best[nxt]:
                best[nxt] = cand
    return list(best[full][1])


def _rebuild(leaves: list[Rel], preds: list[Pred], outs: list[Scalar],
             estimator: Estimator | None) -> Rel:
    offs: list[int] = []
    o = 0
    for leaf in leaves:
        offs.append(o)
        o += leaf.arity
    owner = [i for i, leaf in enumerate(leaves) for _ in range(leaf.arity)]

    def leaves_of(e: Scalar) -> set[int]:
        return {owner[c] for c in scalar_cols(e)}

    def local(e: Scalar, leaf: int) -> Scalar:
        return map_cols(e, lambda i: i - offs[leaf])

    own: list[list[Scalar]] = [[] for _ in leaves]
    extras: list[list[Scalar]] = [[] for _ in leaves]
    top: list[Scalar] = []
    residual: list[tuple[frozenset[int], Scalar]] = []
    # edges: (leaf A, local column of A, leaf B, local column of B)
    edges: list[Edge] = []

    def key_col(e: Scalar, leaf: int) -> int:
        le = local(e, leaf)
        if isinstance(le, Col):
            return le.index
        if le in extras[leaf]:
            return leaves[leaf].arity + extras[leaf].index(le)
        extras[leaf].append(le)
        return leaves[leaf].arity + len(extras[leaf]) - 1

    sql_keys: list[tuple[int, Scalar]] = []
    for p in preds:
        if isinstance(p, _KeyEq):
            la, lb = owner[p.a], owner[p.b]
            edges.append((la, p.a - offs[la], lb, p.b - offs[lb]))
            continue
        for c in _conjuncts(p):
            ls = leaves_of(c)
            if not ls:
                top.append(c)
            elif len(ls) == 1:
                (leaf,) = ls
                own[leaf].append(local(c, leaf))
            else:
                if isinstance(c, Call) and c.func == "eq" and len(c.args) == 2:
                    x, y = c.args
                    lx, ly = leaves_of(x), leaves_of(y)
                    if len(lx) == 1 and len(ly) == 1 and lx != ly:
                        (a,), (b,) = lx, ly
                        sql_keys += [(a, x), (b, y)]
                        edges.append((a, key_col(x, a), b, key_col(y, b)))
                        continue
                residual.append((frozenset(ls), c))
    for leaf, e in sql_keys:
        own[leaf].append(_not_null(local(e, leaf)))

    # Each leaf keeps only the columns read above it (outputs, residual filters, join keys),
    # so neither the joins nor their arrangements carry columns nobody reads.
    needed: list[set[int]] = [set() for _ in leaves]
    for e in (*outs, *top, *(c for _, c in residual)):
        for c in scalar_cols(e):
            needed[owner[c]].add(c - offs[owner[c]])
    for a, ca, b, cb in edges:
        needed[a].add(ca)
        needed[b].add(cb)
    inputs: list[Rel] = []
    lpos: list[dict[int, int]] = []
    for i, leaf in enumerate(leaves):
        n = leaf.arity + len(extras[i])
        keep = tuple(sorted(needed[i]))
        lpos.append({c: k for k, c in enumerate(keep)})
        if own[i] or extras[i] or keep != tuple(range(n)):
            inputs.append(Mfp(leaf, tuple(extras[i]), tuple(own[i]), keep))
        else:
            inputs.append(leaf)

    informed = estimator is not None and estimator.informed and len(leaves) >= 3
    if informed:
        edges += _implied(edges)
    adj: dict[int, set[int]] = {i: set() for i in range(len(leaves))}
    for a, _, b, _ in edges:
        adj[a].add(b)
        adj[b].add(a)
    if informed:
        assert estimator is not None
        local_edges = [(a, lpos[a][ca], b, lpos[b][cb]) for a, ca, b, cb in edges]
        order = cheapest_order(inputs, local_edges, adj, estimator)
    else:
        order = _greedy_order([_score(own[i]) for i in range(len(leaves))], adj)
    start = order[0]

    pos: dict[tuple[int, int], int] = {}
    cur = inputs[start]
    for c, k in lpos[start].items():
        pos[(start, c)] = k
    done = {start}
    pending = list(residual)
    # (leaf, column)s the keys of the joins so far make equal (union-find): with the implied
    # edges, an edge between two of them is implied by those keys, and needs no key of its own
    # (a key per edge is always correct; fewer keys make smaller arrangements)
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for nxt in order[1:]:
        keys = []
        for a, ca, b, cb in edges:
            if a in done and b == nxt:
                left, right = pos[(a, ca)], lpos[b][cb]
            elif b in done and a == nxt:
                left, right = pos[(b, cb)], lpos[a][ca]
            else:
                continue
            if informed:
                ra, rb = find((a, ca)), find((b, cb))
                if ra == rb:
                    continue
                parent[ra] = rb
            keys.append((left, right))
        width = cur.arity
        cur = Join(cur, inputs[nxt], tuple(keys))
        for c, k in lpos[nxt].items():
            pos[(nxt, c)] = width + k
        done.add(nxt)
        now = [c for ls, c in pending if ls <= done]
        pending = [(ls, c) for ls, c in pending if not ls <= done]
        if now:
            cur = Mfp(cur, (), tuple(map_cols(c, lambda i: pos[(owner[i], i - offs[owner[i]])])
                                     for c in now), tuple(range(cur.arity)))
    assert not pending

    def place(i: int) -> int:
        return pos[(owner[i], i - offs[owner[i]])]

    n = cur.arity
    maps: list[Scalar] = []
    proj: list[int] = []
    for e in outs:
        if isinstance(e, Col):
            proj.append(place(e.index))
        else:
            maps.append(map_cols(e, place))
            proj.append(n + len(maps) - 1)
    return Mfp(cur, tuple(maps), tuple(map_cols(c, place) for c in top), tuple(proj))


def order_joins(r: Rel, estimator: Estimator | None = None) -> Rel:
    """Every maximal tree of inner joins and filters, rebuilt along its join graph (ordered by
    estimated cardinalities when the estimator has statistics)."""
    if _joinish(r):
        leaves: list[Rel] = []
        preds: list[Pred] = []
        try:
            return _rebuild(leaves, preds, _flatten(r, leaves, preds, estimator), estimator)
        except _Keep:
            return with_children(r, [order_joins(k, estimator) for k in children(r)])
    kids = children(r)
    if not kids:
        return r
    return with_children(r, [order_joins(k, estimator) for k in kids])


# ---------------------------------------------------------------- delta joins


def _binary_tree(r: Rel) -> bool:
    """r is an inner binary join, possibly under arrangements and maps-free Mfps."""
    while isinstance(r, ArrangeBy) or (isinstance(r, Mfp) and not r.map):
        r = r.input
    return isinstance(r, Join)


def _flatten_binary(r: Rel, inputs: list[Rel], keys: list[tuple[int, int]],
                    filters: list[Scalar], crosses: list[bool], choose: str) -> list[int]:
    """Inputs, key pairs and filters (over the concatenated input columns) of a binary join
    tree, in place; returns r's columns as concatenated columns."""
    if isinstance(r, ArrangeBy) and _binary_tree(r.input):
        return _flatten_binary(r.input, inputs, keys, filters, crosses, choose)
    if isinstance(r, Mfp) and not r.map and _binary_tree(r.input):
        cols = _flatten_binary(r.input, inputs, keys, filters, crosses, choose)
        filters.extend(map_cols(p, lambda i: cols[i]) for p in r.filter)
        return [cols[i] for i in r.project]
    if isinstance(r, Join):
        lo = _flatten_binary(r.left, inputs, keys, filters, crosses, choose)
        ro = _flatten_binary(r.right, inputs, keys, filters, crosses, choose)
        keys.extend((lo[a], ro[b]) for a, b in r.keys)
        crosses.append(not r.keys)
        return lo + ro
    while isinstance(r, ArrangeBy):  # an input's arrangement for the binary plan
        r = r.input
    base = sum(x.arity for x in inputs)
    inputs.append(plan_delta_joins(r, choose))
    return [base + i for i in range(r.arity)]


def _selective(r: Rel) -> bool:
    """r filters its rows by something other than the NOT NULL checks join keys add."""
    if not isinstance(r, Mfp):
        return False
    return any(not (isinstance(p, Call) and p.func == "not" and isinstance(p.args[0], Call)
                    and p.args[0].func == "is_null") for p in r.filter)


def plan_delta_joins(r: Rel, choose: str = "auto") -> Rel:
    """Every binary join tree of three or more inputs that is better as a delta join becomes a
    ``DeltaJoin`` of its inputs (in the tree's left-deep order) under one Mfp for its
    filters and projection. ``choose`` is "auto", "delta" (every such tree) or "binary".

    "auto" picks the delta join when the left-deep plan would arrange intermediate results
    that are likely larger than the inputs: when it has a cross product, or when no input is
    filtered (otherwise the join starts from the filtered input and its intermediate results
    stay small, while a delta join arranges each middle input once per neighbour)."""
    if choose != "binary" and _binary_tree(r):
        inputs: list[Rel] = []
        keys: list[tuple[int, int]] = []
        filters: list[Scalar] = []
        crosses: list[bool] = []
        cols = _flatten_binary(r, inputs, keys, filters, crosses, choose)
        if len(inputs) >= 3 and (choose == "delta" or any(crosses) or
                                 not any(_selective(x) for x in inputs)):
            dj = DeltaJoin(tuple(inputs), tuple(keys))
            return Mfp(dj, (), tuple(filters), tuple(cols))
        return _in_leaves(r, choose)  # the tree stays binary: so do its parts
    kids = children(r)
    if not kids:
        return r
    return with_children(r, [plan_delta_joins(k, choose) for k in kids])


def _in_leaves(r: Rel, choose: str) -> Rel:
    """plan_delta_joins applied to the inputs of a binary join tree, not to its subtrees."""
    if isinstance(r, Join) or ((isinstance(r, ArrangeBy) or (isinstance(r, Mfp) and not r.map))
                               and _binary_tree(r.input)):
        return with_children(r, [_in_leaves(k, choose) for k in children(r)])
    if isinstance(r, ArrangeBy):
        return ArrangeBy(plan_delta_joins(r.input, choose), r.keys)
    return plan_delta_joins(r, choose)


def left_deep(r: DeltaJoin) -> Rel:
    """The binary join of r's inputs in order, each step keyed by the key pairs it closes
    (the reference plan, and the plan inside loops)."""
    own = r.owners()
    offs = [sum(x.arity for x in r.inputs[:i]) for i in range(len(r.inputs))]
    cur: Rel = r.inputs[0]
    for j in range(1, len(r.inputs)):
        step = []
        for a, b in r.keys:
            (ia, _), (ib, _) = own[a], own[b]
            if ia == j and ib < j:
                a, b = b, a
                ia, ib = ib, ia
            if ib == j and ia < j:
                step.append((a, b - offs[j]))
        kl = tuple(a for a, _ in step)
        kr = tuple(b for _, b in step)
        cur = Join(ArrangeBy(cur, kl), ArrangeBy(r.inputs[j], kr), tuple(step))
    return cur


def as_binary(r: Rel) -> Rel:
    """r with every DeltaJoin replaced by its left-deep binary join (the reference plan)."""
    return transform_up(r, lambda n: left_deep(n) if isinstance(n, DeltaJoin) else n)
