"""Progress tracking: for every operator input, the frontier of times that may still arrive.

Pointstamps are held at operator outputs: an operator's capabilities (input epochs, pending
times, buffered data) plus the times of the messages queued at its inputs, mapped through the
operator's summary, because the operator will consume those messages and may send at those
times. A port's frontier is the minimal antichain of every pointstamp that can reach it along
edges, each operator applying its summary (identity, enter: append 0, leave: drop the last
coordinate, feedback: +1 on the innermost coordinate).

The frontier at a port excludes the messages queued at that port itself, which is sound because
an operator consumes all of its queued messages when it is activated. Cycles terminate because
every cycle passes a feedback edge, whose +1 makes the returning time dominated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from engine.lattice import Antichain, Time, less_equal


class Node(Protocol):
    """What progress tracking reads of an operator (`engine.dataflow.Operator`, which builds
    on this module, so this one names only the shape it needs)."""

    @property
    def index(self) -> int: ...

    @property
    def downstream(self) -> Sequence[tuple[Node, int]]: ...

    def pointstamps(self) -> Iterable[Time]: ...

    def summary(self, t: Time) -> Time | None: ...

    # True when `summary` is the identity.
    _identity: bool
    # True when the operator holds no capabilities (its pointstamps are its queues' times).
    _stateless: bool


# Per operator index: `(downstream operator index, its summary or None for the identity)`.
ReachPlan = list[tuple[tuple[int, Callable[[Time], Time | None] | None], ...]]


def reach_plan(ops: Sequence[Node]) -> ReachPlan:
    """The edges `compute_reach` walks, looked up once per graph instead of once per step
    (operators are indexed by their position in `ops`)."""
    return [
        tuple((dst.index, None if dst._identity else dst.summary) for dst, _port in op.downstream)
        for op in ops
    ]


def compute_reach(ops: Sequence[Node], plan: ReachPlan | None = None) -> list[Antichain]:
    """For every operator (by index), the antichain of times it may still send at (its output)."""
    if plan is None:
        plan = reach_plan(ops)
    # The scheduler calls this every step, so antichains are plain lists here (no method call
    # per insertion) and wrapped once at the end; `_insert` keeps each list minimal.
    lists: list[list[Time]] = [[] for _ in ops]
    work: list[tuple[int, Time]] = []
    for op in ops:
        if op._stateless:
            for q in op.queues:
                if q:
                    break
            else:
                continue  # holds nothing and has nothing queued: no pointstamps
        i = op.index
        for t in op.pointstamps():
            work.append((i, t))
    while work:
        i, t = work.pop()
        if not _insert(lists[i], t):
            continue
        for dst, summary in plan[i]:
            if summary is None:
                work.append((dst, t))
            else:
                t2 = summary(t)
                if t2 is not None:
                    work.append((dst, t2))
    reach = []
    for els in lists:
        a = Antichain()
        a.elements = els
        reach.append(a)
    return reach


def _insert(els: list[Time], t: Time) -> bool:
    """Add `t` to the minimal list `els` unless some element is `<= t`; drop what it dominates."""
    if not els:
        els.append(t)
        return True
    n = len(t)
    if n == 1:
        t0 = t[0]
        for e in els:
            if e[0] <= t0:
                return False
        els.clear()
        els.append(t)
        return True
    if n == 2:
        t0, t1 = t
        for e in els:
            if e[0] <= t0 and e[1] <= t1:
                return False
        keep = [e for e in els if not (t0 <= e[0] and t1 <= e[1])]
    else:
        for e in els:
            if less_equal(e, t):
                return False
        keep = [e for e in els if not less_equal(t, e)]
    els[:] = keep
    els.append(t)
    return True
