"""Iteration: enter, leave, feedback and loop variables.

Inside an iterative scope times gain a coordinate, the loop counter. `enter` maps `t` to
`t + (0,)`; `leave` drops the counter and sends at once (summing a loop's differences over all
iterations gives its limit, which is final when the outer frontier passes `t`, that is, when
the loop has converged); feedback adds 1 to the counter.

A `Variable` (the fluent handle in `engine.collection`, over the `VariableOp` and `FeedbackOp`
here) is a collection defined by a later `set`. `Variable(scope, source)` follows
differential's `new_from`: its collection is `source` plus the feedback, and `set(result)`
feeds back `result - source`, so at iteration i+1 the variable equals `result` at iteration i.
The feedback operator only forwards consolidated updates at complete times, so updates that
cancel never circulate, and an empty difference ends the loop by progress alone: no iteration
count is assumed. A scope's optional limit turns a loop that is still changing at that
iteration into `IterationLimitExceeded` instead of a hang.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.dataflow import Operator, Scope
from engine.errors import IterationLimitExceeded
from engine.lattice import Antichain, Time
from engine.operators.buffer import split_buffer


class EnterOp(Operator):
    """Moves a collection from the parent scope into `scope`: t -> t + (0,)."""

    summary_form = (0, 0, (0,))  # t -> t + (0,), as `summary` (see engine.progress)
    eager = True

    def __init__(self, scope: Scope, source: Operator) -> None:
        super().__init__(scope, "enter", [source])

    def summary(self, t: Time) -> Time | None:
        return t + (0,)

    def push(self, port: int, payload: Any, lower: list[Time]) -> None:
        self.send(self.dataflow.executor.apply(enter_logic, payload), [t + (0,) for t in lower])

    def activate(self, frontiers: list[Antichain]) -> None:
        for updates, lower in self.drain(0):
            self.push(0, updates, lower)


class LeaveOp(Operator):
    """Moves a collection from a loop to its parent scope: (t, i) -> t."""

    summary_form = (1, 0, ())  # (t, i) -> t, as `summary` (see engine.progress)
    eager = True

    def __init__(self, scope: Scope, source: Operator) -> None:
        super().__init__(scope, "leave", [source])

    def summary(self, t: Time) -> Time | None:
        return t[:-1]

    def push(self, port: int, payload: Any, lower: list[Time]) -> None:
        self.send(self.dataflow.executor.apply(leave_logic, payload), [t[:-1] for t in lower])

    def activate(self, frontiers: list[Antichain]) -> None:
        for updates, lower in self.drain(0):
            self.push(0, updates, lower)


class ConsolidateOp(Operator):
    """Buffers updates until their times are complete, then sends them consolidated."""

    needs_frontier = True

    def __init__(self, scope: Scope, source: Operator, name: str = "consolidate") -> None:
        super().__init__(scope, name, [source])
        self.buffer: list[Any] = []
        self.buffer_lower = Antichain()
        self.buffer_frontier: Antichain | None = None

    def capabilities(self) -> Iterable[Time]:
        return [self.summary(t) for t in self.buffer_lower.elements]  # type: ignore[misc]

    def transform(self, payload: Any, lower: Antichain) -> tuple[Any, list[Time]]:
        return payload, lower.elements

    def activate(self, frontiers: list[Antichain]) -> None:
        new = [updates for updates, _ in self.drain(0)]
        if not new and not self.buffer:
            return  # only the frontier moved, and nothing waits for it
        ex = self.dataflow.executor
        ready, self.buffer, self.buffer_lower, self.buffer_frontier = split_buffer(
            ex, new, self.buffer, self.buffer_lower, self.buffer_frontier, frontiers[0]
        )
        if ready is not None:
            out = ex.consolidate(ready)
            if not ex.is_empty(out):
                payload, lower = self.transform(out, ex.lower(out))
                self.send(payload, lower)


class FeedbackOp(ConsolidateOp):
    """The back edge of a loop: consolidates complete times and adds 1 to the counter."""

    summary_form = (0, 1, ())  # (t, i) -> (t, i + 1), as `summary` (see engine.progress)

    def __init__(self, scope: Scope, source: Operator) -> None:
        super().__init__(scope, source, "feedback")

    def summary(self, t: Time) -> Time | None:
        return t[:-1] + (t[-1] + 1,)

    def transform(self, payload: Any, lower: Antichain) -> tuple[Any, list[Time]]:
        limit = self.scope.limit
        if limit is not None:
            for t in lower.elements:
                if t[-1] + 1 > limit:
                    self.buffer = []
                    self.buffer_lower = Antichain()
                    raise IterationLimitExceeded(limit, self.scope.name, t[:-1])
        out = self.dataflow.executor.apply(feedback_logic, payload)
        return out, [t[:-1] + (t[-1] + 1,) for t in lower.elements]


def enter_logic(updates: list[tuple[Any, Time, int]]) -> list[tuple[Any, Time, int]]:
    return [(d, t + (0,), r) for d, t, r in updates]


def leave_logic(updates: list[tuple[Any, Time, int]]) -> list[tuple[Any, Time, int]]:
    return [(d, t[:-1], r) for d, t, r in updates]


def feedback_logic(updates: list[tuple[Any, Time, int]]) -> list[tuple[Any, Time, int]]:
    return [(d, t[:-1] + (t[-1] + 1,), r) for d, t, r in updates]


# What each does to a time, for executors that change packed times in bulk:
# (coordinates added or removed, increment of the innermost coordinate).
enter_logic.retime = (1, 0)  # type: ignore[attr-defined]
leave_logic.retime = (-1, 0)  # type: ignore[attr-defined]
feedback_logic.retime = (0, 1)  # type: ignore[attr-defined]


class VariableOp(Operator):
    """The loop variable's collection: its source (if any) plus what the feedback sends."""

    eager = True

    def push(self, port: int, payload: Any, lower: list[Time]) -> None:
        self.send(payload, lower)

    def activate(self, frontiers: list[Antichain]) -> None:
        for port in range(len(self.queues)):
            for updates, lower in self.drain(port):
                self.send(updates, lower)
