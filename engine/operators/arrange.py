"""Arrange: seal a collection's updates into batches of a shared, indexed trace.

The arrange operator buffers `(key, val, time, diff)` updates and, whenever its input frontier
moves, seals the updates whose times are complete (not beyond the frontier) into one immutable
batch `[previous upper, frontier)`, inserts it into its trace and sends it to every reader.
Updates at times beyond the frontier stay buffered, and the operator holds capabilities for them.

An `Arrangement` is what operators share: every join, reduce or `as_collection` built on the
same arrangement reads the same trace (built once, read many times). A reader attached after
data has arrived is first handed every existing batch, so a dataflow built later (a new view)
sees the whole current contents. (The fluent handle on it, `engine.collection.Arranged`, adds
the methods that build those operators.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine.dataflow import Operator, Scope
from engine.lattice import Antichain, Time
from engine.operators.buffer import split_buffer
from engine.trace import Snapshot, Trace


class ArrangeOp(Operator):
    needs_frontier = True

    def __init__(self, scope: Scope, name: str, source: Operator, by_self: bool) -> None:
        super().__init__(scope, name, [source])
        self.by_self = by_self
        self.trace = Trace.of_executor(name, scope.dims, self.dataflow.executor)
        self.dataflow.traces.append(self.trace)
        self.buffer: list[Any] = []
        self.buffer_lower = Antichain()
        self.buffer_frontier: Antichain | None = None
        self.upper = Antichain([(0,) * scope.dims])

    def capabilities(self) -> Iterable[Time]:
        return self.buffer_lower.elements

    def activate(self, frontiers: list[Antichain]) -> None:
        new = [updates for updates, _ in self.drain(0)]
        frontier = frontiers[0]
        if not new:
            if frontier == self.upper:
                return
            if not self.buffer:
                # Only the frontier moved, with nothing held (most of a loop's rounds for most
                # of its arrangements): an empty batch would only extend the trace's upper.
                self.upper = frontier
                self.trace.upper = frontier
                self.trace.own_logical = frontier
                return
        ready, self.buffer, self.buffer_lower, self.buffer_frontier = split_buffer(
            self.dataflow.executor, new, self.buffer, self.buffer_lower, self.buffer_frontier, frontier
        )
        lower = self.upper
        self.upper = frontier
        if ready is None:
            self.trace.upper = frontier
            self.trace.own_logical = frontier
            return
        batch = self.dataflow.executor.seal(ready, self.by_self, lower, frontier, self.scope.dims)
        self.trace.insert(batch)
        if batch.records:
            self.send(batch, lower.elements)


class Arrangement:
    """A shared arrangement: a trace plus the operator that feeds it batches."""

    def __init__(self, op: Operator, trace: Trace) -> None:
        self.op = op
        self.trace = trace
        self.scope: Scope = op.scope

    def attach(self, reader_op: Operator, port: int, name: str) -> Any:
        """Register `reader_op` as a reader; queue the existing batches it has not seen."""
        reader = self.trace.new_reader(name)
        if self.trace not in reader_op.dataflow.traces:
            # A trace imported from another dataflow: remember the reader so that dropping
            # this dataflow releases it (a stale reader would hold back compaction forever).
            reader_op.dataflow.foreign_readers.append(reader)
        for b in self.trace.existing_batches():
            reader_op.queues[port].append((b, b.lower.elements or [(0,) * self.scope.dims]))
        return reader

    def stats(self) -> dict[str, Any]:
        return self.trace.stats()

    def snapshot(self, data: Callable[[Any, Any], Any] | None = None) -> Snapshot:
        """The trace's batches now, for reading from another thread (`trace.Snapshot`; `data`
        None: the keys are the data, as in an arrangement by self): take it between runs,
        from the thread that runs the dataflow."""
        return Snapshot(self.trace.existing_batches(), self.op.dataflow.executor, data)


class AsCollectionOp(Operator):
    """Reads batches of an arrangement and sends their updates as a collection."""

    needs_frontier = True

    def __init__(self, arranged: Arrangement, f: Callable[[Any, Any], Any] | None) -> None:
        Operator.__init__(self, arranged.scope, "as_collection", [])
        self.queues.append([])
        arranged.op.downstream.append((self, 0))
        self.inputs.append(arranged.op)
        self.reader = arranged.attach(self, 0, "as_collection")
        self.f = f

    def activate(self, frontiers: list[Antichain]) -> None:
        ex = self.dataflow.executor
        for batch, lower in self.drain(0):
            out = ex.unarrange(batch, self.f)
            self.reader.accept(batch)
            if not ex.is_empty(out):
                self.send(out, lower)
        # This reader needs no history: let the trace compact up to what may still arrive.
        self.reader.set_logical_compaction(frontiers[0])


class ImportOp(Operator):
    """The source, in an importing dataflow, of batches sealed into another dataflow's trace.

    It forwards each batch once, in order, to its readers in this dataflow, and holds a
    capability at the trace's upper frontier: every batch still to come is beyond it.
    """

    needs_frontier = True

    def __init__(self, scope: Scope, trace: Trace, name: str) -> None:
        super().__init__(scope, name, [])
        self.trace = trace
        self.reader = trace.new_reader(name)
        self.dataflow.foreign_readers.append(self.reader)
        # Batches that exist now are handed to each reader when it attaches.
        self.reader.acked = trace.next_seq - 1
        self.reader.set_logical_compaction(trace.upper)

    def _unseen(self) -> list[Any]:
        acked = self.reader.acked
        return [b for b in self.trace.existing_batches() if b.seq > acked]

    def has_messages(self) -> bool:
        return self.trace.next_seq - 1 > self.reader.acked

    def capabilities(self) -> Iterable[Time]:
        for b in self._unseen():
            yield from b.lower.elements
        yield from self.trace.upper.elements

    def activate(self, frontiers: list[Antichain]) -> None:
        for b in self._unseen():
            self.reader.accept(b)
            if b.records:
                self.send(b, b.lower.elements)
        # This reader keeps no history of its own.
        self.reader.set_logical_compaction(self.trace.upper)
