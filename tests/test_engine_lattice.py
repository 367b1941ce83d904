"""Unit and property tests of the lattice layer: product order, join/meet, Antichain, advance_by.

Checks the worked advance_by example from the 2016-07-26 blog post, and (with hypothesis)
the correctness conditions of logical compaction from ENGINE_NOTES section 1: soundness,
canonicity and join preservation, plus the antichain minimality invariant.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Antichain, advance_by, join, less_equal, meet

Time = tuple[int, ...]


def times(dims: int, hi: int = 4) -> st.SearchStrategy[Time]:
    return st.tuples(*[st.integers(0, hi)] * dims)


def grid(dims: int, hi: int) -> list[Time]:
    return list(itertools.product(range(hi + 1), repeat=dims))


def beyond(frontier: list[Time], g: Time) -> bool:
    return any(less_equal(f, g) for f in frontier)


def test_join_meet_are_componentwise_not_lexicographic() -> None:
    assert join((3, 7), (4, 6)) == (4, 7)
    assert meet((3, 7), (4, 6)) == (3, 6)
    assert join((1,), (0,)) == (1,)
    assert meet((0, 5, 2), (1, 0, 2)) == (0, 0, 2)


def test_less_equal_is_product_order() -> None:
    assert less_equal((0, 0), (0, 0))
    assert less_equal((0, 1), (1, 1))
    assert not less_equal((0, 3), (1, 2))
    assert not less_equal((1, 2), (0, 3))
    # lexicographically smaller but incomparable
    assert (0, 9) < (1, 0) and not less_equal((0, 9), (1, 0))


def test_advance_by_blog_example() -> None:
    frontier = [(1, 2), (2, 0)]
    got = [advance_by(t, frontier) for t in [(0, 0), (0, 1), (1, 0), (1, 1)]]
    assert got == [(1, 0), (1, 1), (1, 0), (1, 1)]
    # also accepts an Antichain
    assert advance_by((0, 1), Antichain(frontier)) == (1, 1)


def test_advance_by_empty_frontier_is_identity() -> None:
    assert advance_by((3, 4), []) == (3, 4)
    assert advance_by((3, 4), Antichain()) == (3, 4)


def test_antichain_insert_and_frontier_queries() -> None:
    a = Antichain()
    assert a.is_empty()
    assert a.insert((1, 1))
    assert not a.insert((2, 2)), "dominated insert must not change the antichain"
    assert a.insert((0, 3))
    assert sorted(a) == [(0, 3), (1, 1)]
    assert a.insert((0, 0)), "a smaller time replaces everything it precedes"
    assert sorted(a) == [(0, 0)]
    b = Antichain([(2, 0), (0, 2), (1, 1), (3, 3)])
    assert sorted(b) == [(0, 2), (1, 1), (2, 0)]
    assert b.less_equal((1, 5)) and not b.less_equal((0, 1))
    assert Antichain([(1, 0)]).meet(Antichain([(0, 1)])) == Antichain([(1, 0), (0, 1)])
    assert Antichain([(1, 0)]).join(Antichain([(0, 1)])) == Antichain([(1, 1)])
    # the loop frontier of the notes: epoch e at iteration i, and epoch e+1 may still arrive
    f = Antichain([(5, 3), (6, 0)])
    assert len(f) == 2 and f.less_equal((6, 0)) and not f.less_equal((5, 2))


@settings(max_examples=200, deadline=None)
@given(st.lists(times(3), max_size=8))
def test_antichain_is_minimal_and_represents_upward_closure(ts: list[Time]) -> None:
    a = Antichain(ts)
    els = list(a)
    for x, y in itertools.permutations(els, 2):
        assert not less_equal(x, y), f"{x} <= {y} both in antichain"
    for g in grid(3, 4):
        assert a.less_equal(g) == beyond(ts, g)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(times(d), st.lists(times(d), max_size=4))))
def test_advance_by_soundness_and_join_preservation(case: tuple[Time, list[Time]]) -> None:
    t, frontier = case
    adv = advance_by(t, frontier)
    assert less_equal(t, adv), "advancing never moves a time backwards"
    for g in grid(len(t), 5):
        if beyond(frontier, g):
            assert less_equal(t, g) == less_equal(adv, g), (t, frontier, adv, g)
            assert join(adv, g) == join(t, g), (t, frontier, adv, g)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda d: st.tuples(times(d), times(d), st.lists(times(d), min_size=1, max_size=4))
    )
)
def test_advance_by_canonicity(case: tuple[Time, Time, list[Time]]) -> None:
    t1, t2, frontier = case
    same = advance_by(t1, frontier) == advance_by(t2, frontier)
    indistinguishable = all(
        less_equal(t1, g) == less_equal(t2, g) for g in grid(len(t1), 5) if beyond(frontier, g)
    )
    assert same == indistinguishable, (t1, t2, frontier)


def test_advancer_agrees_with_advance_by() -> None:
    """The specialised compaction functions equal the definition for every frontier shape."""
    import random

    from engine.lattice import advancer

    rng = random.Random(11)
    for dims in (1, 2, 3):
        for size in (0, 1, 2, 3):
            for _ in range(400):
                frontier = Antichain(
                    tuple(rng.randrange(5) for _ in range(dims)) for _ in range(size)
                )
                t = tuple(rng.randrange(6) for _ in range(dims))
                assert advancer(frontier)(t) == advance_by(t, frontier.elements), (t, frontier)


def test_antichain_equality_is_set_equality() -> None:
    # The same elements in another order are equal; any other difference is not.
    assert Antichain([(1, 0), (0, 1)]) == Antichain([(0, 1), (1, 0)])
    assert Antichain([(2, 0), (1, 1), (0, 2)]) == Antichain([(0, 2), (2, 0), (1, 1)])
    assert Antichain([(1, 0), (0, 1)]) != Antichain([(1, 0), (0, 2)])
    assert Antichain([(1,)]) == Antichain([(1,)])
    assert Antichain([(1,)]) != Antichain([(2,)])
    assert Antichain() != Antichain([(0,)])
    assert Antichain() == Antichain()
    assert Antichain([(1, 0), (0, 1)]) != Antichain([(0, 0)])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(st.lists(times(d), max_size=4),
                                                       st.lists(times(d), max_size=4))))
def test_antichain_dominates_and_join_are_the_frontiers_order_and_join(case: tuple[list[Time], list[Time]]) -> None:
    """`a.dominates(b)`: every time beyond `b` is beyond `a`; `a.join(b)`: the times beyond
    both. Checked on every time of a grid (the join's elements also minimal)."""
    xs, ys = case
    a, b = Antichain(xs), Antichain(ys)
    dims = len((xs + ys)[0]) if xs + ys else 1
    everything = grid(dims, 5)
    assert a.dominates(b) == all(beyond(a.elements, g) for g in everything if beyond(b.elements, g))
    both = a.join(b)
    assert [g for g in everything if beyond(both.elements, g)] == [
        g for g in everything if beyond(a.elements, g) and beyond(b.elements, g)
    ]
    assert not any(less_equal(s, t) for s in both.elements for t in both.elements if s is not t)
