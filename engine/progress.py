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

The scheduler needs only the frontiers of the operators a loop reads backwards (a loop
variable reads its feedback, created after it): every other frontier of a pass is computed in
that pass, after the operators before it ran. `backward_reach` computes just those from the
pointstamps, through the minimal summaries of the paths from each operator to them, found once
per graph (`backward_plan`): a summary is `(drop, inc, app)` (drop the last `drop`
coordinates, add `inc` to the last one left, append `app`), which every built-in summary is
(identity, enter, leave, feedback) and which composition keeps. Invariant: for each backward
source, `backward_reach` equals `compute_reach` (the walk, kept as the reference and for graphs
with an operator whose summary has no such form); tests compare them at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from engine.lattice import Antichain, Time, less_equal

Summary = tuple[int, int, tuple[int, ...]]


class Node(Protocol):
    """What progress tracking reads of an operator (`engine.dataflow.Operator`, which builds
    on this module, so this one names only the shape it needs)."""

    @property
    def index(self) -> int: ...

    @property
    def downstream(self) -> Sequence[tuple[Node, int]]: ...

    def pointstamps(self) -> Iterable[Time]: ...

    def summary(self, t: Time) -> Time | None: ...

    @property
    def inputs(self) -> Sequence[Node]: ...

    @property
    def queues(self) -> Sequence[Sequence[object]]: ...

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
    # per insertion) and wrapped once at the end; `insert_minimal` keeps each list minimal.
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
        if not insert_minimal(lists[i], t):
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


def insert_minimal(els: list[Time], t: Time) -> bool:
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


# -- path summaries -------------------------------------------------------------------------------
IDENTITY: Summary = (0, 0, ())


def summary_form(op: object) -> Summary | None:
    """`op`'s summary as `(drop, inc, app)`: the `summary_form` declared by the class that
    defines its `summary`, or None where that class declares none (an overriding `summary`
    never inherits its parent's form)."""
    for cls in type(op).__mro__:
        if "summary" in cls.__dict__:
            form: Summary | None = cls.__dict__.get("summary_form")
            return form
    return None


def apply_summary(s: Summary, t: Time) -> Time:
    drop, inc, app = s
    if drop:
        t = t[:-drop]
    if inc:
        t = t[:-1] + (t[-1] + inc,)
    return t + app if app else t


def compose(first: Summary, then: Summary) -> Summary:
    """The summary of `first` followed by `then`: `apply(compose(f, g), t) == apply(g,
    apply(f, t))` for every time long enough for both."""
    d1, i1, a1 = first
    d2, i2, a2 = then
    if d2 > len(a1):
        # `then` drops everything `first` appended and more: the coordinate `first` added to
        # is gone with them.
        return (d1 + d2 - len(a1), i2, a2)
    kept = a1[: len(a1) - d2]
    if i2:
        if kept:
            kept = kept[:-1] + (kept[-1] + i2,)
        else:
            i1 += i2
    return (d1, i1, kept + a2)


def summary_le(a: Summary, b: Summary) -> bool:
    """`apply(a, t) <= apply(b, t)` for every `t`: the same shape, and coordinate-wise."""
    return a[0] == b[0] and len(a[2]) == len(b[2]) and a[1] <= b[1] and \
        all(x <= y for x, y in zip(a[2], b[2], strict=True))


def _insert_summary(els: list[Summary], s: Summary) -> bool:
    for e in els:
        if summary_le(e, s):
            return False
    els[:] = [e for e in els if not summary_le(s, e)]
    els.append(s)
    return True


# Per backward source: `(its index, [(operator index, minimal path summaries to it)])`.
BackwardPlan = list[tuple[int, list[tuple[int, list[Summary]]]]]
# A bound on the search for path summaries (each cycle adds at least 1, so it ends far sooner).
_PLAN_STEPS = 100_000


def backward_plan(ops: Sequence[Node]) -> BackwardPlan | None:
    """For every operator read backwards, the operators whose pointstamps reach it and the
    minimal summaries of those paths; None when some operator's summary has no declared form
    (then `compute_reach` serves)."""
    forms = [summary_form(op) for op in ops]
    if any(f is None for f in forms):
        return None
    sources = sorted({src.index for op in ops for src in op.inputs if src.index >= op.index})
    plan: BackwardPlan = []
    for q in sources:
        # A pointstamp at x's output reaches y's input, leaves y mapped by y's summary, then
        # goes on from y as y's own would: walk the edges backwards from q.
        to_q: dict[int, list[Summary]] = {q: [IDENTITY]}
        work = [(q, IDENTITY)]
        steps = 0
        while work:
            y, s = work.pop()
            via = compose(forms[y], s)  # type: ignore[arg-type]
            for x in ops[y].inputs:
                if _insert_summary(to_q.setdefault(x.index, []), via):
                    work.append((x.index, via))
            steps += 1
            if steps > _PLAN_STEPS:
                return None
        plan.append((q, sorted(to_q.items())))
    return plan


def backward_reach(ops: Sequence[Node], plan: BackwardPlan) -> list[Antichain | None]:
    """Per operator index: for each backward source in `plan`, the antichain of times it may
    still send at (as `compute_reach` gives it); None for every other operator."""
    reach: list[Antichain | None] = [None] * len(ops)
    stamps: dict[int, Sequence[Time]] = {}
    for q, sources in plan:
        els: list[Time] = []
        for x, summaries in sources:
            pts = stamps.get(x)
            if pts is None:
                op = ops[x]
                if any(op.queues):
                    pts = list(op.pointstamps())
                elif op._stateless:
                    pts = ()  # holds nothing and has nothing queued: no pointstamps
                else:
                    caps = op.capabilities()
                    pts = caps if isinstance(caps, (list, tuple)) else list(caps)
                stamps[x] = pts
            if not pts:
                continue
            for s in summaries:
                if s == IDENTITY:
                    for t in pts:
                        insert_minimal(els, t)
                else:
                    for t in pts:
                        insert_minimal(els, apply_summary(s, t))
        a = Antichain()
        a.elements = els
        reach[q] = a
    return reach
