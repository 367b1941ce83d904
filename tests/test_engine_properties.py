"""Property tests: incremental output equals recomputation, for every batching.

Random non-negative input collections are chosen at every time of a grid (epochs x iteration
delays), turned into differences by Moebius inversion, and fed to the engine either in the root
scope (1-D times) or inside an iterative scope at 2-D times (see harness.py). Each operator under
test (map/filter/flat_map/negate/concat, join, join_map, arranged join, semijoin, antijoin,
reduce, count, distinct, threshold, sum, min, max, top_k, iterate, Variable mutual recursion,
nested iterate) is checked two ways:

* at every complete time the accumulated captured output equals the naive operator applied to
  the accumulated input (tests/naive.py), and the capture's frontier says the time is complete;
* the consolidated output differences are exactly the Moebius inversion of the naive outputs,
  which makes them identical whatever the epoch grouping (run after every epoch, one run after
  all epochs, or a few single scheduling steps in between).

A hypothesis test also feeds arbitrary signed updates (negative accumulations included) at
2-D times to count and join, whose results are defined for any multiplicities.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import naive
import pytest
from harness import Stream2D, random_grid
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Collection, Dataflow, Variable

Multiset = naive.Multiset
EPOCHS = 5


# --------------------------------------------------------------------------------------------
# random inputs


def gen_keyed(rng: random.Random) -> Multiset:
    return {
        (rng.randrange(4), rng.randrange(6)): rng.randint(1, 2) for _ in range(rng.randint(2, 7))
    }


def mutate_keyed(rng: random.Random, m: Multiset) -> Multiset:
    out = dict(m)
    for _ in range(rng.randint(0, 3)):
        kv = (rng.randrange(4), rng.randrange(6))
        c = rng.choice([0, 0, 1, 1, 2])
        if c:
            out[kv] = c
        else:
            out.pop(kv, None)
    return out


def gen_set(rng: random.Random) -> Multiset:
    return {k: 1 for k in range(6) if rng.random() < 0.4}


def mutate_set(rng: random.Random, m: Multiset) -> Multiset:
    out = dict(m)
    for _ in range(rng.randint(0, 2)):
        k = rng.randrange(6)
        if k in out:
            del out[k]
        else:
            out[k] = 1
    return out


GENERATORS = {
    "A": (gen_keyed, mutate_keyed),
    "B": (gen_keyed, mutate_keyed),
    "K": (gen_set, mutate_set),
}


# --------------------------------------------------------------------------------------------
# operators under test: engine dataflow fragment + naive recomputation


@dataclass
class Case:
    name: str
    inputs: tuple[str, ...]
    build: Callable[..., Collection]
    naive: Callable[..., Multiset]


def reduce_logic(key: int, vals: list[tuple[int, int]]) -> list[tuple[Any, int]]:
    total = sum(v * c for v, c in vals)
    return [(("sum_mod3", total % 3), 1), (("distinct_vals", len(vals)), 2)]


def succ(x: Collection, edges: Collection) -> Collection:
    return x.map(lambda n: (n, ())).join(edges).map(lambda kv: kv[1][1])


def edge_set(a: Multiset) -> set[tuple[int, int]]:
    return {kv for kv, c in a.items() if c > 0}


def build_reach_iterate(a: Collection, k: Collection) -> Collection:
    return k.iterate(lambda x: succ(x, a.enter(x.scope)).concat(x).distinct())


def build_reach_variable(a: Collection, k: Collection) -> Collection:
    scope = k.scope.iterative()
    v = Variable(scope, source=k.enter(scope))
    result = succ(v, a.enter(scope)).concat(v).distinct()
    v.set(result)
    return result.leave()


def build_parity(a: Collection, k: Collection) -> Collection:
    """Mutual recursion: even = roots + succ(odd), odd = succ(even)."""
    scope = k.scope.iterative()
    edges = a.enter(scope)
    even = Variable(scope)
    odd = Variable(scope)
    even_next = k.enter(scope).concat(succ(odd, edges)).distinct()
    odd_next = succ(even, edges).distinct()
    even.set(even_next)
    odd.set(odd_next)
    return even_next.map(lambda n: ("even", n)).concat(odd_next.map(lambda n: ("odd", n))).leave()


def naive_parity(a: Multiset, k: Multiset) -> Multiset:
    edges = edge_set(a)
    seen = {(n, 0) for n, c in k.items() if c > 0}
    stack = list(seen)
    while stack:
        n, p = stack.pop()
        for s, d in edges:
            if s == n and (d, 1 - p) not in seen:
                seen.add((d, 1 - p))
                stack.append((d, 1 - p))
    return {("even" if p == 0 else "odd", n): 1 for n, p in seen}


def build_nested(a: Collection, k: Collection) -> Collection:
    """Doubly nested: outer loop grows a root set by one 'hop-then-reach' round each time."""

    def outer(x: Collection) -> Collection:
        edges = a.enter(x.scope)
        reached = x.iterate(lambda y: succ(y, edges.enter(y.scope)).concat(y).distinct())
        return reached.map(lambda n: (n + 1) % 6).concat(x).distinct()

    return k.iterate(outer)


def naive_nested(a: Multiset, k: Multiset) -> Multiset:
    edges = edge_set(a)

    def outer(x: Multiset) -> Multiset:
        reached = naive.reachable(set(x), edges)
        return naive.op_distinct(naive.op_concat({(n + 1) % 6: 1 for n in reached}, x))

    return naive.fixpoint(naive.op_distinct(k), outer)


CASES = [
    Case(
        "map_filter",
        ("A",),
        lambda a: a.map(lambda kv: (kv[0] % 2, kv[1])).filter(lambda kv: kv[1] != 3),
        lambda a: naive.op_filter(
            naive.op_map(a, lambda kv: (kv[0] % 2, kv[1])), lambda kv: kv[1] != 3
        ),
    ),
    Case(
        "flat_map_negate_concat",
        ("A", "B"),
        lambda a, b: (
            a.flat_map(lambda kv: [kv, (kv[0] + 10, kv[1])]).concat(b.negate()).consolidate()
        ),
        lambda a, b: naive.op_concat(
            a, naive.op_map(a, lambda kv: (kv[0] + 10, kv[1])), naive.op_negate(b)
        ),
    ),
    Case("join", ("A", "B"), lambda a, b: a.join(b), naive.op_join),
    Case(
        "join_arranged",
        ("A", "B"),
        lambda a, b: a.join(b.arrange_by_key()),
        naive.op_join,
    ),
    Case(
        "join_map",
        ("A", "B"),
        lambda a, b: a.join_map(b, lambda k, v1, v2: (k, v1 + v2)),
        lambda a, b: naive.op_map(naive.op_join(a, b), lambda x: (x[0], x[1][0] + x[1][1])),
    ),
    Case(
        "shared_arrangement_two_readers",
        ("A", "B"),
        lambda a, b: (lambda arr: a.join(arr).concat(arr.as_collection(lambda k, v: (k, (v, v)))))(
            b.arrange_by_key()
        ),
        lambda a, b: naive.op_concat(
            naive.op_join(a, b), naive.op_map(b, lambda kv: (kv[0], (kv[1], kv[1])))
        ),
    ),
    Case("semijoin", ("A", "K"), lambda a, k: a.semijoin(k), naive.op_semijoin),
    Case("antijoin", ("A", "K"), lambda a, k: a.antijoin(k), naive.op_antijoin),
    Case(
        "reduce",
        ("A",),
        lambda a: a.reduce(reduce_logic),
        lambda a: naive.op_reduce(a, reduce_logic),
    ),
    Case("count", ("A",), lambda a: a.count(), naive.op_count),
    Case(
        "count_keys",
        ("A",),
        lambda a: a.map(lambda kv: kv[0]).count(),
        lambda a: naive.op_count(naive.op_map(a, lambda kv: kv[0])),
    ),
    Case(
        "distinct",
        ("A",),
        lambda a: a.map(lambda kv: kv[1]).distinct(),
        lambda a: naive.op_distinct(naive.op_map(a, lambda kv: kv[1])),
    ),
    Case(
        "threshold",
        ("A",),
        lambda a: a.map(lambda kv: kv[1] % 3).threshold(lambda c: c // 2),
        lambda a: naive.op_threshold(naive.op_map(a, lambda kv: kv[1] % 3), lambda c: c // 2),
    ),
    Case(
        "sum",
        ("A",),
        lambda a: a.map(lambda kv: (kv[0], kv[1] + 1)).sum(),
        lambda a: naive.op_sum(naive.op_map(a, lambda kv: (kv[0], kv[1] + 1))),
    ),
    Case("min", ("A",), lambda a: a.min(), naive.op_min),
    Case("max", ("A",), lambda a: a.max(), naive.op_max),
    Case("top_k", ("A",), lambda a: a.top_k(2), lambda a: naive.op_top_k(a, 2)),
    Case(
        "top_k_offset_order",
        ("A",),
        lambda a: a.top_k(2, offset=1, order=lambda v: -v),
        lambda a: naive.op_top_k(a, 2, offset=1, order=lambda v: -v),
    ),
    Case(
        "join_then_distinct",
        ("A", "B"),
        lambda a, b: a.join(b).map(lambda x: (x[1][0] + x[1][1]) % 5).distinct(),
        lambda a, b: naive.op_distinct(
            naive.op_map(naive.op_join(a, b), lambda x: (x[1][0] + x[1][1]) % 5)
        ),
    ),
    Case(
        "reach_iterate",
        ("A", "K"),
        build_reach_iterate,
        lambda a, k: {n: 1 for n in naive.reachable(set(k), edge_set(a))},
    ),
    Case(
        "reach_variable",
        ("A", "K"),
        build_reach_variable,
        lambda a, k: {n: 1 for n in naive.reachable(set(k), edge_set(a))},
    ),
    Case("parity_mutual_recursion", ("A", "K"), build_parity, naive_parity),
    Case("nested_iterate", ("A", "K"), build_nested, naive_nested),
]


# --------------------------------------------------------------------------------------------
# driver


def run_case(case: Case, seed: int, nested: bool, schedule: str) -> None:
    rng = random.Random(f"{case.name}/{seed}/{nested}")
    delays = 3 if nested else 1
    grids = {name: random_grid(rng, EPOCHS, delays, *GENERATORS[name]) for name in case.inputs}
    diffs = {name: naive.mobius_2d(g) for name, g in grids.items()}

    df = Dataflow()
    if nested:
        _, anchor = df.new_input(name="anchor")
        scope = anchor.scope.iterative()
        streams = {name: Stream2D(df, scope, delays, name) for name in case.inputs}
        colls = [streams[name].collection for name in case.inputs]
    else:
        handles = {}
        colls = []
        for name in case.inputs:
            handles[name], c = df.new_input(name=name)
            colls.append(c)
    out = case.build(*colls)
    cap = out.capture()

    def to_time(e: int, i: int) -> tuple[int, ...]:
        return (e, i) if nested else (e,)

    def send(e: int) -> None:
        for name in case.inputs:
            if nested:
                streams[name].send(e, diffs[name])
                streams[name].advance_to(e + 1)
            else:
                for (data, (te, _)), d in sorted(diffs[name].items(), key=repr):
                    if te == e:
                        handles[name].insert(data, d)
                handles[name].advance_to(e + 1)

    expected = {
        (e, i): case.naive(*[grids[name][(e, i)] for name in case.inputs])
        for e in range(EPOCHS)
        for i in range(delays)
    }

    def check_epoch(e: int) -> None:
        for i in range(delays + 2):
            t = to_time(e, i)
            assert not cap.frontier.less_equal(t), f"{t} not complete after run"
            want = expected[(e, min(i, delays - 1))]
            got = naive.accumulate(cap.updates, t)
            assert got == want, f"{case.name}: wrong output at {t}"
            if schedule == "each" and i == 0:
                assert dict(cap.snapshot(t)) == want, f"{case.name}: snapshot({t})"

    if schedule == "each":
        for e in range(EPOCHS):
            send(e)
            df.run()
            check_epoch(e)
    elif schedule == "once":
        for e in range(EPOCHS):
            send(e)
        df.run()
    elif schedule == "steps":
        for e in range(EPOCHS):
            send(e)
            for _ in range(rng.randint(0, 3)):
                df.step()
        df.run()
    else:
        raise AssertionError(schedule)
    for e in range(EPOCHS):
        check_epoch(e)

    want_diffs = naive.mobius_2d(expected)
    if not nested:
        want_diffs = {(d, (t[0],)): r for (d, t), r in want_diffs.items()}
    assert naive.consolidate(cap.updates) == want_diffs, f"{case.name}: output differences"

    if schedule == "once":
        for name in case.inputs:
            if nested:
                streams[name].close()
            else:
                handles[name].close()
        df.run()
        assert cap.frontier.is_empty(), "closing every input must empty the output frontier"
        assert naive.consolidate(cap.updates) == want_diffs, "closing must not change the output"


@pytest.mark.parametrize("schedule", ["each", "once", "steps"])
@pytest.mark.parametrize("nested", [False, True], ids=["root", "2d"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_operator_matches_naive(case: Case, nested: bool, schedule: str) -> None:
    for seed in range(5):
        run_case(case, seed, nested, schedule)


def test_harness_feeds_2d_times() -> None:
    """The identity dataflow reproduces the submitted 2-D differences exactly."""
    rng = random.Random(7)
    grid = random_grid(rng, EPOCHS, 3, gen_keyed, mutate_keyed)
    diffs = naive.mobius_2d(grid)
    df = Dataflow()
    _, anchor = df.new_input(name="anchor")
    s = Stream2D(df, anchor.scope.iterative(), 3, "x")
    cap = s.collection.capture()
    for e in range(EPOCHS):
        s.send(e, diffs)
        s.advance_to(e + 1)
    df.run()
    assert naive.consolidate(cap.updates) == diffs


signed_updates = st.lists(
    st.tuples(
        st.tuples(st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.integers(0, 2), st.integers(0, 2)),
        st.sampled_from([-2, -1, 1, 2]),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(signed_updates, signed_updates, st.booleans())
def test_count_and_join_with_signed_updates(
    a_ups: list[Any], b_ups: list[Any], run_each_epoch: bool
) -> None:
    """count and join are defined for any (also negative) accumulation; hypothesis shrinks."""
    a_diffs = naive.consolidate(a_ups)
    b_diffs = naive.consolidate(b_ups)
    df = Dataflow()
    _, anchor = df.new_input(name="anchor")
    scope = anchor.scope.iterative()
    sa, sb = Stream2D(df, scope, 3, "a"), Stream2D(df, scope, 3, "b")
    count_cap = sa.collection.count().capture()
    join_cap = sa.collection.join(sb.collection).capture()
    for e in range(3):
        sa.send(e, a_diffs)
        sb.send(e, b_diffs)
        sa.advance_to(e + 1)
        sb.advance_to(e + 1)
        if run_each_epoch:
            df.run()
    df.run()
    a_list = [(d, t, r) for (d, t), r in a_diffs.items()]
    b_list = [(d, t, r) for (d, t), r in b_diffs.items()]
    grid = [(e, i) for e in range(3) for i in range(3)]
    want_count = naive.mobius_2d({t: naive.op_count(naive.accumulate(a_list, t)) for t in grid})
    want_join = naive.mobius_2d(
        {t: naive.op_join(naive.accumulate(a_list, t), naive.accumulate(b_list, t)) for t in grid}
    )
    assert naive.consolidate(count_cap.updates) == want_count
    assert naive.consolidate(join_cap.updates) == want_join
