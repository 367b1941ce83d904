"""Lowering: a planner IR plan becomes engine operators, through the engine's public API only.

Invariants:
- Each distinct (plan node, scope, environment) is lowered once, so a subplan read twice
  (a Let value, a CTE, a repeated subtree) is one dataflow fragment; each (collection, key)
  arrangement is built once per dataflow, and arrangements of source collections are shared
  between all views built in the same Dataflow.
- Rows are tuples everywhere; keyed operators see ``(key_tuple, row)`` pairs. An arranged
  Mfp is filtered, projected and keyed by one generated kernel (planner.mfp_kernel) when it
  can be; ``Lowerer(fuse=False)`` lowers it as written (the reference).
- A DeltaJoin is a delta join (one path of half joins per input, reading only base
  arrangements) where times are totally ordered: the root scope with one time coordinate, on
  the in-process executor. Elsewhere it is its left-deep binary join (planner.joins.left_deep).
- LetRec follows the naive evaluator's semantics exactly (planner.naive): one Variable per
  binding, starting empty; a binding reads the *current* iteration's result of earlier bindings
  and the Variable (previous iteration) of itself and later ones. Hence naive and engine
  results agree whenever the loop converges.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from engine.canonical import canonical
from engine.collection import half_join
from planner.aggregate import (
    IncrementalAggregates,
    IncrementalTopK,
    as_grouped,
    reduce_group,
    topk_rows,
)
from planner.errors import PlanError
from planner.ir import (
    ArrangeBy,
    Call,
    Col,
    Constant,
    DeltaJoin,
    FlatMap,
    Get,
    Join,
    Let,
    LetRec,
    Mfp,
    Negate,
    Reduce,
    Rel,
    Threshold,
    TopK,
    Union,
    scalar_cols,
)
from planner.joins import left_deep
from planner.mfp_kernel import (
    compiled_mfp,
    keyed_mfp,
    keyed_row,
    plain_mfp,
    projection,
    reference_mfp,
)
from planner.scalar import compile_scalar, family
from planner.table_functions import compile_flat_map

# Arrangements of source collections, shared by every view built in the same Dataflow
# (keyed weakly by the Dataflow so a dropped dataflow frees them).
_SHARED: weakref.WeakKeyDictionary[Any, dict[tuple[int, tuple[int, ...]], tuple[Any, Any]]] = (
    weakref.WeakKeyDictionary())


def _getter(idx: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    if not idx:
        return lambda row: ()
    if len(idx) == 1:
        i = idx[0]
        return lambda row: (row[i],)
    g = itemgetter(*idx)
    return lambda row: g(row)


def _concat_pair(kv: tuple[tuple[Any, ...], tuple[Any, ...]]) -> tuple[Any, ...]:
    """(key, aggregates) -> the output row."""
    return kv[0] + kv[1]


# the same over a whole list of updates (see engine.operators.stateless.map_logic)
_concat_pair.over_updates = lambda u: [(k + v, t, r) for (k, v), t, r in u]  # type: ignore[attr-defined]
# ... and over a reduce's pairs kept as columns, whose rows are already key + val
_concat_pair.over_pair_columns = True  # type: ignore[attr-defined]


def _canonical_floats(
    fn: Callable[[tuple[Any, ...]], Any], type_: str | None
) -> Callable[[tuple[Any, ...]], Any]:
    """`fn`, returning the engine's one NaN object for any NaN it computes (0.0 / 0.0): rows
    holding different NaN objects would be different keys, and a NaN row never retracted."""
    if type_ is None or family(type_) not in ("float", "null", "other"):
        return fn
    return lambda row: canonical(fn(row))


def compile_mfp(m: Mfp) -> Callable[[tuple[Any, ...]], tuple[tuple[Any, ...], ...]]:
    """The Mfp as one function row -> () or (out_row,), for a single flat_map.

    Each filter runs as soon as the map columns it reads exist, before later maps (Materialize's
    MFP order): fusion puts a projection's expressions and the WHERE that guards them in one
    Mfp, and ``SELECT 10 // a ... WHERE a <> 0`` must not evaluate ``10 // 0``, which raises."""
    n = m.input.arity
    maps = [_canonical_floats(compile_scalar(e), getattr(e, "type", None)) for e in m.map]
    after: list[list[Callable[[tuple[Any, ...]], Any]]] = [[] for _ in range(len(maps) + 1)]
    not_null: list[int] = []  # the IS NOT NULL filters on input columns that join keys add
    for p in m.filter:
        need = max((c - n + 1 for c in scalar_cols(p) if c >= n), default=0)
        if need == 0 and not after[0] and isinstance(p, Call) and p.func == "not" and \
                isinstance(p.args[0], Call) and p.args[0].func == "is_null" and \
                isinstance(p.args[0].args[0], Col):
            not_null.append(p.args[0].args[0].index)
            continue
        after[need].append(compile_scalar(p))
    proj = _getter(m.project)
    steps = list(zip(maps, after[1:], strict=True))
    first = after[0]

    def f(row: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
        for i in not_null:
            if row[i] is None:
                return ()
        for p in first:
            if p(row) is not True:
                return ()
        full = row
        for mp, filters in steps:
            full = full + (mp(full),)
            for p in filters:
                if p(full) is not True:
                    return ()
        return (proj(full),)

    return f


# Executors whose payloads the driver may read record by record (reduce_total collects them).
_LOCAL_EXECUTORS = ("inprocess", "columnar")


def use_reduce_total(scope: Any) -> bool:
    """Whether reduces in `scope` keep per-group incremental state (engine reduce_total): only
    where times are totally ordered, the root scope of a one-coordinate dataflow (a view;
    inside WITH RECURSIVE loops times are pairs and the general reduce runs). The environment
    variable DIFFSQL_GENERAL_REDUCE=1 lowers every reduce to the general one, the reference
    that tests and benchmarks compare against."""
    return (scope.parent is None and scope.dims == 1
            and os.environ.get("DIFFSQL_GENERAL_REDUCE") != "1"
            and getattr(scope.dataflow.executor, "name", "") in _LOCAL_EXECUTORS)


class Lowerer:
    def __init__(self, df: Any, sources: dict[str, Any], fuse: bool = True,
                 start: int = 0) -> None:
        self.df = df
        # The epoch a constant enters at: the first one the view is read at. Entered earlier,
        # a constant's rows sit at another time than the sources' first rows, so nothing
        # consolidates them with those (a global aggregate's NULL row and its retraction, at
        # two times, made a cross join with it yield every row three times).
        self.start = start
        self.fuse = fuse  # generated keyed-MFP kernels; False lowers every node as written
        self.sources = sources
        self.memo: dict[tuple[Any, ...], Any] = {}
        self.entered: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.arranged: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}
        self.env_ids = itertools.count(1)
        try:
            self.shared = _SHARED.setdefault(df, {})
        except TypeError:  # a Dataflow that cannot be weakly referenced: no sharing
            self.shared = {}

    # -- scopes

    def bring(self, c: Any, scope: Any) -> Any:
        """c, entered step by step into ``scope`` (a descendant of c's scope)."""
        if c.scope is scope:
            return c
        key = (id(c), id(scope))
        hit = self.entered.get(key)
        if hit is not None:
            return hit[1]
        path = []
        s = scope
        while s is not None and s is not c.scope:
            path.append(s)
            s = s.parent
        if s is None:
            raise PlanError("internal", "collection used outside its scope")
        out = c
        for s in reversed(path):
            out = out.enter(s)
        self.entered[key] = (c, out)
        return out

    def keyed(self, keys: tuple[int, ...]) -> Callable[[tuple[Any, ...]], Any]:
        """row -> (the key columns, row): generated, or the reference getter unfused."""
        if self.fuse:
            return keyed_row(keys)
        kf = _getter(keys)
        return lambda row: (kf(row), row)

    def lower_keyed(self, r: Rel, keys: tuple[int, ...], scope: Any, env: dict[str, Any],
                    env_key: int) -> Any:
        """r's rows keyed by `keys`, ``(key columns, row)``: an Mfp and its keying in one
        generated kernel when fused (a reduce's input), else r then `keyed`."""
        if self.fuse and isinstance(r, Mfp):
            kernel = keyed_mfp(r, keys) or compiled_mfp(r, keys)
            if kernel is not None:
                return self.lower(r.input, scope, env, env_key).flat_map(kernel)
        return self.lower(r, scope, env, env_key).map(self.keyed(keys))

    # -- plans

    def lower(self, r: Rel, scope: Any, env: dict[str, Any], env_key: int) -> Any:
        key = (r, id(scope), env_key)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1]
        out = self._lower(r, scope, env, env_key)
        self.memo[key] = (scope, out)
        return out

    def arrange(self, a: ArrangeBy, scope: Any, env: dict[str, Any], env_key: int,
                shared: bool = True) -> Any:
        if isinstance(a.input, Mfp) and self.fuse:
            # filter, project and key in one generated function per row (planner.mfp_kernel)
            m = a.input
            kernel = keyed_mfp(m, a.keys)
            if kernel is not None:
                src = self.lower(m.input, scope, env, env_key)
                fkey = (id(src), (m, a.keys))
                hit = self.arranged.get(fkey)
                if hit is not None:
                    return hit[1]
                name = (m.input.name if isinstance(m.input, Get) else "plan") + ".mfp.by" + \
                    "".join(f"_{k}" for k in a.keys)
                arr = src.flat_map(kernel).arrange_by_key(name)
                self.arranged[fkey] = (src, arr)
                return arr
        c = self.lower(a.input, scope, env, env_key)
        # A half join must see the history of every arrangement it reads (one shared with
        # another view may be compacted already): it asks for one of its own (shared=False).
        cache = self.shared if shared and isinstance(a.input, Get) and not a.input.local and \
            c.scope.parent is None else self.arranged
        key = (id(c), a.keys)
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        kf = _getter(a.keys)
        name = (a.input.name if isinstance(a.input, Get) else "plan") + ".by" + "".join(
            f"_{k}" for k in a.keys)
        arr = c.map(keyed_row(a.keys) if self.fuse else lambda row: (kf(row), row)
                    ).arrange_by_key(name)
        cache[key] = (c, arr)
        return arr

    def _lower(self, r: Rel, scope: Any, env: dict[str, Any], env_key: int) -> Any:
        if isinstance(r, Get):
            src = env[r.name] if r.local else self.sources[r.name]
            return self.bring(src, scope)
        if isinstance(r, Constant):
            handle, c = self.df.new_input("constant")
            if self.start:
                handle.advance_to(self.start)
            for row in r.rows:
                handle.insert(row)
            handle.close()
            return self.bring(c, scope)
        if isinstance(r, Mfp):
            c = self.lower(r.input, scope, env, env_key)
            if not r.map and not r.filter:
                return c.map(projection(r.project) if self.fuse else _getter(r.project))
            if not self.fuse:
                return c.flat_map(compile_mfp(r))
            return c.flat_map(plain_mfp(r) or compiled_mfp(r) or reference_mfp(r))
        if isinstance(r, FlatMap):
            return self.lower(r.input, scope, env, env_key).flat_map(compile_flat_map(r))
        if isinstance(r, ArrangeBy):
            return self.arrange(r, scope, env, env_key).as_collection(lambda k, v: v)
        if isinstance(r, Join):
            la = r.left if isinstance(r.left, ArrangeBy) else ArrangeBy(
                r.left, tuple(a for a, _ in r.keys))
            ra = r.right if isinstance(r.right, ArrangeBy) else ArrangeBy(
                r.right, tuple(b for _, b in r.keys))
            left = self.arrange(la, scope, env, env_key)
            right = self.arrange(ra, scope, env, env_key)
            return left.join_map(right, _concat_values)
        if isinstance(r, DeltaJoin):
            if scope.parent is None and scope.dims == 1 and \
                    getattr(self.df.executor, "name", "") == "inprocess":
                return self.delta_join(r, scope, env, env_key)
            # partially ordered times (loops), or an executor whose batches half joins cannot
            # read (engine/operators/half_join.py): the left-deep binary join
            return self.lower(left_deep(r), scope, env, env_key)
        if isinstance(r, Reduce):
            if not r.aggs:
                c = self.lower(r.input, scope, env, env_key)
                if r.group != tuple(range(r.input.arity)):
                    c = c.map(projection(r.group) if self.fuse else _getter(r.group))
                return c.distinct()
            aggs = as_grouped(r.group, r.aggs)
            keyed = self.lower_keyed(r.input, r.group, scope, env, env_key)
            if use_reduce_total(scope):
                red = keyed.reduce_total(IncrementalAggregates(aggs), "reduce")
                return red.map(_concat_pair)

            def logic(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
                # An aggregate can compute a NaN (inf + -inf); it must be the engine's one NaN
                # so the row retracts when the group changes.
                return [(canonical(reduce_group(aggs, vals)), 1)]

            red = keyed.reduce(logic, "reduce")
            return red.map(_concat_pair)
        if isinstance(r, TopK):
            c = self.lower(r.input, scope, env, env_key)
            order, limit, offset = r.order, r.limit, r.offset
            if use_reduce_total(scope):
                return c.map(self.keyed(r.group)).reduce_total(
                    IncrementalTopK(order, limit, offset), "topk").map(lambda kv: kv[1])

            def topk(key: Any, vals: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
                return topk_rows(vals, order, limit, offset)

            return c.map(self.keyed(r.group)).reduce(topk, "topk").map(
                lambda kv: kv[1])
        if isinstance(r, Negate):
            return self.lower(r.input, scope, env, env_key).negate()
        if isinstance(r, Threshold):
            return self.lower(r.input, scope, env, env_key).threshold(
                lambda n: n if n > 0 else 0)
        if isinstance(r, Union):
            cs = [self.lower(k, scope, env, env_key) for k in r.inputs]
            return cs[0].concat(*cs[1:]) if len(cs) > 1 else cs[0]
        if isinstance(r, Let):
            value = self.lower(r.value, scope, env, env_key)
            env2 = dict(env)
            env2[r.id] = value
            return self.lower(r.body, scope, env2, env_key)
        if isinstance(r, LetRec):
            return self.letrec(r, scope, env)
        raise AssertionError(type(r).__name__)

    def delta_join(self, r: DeltaJoin, scope: Any, env: dict[str, Any], env_key: int) -> Any:
        """One path per input (``r.paths()``): its changes, half-joined with each other input's
        arrangement by the keys that link it to the inputs visited so far (strictly before
        the change's time for inputs earlier in ``r.inputs``), then permuted to r's column
        order. Only base inputs are arranged, each once per distinct key."""
        own = r.owners()
        offs = [sum(x.arity for x in r.inputs[:i]) for i in range(len(r.inputs))]
        outs = []
        for i, path in enumerate(r.paths()):
            stream = self.lower(r.inputs[i], scope, env, env_key)
            layout = [(i, c) for c in range(r.inputs[i].arity)]
            for j in path[1:]:
                at = {g: n for n, g in enumerate(layout)}
                pairs = []
                for a, b in r.keys:
                    if own[b][0] == j and own[a] in at:
                        pairs.append((at[own[a]], b - offs[j]))
                    elif own[a][0] == j and own[b] in at:
                        pairs.append((at[own[b]], a - offs[j]))
                arr = self.arrange(ArrangeBy(r.inputs[j], tuple(b for _, b in pairs)), scope,
                                   env, env_key, shared=False)
                cols = tuple(a for a, _ in pairs)
                stream = half_join(stream, arr, _getter(cols), _concat, strict=j < i,
                                   name=f"delta.{i}.{j}", key_columns=cols, concat=True)
                layout += [(j, c) for c in range(r.inputs[j].arity)]
            at = {g: n for n, g in enumerate(layout)}
            perm = tuple(at[g] for g in own)
            outs.append(stream if perm == tuple(range(len(perm))) else stream.map(
                projection(perm) if self.fuse else _getter(perm)))
        return outs[0].concat(*outs[1:])

    def letrec(self, r: LetRec, scope: Any, env: dict[str, Any]) -> Any:
        from engine import Variable

        inner = scope.iterative(r.limit)
        variables = [Variable(inner) for _ in r.ids]
        results: list[Any] = []
        for j, value in enumerate(r.values):
            env_j = dict(env)
            for k, i in enumerate(r.ids):
                env_j[i] = results[k] if k < j else variables[k].collection
            res = self.lower(value, inner, env_j, next(self.env_ids))
            variables[j].set(res)
            results.append(res)
        env_b = dict(env)
        for i, res in zip(r.ids, results, strict=True):
            env_b[i] = res.leave()
        return self.lower(r.body, scope, env_b, next(self.env_ids))


def _concat(row: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
    return row + other


def _concat_values(key: Any, row: tuple[Any, ...], other: tuple[Any, ...]) -> tuple[Any, ...]:
    return row + other


# The executor may join batches of columns as columns for it (engine.columns_join).
_concat_values.concatenates = True  # type: ignore[attr-defined]


def lower(plan: Rel, df: Any, sources: dict[str, Any], start: int = 0) -> Any:
    """Build ``plan`` in ``df`` reading ``sources``; returns the root-scope output Collection.
    The plan's constants enter at epoch ``start`` (see `Lowerer`)."""
    low = Lowerer(df, sources, start=start)
    return low.lower(plan, df.root, {}, 0)
