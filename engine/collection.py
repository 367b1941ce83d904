"""The fluent API: handles that build operators, and nothing below imports them.

A `Collection` is a handle on an operator's output stream of updates. Every method builds
operators in the collection's scope and returns a new handle; nothing runs until the dataflow
steps. Keyed operators take collections of `(key, val)` pairs; `count`, `distinct` and
`threshold` treat the whole record as the key, as differential dataflow does. Stateful operators
(join, reduce and its specialisations) read arrangements; passing an `Arranged` (the handle on a
shared `Arrangement`) instead of a collection shares its trace rather than building another. A
`Variable` is a collection in a loop defined by a later `set`; `new_input` makes an input's
handle and collection (and is what `Dataflow.new_input` calls).

This module is the top of the engine's layers: it imports the graph (`engine.dataflow`) and the
operators, and they never import it (see tests/test_engine_layout.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine import reducers
from engine.dataflow import Dataflow, Operator, Scope
from engine.fields import ArrangedFields
from engine.operators.arrange import Arrangement, ArrangeOp, AsCollectionOp, ImportOp
from engine.operators.capture import Capture, CaptureOp, Probe, ProbeOp
from engine.operators.half_join import HalfJoinOp
from engine.operators.input import InputHandle, InputOp
from engine.operators.iterate import ConsolidateOp, EnterOp, FeedbackOp, LeaveOp, VariableOp
from engine.operators.join import JoinOp
from engine.operators.reduce import ReduceOp
from engine.operators.stateless import (
    ConcatOp,
    UnaryOp,
    filter_logic,
    flat_map_logic,
    inspect_logic,
    map_logic,
    negate_logic,
)


def new_input(dataflow: Dataflow, name: str = "input") -> tuple[InputHandle, Collection]:
    """A new input of `dataflow`: a handle to send updates and advance epochs, and its
    collection."""
    op = InputOp(dataflow.root, name)
    handle = InputHandle(op)
    dataflow.inputs.append(handle)
    return handle, Collection(op)


class Collection:
    """A multiset that changes over (partially ordered) time, as a stream of updates."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.scope: Scope = op.scope

    @property
    def dataflow(self) -> Any:
        return self.scope.dataflow

    # -- stateless ---------------------------------------------------------------------------
    def map(self, f: Callable[[Any], Any]) -> Collection:
        return Collection(UnaryOp(self.scope, "map", self.op, map_logic(f)))

    def filter(self, predicate: Callable[[Any], bool]) -> Collection:
        return Collection(UnaryOp(self.scope, "filter", self.op, filter_logic(predicate)))

    def flat_map(self, f: Callable[[Any], Iterable[Any]]) -> Collection:
        return Collection(UnaryOp(self.scope, "flat_map", self.op, flat_map_logic(f)))

    def negate(self) -> Collection:
        return Collection(UnaryOp(self.scope, "negate", self.op, negate_logic))

    def inspect(self, f: Callable[[Any, Any, int], None]) -> Collection:
        return Collection(UnaryOp(self.scope, "inspect", self.op, inspect_logic(f)))

    def concat(self, *others: Collection) -> Collection:
        for o in others:
            self._same_scope(o)
        return Collection(ConcatOp(self.scope, "concat", [self.op] + [o.op for o in others]))

    def consolidate(self) -> Collection:
        return Collection(ConsolidateOp(self.scope, self.op))

    # -- arrangements ------------------------------------------------------------------------
    def arrange_by_key(self, name: str = "arrange") -> Arranged:
        op = ArrangeOp(self.scope, name, self.op, by_self=False)
        return Arranged(op, op.trace)

    def arrange_by_self(self, name: str = "arrange_self") -> Arranged:
        op = ArrangeOp(self.scope, name, self.op, by_self=True)
        return Arranged(op, op.trace)

    # -- join family -------------------------------------------------------------------------
    def join_map(self, other: Collection | Arranged, f: Callable[[Any, Any, Any], Any]) -> Collection:
        """`f(key, v1, v2)` for every pair of `(key, v1)` here and `(key, v2)` in `other`."""
        return join_arranged(self.arrange_by_key("join.left"), other, f)

    def join(self, other: Collection | Arranged) -> Collection:
        """`(key, (v1, v2))` for every matching pair."""
        return self.join_map(other, lambda k, a, b: (k, (a, b)))

    def semijoin(self, keys: Collection | Arranged) -> Collection:
        """The `(key, val)` records whose key is in `keys` (with `keys` taken as a set)."""
        ks = keys if isinstance(keys, Arranged) else keys.distinct().map(lambda k: (k, ()))
        if isinstance(ks, Arranged):
            return join_arranged(self.arrange_by_key("semijoin"), ks, lambda k, v, _: (k, v))
        return self.join_map(ks, lambda k, v, _: (k, v))

    def antijoin(self, keys: Collection | Arranged) -> Collection:
        """The `(key, val)` records whose key is not in `keys`."""
        return self.concat(self.semijoin(keys).negate())

    # -- reduce family -----------------------------------------------------------------------
    def reduce(
        self, logic: Callable[[Any, list[tuple[Any, int]]], Iterable[tuple[Any, int]]], name: str = "reduce"
    ) -> Collection:
        """Per key: `(key, out)` with multiplicities `logic(key, [(val, count), ...])`."""
        return self.arrange_by_key(name + ".input").reduce(logic, name).as_collection()

    def reduce_arranged(self, logic: Any, name: str = "reduce") -> Arranged:
        return self.arrange_by_key(name + ".input").reduce(logic, name)

    def reduce_total(
        self, new_state: Callable[[Any], Any], name: str = "reduce_total"
    ) -> Collection:
        """Per key: `(key, out)` with the multiplicities `new_state(key).output()` gives for
        the key's accumulated values, maintained incrementally. Only for a scope whose times
        are totally ordered (`dims == 1`); see `engine.operators.reduce_total`."""
        from engine.operators.reduce_total import ReduceTotalOp

        return Collection(ReduceTotalOp(self.scope, self.op, new_state, name))

    def count(self) -> Collection:
        """`(data, n)` for every record with a non-zero count n."""
        return (
            self.arrange_by_self("count.input")
            .reduce(reducers.count, "count")
            .as_collection(ArrangedFields("key", "val"))
        )

    def distinct(self) -> Collection:
        """Each record with a positive count, once."""
        return (
            self.arrange_by_self("distinct.input")
            .reduce(reducers.distinct, "distinct")
            .as_collection(ArrangedFields("key"))
        )

    def threshold(self, f: Callable[[int], int]) -> Collection:
        """Each record with multiplicity `f(count)`."""
        return (
            self.arrange_by_self("threshold.input")
            .reduce(reducers.threshold(f), "threshold")
            .as_collection(ArrangedFields("key"))
        )

    def sum(self) -> Collection:
        return self.reduce(reducers.sum_values, "sum")

    def min(self) -> Collection:
        return self.reduce(reducers.minimum, "min")

    def max(self) -> Collection:
        return self.reduce(reducers.maximum, "max")

    def top_k(self, k: int, offset: int = 0, order: Callable[[Any], Any] | None = None) -> Collection:
        """Per key, the records at positions `offset .. offset+k-1` in `order(val)` order."""
        return self.reduce(reducers.top_k(k, offset, order), "top_k")

    # -- scopes ------------------------------------------------------------------------------
    def enter(self, scope: Scope) -> Collection:
        if scope.parent is not self.scope:
            raise ValueError("enter() moves a collection one scope inwards")
        return Collection(EnterOp(scope, self.op))

    def leave(self) -> Collection:
        if self.scope.parent is None:
            raise ValueError("leave() from the root scope")
        return Collection(LeaveOp(self.scope.parent, self.op))

    def iterate(
        self, body: Callable[[Collection], Collection], limit: int | None = None
    ) -> Collection:
        """The fixed point of `x = body(x)` starting from this collection, left to this scope."""
        scope = self.scope.iterative(limit)
        source = self.enter(scope)
        var = Variable(scope, source)
        result = body(var.collection)
        var.set(result)
        return result.leave()

    # -- outputs -----------------------------------------------------------------------------
    def capture(self, history: bool = True, drain: bool = True, current: bool = True) -> Capture:
        """Record this collection's updates (`history`), its accumulated contents (`current`)
        and its frontier; with `drain`, also queue final updates for `Capture.drain`. A caller
        that keeps the contents itself passes `current=False` and holds no second copy."""
        return Capture(CaptureOp(self.scope, self.op, history, None, drain, current))

    def subscribe(
        self, callback: Callable[[list[tuple[Any, Any, int]], Any], None], history: bool = False
    ) -> Capture:
        """Call `callback(updates, frontier)` whenever updates become final or the frontier
        moves: `updates` are the `(data, time, diff)` at times no longer beyond `frontier`."""
        return Capture(CaptureOp(self.scope, self.op, history, callback))

    def probe(self) -> Probe:
        return Probe(ProbeOp(self.scope, self.op))

    def _same_scope(self, other: Collection) -> None:
        if other.scope is not self.scope:
            raise ValueError("collections from different scopes: use enter()/leave()")


