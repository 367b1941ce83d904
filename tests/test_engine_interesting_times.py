"""Hand-written 2-D cases where output must appear at times no input update has.

* distinct on cat+1 at (0,3) and cat+1 at (1,2) owes cat-1 at (1,3) (ENGINE_NOTES section 5);
* +a at (1,0) and -a at (0,1) owe a retraction at (1,1) even though, once compacted, the two
  input updates cancel (formal/TARGETS2 scenario 1), also when epoch 0 is run and compacted
  before epoch 1 arrives;
* a join of (1,0) with (0,3) produces output at (1,3).
Each case runs with a df.run() after every epoch and with a single run at the end.
"""

from __future__ import annotations

from typing import Any

import naive
import pytest
from harness import Stream2D

from engine import Collection, Dataflow


def run_2d(
    inputs: list[dict[tuple[Any, naive.Time], int]],
    build: Any,
    delays: int,
    run_each_epoch: bool,
) -> dict[tuple[Any, naive.Time], int]:
    df = Dataflow()
    _, anchor = df.new_input(name="anchor")
    scope = anchor.scope.iterative()
    streams = [Stream2D(df, scope, delays, f"in{j}") for j in range(len(inputs))]
    cap: Any = build(*[s.collection for s in streams]).capture()
    epochs = 1 + max(t[0] for diffs in inputs for (_, t) in diffs)
    for e in range(epochs):
        for s, diffs in zip(streams, inputs, strict=True):
            s.send(e, diffs)
            s.advance_to(e + 1)
        if run_each_epoch:
            df.run()
    df.run()
    return naive.consolidate(cap.updates)


def distinct(c: Collection) -> Collection:
    return c.distinct()


@pytest.mark.parametrize("run_each_epoch", [True, False])
def test_distinct_owes_correction_at_join_of_input_times(run_each_epoch: bool) -> None:
    got = run_2d([{("cat", (0, 3)): 1, ("cat", (1, 2)): 1}], distinct, 4, run_each_epoch)
    assert got == {("cat", (0, 3)): 1, ("cat", (1, 2)): 1, ("cat", (1, 3)): -1}


@pytest.mark.parametrize("run_each_epoch", [True, False])
def test_cancelling_inputs_still_owe_retraction(run_each_epoch: bool) -> None:
    got = run_2d([{("a", (1, 0)): 1, ("a", (0, 1)): -1}], distinct, 2, run_each_epoch)
    # accumulations: (0,1) -> -1, (1,0) -> +1, (1,1) -> 0; distinct keeps positive counts
    assert got == {("a", (1, 0)): 1, ("a", (1, 1)): -1}


@pytest.mark.parametrize("run_each_epoch", [True, False])
def test_join_output_later_than_both_inputs(run_each_epoch: bool) -> None:
    got = run_2d(
        [{((7, "x"), (1, 0)): 1}, {((7, "y"), (0, 3)): 1}],
        lambda a, b: a.join(b),
        4,
        run_each_epoch,
    )
    assert got == {((7, ("x", "y")), (1, 3)): 1}
