"""Half join: a stream of changes looked up in an arrangement, at times totally ordered.

The delta-join plan (Materialize's, after differential dataflow's `dogs^3`) maintains
``A_1 join ... join A_n`` from base arrangements only. Over totally ordered times, the change
of the join at time t telescopes into one term per input:

    d(A_1 ... A_n)(t) = sum_i  A_1..A_{i-1} (through t) * dA_i(t) * A_{i+1}..A_n (before t)

so the path of input i joins each change of ``A_i`` with the other inputs' arrangements, the
earlier ones accumulated through its time (``strict=False``) and the later ones strictly
before it (``strict=True``). That tie-break makes each output pair appear exactly once, when
several inputs change at the same time. No path arranges an intermediate result.

This operator is one step of a path: each stream update ``(d, t, r)`` meets every entry
``(w, s, q)`` of the arrangement under ``key(d)`` with ``s <= t`` (or ``s < t``) and yields
``(f(d, w), t, r * q)``. An update waits (and the operator holds a capability for its time)
until the arrangement's frontier has passed t, so the arrangement is complete through t.

Invariant: the output accumulated through any time t equals the stream through t joined with
the arrangement as it was through t (strict: before the update's own time) - which is what the
delta-join sum needs. Only valid for times of one coordinate (a root scope with ``dims == 1``):
with partially ordered times "before t" is not a prefix, and the telescoping fails. It reads
the in-process executor's batches directly (there is no half-join kernel in the executor
boundary yet), so other executors get the binary plan.

A stream payload of columns (engine.columns_at, a hydration) whose key is columns of the row
and whose `f` concatenates is joined as columns with the batches that hold tables
(engine.columns_join); what that cannot decide, or the batches that hold rows, take the path
above, so the output is the same multiset either way.

Compaction: this reader lets the trace advance times only to ``m - 1``, where ``m`` is the
earliest time a stream update may still have; for every later ``t`` both ``s <= t`` and
``s < t`` (= ``s <= t - 1``) are unchanged by advancing ``s`` to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine.budget import CHECK_EVERY
from engine.columns_at import ColumnsAt
from engine.columns_join import join_columns
from engine.dataflow import Operator
from engine.lattice import Antichain, Time
from engine.operators.arrange import Arrangement

# A stream payload of columns smaller than this is joined row by row (the Arrow calls cost more).
COLUMNS_MIN_ROWS = 64


class HalfJoinOp(Operator):
    needs_frontier = True

    def __init__(self, stream: Operator, arranged: Arrangement, key: Callable[[Any], Any],
                 f: Callable[[Any, Any], Any], strict: bool, name: str = "half_join",
                 key_columns: tuple[int, ...] | None = None, concat: bool = False) -> None:
        scope = arranged.scope
        if stream.scope is not scope:
            raise ValueError("half join inputs must be in the same scope")
        if scope.parent is not None or scope.dims != 1:
            raise ValueError("a half join needs totally ordered times (a root scope, dims == 1)")
        if getattr(scope.dataflow.executor, "name", "") != "inprocess":
            # it reads the in-process executor's batches (key -> entries) directly
            raise ValueError("a half join needs the in-process executor")
        Operator.__init__(self, scope, name, [stream])
        self.queues.append([])
        self.inputs.append(arranged.op)
        arranged.op.downstream.append((self, 1))
        self.reader = arranged.attach(self, 1, name)
        self.key = key
        self.f = f
        self.strict = strict
        # With `key(d)` the columns `key_columns` of d and `f(d, w) = d + w`, a stream payload
        # of columns is joined as columns (engine.columns_join).
        self.key_columns = key_columns if concat else None
        # stream updates whose time the arrangement is not yet complete through
        self.pending: dict[Time, list[tuple[Any, int]]] = {}
        # ... and stream payloads of columns (engine.columns_at), by their one time
        self.pending_columns: dict[Time, list[ColumnsAt]] = {}

    def capabilities(self) -> Iterable[Time]:
        if self.pending or self.pending_columns:
            yield min([*self.pending, *self.pending_columns])

    def activate(self, frontiers: list[Antichain]) -> None:
        for batch, _ in self.drain(1):
            self.reader.accept(batch)
        pending = self.pending
        for updates, _ in self.drain(0):
            if updates.__class__ is ColumnsAt and self.key_columns is not None and \
                    len(updates) >= COLUMNS_MIN_ROWS:
                self.pending_columns.setdefault(updates.time, []).append(updates)
                continue
            for d, t, r in updates:
                lst = pending.get(t)
                if lst is None:
                    pending[t] = [(d, r)]
                else:
                    lst.append((d, r))
        done = frontiers[1].less_equal  # may the arrangement still change at this time?
        ready = sorted(t for t in {*pending, *self.pending_columns} if not done(t))
        if ready:
            batches = self.reader.batches()
            for t in ready:
                items = pending.pop(t, [])
                for c in self.pending_columns.pop(t, []):
                    split = join_columns(c, self.key_columns, batches, t[0], self.strict)  # type: ignore[arg-type]
                    if split is None:  # not decidable on columns: the rows
                        items.extend((d, r) for d, _, r in c)
                        continue
                    joined, rest, rest_batches = split
                    for payload in joined:
                        if self.dataflow.budget is not None:
                            self.dataflow.budget.charge(len(payload))
                        self.send(payload, [t])
                    if rest is not None and len(rest):
                        self._join_rows([(d, r) for d, _, r in rest], rest_batches, t)
                if items:
                    self._join_rows(items, batches, t)
        earliest = [t[0] for t in [*pending, *self.pending_columns]] + [
            t[0] for t in frontiers[0].elements]
        if earliest:
            self.reader.set_logical_compaction(Antichain([(max(min(earliest) - 1, 0),)]))

    def _join_rows(self, items: list[tuple[Any, int]], batches: list[Any], t: Time) -> None:
        """Send the stream updates `items` (at `t`) joined with `batches`, row by row."""
        key, f, strict = self.key, self.f, self.strict
        # a join's outputs are charged to the run's budget as they are produced (see
        # engine/budget.py), so a runaway delta join fails like a runaway binary join
        budget = self.dataflow.budget
        t0 = t[0]
        out: list[tuple[Any, Time, int]] = []
        charged = 0
        keys = [key(d) for d, _ in items]
        for b in batches:
            # Every entry of a batch wholly before t passes the time test: no test per
            # entry (at hydration that is every batch).
            before = _before(b, t0, strict)
            # all of this time's keys at once: an indexed batch (engine.rows_batch)
            # answers them in one vectorised search
            for (d, r), entries in zip(items, b.get_many(keys), strict=True):
                if not entries:
                    continue
                if before:
                    out.extend([(f(d, w), t, r * q) for w, _, q in entries])
                else:
                    for w, s, q in entries:
                        if s[0] < t0 or (not strict and s[0] == t0):
                            out.append((f(d, w), t, r * q))
                if budget is not None and len(out) - charged >= CHECK_EVERY:
                    budget.charge(len(out) - charged)
                    charged = len(out)
        if budget is not None:
            budget.charge(len(out) - charged)
        if out:
            self.send(out, [t])



def _before(batch: Any, t0: int, strict: bool) -> bool:
    """Whether every time in `batch` is before `t0` (`strict`) or at most `t0`: its times are
    below its upper, or advanced to its `since` (see `engine.trace`)."""
    upper = batch.upper.elements
    if not upper:
        return False
    last = upper[0][0] - 1
    since = batch.since.elements
    if since:
        last = max(last, since[0][0])
    return last < t0 if strict else last <= t0
