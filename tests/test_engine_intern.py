"""String interning by iterative hash-collision resolution (blog 2018-12-10, seed 003).

The dataflow is the post's final formulation: the loop starts empty and iterates only the
changes relative to the initial assignment (every string at round 0); a reduce per hash bucket
keeps the smallest (round, string) and bumps the others to the next round. With a hash space
barely larger than the set of strings, collisions are forced. After every insertion/deletion:
ids are unique, every present string has exactly one id, and the assignment equals the plain
iteration in tests/naive.py, so it depends only on the current set (stable under history).
"""

from __future__ import annotations

import random
from typing import Any

import naive

from engine import Collection, Dataflow

BUCKETS = 16
POOL = [f"str{i:02d}" for i in range(24)]


def intern(strings: Collection, buckets: int) -> Collection:
    init = strings.map(lambda s: (0, s))

    def body(diff: Collection) -> Collection:
        return (
            init.enter(diff.scope)
            .concat(diff)
            .map(lambda p: (naive.intern_hash(p, buckets), p))
            .reduce(naive.intern_logic)
            .map(lambda kv: kv[1])
        )

    return (
        init.filter(lambda _: False)
        .iterate(body)
        .concat(init)
        .map(lambda p: (p[1], naive.intern_hash(p, buckets)))
    )


def script(seed: int, steps: int) -> tuple[set[str], list[tuple[str, int]]]:
    rng = random.Random(seed)
    present = set(rng.sample(POOL, 10))
    start = set(present)
    ops: list[tuple[str, int]] = []
    for _ in range(steps):
        s = rng.choice(POOL)
        if s in present:
            if len(present) > 2:
                present.remove(s)
                ops.append((s, -1))
        elif len(present) < BUCKETS - 2:
            present.add(s)
            ops.append((s, +1))
    return start, ops


def check_assignment(state: dict[Any, int], present: set[str], where: str) -> dict[str, int]:
    assert all(c == 1 for c in state.values()), f"{where}: multiplicities {state}"
    ids: dict[str, int] = {}
    for s, h in state:
        assert s not in ids, f"{where}: {s} has two ids"
        ids[s] = h
    assert set(ids) == present, f"{where}: strings without an id or stale ids"
    assert len(set(ids.values())) == len(ids), f"{where}: ids collide {ids}"
    assert ids == naive.intern_naive(present, BUCKETS), f"{where}: differs from the fixpoint"
    return ids


def test_tiny_hash_space_forces_collisions() -> None:
    start, _ = script(0, 0)
    round0 = {s: naive.intern_hash((0, s), BUCKETS) for s in start}
    assert len(set(round0.values())) < len(start), "test premise: round-0 hashes must collide"


def test_intern_unique_and_stable_under_updates() -> None:
    start, ops = script(0, 120)
    df = Dataflow()
    handle, strings = df.new_input(name="strings")
    cap = intern(strings, BUCKETS).capture()
    present = set(start)
    for s in sorted(start):
        handle.insert(s)
    state: dict[Any, int] = {}
    history: dict[frozenset[str], dict[str, int]] = {}
    moved = 0
    for epoch in range(len(ops) + 1):
        handle.advance_to(epoch + 1)
        df.run()
        for data, _t, d in cap.drain():
            state[data] = state.get(data, 0) + d
            if state[data] == 0:
                del state[data]
        ids = check_assignment(state, present, f"epoch {epoch}")
        moved += sum(1 for s, h in ids.items() if h != naive.intern_hash((0, s), BUCKETS))
        key = frozenset(present)
        if key in history:
            assert history[key] == ids, "same set of strings, different ids"
        history[key] = ids
        if epoch < len(ops):
            s, d = ops[epoch]
            handle.insert(s, d)
            (present.add if d > 0 else present.discard)(s)
    assert moved > 0, "no string ever left round 0: the test exercised no collisions"


def test_intern_all_epochs_in_flight() -> None:
    """Same script with every epoch submitted before a single run."""
    start, ops = script(1, 60)
    df = Dataflow()
    handle, strings = df.new_input(name="strings")
    cap = intern(strings, BUCKETS).capture()
    for s in sorted(start):
        handle.insert(s)
    for epoch, (s, d) in enumerate(ops):
        handle.advance_to(epoch + 1)
        handle.insert(s, d)
    handle.advance_to(len(ops) + 1)
    df.run()
    present = set(start)
    for epoch in range(len(ops) + 1):
        if epoch > 0:
            s, d = ops[epoch - 1]
            (present.add if d > 0 else present.discard)(s)
        state = naive.accumulate(cap.updates, (epoch,))
        check_assignment(state, present, f"epoch {epoch}")