class Arranged(Arrangement):
    """The fluent handle on a shared arrangement (`engine.operators.arrange.Arrangement`)."""

    def as_collection(self, f: Callable[[Any, Any], Any] | None = None) -> Collection:
        """The arranged updates as a collection of `(key, val)` or `f(key, val)`."""
        return Collection(AsCollectionOp(self, f))

    def import_into(self, dataflow: Any, name: str | None = None) -> Arranged:
        """This arrangement, readable from the root scope of another dataflow, without a copy.

        Operators there read the same trace: a reader attached now is first handed its current
        contents, then every batch sealed later. Run this arrangement's dataflow before the
        importing one (so what it seals is there to read), and call `release()` on the
        importing dataflow before discarding it.
        """
        if self.scope.parent is not None:
            raise ValueError("only arrangements in a root scope can be imported")
        if dataflow.root.dims != self.scope.dims:
            raise ValueError("the importing dataflow's times must have %d coordinates" % self.scope.dims)
        op = ImportOp(dataflow.root, self.trace, name or "import:" + self.trace.name)
        return Arranged(op, self.trace)

    # Keyed operators can take an Arranged directly; these forward to the collection API.
    def join_map(self, other: Any, f: Callable[[Any, Any, Any], Any]) -> Collection:
        return join_arranged(self, other, f)

    def join(self, other: Any) -> Collection:
        return self.join_map(other, lambda k, a, b: (k, (a, b)))

    def reduce(self, logic: Any, name: str = "reduce") -> Arranged:
        op = ReduceOp(self, logic, name)
        return Arranged(op, op.output)


