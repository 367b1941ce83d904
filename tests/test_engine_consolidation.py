"""`engine.consolidation`'s fast-path tests (`one_time`, `insertions_only`, `count_data`) and
`engine.trace.arrange_updates`, which takes a different path for each answer they give, against
a naive consolidation of seeded random updates: one time or several, insertions only or not,
distinct data or repeated, keyed by the data itself or by its first half."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from engine.consolidation import count_data, insertions_only, one_time
from engine.lattice import Antichain
from engine.trace import arrange_updates


def _naive(updates: list) -> dict:
    acc: Counter = Counter()
    for d, t, r in updates:
        acc[(d, t)] += r
    return {k: r for k, r in acc.items() if r}


def _updates(rng: random.Random, shape: str) -> list:
    n = rng.choice([0, 1, 2, 5, 40])
    times = [(1, 0)] if shape.startswith("one") else [(1, 0), (1, 1), (2, 0)]
    keys = range(3 if "repeated" in shape else 10**6)
    data = [(k, rng.randrange(4)) for k in rng.sample(keys, n)] if "distinct" in shape else [
        (rng.choice(keys), rng.randrange(2)) for _ in range(n)]
    diffs = [1] if "insert" in shape else [1, -1, 2]
    return [(d, rng.choice(times), rng.choice(diffs)) for d in data]


SHAPES = ["one-insert-distinct", "one-insert-repeated", "one-mixed-repeated", "many-insert-distinct",
          "many-mixed-repeated"]


@pytest.mark.parametrize("shape", SHAPES)
def test_fast_path_tests_and_count(shape: str) -> None:
    rng = random.Random(shape)
    for _ in range(200):
        ups = _updates(rng, shape)
        times = {t for _, t, _ in ups}
        assert one_time(ups) == (next(iter(times)) if len(times) == 1 else None)
        assert insertions_only(ups) == (bool(ups) and all(r == 1 for _, _, r in ups))
        if one_time(ups) is not None and insertions_only(ups):
            t = one_time(ups)
            assert {(d, t): r for d, r in count_data(ups).items()} == _naive(ups)


@pytest.mark.parametrize("by_self", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_arrange_updates_equals_naive_consolidation(shape: str, by_self: bool) -> None:
    rng = random.Random(f"{shape}{by_self}")
    lo, hi = Antichain([(0, 0)]), Antichain([(9, 0)])
    for _ in range(200):
        ups = _updates(rng, shape)
        batch = arrange_updates(ups, by_self, lo, hi, lo)
        got: Counter = Counter()
        for k, entries in batch.updates.items():
            for v, t, r in entries:
                assert r != 0
                data = k if by_self else (k, v)
                assert (data, t) not in got, "an entry per (data, time)"
                got[(data, t)] = r
        assert dict(got) == _naive(ups)
        assert batch.records == sum(len(e) for e in batch.updates.values())
