"""Join on arrangements, by the two-sided delta rule.

d(A join B) = dA join B + A join dB + dA join dB. A pair `(k, v1, t1, r1)`, `(k, v2, t2, r2)`
yields `(f(k, v1, v2), join(t1, t2), r1 * r2)`; the output accumulated at any time t is then
the product of the inputs accumulated at t, for any partial order.

Exactly once: a new batch of A is joined with B's trace through the batches this join has
accepted from B, then accepted; a new batch of B is joined with A's trace through the batches
accepted from A (this activation's included). Each pair is produced by whichever side's batch
is accepted later. Each trace may be compacted to the other input's frontier: by join
preservation that changes no output time beyond it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.dataflow import Operator
from engine.lattice import Antichain
from engine.operators.arrange import Arrangement


class JoinOp(Operator):
    needs_frontier = True

    def __init__(self, left: Arrangement, right: Arrangement, f: Callable[[Any, Any, Any], Any]) -> None:
        if left.scope is not right.scope:
            raise ValueError("join inputs must be in the same scope")
        Operator.__init__(self, left.scope, "join", [])
        self.queues = [[], []]
        self.inputs = [left.op, right.op]
        left.op.downstream.append((self, 0))
        right.op.downstream.append((self, 1))
        self.left_reader = left.attach(self, 0, "join.left")
        self.right_reader = right.attach(self, 1, "join.right")
        self.f = f

    def activate(self, frontiers: list[Antichain]) -> None:
        ex = self.dataflow.executor
        lr, rr = self.left_reader, self.right_reader
        # only a budgeted dataflow passes one (executors without budgets need not accept it)
        kw = {"budget": self.dataflow.budget} if self.dataflow.budget is not None else {}
        for batch, blower in self.drain(0):
            out = ex.join(batch, rr.batches(), self.f, True, **kw)
            lr.accept(batch)
            if not ex.is_empty(out):
                self.send(out, blower)
        for batch, blower in self.drain(1):
            out = ex.join(batch, lr.batches(), self.f, False, **kw)
            rr.accept(batch)
            if not ex.is_empty(out):
                self.send(out, blower)
        # Join preservation: each trace only needs accuracy at times beyond the other input.
        lr.set_logical_compaction(frontiers[1])
        rr.set_logical_compaction(frontiers[0])
