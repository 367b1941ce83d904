"""The in-process executor: operators' bulk work over Python lists and dicts, in this process.

It implements the executor boundary (`engine.executors.base`): payloads are Python lists of
`(data, time, diff)`, batches are `trace.Batch` (dicts of key -> entries), and the per-key work
is `kernels`. It is the embedded default and the reference every other executor must agree with:
for the same inputs, each of their methods denotes the same updates (or batch) as this one's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.columnar import memory
from engine.columns_at import ColumnsAt, PairColumnsAt, summed_columns
from engine.columns_join import join_tables
from engine.consolidation import consolidate
from engine.counted_batch import CountedRowsBatch, counted_round
from engine.executors.base import Updates
from engine.fields import ArrangedFields
from engine.kernels import Logic, group_by_time, history, join_batches, reduce_key
from engine.lattice import Antichain, Time, less_equal
from engine.rows_at import RowsAt, rows_by_key
from engine.rows_batch import KeyedRowsBatch
from engine.sources import FileSource, read_arrow, updates_of
from engine.trace import (
    Batch,
    arrange_updates,
    build_batch,
    consolidate_entries,
    merge_batches,
    merge_steps,
)

# Its NumPy columns are allocated fresh for every large batch: see `columnar.memory`.
memory.advise_hugepages(memory.HUGEPAGE)


class InProcessExecutor:
    """Runs operators' bulk work in this process over Python lists and dicts."""

    name = "inprocess"

    # -- payloads ------------------------------------------------------------------------------
    def from_updates(self, updates: Updates) -> Updates:
        return updates

    def from_rows(self, rows: list[Any], time: Time, diff: int) -> Updates | RowsAt:
        # Kept as the rows (engine.rows_at): the steps up to an arrangement run over them.
        return RowsAt(rows, time, diff)

    def from_columns(self, table: Any, time: Time, diff: int) -> ColumnsAt:
        # Kept as columns (engine.columns_at): the steps up to a reduce may run over them.
        return ColumnsAt(table, time, diff)

    def from_pair_columns(self, table: Any, time: Time, diff: int, split: int) -> PairColumnsAt:
        # Kept as columns (engine.columns_at): the step after a reduce may run over them.
        return PairColumnsAt(table, time, diff, split)

    def collect(self, payload: Updates | RowsAt) -> Updates:
        if payload.__class__ is PairColumnsAt:
            return payload.updates()  # type: ignore[union-attr]
        if payload.__class__ is ColumnsAt:
            payload = payload.as_rows()  # type: ignore[union-attr]
        if payload.__class__ is RowsAt:
            return payload.updates()  # type: ignore[union-attr]
        return payload  # type: ignore[return-value]

    def read(self, source: FileSource, time: Time) -> Updates | ColumnsAt:
        """Every row of a bulk source at `time` (see `engine.sources`); without a diff column,
        kept as the columns read (engine.columns_at)."""
        if not source.diff_column:
            return ColumnsAt(read_arrow(source), time, 1)
        return updates_of(source, time)

    def apply(self, logic: Callable[[Updates], Updates], payload: Updates | RowsAt
              ) -> Updates | RowsAt:
        if payload.__class__ is PairColumnsAt:
            pc: PairColumnsAt = payload  # type: ignore[assignment]
            # The map that concatenates each pair gives the table's rows: columns still.
            if getattr(logic, "over_pair_columns", None) is not None:
                return ColumnsAt(pc.table, pc.time, pc.diff)
            return logic(pc.updates())
        if payload.__class__ is ColumnsAt:
            c: ColumnsAt = payload  # type: ignore[assignment]
            # A step with a form over columns (planner.mfp_columns) keeps the columns form
            # when it can compute the step exactly; otherwise the step sees the rows.
            over_columns = getattr(logic, "over_columns", None)
            if over_columns is not None and c.key is None:
                table = over_columns(c.table)
                if table is not None:
                    return ColumnsAt(table, c.time, c.diff, logic.row_keys)  # type: ignore[attr-defined]
            if getattr(logic, "negates", False):
                return ColumnsAt(c.table, c.time, -c.diff, c.key)
            payload = c.as_rows()
        if payload.__class__ is RowsAt:
            p: RowsAt = payload  # type: ignore[assignment]
            # A step with a form over plain rows (a generated filter/project/key, see
            # planner.mfp_kernel) keeps the rows form; any other step sees the updates.
            over_rows = getattr(logic, "over_rows", None)
            if over_rows is not None and p.key is None:
                return RowsAt(over_rows(p.rows), p.time, p.diff, logic.row_keys)  # type: ignore[attr-defined]
            if getattr(logic, "negates", False):
                return RowsAt(p.rows, p.time, -p.diff, p.key)
            return logic(p.updates())
        return logic(payload)  # type: ignore[arg-type]

    def is_empty(self, payload: Updates | RowsAt) -> bool:
        return not payload

    def consolidate(self, payload: Updates | RowsAt) -> Updates:
        return consolidate(self.collect(payload))

    def lower(self, payload: Updates | RowsAt) -> Antichain:
        if payload.__class__ is RowsAt or payload.__class__ is ColumnsAt or \
                payload.__class__ is PairColumnsAt:
            return Antichain([payload.time])  # type: ignore[union-attr]
        return Antichain(t for _, t, _ in payload)

    def split(self, payloads: list[Updates], frontier: Antichain) -> tuple[Updates, Updates]:
        """Updates at complete times (not beyond `frontier`), and the rest."""
        beyond = frontier.less_equal
        if len(payloads) == 1:
            # One payload at one time (an epoch's writes, a hydration): it goes whole to one
            # side. The caller only reads what `split` returns, so the list is shared as is.
            (p,) = payloads
            times = {p.time} if p.__class__ in (RowsAt, ColumnsAt, PairColumnsAt) else \
                {u[1] for u in p}
            if len(times) == 1:
                return ([], p) if beyond(next(iter(times))) else (p, [])
        summed = summed_columns(payloads)
        if summed is not None:  # columns of one time, kept columns (engine.columns_at)
            return ([], summed) if beyond(summed.time) else (summed, [])
        ready: Updates = []
        rest: Updates = []
        # Updates share few distinct times: decide each time once.
        side: dict[Time, Updates] = {}
        for p in payloads:
            for u in p:
                t = u[1]
                dst = side.get(t)
                if dst is None:
                    dst = side[t] = rest if beyond(t) else ready
                dst.append(u)
        return ready, rest

    def group_by_time(self, payload: Updates | RowsAt
                      ) -> dict[Time, tuple[dict[Any, list[Any]], int | None]]:
        """`(key, val)` updates by time, then key (see `kernels.group_by_time`); keyed rows
        at one time (engine.rows_at) become each key's bare rows with their one diff."""
        if payload.__class__ is ColumnsAt:
            payload = payload.as_rows()  # type: ignore[union-attr]
        if payload.__class__ is not RowsAt or payload.key is None:  # type: ignore[union-attr]
            return group_by_time(self.collect(payload))
        p: RowsAt = payload  # type: ignore[assignment]
        per_key = rows_by_key(p.rows, p.key)  # type: ignore[arg-type]
        return {p.time: (per_key, p.diff)}

    def keyed_columns(self, payload: Any) -> ColumnsAt | None:
        """The payload if it is keyed columns at one time (engine.columns_at), else None."""
        if payload.__class__ is ColumnsAt and payload.key is not None:
            return payload  # type: ignore[no-any-return]
        return None

    # -- batches -------------------------------------------------------------------------------
    def seal(
        self, ready: Updates, by_self: bool, lower: Antichain, upper: Antichain, dims: int
    ) -> Batch:
        """A batch `[lower, upper)` of `ready` updates, keyed by the data or its first half."""
        since = Antichain([(0,) * dims])
        if ready.__class__ is ColumnsAt:
            c: ColumnsAt = ready  # type: ignore[assignment]
            if c.key is not None and not by_self:
                # the rows are made from the table when first read (engine.rows_batch)
                return KeyedRowsBatch(None, c.key, c.time, c.diff, lower, upper, since,
                                      table=c.table)
            counted = c.counted() if by_self else None
            if counted is not None:  # the distinct rows and their counts, kept columns
                return CountedRowsBatch(counted[0], counted[1], c.time, lower, upper, since)
            ready = c.as_rows()
        if ready.__class__ is RowsAt:
            p: RowsAt = ready  # type: ignore[assignment]
            if p.key is not None and not by_self:
                return KeyedRowsBatch(p.rows, p.key, p.time, p.diff, lower, upper, since)
            ready = p.updates()
        return arrange_updates(ready, by_self, lower, upper, since)

    def merge(self, older: Batch, newer: Batch, frontier: Antichain) -> Batch:
        return merge_batches(older, newer, frontier)

    # Large merges run incrementally (see `Trace`); an executor without this merges at once.
    merge_steps = staticmethod(merge_steps)

    def unarrange(self, batch: Batch, f: Callable[[Any, Any], Any] | None) -> Updates:
        if batch.__class__ is CountedRowsBatch and f.__class__ is ArrangedFields and \
                f.sources == ("key",):  # type: ignore[union-attr]
            # a DISTINCT's rows read back: columns still
            cols = batch.as_columns()  # type: ignore[attr-defined]
            if cols is not None:
                return cols  # type: ignore[return-value]
        if f is None:
            return [((k, v), t, r) for k, es in batch.updates.items() for v, t, r in es]
        return [(f(k, v), t, r) for k, es in batch.updates.items() for v, t, r in es]

    # -- stateful kernels ----------------------------------------------------------------------
    def join(
        self, new: Batch, others: list[Batch], f: Callable[[Any, Any, Any], Any], new_is_left: bool,
        budget: Any = None,
    ) -> Updates | ColumnsAt:
        if getattr(f, "concatenates", False) and others:
            # f(k, a, b) is a + b: batches holding their rows as columns join as columns
            joined = join_tables(new, others, new_is_left)
            if joined is not None:
                if budget is not None:
                    budget.charge(len(joined))
                return joined
        out: Updates = []
        join_batches(new, others, f, new_is_left, out, budget)
        return out

    def reduce_round(
        self,
        new: list[Batch],
        pending: dict[Any, set[Time]],
        inputs: list[Batch],
        outputs: list[Batch],
        lower: Antichain,
        upper: Antichain,
        logic: Logic,
        dims: int,
    ) -> tuple[Batch | None, dict[Any, set[Time]]]:
        """One round of reduce: corrections for every key `new` touches or with pending times
        now complete, as a batch `[lower, upper)`; returns it and the pending times left."""
        counting = getattr(logic, "counting", None)
        if counting is not None and not pending and not outputs and len(new) == 1 \
                and len(inputs) == 1 and inputs[0] is new[0]:
            # A first round (a hydration): every key's history is its entries in this one
            # batch, and it has no output yet; keys at one time go at once.
            if new[0].__class__ is CountedRowsBatch:
                # rows kept as columns, with their counts: the outputs as columns too
                since = Antichain([(0,) * dims])
                out = counted_round(new[0], counting, lower, upper, since)
                if out is not None:
                    return (out if out.records else None), {}
            return first_counting_round(new[0], lower, upper, logic, counting, dims)
        beyond = upper.less_equal
        seeds: dict[Any, set[Time]] = {}
        for b in new:
            for key, entries in b.updates.items():
                s = seeds.get(key)
                if s is None:
                    s = seeds[key] = set()
                for _, t, _ in entries:
                    s.add(t)
        left: dict[Any, set[Time]] = {}
        for key, times in pending.items():
            ready = {p for p in times if not beyond(p)}
            if ready:
                seeds.setdefault(key, set()).update(ready)
            rest = times - ready
            if rest:
                left[key] = rest
        # Times not beyond `lower` cannot be told apart by any time evaluated now; advancing
        # long histories to it shrinks the set of interesting times.
        compact = lower if lower.elements else None
        out: list[tuple[Any, Any, Time, int]] = []
        for key, key_seeds in seeds.items():
            ins = history(inputs, key)
            outs = history(outputs, key)
            if counting is not None and len(key_seeds) == 1:
                # The common case, inlined: one new time that every stored time precedes, and
                # logic that reads only the total count. The one interesting time is the seed.
                (t0,) = key_seeds
                if counting_step(key, ins, outs, t0, counting, out):
                    continue
            if compact is not None and (len(ins) > 4 or len(outs) > 4):
                ins = consolidate_entries(ins, compact)
                outs = consolidate_entries(outs, compact)
            emitted, deferred = reduce_key(key, ins, outs, key_seeds, upper, logic)
            for v, t, r in emitted:
                out.append((key, v, t, r))
            if deferred:
                left.setdefault(key, set()).update(deferred)
        if not out:
            return None, left
        return build_batch(out, lower, upper, Antichain([(0,) * dims])), left


