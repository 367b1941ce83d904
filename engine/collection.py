"""The fluent API: a `Collection` is a handle on an operator's output stream of updates.

Every method builds operators in the collection's scope and returns a new handle; nothing runs
until the dataflow steps. Keyed operators take collections of `(key, val)` pairs; `count`,
`distinct` and `threshold` treat the whole record as the key, as differential dataflow does.
Stateful operators (join, reduce and its specialisations) read arrangements; passing an
`Arranged` instead of a collection shares its trace rather than building another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine import reducers
from engine.dataflow import Operator, Scope
from engine.operators.arrange import Arranged, ArrangeOp
from engine.operators.capture import Capture, CaptureOp, Probe, ProbeOp
from engine.operators.iterate import ConsolidateOp, EnterOp, LeaveOp, Variable
from engine.operators.stateless import (
    ConcatOp,
    UnaryOp,
    filter_logic,
    flat_map_logic,
    inspect_logic,
    map_logic,
    negate_logic,
)


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
            .as_collection(lambda k, v: (k, v))
        )

    def distinct(self) -> Collection:
        """Each record with a positive count, once."""
        return (
            self.arrange_by_self("distinct.input")
            .reduce(reducers.distinct, "distinct")
            .as_collection(lambda k, v: k)
        )

    def threshold(self, f: Callable[[int], int]) -> Collection:
        """Each record with multiplicity `f(count)`."""
        return (
            self.arrange_by_self("threshold.input")
            .reduce(reducers.threshold(f), "threshold")
            .as_collection(lambda k, v: k)
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
    def capture(self, history: bool = True, drain: bool = True) -> Capture:
        """Record this collection's updates (`history`), its accumulated current contents and
        its frontier; with `drain`, also queue final updates for `Capture.drain`."""
        return Capture(CaptureOp(self.scope, self.op, history, None, drain))

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


def join_arranged(
    left: Arranged, other: Collection | Arranged, f: Callable[[Any, Any, Any], Any]
) -> Collection:
    from engine.operators.join import JoinOp

    right = other if isinstance(other, Arranged) else other.arrange_by_key("join.right")
    return Collection(JoinOp(left, right, f))
