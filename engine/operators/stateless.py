"""Stateless operators: map, filter, flat_map, concat, negate, inspect.

They hold no capabilities and keep no state: each message becomes one outgoing message at the
same times (so its `lower` passes through unchanged), which is why they never wait for
frontiers, and why they act on a message as it is sent (`Operator.eager`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.dataflow import Operator, Scope
from engine.lattice import Antichain, Time

Updates = list[tuple[Any, Time, int]]


class UnaryOp(Operator):
    """Applies `logic` to each batch of updates."""

    eager = True

    def __init__(
        self, scope: Scope, name: str, source: Operator, logic: Callable[[Updates], Updates]
    ) -> None:
        super().__init__(scope, name, [source])
        self.logic = logic

    def push(self, port: int, payload: Any, lower: list[Time]) -> None:
        ex = self.dataflow.executor
        out = ex.apply(self.logic, payload)
        if not ex.is_empty(out):
            self.send(out, lower)

    def activate(self, frontiers: list[Antichain]) -> None:
        for updates, lower in self.drain(0):
            self.push(0, updates, lower)


class ConcatOp(Operator):
    """The multiset sum of its inputs."""

    eager = True

    def push(self, port: int, payload: Any, lower: list[Time]) -> None:
        self.send(payload, lower)

    def activate(self, frontiers: list[Antichain]) -> None:
        for port in range(len(self.queues)):
            for updates, lower in self.drain(port):
                self.send(updates, lower)


def _over_updates(f: Callable[[Any], Any],
                  per_record: Callable[[Updates], Updates]) -> Callable[[Updates], Updates]:
    """The step over a list of updates: `f`'s own whole-list form if it has one (a generated
    kernel: the same updates without a Python call per record), else `per_record`. A fresh
    function either way, so the caller may set attributes on it."""
    over_updates = getattr(f, "over_updates", None)
    step = over_updates if over_updates is not None else per_record

    def logic(u: Updates) -> Updates:
        return step(u)
    # A kernel that also maps a plain list of rows (one output row per kept row, keyed by
    # the columns `row_keys` or not keyed) lets an executor keep rows at one time as rows
    # (engine.rows_at): `over_rows(rows)` must denote what `step` does to their updates.
    over_rows = getattr(f, "over_rows", None)
    if over_rows is not None:
        logic.over_rows = over_rows  # type: ignore[attr-defined]
        logic.row_keys = f.row_keys  # type: ignore[attr-defined]
    # Likewise over rows kept as columns (engine.columns_at): `over_columns(table)` returns
    # the table of output rows (keyed by `row_keys`), or None to be given the rows instead.
    over_columns = getattr(f, "over_columns", None)
    if over_columns is not None:
        logic.over_columns = over_columns  # type: ignore[attr-defined]
        logic.row_keys = f.row_keys  # type: ignore[attr-defined]
    # A map of `(key, val)` pairs to `key + val` marks itself `over_pair_columns` (True):
    # over a reduce's pairs kept as columns (engine.columns_at.PairColumnsAt) its output is
    # the table's rows, kept as columns.
    over_pair_columns = getattr(f, "over_pair_columns", None)
    if over_pair_columns is not None:
        logic.over_pair_columns = over_pair_columns  # type: ignore[attr-defined]
    return logic


def map_logic(f: Callable[[Any], Any]) -> Callable[[Updates], Updates]:
    logic = _over_updates(f, lambda u: [(f(d), t, r) for d, t, r in u])
    # One output per input at the same time: an executor may keep such a step lazy.
    logic.one_to_one = True  # type: ignore[attr-defined]
    # An executor that holds data apart from times and diffs applies `f` to the data alone.
    logic.map_f = f  # type: ignore[attr-defined]
    return logic


def filter_logic(p: Callable[[Any], bool]) -> Callable[[Updates], Updates]:
    def logic(u: Updates) -> Updates:
        return [x for x in u if p(x[0])]

    logic.filter_p = p  # type: ignore[attr-defined]
    return logic


def flat_map_logic(f: Callable[[Any], Any]) -> Callable[[Updates], Updates]:
    logic = _over_updates(f, lambda u: [(y, t, r) for d, t, r in u for y in f(d)])
    logic.flat_f = f  # type: ignore[attr-defined]
    return logic


def negate_logic(u: Updates) -> Updates:
    return [(d, t, -r) for d, t, r in u]


negate_logic.negates = True  # type: ignore[attr-defined]


def inspect_logic(f: Callable[[Any, Time, int], None]) -> Callable[[Updates], Updates]:
    def logic(u: Updates) -> Updates:
        for d, t, r in u:
            f(d, t, r)
        return u

    return logic
