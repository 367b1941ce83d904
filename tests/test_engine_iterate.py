"""Iteration limits, convergence and output plumbing (probe, late arrangement readers).

* A diverging recursion (an unbounded counter) with ``limit=50`` makes ``df.run()`` raise
  ``IterationLimitExceeded`` naming the limit; the same for an explicit scope's limit.
* Loops that converge within the limit do not raise, and loops whose input later changes
  keep converging (fixpoint equals the naive one at every epoch).
* ``Probe.done`` reports completed epochs; a reader attached to an arrangement later replays
  the trace's contents.
"""

from __future__ import annotations

import naive
import pytest

from engine import Collection, Dataflow, IterationLimitExceeded, Variable


def counter(x: Collection) -> Collection:
    return x.map(lambda n: n + 1).concat(x).distinct()


def test_diverging_iterate_raises_iteration_limit() -> None:
    df = Dataflow()
    handle, start = df.new_input(name="start")
    start.iterate(counter, limit=50).capture()
    handle.insert(0)
    handle.advance_to(1)
    with pytest.raises(IterationLimitExceeded, match=r"\b50\b"):
        df.run()


def test_diverging_variable_scope_raises_iteration_limit() -> None:
    df = Dataflow()
    handle, start = df.new_input(name="start")
    scope = start.scope.iterative(limit=20)
    v = Variable(scope, source=start.enter(scope))
    nxt = counter(v)
    v.set(nxt)
    nxt.leave().capture()
    handle.insert(0)
    handle.advance_to(1)
    with pytest.raises(IterationLimitExceeded, match=r"\b20\b"):
        df.run()


def test_converging_loops_within_limit_do_not_raise() -> None:
    df = Dataflow()
    handle, start = df.new_input(name="start")
    # a chain 0 -> 1 -> ... -> 30 needs 30 rounds; limit 50 is enough
    cap = start.iterate(
        lambda x: x.map(lambda n: min(n + 1, 30)).concat(x).distinct(), limit=50
    ).capture()
    handle.insert(0)
    handle.advance_to(1)
    df.run()
    assert naive.accumulate(cap.updates, (0,)) == {n: 1 for n in range(31)}
    # the input changes: from 25 the loop needs only 5 rounds, and 0's closure disappears
    handle.remove(0)
    handle.insert(25)
    handle.advance_to(2)
    df.run()
    assert naive.accumulate(cap.updates, (1,)) == {n: 1 for n in range(25, 31)}


def test_iterate_mod_closure_matches_naive_over_epochs() -> None:
    df = Dataflow()
    handle, start = df.new_input(name="start")
    cap = start.iterate(lambda x: x.map(lambda n: (n * 3 + 1) % 37).concat(x).distinct()).capture()
    current: set[int] = set()
    for epoch, (add, rem) in enumerate([(5, None), (0, 5), (17, None), (None, 17), (2, 0)]):
        if add is not None:
            handle.insert(add)
            current.add(add)
        if rem is not None:
            handle.remove(rem)
            current.discard(rem)
        handle.advance_to(epoch + 1)
        df.run()
        want = naive.fixpoint(
            {n: 1 for n in current},
            lambda m: naive.op_distinct(
                naive.op_concat(naive.op_map(m, lambda v: (v * 3 + 1) % 37), m)
            ),
        )
        assert naive.accumulate(cap.updates, (epoch,)) == want, f"epoch {epoch}"


def test_probe_done_tracks_epochs() -> None:
    df = Dataflow()
    handle, xs = df.new_input(name="xs")
    probe = xs.map(lambda n: (n % 3, n)).reduce(lambda k, vals: [(len(vals), 1)]).probe()
    handle.insert(1)
    assert not probe.done(0)
    handle.advance_to(1)
    df.run()
    assert probe.done(0)
    assert not probe.done(1)
    handle.insert(2)
    handle.advance_to(2)
    df.run()
    assert probe.done(1)
    handle.close()
    df.run()
    assert probe.frontier.is_empty()


def test_late_arrangement_reader_replays_trace() -> None:
    df = Dataflow()
    handle, xs = df.new_input(name="xs")
    arranged = xs.map(lambda n: (n % 4, n)).arrange_by_key()
    early = arranged.as_collection().capture()
    for epoch, batch in enumerate([[1, 2, 3], [4, 5], [6]]):
        for n in batch:
            handle.insert(n)
        if epoch == 1:
            handle.remove(2)
        handle.advance_to(epoch + 1)
        df.run()
    late = arranged.as_collection(lambda k, v: (v, k)).capture()
    handle.insert(7)
    handle.advance_to(4)
    df.run()
    want_early = {(n % 4, n): 1 for n in [1, 3, 4, 5, 6, 7]}
    assert naive.accumulate(early.updates, (3,)) == want_early
    assert naive.accumulate(late.updates, (3,)) == {(n, n % 4): 1 for n in [1, 3, 4, 5, 6, 7]}
    assert naive.accumulate(late.updates, (2,)) == {(n, n % 4): 1 for n in [1, 3, 4, 5, 6]}