class Variable:
    """A collection in an iterative scope whose next iteration is given by `set`."""

    def __init__(self, scope: Scope, source: Collection | None = None, name: str = "variable") -> None:
        if scope.parent is None:
            raise ValueError("a Variable needs an iterative scope (use scope.iterative())")
        if source is not None and source.scope is not scope:
            raise ValueError("the source of a Variable must be in its scope: use .enter(scope)")
        self.scope = scope
        self.source = source
        self.op = VariableOp(scope, name, [source.op] if source is not None else [])
        self.collection = Collection(self.op)
        self.is_set = False

    def set(self, result: Collection) -> Collection:
        """Close the loop: the variable at iteration i+1 is `result` at iteration i."""
        if self.is_set:
            raise ValueError("variable already set")
        if result.scope is not self.scope:
            raise ValueError("a Variable must be set from a collection in its own scope")
        self.is_set = True
        fed = result if self.source is None else result.concat(self.source.negate())
        fb = FeedbackOp(self.scope, fed.op)
        fb.downstream.append((self.op, len(self.op.queues)))
        self.op.queues.append([])
        self.op.inputs.append(fb)
        return result

    # A Variable is used as a collection in the loop body.
    def __getattr__(self, name: str) -> Any:
        return getattr(self.collection, name)


def join_arranged(
    left: Arranged, other: Collection | Arranged, f: Callable[[Any, Any, Any], Any]
) -> Collection:
    right = other if isinstance(other, Arranged) else other.arrange_by_key("join.right")
    return Collection(JoinOp(left, right, f))


def half_join(stream: Any, arranged: Arrangement, key: Callable[[Any], Any],
              f: Callable[[Any, Any], Any], strict: bool, name: str = "half_join",
              key_columns: tuple[int, ...] | None = None, concat: bool = False) -> Any:
    """The collection of ``f(d, w)`` for each stream record ``d`` and arrangement value ``w``
    under ``key(d)`` at a time not after (``strict``: before) the stream update's. With
    `key_columns` (``key(d)`` is those columns of d) and `concat` (``f(d, w)`` is ``d + w``)
    rows that arrive as columns are joined as columns."""
    return Collection(HalfJoinOp(stream.op, arranged, key, f, strict, name, key_columns, concat))


# The graph layer builds inputs through this module (see `Dataflow.input_factory`).
Dataflow.input_factory = new_input