def first_counting_round(
    batch: Batch, lower: Antichain, upper: Antichain, logic: Logic,
    counting: Callable[[int], list[tuple[Any, int]]], dims: int,
) -> tuple[Batch | None, dict[Any, set[Time]]]:
    """`reduce_round` for count-only logic when `batch` is the whole input history and there
    is no output yet: a key whose entries share one time `t` takes `counting_step` at `t`
    (every interesting time of it is `t`, and nothing is there to retract), without the two
    history lookups per key of the general round; a key at several times takes the general
    kernel over its entries."""
    out: list[tuple[Any, Any, Time, int]] = []
    left: dict[Any, set[Time]] = {}
    for key, entries in batch.updates.items():
        t0 = entries[0][1]
        if all(e[1] == t0 for e in entries) and counting_step(key, entries, [], t0, counting,
                                                                out):
            continue
        emitted, deferred = reduce_key(key, entries, [], {t for _, t, _ in entries}, upper,
                                       logic)
        for v, t, r in emitted:
            out.append((key, v, t, r))
        if deferred:
            left[key] = set(deferred)
    if not out:
        return None, left
    return build_batch(out, lower, upper, Antichain([(0,) * dims])), left


def counting_step(
    key: Any,
    ins: list[tuple[Any, Time, int]],
    outs: list[tuple[Any, Time, int]],
    t0: Time,
    counting: Callable[[int], list[tuple[Any, int]]],
    out: list[tuple[Any, Any, Time, int]],
) -> bool:
    """Corrections at `t0` for count-only logic when every stored time is `<= t0`.

    Returns False, having emitted nothing, when some stored time is not `<= t0` (the general
    interesting-times path must run instead).
    """
    total = 0
    for _, s, r in ins:
        if s == t0 or less_equal(s, t0):
            total += r
        else:
            return False
    have: dict[Any, int] = {}
    for v, s, r in outs:
        if s == t0 or less_equal(s, t0):
            have[v] = have.get(v, 0) + r
        else:
            return False
    for v, m in counting(total) if total else ():
        d = m - have.pop(v, 0)
        if d:
            out.append((key, v, t0, d))
    for v, c in have.items():
        if c:
            out.append((key, v, t0, -c))
    return True

