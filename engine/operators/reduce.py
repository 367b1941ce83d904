"""Reduce: per key, the output is `logic(key, input)` at every time, for partially ordered times.

Driver: each activation retires the interval up to `upper`, the frontier of times that may still
arrive (the join of the input port's frontier and the newest batch's upper). For every key that
the new batches touch, or that has pending times now complete, the kernel `reduce_key` computes
the interesting times (the closure under join of the new times with the key's stored input and
output times), evaluates `logic` at those not beyond `upper` and emits "desired minus
accumulated output" corrections; times beyond `upper` are kept pending, and the operator holds
capabilities at them. With nothing pending it holds none, which is what lets loops converge.

The output is itself an arrangement (a trace of corrections keyed like the input), so readers
downstream share it. Both traces are compacted to `upper` after each round.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.dataflow import Operator
from engine.kernels import Logic
from engine.lattice import Antichain, Time
from engine.operators.arrange import Arrangement
from engine.trace import Batch, Trace


class ReduceOp(Operator):
    needs_frontier = True

    def __init__(self, source: Arrangement, logic: Logic, name: str = "reduce") -> None:
        Operator.__init__(self, source.scope, name, [])
        self.queues = [[]]
        self.inputs = [source.op]
        source.op.downstream.append((self, 0))
        self.reader = source.attach(self, 0, name + ".input")
        self.logic = logic
        self.output = Trace.of_executor(name, source.scope.dims, self.dataflow.executor)
        self.dataflow.traces.append(self.output)
        # The reduce reads its own output history; it is the output trace's first reader.
        self.output_reader = self.output.new_reader(name + ".output")
        self.pending: dict[Any, set[Time]] = {}
        self.pending_lower = Antichain()
        self.upper = Antichain([(0,) * source.scope.dims])

    def capabilities(self) -> Iterable[Time]:
        return self.pending_lower.elements

    def activate(self, frontiers: list[Antichain]) -> None:
        batches: list[Batch] = [b for b, _ in self.drain(0)]
        upper = frontiers[0]
        if batches:
            upper = upper.join(batches[-1].upper) if upper.elements else upper
        if not batches and upper == self.upper:
            return
        if not batches and not self.pending:
            self._advance(upper)
            return
        for b in batches:
            self.reader.accept(b)
        batch, self.pending = self.dataflow.executor.reduce_round(
            batches,
            self.pending,
            self.reader.batches(),
            self.output_reader.batches(),
            self.upper,
            upper,
            self.logic,
            self.scope.dims,
        )
        if batch is not None:
            self.output.insert(batch)
            self.output_reader.accept(batch)
            if batch.records:
                self.send(batch, self.upper.elements)
        self._advance(upper)

    def _advance(self, upper: Antichain) -> None:
        self.upper = upper
        self.output.upper = upper
        self.output.own_logical = upper
        self.reader.set_logical_compaction(upper)
        self.output_reader.set_logical_compaction(upper)
        lower_of = getattr(self.pending, "lower", None)
        if lower_of is not None:
            # An executor's own pending set computes its antichain itself.
            self.pending_lower = lower_of()
            return
        lower = Antichain()
        for times in self.pending.values():
            for t in times:
                lower.insert(t)
        self.pending_lower = lower
