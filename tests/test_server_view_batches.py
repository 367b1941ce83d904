"""A view's contents take each batch exactly: `server.views.apply_batch` (its fast path for a
first, consolidated batch included) against a naive accumulation, on seeded random batches
that repeat rows, carry zero and negative diffs, and come as lists or as iterators."""

from __future__ import annotations

import random
from collections import Counter

from server.views import apply_batch


def _naive(contents: dict, batch: list) -> dict:
    acc = dict(contents)
    for row, d in batch:
        acc[row] = acc.get(row, 0) + d
    return {r: n for r, n in acc.items() if n}


def test_apply_batch_equals_naive_accumulation() -> None:
    rng = random.Random(5)
    for trial in range(400):
        contents: Counter = Counter()
        want: dict = {}
        for _ in range(rng.randrange(1, 4)):
            rows = [(rng.randrange(6), rng.choice(["a", "b", None])) for _ in range(rng.randrange(8))]
            if trial % 2:  # consolidated, as the server's batches are
                batch = [(r, rng.choice([1, 2, -1])) for r in dict.fromkeys(rows)]
            else:  # repeated rows and zero diffs: the general path
                batch = [(r, rng.choice([1, 0, -1, 3])) for r in rows]
            want = _naive(want, batch)
            apply_batch(contents, batch if trial % 3 else iter(batch))
            assert dict(contents) == want
