"""The 2015 blog example: count distinct strings per length at 2-D times.

Input differences (a+1 b+3 cc+2 at (0,0); a-1 b-3 at (0,1); a-1 b-1 at (1,0); a+1 b+2 at
(1,1)) are fed to a reduce inside an iterative scope (epoch = first coordinate, a Variable
delays the second input by one iteration). The reduce's output differences, consolidated,
must be exactly the four lines printed in the post, under either epoch batching.
"""

from __future__ import annotations

from typing import Any

import naive
import pytest

from engine import Dataflow, Variable

INPUT = {
    (0, 0): [("a", 1), ("b", 3), ("cc", 2)],
    (0, 1): [("a", -1), ("b", -3)],
    (1, 0): [("a", -1), ("b", -1)],
    (1, 1): [("a", 1), ("b", 2)],
}

EXPECTED = {
    (("length: 1", 2), (0, 0)): 1,
    (("length: 2", 1), (0, 0)): 1,
    (("length: 1", 2), (0, 1)): -1,
    (("length: 1", 1), (1, 0)): 1,
    (("length: 1", 2), (1, 0)): -1,
    (("length: 1", 2), (1, 1)): 1,
}


def count_by_length(key: int, vals: list[tuple[str, int]]) -> list[tuple[Any, int]]:
    return [((f"length: {key}", len(vals)), 1)]


def build(df: Dataflow) -> tuple[Any, Any, Any, Any]:
    base_h, base = df.new_input(name="base")  # differences at (e, 0)
    delta_h, delta = df.new_input(name="delta")  # differences at (e, 1)
    scope = base.scope.iterative()
    delayed = Variable(scope)
    delayed.set(delta.enter(scope))
    strings = base.enter(scope).concat(delayed)
    out = strings.map(lambda s: (len(s), s)).reduce(count_by_length)
    return base_h, delta_h, strings.capture(), out.map(lambda kv: kv[1]).capture()


@pytest.mark.parametrize("schedule", ["run_each_epoch", "run_once"])
def test_count_distinct_by_length_blog_2015(schedule: str) -> None:
    df = Dataflow()
    base_h, delta_h, in_cap, out_cap = build(df)
    for epoch in (0, 1):
        base_h.send(INPUT[(epoch, 0)])
        delta_h.send(INPUT[(epoch, 1)])
        base_h.advance_to(epoch + 1)
        delta_h.advance_to(epoch + 1)
        if schedule == "run_each_epoch":
            df.run()
            done = {k: v for k, v in EXPECTED.items() if k[1][0] <= epoch}
            got = {k: v for k, v in naive.consolidate(out_cap.updates).items()}
            assert got == done, f"after epoch {epoch}"
    df.run()
    want_in = {(d, t): r for t, ups in INPUT.items() for d, r in ups}
    assert naive.consolidate(in_cap.updates) == want_in, "harness: inputs not at 2-D times"
    assert naive.consolidate(out_cap.updates) == EXPECTED
    # accumulated output at (1,1): one distinct length-1 string, one length-2 string
    assert naive.accumulate(out_cap.updates, (1, 1)) == {("length: 1", 1): 1, ("length: 2", 1): 1}
    for t in [(0, 0), (0, 1), (1, 0), (1, 1), (0, 5), (1, 5)]:
        assert not out_cap.frontier.less_equal(t), f"{t} should be complete"
