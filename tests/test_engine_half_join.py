"""Half joins (engine/operators/half_join.py) composed into a three-way delta join, against the
binary join on arrangements (JoinOp) and against recomputation: random signed updates to three
collections at many epochs, run after every epoch or once after all of them; at every epoch
the accumulated output equals the naive join of the accumulated inputs, and the output changes
at each epoch equal the binary join's (each pair appears exactly once, whatever the batching).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from engine import Dataflow
from engine.collection import half_join

EPOCHS = 8


def _updates(rng: random.Random) -> list[list[tuple[tuple[int, int], int]]]:
    """Per epoch, updates to an (a, b) collection; accumulations may go negative."""
    return [[((rng.randrange(3), rng.randrange(3)), rng.choice([1, 1, 2, -1]))
             for _ in range(rng.randint(0, 4))] for _ in range(EPOCHS)]


def _naive(a: Counter, b: Counter, c: Counter) -> Counter:
    """A(x, y) join B(y, z) join C(z, w) on A.y = B.y and B.z = C.z."""
    out: Counter = Counter()
    for (x, y), ra in a.items():
        for (y2, z), rb in b.items():
            if y2 != y:
                continue
            for (z2, w), rc in c.items():
                if z2 == z:
                    out[(x, y, y2, z, z2, w)] += ra * rb * rc
    return Counter({k: v for k, v in out.items() if v})


def _delta(df: Dataflow, ins: list[Any]) -> Any:
    """The delta join: input 0's path looks up 1 then 2, input 1's looks up 0 and 2, input 2's
    looks up 1 then 0; inputs earlier than the path's own are read strictly before its time."""
    a, b, c = ins
    a_by_y = a.map(lambda r: ((r[1],), r)).arrange_by_key("a.y")
    b_by_y = b.map(lambda r: ((r[0],), r)).arrange_by_key("b.y")
    b_by_z = b.map(lambda r: ((r[1],), r)).arrange_by_key("b.z")
    c_by_z = c.map(lambda r: ((r[0],), r)).arrange_by_key("c.z")

    def cat(d: Any, w: Any) -> Any:
        return d + w

    p0 = half_join(half_join(a, b_by_y, lambda d: (d[1],), cat, strict=False),
                   c_by_z, lambda d: (d[3],), cat, strict=False)
    p1 = half_join(half_join(b, a_by_y, lambda d: (d[0],), cat, strict=True),
                   c_by_z, lambda d: (d[1],), cat, strict=False)
    p1 = p1.map(lambda d: d[2:4] + d[0:2] + d[4:])  # (b, a, c) -> (a, b, c)
    p2 = half_join(half_join(c, b_by_z, lambda d: (d[0],), cat, strict=True),
                   a_by_y, lambda d: (d[2],), cat, strict=True)
    p2 = p2.map(lambda d: d[4:6] + d[2:4] + d[0:2])  # (c, b, a) -> (a, b, c)
    return p0.concat(p1, p2)


def _binary(df: Dataflow, ins: list[Any]) -> Any:
    a, b, c = ins
    ab = a.map(lambda r: ((r[1],), r)).join_map(b.map(lambda r: ((r[0],), r)),
                                                 lambda k, x, y: x + y)
    return ab.map(lambda r: ((r[3],), r)).join_map(c.map(lambda r: ((r[0],), r)),
                                                    lambda k, x, y: x + y)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("run_every_epoch", [True, False])
def test_delta_join_equals_binary_join_and_recomputation(seed: int,
                                                         run_every_epoch: bool) -> None:
    rng = random.Random(seed)
    streams = [_updates(rng) for _ in range(3)]
    df = Dataflow()
    handles, ins = zip(*(df.new_input(n) for n in "abc"), strict=True)
    delta = _delta(df, list(ins)).capture()
    binary = _binary(df, list(ins)).capture()
    for e in range(EPOCHS):
        for h, s in zip(handles, streams, strict=True):
            h.send(s[e])
            h.advance_to(e + 1)
        if run_every_epoch:
            df.run()
    df.run()
    acc = [Counter() for _ in range(3)]
    for e in range(EPOCHS):
        for m, s in zip(acc, streams, strict=True):
            for d, r in s[e]:
                m[d] += r
        want = _naive(*acc)
        assert delta.snapshot(e) == dict(want), (seed, e)
        assert binary.snapshot(e) == dict(want), (seed, e)
    by_time_d = delta.consolidated_by_time()
    by_time_b = binary.consolidated_by_time()
    assert by_time_d == by_time_b


def test_half_join_needs_totally_ordered_times() -> None:
    df = Dataflow()
    _, a = df.new_input("a")
    inner = df.root.iterative()
    arr = a.enter(inner).map(lambda r: ((r[0],), r)).arrange_by_key("x")
    with pytest.raises(ValueError, match="totally ordered"):
        half_join(a.enter(inner), arr, lambda d: (d[0],), lambda d, w: d + w, strict=False)
