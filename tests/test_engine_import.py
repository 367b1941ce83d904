"""Importing an arrangement into another dataflow: the importer reads the same trace.

A dataflow that imports another's arrangement must see its whole contents when it is built
late, then every later change, at the same times; its results must equal recomputation after
every epoch. Releasing the importer must stop it from holding back the trace's compaction.
"""

from __future__ import annotations

import random
from collections import Counter

from engine import Dataflow


def test_import_shares_the_trace_and_tracks_changes() -> None:
    rng = random.Random(3)
    upstream = Dataflow()
    handle, pairs = upstream.new_input("pairs")
    arranged = pairs.arrange_by_key("pairs_by_key")
    live: Counter[tuple[int, int]] = Counter()

    def step(epoch: int, n: int) -> None:
        for _ in range(n):
            kv = (rng.randrange(10), rng.randrange(5))
            if live[kv] and rng.random() < 0.4:
                handle.remove(kv)
                live[kv] -= 1
            else:
                handle.insert(kv)
                live[kv] += 1
        handle.advance_to(epoch + 1)
        upstream.run()

    for epoch in range(5):
        step(epoch, 20)
    # Built late: the importer first sees the contents so far.
    downstream = Dataflow()
    imported = arranged.import_into(downstream)
    counts = imported.as_collection().map(lambda kv: kv[0]).count().capture()
    sums = imported.join_map(imported, lambda k, a, b: (k, a * b)).map(lambda kv: kv[0]).count().capture()
    trace_count_before = len(upstream.traces)
    for epoch in range(5, 25):
        step(epoch, 10)
        downstream.run()
        want = Counter()
        for (k, _), c in live.items():
            want[k] += c
        assert counts.current() == {(k, c): 1 for k, c in want.items() if c}, epoch
        pair_counts = Counter()
        for (k, _), c1 in live.items():
            for (k2, _), c2 in live.items():
                if k == k2:
                    pair_counts[k] += c1 * c2
        assert sums.current() == {(k, c): 1 for k, c in pair_counts.items() if c}, epoch
        assert counts.done(epoch)
    assert len(upstream.traces) == trace_count_before, "the importer must not copy the trace"
    readers_before = len(arranged.trace.readers)
    downstream.release()
    assert len(arranged.trace.readers) < readers_before
    # With the importer released, the upstream trace compacts to its own frontier again.
    for epoch in range(25, 60):
        step(epoch, 10)
    arranged.trace.compact_all()
    assert arranged.trace.records() <= sum(1 for c in live.values() if c) + 5
