"""Naive reference evaluator for the engine acceptance tests.

Everything here recomputes from scratch on plain dicts (multisets ``{data: count}``) and lists of
``(data, time, diff)`` updates, so it is slow but obviously correct. Nothing here imports the
engine: the tests compare the engine's incremental output against these functions.

Times are tuples of ints compared in the product partial order.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

Time = tuple[int, ...]
Update = tuple[Any, Time, int]
Multiset = dict[Any, int]


# --------------------------------------------------------------------------------------------
# times and update streams


def leq(a: Time, b: Time) -> bool:
    """Product partial order."""
    return len(a) == len(b) and all(x <= y for x, y in zip(a, b, strict=True))


def consolidate(updates: Iterable[Update]) -> dict[tuple[Any, Time], int]:
    """Sum diffs of equal (data, time) pairs and drop zeros."""
    acc: dict[tuple[Any, Time], int] = defaultdict(int)
    for data, time, diff in updates:
        acc[(data, tuple(time))] += diff
    return {k: v for k, v in acc.items() if v != 0}


def accumulate(updates: Iterable[Update], t: Time) -> Multiset:
    """The collection at ``t``: the sum of updates at times ``<= t`` (zeros dropped)."""
    acc: dict[Any, int] = defaultdict(int)
    for data, time, diff in updates:
        if leq(tuple(time), t):
            acc[data] += diff
    return {k: v for k, v in acc.items() if v != 0}


def diff_multisets(new: Multiset, old: Multiset) -> Multiset:
    out = {k: new.get(k, 0) - old.get(k, 0) for k in set(new) | set(old)}
    return {k: v for k, v in out.items() if v != 0}


def add_multisets(*ms: Multiset) -> Multiset:
    acc: dict[Any, int] = defaultdict(int)
    for m in ms:
        for k, v in m.items():
            acc[k] += v
    return {k: v for k, v in acc.items() if v != 0}


def mobius_2d(colls: dict[tuple[int, int], Multiset]) -> dict[tuple[Any, Time], int]:
    """Differences at 2-D grid times whose accumulation gives ``colls`` at every grid point.

    ``D(e,i) = C(e,i) - C(e-1,i) - C(e,i-1) + C(e-1,i-1)`` (missing points are empty).
    """
    out: dict[tuple[Any, Time], int] = {}
    for (e, i), c in colls.items():
        d = add_multisets(
            c,
            {k: -v for k, v in colls.get((e - 1, i), {}).items()},
            {k: -v for k, v in colls.get((e, i - 1), {}).items()},
            colls.get((e - 1, i - 1), {}),
        )
        for k, v in d.items():
            out[(k, (e, i))] = v
    return out


def stable_hash(x: Any) -> int:
    """Deterministic hash (``hash(str)`` is salted per process)."""
    return zlib.crc32(repr(x).encode())


# --------------------------------------------------------------------------------------------
# operators on multisets


def op_map(m: Multiset, f: Callable[[Any], Hashable]) -> Multiset:
    acc: dict[Any, int] = defaultdict(int)
    for k, v in m.items():
        acc[f(k)] += v
    return {k: v for k, v in acc.items() if v != 0}


def op_filter(m: Multiset, p: Callable[[Any], bool]) -> Multiset:
    return {k: v for k, v in m.items() if p(k)}


def op_concat(*ms: Multiset) -> Multiset:
    return add_multisets(*ms)


def op_negate(m: Multiset) -> Multiset:
    return {k: -v for k, v in m.items()}


def group(m: Multiset) -> dict[Any, list[tuple[Any, int]]]:
    """Group ``(key, val)`` data by key: ``{key: sorted [(val, count)]}`` for positive counts."""
    g: dict[Any, list[tuple[Any, int]]] = defaultdict(list)
    for (k, v), c in m.items():
        if c > 0:
            g[k].append((v, c))
    for k in g:
        g[k].sort()
    return g


def op_join(a: Multiset, b: Multiset) -> Multiset:
    idx: dict[Any, list[tuple[Any, int]]] = defaultdict(list)
    for (k, v), c in b.items():
        idx[k].append((v, c))
    acc: dict[Any, int] = defaultdict(int)
    for (k, v1), c1 in a.items():
        for v2, c2 in idx.get(k, ()):
            acc[(k, (v1, v2))] += c1 * c2
    return {k: v for k, v in acc.items() if v != 0}


def op_semijoin(a: Multiset, keys: Multiset) -> Multiset:
    """Keys is a set (counts 0/1); keeps ``(key, val)`` with multiplicity when key present."""
    return {(k, v): c for (k, v), c in a.items() if keys.get(k, 0) > 0}


def op_antijoin(a: Multiset, keys: Multiset) -> Multiset:
    return {(k, v): c for (k, v), c in a.items() if keys.get(k, 0) <= 0}


def op_reduce(
    m: Multiset, f: Callable[[Any, list[tuple[Any, int]]], list[tuple[Any, int]]]
) -> Multiset:
    acc: dict[Any, int] = defaultdict(int)
    for k, vals in group(m).items():
        for out, c in f(k, vals):
            acc[(k, out)] += c
    return {k: v for k, v in acc.items() if v != 0}


def op_count(m: Multiset) -> Multiset:
    return {(d, c): 1 for d, c in m.items() if c != 0}


def op_distinct(m: Multiset) -> Multiset:
    return {d: 1 for d, c in m.items() if c > 0}


def op_threshold(m: Multiset, f: Callable[[int], int]) -> Multiset:
    out = {d: f(c) for d, c in m.items() if c > 0}
    return {d: c for d, c in out.items() if c != 0}


def op_sum(m: Multiset) -> Multiset:
    acc: dict[Any, int] = defaultdict(int)
    present: set[Any] = set()
    for (k, v), c in m.items():
        acc[k] += v * c
        present.add(k)
    return {(k, acc[k]): 1 for k in present}


def op_min(m: Multiset) -> Multiset:
    return {(k, vals[0][0]): 1 for k, vals in group(m).items()}


def op_max(m: Multiset) -> Multiset:
    return {(k, vals[-1][0]): 1 for k, vals in group(m).items()}


def op_top_k(
    m: Multiset, k: int, offset: int = 0, order: Callable[[Any], Any] | None = None
) -> Multiset:
    """Per key, the rows (with multiplicity) ``[offset, offset + k)`` sorted by ``order(val)``."""
    key_fn = order if order is not None else (lambda v: v)
    acc: dict[Any, int] = defaultdict(int)
    for key, vals in group(m).items():
        rows = [v for v, c in sorted(vals, key=lambda vc: key_fn(vc[0])) for _ in range(c)]
        for v in rows[offset : offset + k]:
            acc[(key, v)] += 1
    return dict(acc)


def fixpoint(
    start: Multiset, body: Callable[[Multiset], Multiset], limit: int = 10_000
) -> Multiset:
    """Iterate ``x_{i+1} = body(x_i)`` from ``x_0 = start`` until it stops changing."""
    x = start
    for _ in range(limit):
        y = body(x)
        if y == x:
            return x
        x = y
    raise RuntimeError("naive fixpoint did not converge")


# --------------------------------------------------------------------------------------------
# graph algorithms (as the dataflows compute them, on sets of edges)


def min_label_propagation(nodes: dict[Any, Any], edges: set[tuple[Any, Any]]) -> dict[Any, Any]:
    """Fig. 7 LocalMin to fixpoint: label(n) = min over seeds m reaching n of label(m)."""
    labels = dict(nodes)
    changed = True
    while changed:
        changed = False
        for s, d in edges:
            if s in labels and (d not in labels or labels[s] < labels[d]):
                labels[d] = labels[s]
                changed = True
    return labels


def scc_edges_fixpoint(edges: set[tuple[Any, Any]]) -> set[tuple[Any, Any]]:
    """Fig. 8: iterate TrimAndReverse twice to fixpoint; every endpoint seeds its own label."""

    def trim_and_reverse(es: set[tuple[Any, Any]]) -> set[tuple[Any, Any]]:
        nodes = {n: n for e in es for n in e}
        labels = min_label_propagation(nodes, es)
        return {(d, s) for s, d in es if labels[s] == labels[d]}

    y = set(edges)
    while True:
        z = trim_and_reverse(trim_and_reverse(y))
        if z == y:
            return y
        y = z


def reachable(roots: set[Any], edges: set[tuple[Any, Any]]) -> set[Any]:
    adj: dict[Any, list[Any]] = defaultdict(list)
    for s, d in edges:
        adj[s].append(d)
    seen = set(roots)
    stack = list(roots)
    while stack:
        n = stack.pop()
        for m in adj[n]:
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return seen


# --------------------------------------------------------------------------------------------
# string interning (seed 003, "iterate only the changes relative to init")


def intern_hash(pair: tuple[int, str], buckets: int) -> int:
    return stable_hash(pair) % buckets


def intern_logic(
    _h: int, vals: list[tuple[tuple[int, str], int]]
) -> list[tuple[tuple[int, str], int]]:
    """Reduce logic of the blog's final intern(): emits changes relative to round 0."""
    out: list[tuple[tuple[int, str], int]] = []
    (round0, rec0), c0 = vals[0]
    if round0 > 0:
        out.append(((0, rec0), -c0))
        out.append(((round0, rec0), c0))
    for (rnd, rec), c in vals[1:]:
        out.append(((0, rec), -c))
        out.append(((rnd + 1, rec), c))
    return out


def intern_naive(strings: set[str], buckets: int) -> dict[str, int]:
    """The fixpoint the interning dataflow computes, evaluated by plain iteration."""
    init = {(0, s): 1 for s in strings}

    def body(diff: Multiset) -> Multiset:
        cur = add_multisets(init, diff)
        keyed = op_map(cur, lambda p: (intern_hash(p, buckets), p))
        return op_map(op_reduce(keyed, intern_logic), lambda kv: kv[1])

    diff = fixpoint({}, body)
    final = add_multisets(diff, init)
    assert all(c == 1 for c in final.values()), final
    return {s: intern_hash((r, s), buckets) for (r, s) in final}
