"""Compaction keeps traces bounded under a fixed-size sliding window.

A window of 2,000 random edges over 1,000 nodes slides for 20,000 edge updates (10,000 in and
10,000 out, 10 slides per epoch) through a join + distinct dataflow (distinct two-hop paths).
The total number of updates held in all traces (``df.arrangement_stats()`` "records") must stay
within a constant multiple of the window for the whole run, and must not keep growing: without
compaction it would grow linearly with the number of updates. The output is also checked
against recomputation at a few epochs. A smaller loop version does the same for reachability,
whose traces live inside an iterative scope.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import naive
from harness import reachable_from

from engine import Dataflow

NODES, WINDOW, UPDATES, SLIDES_PER_EPOCH = 1_000, 2_000, 20_000, 10


def total_records(df: Dataflow) -> int:
    stats = df.arrangement_stats()
    assert stats, "the dataflow arranges data, so arrangement_stats must list its traces"
    return sum(s["records"] for s in stats)


def two_hop_pairs(edges: Counter[tuple[int, int]]) -> dict[tuple[int, int], int]:
    by_src: dict[int, list[int]] = {}
    for (s, d), c in edges.items():
        if c > 0:
            by_src.setdefault(s, []).append(d)
    return {(a, c): 1 for (a, b), n in edges.items() if n > 0 for c in by_src.get(b, ())}


def test_sliding_window_join_distinct_traces_stay_bounded() -> None:
    rng = random.Random(42)
    df = Dataflow()
    handle, edges = df.new_input(name="edges")
    paths = (
        edges.map(lambda e: (e[1], e[0]))
        .join(edges)
        .map(lambda kv: (kv[1][0], kv[1][1]))
        .distinct()
    )
    cap = paths.capture()
    window: list[tuple[int, int]] = []
    live: Counter[tuple[int, int]] = Counter()
    state: dict[Any, int] = {}

    def rand_edge() -> tuple[int, int]:
        return (rng.randrange(NODES), rng.randrange(NODES))

    for _ in range(WINDOW):
        e = rand_edge()
        window.append(e)
        live[e] += 1
        handle.insert(e)
    handle.advance_to(1)
    df.run()
    baseline = total_records(df)
    samples: list[int] = []
    epoch, sent = 1, 0
    while sent < UPDATES:
        for _ in range(SLIDES_PER_EPOCH):
            e = rand_edge()
            window.append(e)
            live[e] += 1
            handle.insert(e)
            old = window.pop(0)
            live[old] -= 1
            handle.remove(old)
            sent += 2
        epoch += 1
        handle.advance_to(epoch)
        df.run()
        if epoch % 10 == 0:  # arrangement_stats walks every record for "bytes": sample
            samples.append(total_records(df))
        if epoch % 250 == 0:
            for data, _t, d in cap.drain():
                state[data] = state.get(data, 0) + d
                if state[data] == 0:
                    del state[data]
            assert state == two_hop_pairs(live), f"wrong two-hop paths at epoch {epoch}"

    peak = max(samples)
    # Live state: two edge arrangements (~2 x 2,000) plus distinct's input and output (~2 x
    # 4,000 two-hop paths). Uncompacted traces would hold every one of the 20,000 edge updates
    # per edge trace plus ~80,000 path updates per distinct trace, far above this bound.
    assert peak <= 15 * WINDOW, f"traces hold {peak} records (baseline {baseline})"
    late = samples[len(samples) // 2 :]
    early = samples[: len(samples) // 4]
    assert max(late) <= 1.5 * max(early), f"traces keep growing: {max(early)} -> {max(late)}"


def test_sliding_window_reachability_loop_traces_stay_bounded() -> None:
    rng = random.Random(5)
    nodes, window_size, slides, per_epoch = 300, 300, 2_000, 5
    df = Dataflow()
    edges_h, edges = df.new_input(name="edges")
    roots_h, roots = df.new_input(name="roots")
    reach = reachable_from(roots, edges)
    cap = reach.capture()
    for r in range(3):
        roots_h.insert(r)
    window: list[tuple[int, int]] = []
    for _ in range(window_size):
        e = (rng.randrange(nodes), rng.randrange(nodes))
        window.append(e)
        edges_h.insert(e)
    samples: list[int] = []
    for epoch in range(1, slides // per_epoch + 1):
        edges_h.advance_to(epoch)
        roots_h.advance_to(epoch)
        df.run()
        if epoch % 4 == 0:
            samples.append(total_records(df))
        if epoch % 100 == 0:
            got = naive.accumulate(cap.updates, (epoch - 1,))
            assert got == {v: 1 for v in naive.reachable({0, 1, 2}, set(window))}, epoch
        for _ in range(per_epoch):
            e = (rng.randrange(nodes), rng.randrange(nodes))
            window.append(e)
            edges_h.insert(e)
            edges_h.remove(window.pop(0))
    late = samples[len(samples) // 2 :]
    early = samples[: len(samples) // 4]
    assert max(late) <= 2 * max(early), f"loop traces keep growing: {max(early)} -> {max(late)}"
    assert max(samples) <= 10 * window_size, f"loop traces hold {max(samples)} records"
