"""Subscriptions: a callback sees every final update once, with frontier notifications.

The accumulated callback stream must equal the collection recomputed from the inputs after
every epoch, and each notified frontier must say that epoch is complete.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from engine import Dataflow


def test_subscribe_stream_accumulates_to_the_collection() -> None:
    rng = random.Random(7)
    df = Dataflow()
    handle, words = df.new_input("words")
    seen: list[tuple[Any, Any, int]] = []
    frontiers: list[Any] = []

    def on_change(updates: list[tuple[Any, Any, int]], frontier: Any) -> None:
        seen.extend(updates)
        frontiers.append(frontier)

    words.map(lambda w: (len(w), w)).distinct().map(lambda p: p[0]).count().subscribe(on_change)
    live: Counter[str] = Counter()
    for epoch in range(30):
        for _ in range(5):
            w = "x" * rng.randrange(1, 5) + rng.choice("ab")
            if live[w] and rng.random() < 0.4:
                handle.remove(w)
                live[w] -= 1
            else:
                handle.insert(w)
                live[w] += 1
        handle.advance_to(epoch + 1)
        df.run()
        acc: Counter[Any] = Counter()
        for d, t, r in seen:
            assert t[0] <= epoch, "a final update must be at a complete epoch"
            acc[d] += r
        distinct_by_len = Counter(len(w) for w, c in live.items() if c > 0)
        want = {(n, c): 1 for n, c in distinct_by_len.items()}
        assert {d: c for d, c in acc.items() if c} == want
        assert not frontiers[-1].less_equal((epoch,)), "the frontier must show the epoch complete"


def test_capture_without_contents_still_drains_every_update() -> None:
    """`capture(current=False)` (the server's: a view keeps its own contents) keeps no second
    copy, refuses `current()`, and drains the same final updates as a full capture."""
    import pytest

    df = Dataflow()
    handle, xs = df.new_input("xs")
    pairs = xs.map(lambda x: (x % 3, x))
    lean = pairs.capture(history=False, current=False)
    full = pairs.capture(history=False)
    for epoch, batch in enumerate([[1, 2, 3], [4], [5, 6]]):
        for x in batch:
            handle.insert(x)
        if epoch == 2:
            handle.remove(1)
        handle.advance_to(epoch + 1)
        df.run()
        assert lean.drain() == full.drain() != []
    assert lean.op.state == {}
    with pytest.raises(ValueError, match="current=False"):
        lean.current()
    assert full.current() == {(x % 3, x): 1 for x in [2, 3, 4, 5, 6]}


def test_drain_by_time_is_each_times_consolidated_updates() -> None:
    """`drain_by_time` (the server's: no sort key per update) holds exactly the updates
    `drain` gives, grouped by time, none with diff zero, and no time left empty: checked
    against a naive consolidation of the inputs on seeded random epochs, several of them
    drained at once, where inserts and removes of one value cancel within an epoch."""
    rng = random.Random(11)
    for drains in (1, 3):
        df = Dataflow()
        handle, xs = df.new_input("xs")
        by_time = xs.map(lambda x: (x % 5, x)).capture(history=False, current=False)
        sorted_ = xs.map(lambda x: (x % 5, x)).capture(history=False, current=False)
        sent: dict[int, Counter[Any]] = {}
        got: dict[int, dict[Any, int]] = {}
        for epoch in range(12):
            for _ in range(rng.randrange(0, 8)):
                x = rng.randrange(10)
                r = rng.choice([1, 1, -1, 2])
                handle.update(x, r)
                sent.setdefault(epoch, Counter())[(x % 5, x)] += r
            handle.advance_to(epoch + 1)
            if epoch % drains == drains - 1:
                df.run()
                out = by_time.drain_by_time()
                flat = [(d, t, r) for t, m in out.items() for d, r in m.items()]
                assert sorted(flat, key=repr) == sorted(sorted_.drain(), key=repr)
                for t, m in out.items():
                    assert m and all(m.values())
                    assert t[0] not in got
                    got[t[0]] = m
        want = {t: {d: r for d, r in c.items() if r} for t, c in sent.items()}
        assert got == {t: m for t, m in want.items() if m}


def test_drain_by_time_keeps_the_times_of_insertions() -> None:
    """Insertions only, at several times drained at once: each stays at its own time (the
    one-time fast path must not take them)."""
    df = Dataflow()
    handle, xs = df.new_input("xs")
    cap = xs.capture(history=False, current=False)
    for epoch in range(3):
        handle.insert(epoch)
        handle.insert(epoch)
        handle.advance_to(epoch + 1)
    df.run()
    assert cap.drain_by_time() == {(0,): {0: 2}, (1,): {1: 2}, (2,): {2: 2}}
    assert cap.drain_by_time() == {}
