"""The dataflow graph, its scopes, and the scheduler.

A `Dataflow` owns operators in creation order, which is a topological order of the graph once
feedback edges are cut (an operator only reads operators created before it, except a loop
variable, which reads its feedback). `step` computes every port's frontier (see `progress`) and
then activates, in that order, each operator that has queued messages or whose input frontiers
moved. Operators act only on complete times: those not beyond their input frontier. A frontier
computed at the start of a pass stays sound for the whole pass, because an operator may only
send at times at or after pointstamps that were counted.

`run` steps until no operator has anything to do: every submitted epoch is then fully processed
and every loop has converged (progress-based termination; no iteration count is assumed).

A `Scope` gives times their length: the root scope has `dims` coordinates (1 by default:
the epoch), and each iterative scope adds one coordinate, the loop counter.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from engine import executors
from engine.errors import DataflowPoisoned
from engine.lattice import Antichain, Time
from engine.progress import (
    BackwardPlan,
    ReachPlan,
    backward_plan,
    backward_reach,
    compute_reach,
    insert_minimal,
    reach_plan,
)

if TYPE_CHECKING:
    from engine.trace import Trace

# `Dataflow._pass`'s answer when the next pass would find nothing to do.
_IDLE: list[Any] = []
# The longest chain of `eager` operators a message is pushed through within one send; past it,
# it is queued for the next operator's turn (a UNION ALL of 300 SELECTs is a chain of 300
# concats, and a push is two Python frames).
EAGER_DEPTH = 64


class Scope:
    """A region of the dataflow whose times have `dims` coordinates."""

    def __init__(
        self,
        dataflow: Dataflow,
        parent: Scope | None,
        dims: int,
        limit: int | None = None,
        name: str = "root",
    ) -> None:
        self.dataflow = dataflow
        self.parent = parent
        self.dims = dims
        self.limit = limit
        self.name = name

    def iterative(self, limit: int | None = None, name: str | None = None) -> Scope:
        """A nested scope for a loop; `limit` bounds its iteration counter."""
        n = name or "loop%d" % (self.dataflow._scope_count + 1)
        self.dataflow._scope_count += 1
        return Scope(self.dataflow, self, self.dims + 1, limit, n)

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()

    def is_within(self, other: Scope) -> bool:
        s: Scope | None = self
        while s is not None:
            if s is other:
                return True
            s = s.parent
        return False

    def __repr__(self) -> str:
        return "Scope(%s, dims=%d)" % (self.name, self.dims)


class Operator:
    """Base class of every operator.

    Subclasses set `needs_frontier` when they must run on frontier changes alone, override
    `capabilities` to report the times at which they may still send, `summary` when they change
    times, and `activate` to consume their queues.
    """

    needs_frontier = False
    # True for an operator that acts on each message as it is sent (`push`) instead of
    # queueing it for its turn: a stateless one that keeps no capabilities and never waits for
    # frontiers (map, concat, a loop variable, enter, leave), for which acting at once is
    # what its turn in the same pass would do. Its queues stay empty, so its turn costs the
    # scheduler almost nothing, and its work is done without an activation of its own. Sound
    # for progress: what it sends is at times its sender may send at (mapped by its summary),
    # which every frontier computed in the pass already allows for.
    eager: ClassVar[bool] = False

    def __init__(self, scope: Scope, name: str, inputs: Iterable[Operator] = ()) -> None:
        self.scope = scope
        self.name = name
        self.dataflow = scope.dataflow
        self.inputs = list(inputs)
        # Each queued message is (payload, lower): `lower` lists times every payload time is beyond.
        self.queues: list[list[tuple[Any, list[Time]]]] = [[] for _ in self.inputs]
        self.downstream: list[tuple[Operator, int]] = []
        self.last_frontiers: list[Antichain] | None = None
        for port, src in enumerate(self.inputs):
            src.downstream.append((self, port))
        self.index = self.dataflow._register(self)
        # True when `summary` is the identity (the operator never changes times).
        self._identity = type(self).summary is Operator.summary
        # True when the operator never holds capabilities (it sends only while consuming its
        # queues): progress tracking and the scheduler skip it whenever its queues are empty.
        cls = type(self)
        self._stateless = (cls.capabilities is Operator.capabilities
                           and cls.has_messages is Operator.has_messages)
        # Both, and not woken by frontiers: with one input (inputs can be added after
        # construction, so the scheduler counts them) and nothing queued, it has nothing to do
        # and its reach is its input's frontier.
        self._passthrough = self._identity and self._stateless and not self.needs_frontier
        # `reach`'s last answer with nothing queued: (capabilities, input frontiers' elements,
        # the antichain it returned).
        self._reach_memo: tuple[tuple[Time, ...], list[list[Time]], Antichain] | None = None

    # -- progress ------------------------------------------------------------------------------
    # `summary` as `(drop, inc, app)` (see `progress`): a class that overrides `summary`
    # declares its form next to it, or progress tracking walks the graph for it.
    summary_form: ClassVar[tuple[int, int, tuple[int, ...]] | None] = (0, 0, ())

    def summary(self, t: Time) -> Time | None:
        return t

    def capabilities(self) -> Iterable[Time]:
        return ()

    def pointstamps(self) -> Iterable[Time]:
        yield from self.capabilities()
        for q in self.queues:
            for _, lower in q:
                for t in lower:
                    s = self.summary(t)
                    if s is not None:
                        yield s

    def reach(self, frontiers: list[Antichain]) -> Antichain:
        """A lower bound on every time this operator may still send at, given its input frontiers."""
        if self.has_messages():
            els: list[Time] = []
            for t in self.pointstamps():
                insert_minimal(els, t)
            return self._with_inputs(els, frontiers)
        caps = self.capabilities()
        if not isinstance(caps, (list, tuple)):
            caps = list(caps)
        if caps and self._identity and len(frontiers) == 1:
            # An operator holding times its input may still send at anyway (an arrangement's
            # buffer, a reduce's pending times: beyond the frontier they wait for) reaches no
            # further back than its input: its reach is that frontier, shared as below.
            first = frontiers[0]
            for t in caps:
                if not first.less_equal(t):
                    break
            else:
                return first
        if not caps and self._identity and frontiers:
            # Most operators hold nothing after their turn and do not change times: their
            # reach is their input's frontier (their inputs' one, when they all agree, as a
            # loop's inputs do in most rounds). No code inserts into a frontier it was
            # handed (joins and meets build new antichains), so the object is shared.
            first = frontiers[0]
            for f in frontiers:
                if f is not first and f.elements != first.elements:
                    break
            else:
                return first
        # With nothing queued the reach is a function of the capabilities and the input
        # frontiers alone, which a loop round mostly leaves as they were: the last answer is
        # reused (shared, as above), and so are the frontier comparisons downstream, which
        # find the same object.
        held = tuple(caps)
        inputs = [f.elements for f in frontiers]
        memo = self._reach_memo
        if memo is not None and memo[0] == held and memo[1] == inputs:
            return memo[2]
        els = []
        for t in caps:
            insert_minimal(els, t)
        out = self._with_inputs(els, frontiers)
        self._reach_memo = (held, inputs, out)
        return out

    def _with_inputs(self, els: list[Time], frontiers: list[Antichain]) -> Antichain:
        """The antichain of `els` (minimal) and the input frontiers mapped by `summary`."""
        if self._identity:
            for f in frontiers:
                for t in f.elements:
                    insert_minimal(els, t)
        else:
            summary = self.summary
            for f in frontiers:
                for t in f.elements:
                    s = summary(t)
                    if s is not None:
                        insert_minimal(els, s)
        out = Antichain()
        out.elements = els
        return out

    def has_messages(self) -> bool:
        for q in self.queues:
            if q:
                return True
        return False

    # -- work ----------------------------------------------------------------------------------
    def activate(self, frontiers: list[Antichain]) -> None:
        """Consume queued messages and act on complete times; every operator defines this."""
        raise TypeError("%s does not define activate()" % type(self).__name__)

    def drain(self, port: int) -> list[tuple[Any, list[Time]]]:
        q = self.queues[port]
        self.queues[port] = []
        return q

    def push(self, port: int, payload: Any, lower: list[Time]) -> None:
        """Act on one message as it arrives at `port` (an `eager` operator's `activate`, for
        one message)."""
        raise TypeError("%s is not eager" % type(self).__name__)

    def send(self, payload: Any, lower: list[Time]) -> None:
        """Queue `payload` (updates or a batch) at every downstream port; an `eager`
        operator downstream acts on it at once."""
        df = self.dataflow
        for dst, port in self.downstream:
            if dst.eager and df.eager_depth < EAGER_DEPTH:
                df.eager_depth += 1
                try:
                    dst.push(port, payload, lower)
                finally:
                    df.eager_depth -= 1
            else:
                dst.queues[port].append((payload, lower))

    def __repr__(self) -> str:
        return "%s#%d(%s)" % (type(self).__name__, self.index, self.name)


class Dataflow:
    """A graph of operators over collections, with its inputs and the scheduler that runs it."""

    def __init__(self, dims: int = 1, executor: Any = None) -> None:
        self.dims = dims
        # Where operators' bulk work runs (see engine/executors/base.py).
        self.executor = executor if executor is not None else executors.default_executor()
        self.ops: list[Operator] = []
        self.root = Scope(self, None, dims)
        self._scope_count = 0
        self.traces: list[Trace] = []
        # Each input's `InputHandle` (engine.operators.input), in creation order.
        self.inputs: list[Any] = []
        # Readers this dataflow holds on traces imported from other dataflows.
        self.foreign_readers: list[Any] = []
        self.poisoned: BaseException | None = None
        # Limits on each run() (engine/budget.py); None: unlimited.
        self.budget: Any = None
        self.steps = 0
        # How many `eager` pushes are under way (see `Operator.send`).
        self.eager_depth = 0
        self._has_loops = False
        self._loops_version = -1
        self._reach_plan: ReachPlan = []
        self._plan_version = -1
        self._backward_plan: BackwardPlan | None = None
        self._backward_version = -1

    def _register(self, op: Operator) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    # How `new_input` builds an input. The graph and scheduler sit below the operators and the
    # fluent API, so they never import them: `engine.collection` installs its `new_input` here
    # when it is imported, which importing any engine module does (through `engine/__init__`).
    input_factory: ClassVar[Callable[[Dataflow, str], tuple[Any, Any]] | None] = None

    def new_input(self, name: str = "input") -> tuple[Any, Any]:
        """A new input: a handle to send updates and advance epochs (`InputHandle`), and its
        collection (`Collection`). See `engine.collection.new_input`."""
        factory = Dataflow.input_factory
        if factory is None:
            raise RuntimeError("no input factory: import engine (engine.collection) first")
        return factory(self, name)

    # -- scheduling ----------------------------------------------------------------------------
    def step(self) -> bool:
        """One pass over the operators in topological order. True if any had work.

        Each operator's input frontier is the `reach` of the operator feeding that port: the
        times it may still send at, computed just after that operator's own turn in this pass
        (for operators earlier in the order) or in the previous pass (for a loop's feedback,
        which comes later). A reach computed earlier is still a lower bound on everything the
        operator can send, so both are sound, and a loop advances one iteration per pass.
        """
        return self._pass(None)[0]

    def _pass(self, start: list[Any] | None) -> tuple[bool, list[Any] | None]:
        """`step`, starting from `start` (the backward reach the previous pass left, when
        nothing ran in between) if given. Returns whether any operator had work, and, for a
        dataflow with loops, the backward reach the next pass starts from: `_IDLE` when the next
        pass would find nothing to do, None when the next pass computes it.

        The next pass is idle when this one ends with nothing queued and the backward reach
        unchanged from its start: each operator, in order, would then see the input frontiers
        it saw at its turn in this pass (by induction: the loops' feedback reach is the same,
        and an operator that does not run keeps its capabilities and so its reach), which it
        has acted on already. At the reachability benchmark's config b that was the last of
        each update's 11-15 passes."""
        if self.poisoned is not None:
            raise DataflowPoisoned("the dataflow failed earlier: %s" % self.poisoned)
        self.steps += 1
        # A loop's feedback is read before it is computed in this pass, so its reach must come
        # from real pointstamps: a reach carried around a cycle from the previous pass would
        # only ever grow by one and never let the loop retire.
        loops = self.has_loops()
        if start is not None:
            reach: Any = start
        else:
            reach = self._backward_reach() if loops else [None] * len(self.ops)
        began = list(reach) if loops else None
        busy = False
        budget = self.budget
        try:
            for op in self.ops:
                if op._passthrough and len(op.queues) == 1 and not op.queues[0]:
                    # Idle and stateless: nothing to run, and it sends at most what its input
                    # may (the general path below computes the same, at a call per operator).
                    reach[op.index] = reach[op.inputs[0].index]
                    if budget is not None:
                        budget.charge()
                    continue
                frontiers = [reach[src.index] for src in op.inputs]
                if op.has_messages():
                    op.last_frontiers = frontiers
                    op.activate(frontiers)
                    busy = True
                elif op.needs_frontier and frontiers != op.last_frontiers:
                    op.last_frontiers = frontiers
                    op.activate(frontiers)
                    busy = True
                reach[op.index] = op.reach(frontiers)
                if budget is not None:
                    budget.charge()
            for trace in self.traces:
                if trace.pending:
                    trace.maintain()
            if budget is not None and budget.records is not None:
                budget.check_records(self.total_records())
            if not busy or began is None:
                return busy, None
            for op in self.ops:
                if op.has_messages():
                    return busy, None
            after = self._backward_reach()
            for a, b in zip(after, began, strict=True):
                if a is not None and a.elements != b.elements:
                    return busy, after
        except BaseException as exc:
            self.poisoned = exc
            raise
        return busy, _IDLE

    def _backward_reach(self) -> list[Any]:
        """The frontiers of the operators read backwards (see `progress`), from the
        pointstamps as they are now."""
        # Operators and their edges are only ever added, each with a new operator.
        if self._backward_version != len(self.ops):
            self._backward_plan = backward_plan(self.ops)
            self._backward_version = len(self.ops)
        if self._backward_plan is None:
            return compute_reach(self.ops, self._plan())
        return backward_reach(self.ops, self._backward_plan)

    def _plan(self) -> ReachPlan:
        # Operators and their edges are only ever added, each with a new operator.
        if self._plan_version != len(self.ops):
            self._reach_plan = reach_plan(self.ops)
            self._plan_version = len(self.ops)
        return self._reach_plan

    def has_loops(self) -> bool:
        if self._loops_version != len(self.ops):
            self._has_loops = any(
                src.index >= op.index for op in self.ops for src in op.inputs
            )
            self._loops_version = len(self.ops)
        return self._has_loops

    def run(self, max_steps: int | None = None) -> int:
        """Step until quiescent: every submitted epoch processed, every loop converged (a
        dataflow without loops is quiescent after one busy pass).

        Python's cyclic collector is paused while the dataflow runs. Updates, batches and
        traces are acyclic (tuples, lists and dicts of values), so reference counting frees
        them; but every collection scans all tracked objects, and with millions of live
        updates the collections that allocation triggers dominate the run time (a 10M-entry
        arrangement built 3-5x slower with it on). Objects that survive the run are scanned
        once the collector resumes, so the cost is linear instead of repeated.
        """
        paused = gc.isenabled()
        if paused:
            gc.disable()
        if self.budget is not None:
            self.budget.start()
        try:
            n = 0
            start: list[Any] | None = None
            while True:
                busy, start = self._pass(start)
                if not busy:
                    break
                n += 1
                if start is _IDLE:
                    break
                if max_steps is not None and n >= max_steps:
                    return n
                if not self.has_loops():
                    # Without loops every operator comes after its inputs, so one pass in
                    # that order consumed every message and saw every input's final reach:
                    # a second pass would find nothing to do (it cost a third of a
                    # single-row write's scheduling).
                    break
            self._settle()
            return n
        finally:
            if paused:
                gc.enable()

    def _settle(self) -> None:
        """After a run: batches that kept a hydration's rows as columns (engine.rows_batch)
        get ready for single updates' probes: their sorted key index, and either a picker
        per column (a probe converts its hits only) or, where a column has none, the rows
        made now (making them on the first write would stall that write instead)."""
        for trace in self.traces:
            existing = getattr(trace, "existing_batches", None)
            if existing is None:
                continue
            for b in existing():
                settle = getattr(b, "settle", None)
                if settle is not None and settle():
                    trace.forget_size(b)

    def release(self) -> None:
        """Drop this dataflow's readers of imported traces, so they no longer hold back
        compaction in the dataflows that own them. The dataflow cannot run afterwards."""
        for reader in self.foreign_readers:
            reader.drop()
        self.foreign_readers = []
        self.poisoned = self.poisoned or RuntimeError("the dataflow was released")

    def arrangement_stats(self) -> list[dict[str, Any]]:
        """Per trace: name, records held, batches, approximate bytes, readers."""
        return [t.stats() for t in self.traces]

    def total_records(self) -> int:
        return sum(t.records() for t in self.traces)
