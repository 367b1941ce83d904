"""A naive evaluator of planner IR over in-memory multisets: the oracle for the engine lowering
and for fixpoint semantics.

Invariant: ``evaluate(plan, sources)`` is the multiset (dict row -> positive count) the plan
denotes, computed from scratch with no incrementality. LetRec follows WITH MUTUALLY RECURSIVE:
every binding starts empty; one round re-evaluates the bindings in order, each seeing the values
already computed in this round for earlier bindings and last round's for itself and later ones;
rounds repeat until a round changes nothing, and a loop still changing after ``limit`` rounds
raises PlanError("recursion_limit").
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from planner.aggregate import as_grouped, reduce_group, topk_rows
from planner.errors import PlanError
from planner.ir import (
    ArrangeBy,
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
)
from planner.joins import left_deep
from planner.lower import compile_mfp
from planner.table_functions import compile_flat_map

Bag = dict[tuple[Any, ...], int]


def _clean(b: dict[tuple[Any, ...], int]) -> Bag:
    return {k: v for k, v in b.items() if v != 0}


def evaluate(r: Rel, sources: dict[str, Bag], env: dict[str, Bag] | None = None) -> Bag:
    env = dict(env or {})
    return _eval(r, sources, env)


def _eval(r: Rel, sources: dict[str, Bag], env: dict[str, Bag]) -> Bag:
    if isinstance(r, Get):
        if r.local:
            return env[r.name]
        return dict(sources[r.name])
    if isinstance(r, Constant):
        out: dict[tuple[Any, ...], int] = defaultdict(int)
        for row in r.rows:
            out[row] += 1
        return dict(out)
    if isinstance(r, Mfp):
        inp = _eval(r.input, sources, env)
        # the engine's row function: the same filter-before-later-maps order, so the same
        # rows raise EvaluationError in both
        mfp = compile_mfp(r)
        out = defaultdict(int)
        for row, c in inp.items():
            for o in mfp(row):
                out[o] += c
        return _clean(out)
    if isinstance(r, FlatMap):
        inp = _eval(r.input, sources, env)
        fm = compile_flat_map(r)
        out = defaultdict(int)
        for row, c in inp.items():
            for o in fm(row):
                out[o] += c
        return _clean(out)
    if isinstance(r, ArrangeBy):
        return _eval(r.input, sources, env)
    if isinstance(r, DeltaJoin):
        return _eval(left_deep(r), sources, env)
    if isinstance(r, Join):
        left = _eval(r.left, sources, env)
        right = _eval(r.right, sources, env)
        index: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
        for row, c in right.items():
            index[tuple(row[b] for _, b in r.keys)].append((row, c))
        out = defaultdict(int)
        for row, c in left.items():
            for row2, c2 in index.get(tuple(row[a] for a, _ in r.keys), ()):
                out[row + row2] += c * c2
        return _clean(out)
    if isinstance(r, Reduce):
        inp = _eval(r.input, sources, env)
        groups: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
        for row, c in inp.items():
            groups[tuple(row[g] for g in r.group)].append((row, c))
        out = {}
        for key, rows in groups.items():
            if sum(c for _, c in rows) <= 0:
                continue
            out[key + reduce_group(as_grouped(r.group, r.aggs), rows)] = 1
        return out
    if isinstance(r, TopK):
        inp = _eval(r.input, sources, env)
        tgroups: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = defaultdict(list)
        for row, c in inp.items():
            if c > 0:
                tgroups[tuple(row[g] for g in r.group)].append((row, c))
        out = defaultdict(int)
        for rows in tgroups.values():
            for row, c in topk_rows(rows, r.order, r.limit, r.offset):
                out[row] += c
        return dict(out)
    if isinstance(r, Negate):
        return {k: -v for k, v in _eval(r.input, sources, env).items()}
    if isinstance(r, Threshold):
        return {k: v for k, v in _eval(r.input, sources, env).items() if v > 0}
    if isinstance(r, Union):
        out = defaultdict(int)
        for k in r.inputs:
            for row, c in _eval(k, sources, env).items():
                out[row] += c
        return _clean(out)
    if isinstance(r, Let):
        env2 = dict(env)
        env2[r.id] = _eval(r.value, sources, env)
        return _eval(r.body, sources, env2)
    if isinstance(r, LetRec):
        env2 = dict(env)
        for i in r.ids:
            env2[i] = {}
        rounds = 0
        while True:
            changed = False
            for i, v in zip(r.ids, r.values, strict=True):
                new = _eval(v, sources, env2)
                if new != env2[i]:
                    changed = True
                env2[i] = new
            if not changed:
                break
            rounds += 1
            if r.limit is not None and rounds >= r.limit:
                raise PlanError("recursion_limit", f"recursive query did not converge within "
                                f"{r.limit} iterations")
        return _eval(r.body, sources, env2)
    raise AssertionError(type(r).__name__)
