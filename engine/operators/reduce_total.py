"""Reduce over totally ordered times: per-key incremental state at the input frontier.

`ReduceOp` is the general reduce: its times may be partially ordered (loops), so for each key
it re-reads the key's input and output histories and evaluates the logic over the whole group
at every interesting time. When the times are totally ordered (a root scope with one
coordinate, the epoch), every complete time has a single predecessor state, and the reduce can
instead keep, per key, a state summarising the key's input accumulated up to the frontier.

Invariant: after each activation, for every key `k`, its state (`states[k]`, or still in
the arrays of a hydration from columns, `built`, until `k` first changes) is the key's input
accumulated at every time not beyond the input frontier (`upper`), and `emitted[k]` (for a
key still in `built`: `[(built_rows[i], 1)]`, or the output of the key's state when the
rows went out as columns, `built.columns()`) is the output the operator has sent for `k` accumulated over the same
times, which equals the state's `output()`. For each newly complete time `t`, in increasing
order, the operator applies `t`'s input diffs to the states of the keys they touch and sends,
at `t`, the retraction of each such key's previous output and its new output (nothing when
unchanged).
Updates at times not yet complete wait in a buffer, with capabilities held at their lower
bound; with nothing buffered the operator holds no capability. It keeps no history, so
compaction is inherent: its state is already at the frontier.

The state of a key is a `KeyState` made by the caller's factory (the planner passes its SQL
aggregates; engine/ knows nothing of SQL). Each state reports how many records it touched
per change (`records_touched` counts them), so tests can check that the per-change work is
bounded by the state's data structure, not by the group's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any, Protocol

from engine.columns_at import keyed_columns_of, keyed_columns_split, summed_columns
from engine.dataflow import Operator, Scope
from engine.kernels import group_by_time
from engine.lattice import Antichain, Time
from engine.operators.buffer import split_buffer

# From this many insertions, a reduce's first input given as rows (a hydration whose rows came
# through a join) is made columns (`keyed_columns_of`) for the factory's `build_columns`: a
# conversion per column instead of a state update per row (Q18's second GROUP BY: 42,000
# rows into 6,671 groups, 0.45 s by rows).
ROWS_AS_COLUMNS = 4096

# A later batch is absorbed as columns (`_absorb_columns`) only when it holds at least this
# many rows per key (else its rows are applied to the states one by one): a key's state built
# from columns and absorbed costs about what applying 4-6 rows to it costs (a 10,000-row
# transaction over 5,500 of a MIN/MAX view's groups: 0.47-0.59 s absorbed, 0.33-0.44 s by
# rows).
ABSORB_ROWS_PER_KEY = 8

# A rough per-record size of a key's state (a dict slot, an index slot, a tuple), for stats.
APPROX_BYTES_PER_RECORD = 120


class KeyState(Protocol):
    """The incremental state of one key."""

    def apply(self, changes: list[tuple[Any, int]]) -> int:
        """Add the `(val, diff)` changes of one time; returns the records touched."""
        ...

    # Optionally `apply_vals(vals, diff) -> int`: `apply` of `(val, diff)` for every val (a
    # hydration's rows, given without a pair per row).
    # The factory may have `build_columns(table, key) -> BuiltStates | None`: the states of
    # every group of an Arrow table's rows keyed by the columns `key` (or None: build them
    # from rows). Where it also has `absorbs` true, its states have
    # `absorb(other, sign) -> int`: `apply` of every row of `other` with diff `sign` (1 or
    # -1), `other` a state `build_columns` made from a batch's rows, returning the records
    # touched.

    def output(self) -> tuple[list[tuple[Any, int]], int]:
        """The key's output `[(out, multiplicity)]` for its current input, and records read."""
        ...

    def empty(self) -> bool:
        """True when the key's accumulated input is empty (its state can be dropped)."""
        ...

    def size(self) -> int:
        """Records held, for `arrangement_stats`."""
        ...

    # Optionally `approx_bytes() -> int`: about the bytes held, where they are far from
    # `size()` records at `APPROX_BYTES_PER_RECORD` (a state that keeps values in arrays).


class BuiltStates(Protocol):
    """The states of many keys built at once from columns, each made only when its key first
    changes: `state(i)` equals a new state that `apply`d key `keys[i]`'s values with diff 1,
    every key's `output()` is one row with diff 1 and `rows()` is those rows in `keys` order
    (with the records read) or, for states all made already whose output may be several
    rows (a top-k), an `outputs()` method gives each key's `output()` list in `keys` order
    instead (the states then go straight into the operator's `states`); optionally
    `columns()` gives `rows()` as an Arrow table of each key then its row, with the key's
    width and the records read (or None), sent on as columns (engine.columns_at's
    PairColumnsAt) where the executor keeps them, and then optionally `output_rows(positions)`
    the rows it gave those keys (a batch's made states' previous output, taken together); and
    `records()` the records held for all keys, `records_of(i)` for key `keys[i]` (until its
    state is made and reports its own `size()`)."""

    # a sequence; it may give `unbuilt()`: the dict {key: position} for its keys' states not
    # made yet, or an object answering `in`, `pop` (with a default) and `len` as it would
    keys: Sequence[Any]

    def state(self, i: int) -> KeyState: ...

    def rows(self) -> tuple[list[Any], int]: ...

    def records(self) -> int: ...

    def records_of(self, i: int) -> int: ...

    def approx_bytes(self) -> int: ...


class ReduceTotalOp(Operator):
    """The reduce of `(key, val)` updates whose times are totally ordered (see module doc)."""

    needs_frontier = True

    def __init__(
        self, scope: Scope, source: Operator, new_state: Callable[[Any], KeyState], name: str
    ) -> None:
        if scope.dims != 1:
            raise ValueError("reduce_total needs totally ordered times (a scope with dims == 1)")
        super().__init__(scope, name, [source])
        self.new_state = new_state
        self.states: dict[Any, KeyState] = {}
        # Keys whose state is still held by `built` (a hydration from columns), by position:
        # a key is in `states` or in `unbuilt`, never both.
        self.built: BuiltStates | None = None
        # `built.rows()`, each unbuilt key's output row (None: sent as columns, `columns()`)
        self.built_rows: list[Any] | None = []
        self.built_records = 0  # of `state_records`, those the unbuilt keys hold in `built`
        self.unbuilt: Any = {}  # a dict, or an object answering `in`, `pop`, `len` alike
        self.emitted: dict[Any, list[tuple[Any, int]]] = {}
        self.buffer: list[Any] = []
        self.buffer_lower = Antichain()
        self.buffer_frontier: Antichain | None = None
        self.upper = Antichain([(0,)])
        # Instrumentation: records the states touched (inputs applied, entries read).
        self.records_touched = 0
        self.state_records = 0
        # Of the states in `states` with `approx_bytes`, their bytes beyond `size()` records
        # at APPROX_BYTES_PER_RECORD (negative when smaller), kept per change for stats.
        self.state_excess = 0
        self.dataflow.traces.append(StateStats(self))

    def capabilities(self) -> Iterable[Time]:
        return self.buffer_lower.elements

    def activate(self, frontiers: list[Antichain]) -> None:
        ex = self.dataflow.executor
        new = [payload for payload, _ in self.drain(0)]
        frontier = frontiers[0]
        if frontier == self.upper and not new:
            return
        if len(new) > 1 and not self.buffer and (self.states or self.unbuilt) and \
                self._absorb_columns(ex, new, frontier):
            # several payloads of one complete time (a large UPDATE's old and new rows, each
            # as columns): absorbed as they are, not made one list of updates by `split`
            self.upper = frontier
            return
        if len(new) > 1 and not self.buffer and not self.states and not self.unbuilt:
            new = self._build_from_largest(ex, new, frontier)
        ready, self.buffer, self.buffer_lower, self.buffer_frontier = split_buffer(
            ex, new, self.buffer, self.buffer_lower, self.buffer_frontier, frontier
        )
        self.upper = frontier
        if ready is None:
            return
        if not self.states and not self.unbuilt:
            if self._build_from_columns(ex, ready):
                return
        elif self._absorb_columns(ex, [ready], None):
            return
        by_time = ex.group_by_time(ready) if hasattr(ex, "group_by_time") else \
            group_by_time(ex.collect(ready))
        out: list[tuple[Any, Time, int]] = []
        for t in sorted(by_time):
            per_key, diff = by_time[t]
            self._apply_time(t, per_key, diff, out)
        if out:
            self.send(ex.from_updates(out), [min(by_time)])

    def _build_from_largest(self, ex: Any, new: list[Any], frontier: Antichain) -> list[Any]:
        """A hydration given as several payloads of one complete time, the largest of them an
        insertion of keyed columns (an outer join's inner join as columns, beside its
        unmatched rows: the preserved side's rows and the retraction of those that matched):
        every group's state built from those columns (`_build_from_columns`), and the other
        payloads, consolidated, returned to be applied to the states as a later batch at the
        same time. Why: made one list of updates with the columns, every row would be a
        Python tuple; consolidated apart, an outer join's matched rows cancel their
        retractions before any key state sees them. Returns `new` unchanged when it is not of
        that form or the factory declines."""
        keyed_columns = getattr(ex, "keyed_columns", None)
        if keyed_columns is None or any(p.__class__ is list for p in new):
            return new
        summed = summed_columns(new)
        if summed is not None:
            return [summed]
        times = {getattr(p, "time", None) for p in new}
        if len(times) != 1 or None in times:
            return new
        (t,) = times
        if frontier.less_equal(t):
            return new  # not complete yet: buffered as usual
        big = max(range(len(new)), key=lambda i: len(new[i]))
        cols = keyed_columns(new[big])
        if cols is None or cols.diff != 1 or not self._build_from_columns(ex, cols):
            return new
        rest: list[Any] = []
        for i, p in enumerate(new):
            if i != big:
                rest.extend(ex.collect(p))
        rest = ex.consolidate(rest)
        return [rest] if rest else []

    def _build_from_columns(self, ex: Any, ready: Any) -> bool:
        """The first input, an insertion of keyed columns (engine.columns_at: a hydration;
        or of at least `ROWS_AS_COLUMNS` rows that convert to such columns exactly), given to
        the state factory's `build_columns(table, key)` if it has one: every group's
        state built from whole columns. Returns False, having done nothing, when the payload
        is not such columns or the factory declines (returns None)."""
        build = getattr(self.new_state, "build_columns", None)
        keyed_columns = getattr(ex, "keyed_columns", None)
        if build is None or keyed_columns is None:
            return False
        cols = keyed_columns(ready)
        if cols is None and len(ready) >= ROWS_AS_COLUMNS:
            cols = keyed_columns_of(ex.collect(ready))
        if cols is None or cols.diff != 1:
            return False
        built = build(cols.table, cols.key)
        if built is None:
            return False
        t = cols.time
        outputs = getattr(built, "outputs", None)
        if outputs is not None:
            # every state made already (a top-k): each goes straight into `states`
            outs, read = outputs()
            for i, (k, o) in enumerate(zip(built.keys, outs, strict=True)):
                st = self.states[k] = built.state(i)
                self.emitted[k] = list(o)
                self.state_records += st.size()
            self.records_touched += len(cols) + read
            out = [((k, r), t, m) for k, o in zip(built.keys, outs, strict=True) for r, m in o]
            if out:
                self.send(ex.from_updates(out), [t])
            return True
        columns = getattr(built, "columns", None)
        pairs = getattr(ex, "from_pair_columns", None)
        table = columns() if columns is not None and pairs else None
        payload: Any
        if table is not None:
            # every key's one row as the columns of key + row (engine.columns_at): no pair
            # per key; `emitted` gets a key's row from its state when the state is made
            out_table, split, read = table
            rows = None
            payload = pairs(out_table, t, 1, split) if out_table.num_rows else None
        else:
            rows, read = built.rows()
            # every key's one row, with diff 1 (C loops: a hydration may have millions of
            # keys); `emitted` gets a key's row when its state is made
            out = list(zip(zip(built.keys, rows, strict=True), repeat(t), repeat(1)))
            payload = ex.from_updates(out) if out else None
        self.built = built
        self.built_rows = rows
        # key -> position of the keys whose state is not made yet: a dict, or what the
        # keys give in its place (`unbuilt()`: keys held in arrays, no entry per key)
        unbuilt = getattr(built.keys, "unbuilt", None)
        self.unbuilt = unbuilt() if unbuilt is not None else dict(
            zip(built.keys, range(len(built.keys)), strict=True))
        self.state_records += built.records()
        self.built_records = built.records()
        self.records_touched += len(cols) + read
        if payload is not None:
            self.send(payload, [t])
        return True

    def _absorb_columns(self, ex: Any, payloads: list[Any], frontier: Antichain | None
                        ) -> bool:
        """A later batch of at least `ROWS_AS_COLUMNS` rows at one time (`payloads`, complete
        at `frontier` when it is given) that converts to keyed columns (a COPY, an INSERT ...
        SELECT, a large DELETE or UPDATE into a table with rows already; given only as rows,
        with `ABSORB_ROWS_PER_KEY` rows a key), where the factory `absorbs`: the groups of
        the batch's insertions and of its retractions are each built from whole columns
        (`build_columns`), and each key's state absorbs its group's insertions, then its
        retractions (`absorb`), instead of a state update per row. Returns False, having done
        nothing, when the payloads are not such columns or the factory declines."""
        if not getattr(self.new_state, "absorbs", False):
            return False
        keyed_columns = getattr(ex, "keyed_columns", None)
        if keyed_columns is None or sum(map(len, payloads)) < ROWS_AS_COLUMNS:
            return False
        times = set()
        parts: list[Any] = []
        updates: list[Any] = []
        for p in payloads:
            cols = keyed_columns(p)
            if cols is not None:
                parts.append(cols)
                times.add(cols.time)
            else:
                more = ex.collect(p)
                updates.extend(more)
                times.update(u[1] for u in more)
        if len(times) != 1:
            return False
        (t,) = times
        if frontier is not None and frontier.less_equal(t):
            return False  # not complete yet: buffered, as any update beyond the frontier
        if updates:
            if not parts and len(updates) < ABSORB_ROWS_PER_KEY * len(
                    {u[0][0] for u in updates}):
                return False  # before making them columns: the rows' keys counted
            # not consolidated: a row inserted and retracted is absorbed both ways, which
            # costs less than summing the updates by their rows first (a third of the time)
            split = keyed_columns_split(updates, consolidate=False)
            if split is None:
                return False
            parts += [p for p in split if p is not None]
        if any(p.diff not in (1, -1) for p in parts):
            return False
        if sum(map(len, parts)) < ABSORB_ROWS_PER_KEY * _distinct_keys(parts):
            return False
        per_key: dict[Any, list[tuple[Any, int]]] = {}
        # insertions first: a value's count never falls below 0 on the way
        for p in sorted(parts, key=lambda p: -p.diff):
            built = self.new_state.build_columns(p.table, p.key)
            if built is None or hasattr(built, "outputs"):
                return False
            states = built.states(list(range(len(built.keys))))
            for k, st in zip(built.keys, states, strict=True):
                per_key.setdefault(k, []).append((st, p.diff))
        self.records_touched += sum(map(len, parts))
        out: list[tuple[Any, Time, int]] = []
        self._apply_time(t, per_key, None, out, absorb=True)
        if out:
            self.send(ex.from_updates(out), [t])
        return True

    def _apply_time(
        self, t: Time, per_key: dict[Any, Any], diff: int | None,
        out: list[tuple[Any, Time, int]], absorb: bool = False,
    ) -> None:
        """Apply time `t`'s changes: per key `[(val, diff)]`, or with `diff`, the bare vals
        that all change by it, or with `absorb`, `[(state, sign)]`: states of the key's
        insertions (sign 1) and retractions (-1) for the key's state to `absorb`."""
        states, emitted = self.states, self.emitted
        touched = 0
        unbuilt = self.unbuilt
        # The states of this time's keys still held in `built`, made together where it can:
        # a batch that changes thousands of groups (`BuiltGroups.states`).
        made: dict[Any, tuple[int, Any, Any]] = {}
        many = getattr(self.built, "states", None)
        if unbuilt and many is not None and len(per_key) > 1:
            wanted = [(key, i) for key in per_key
                      if key not in states and (i := unbuilt.pop(key, -1)) >= 0]
            if wanted:
                groups = [i for _, i in wanted]
                # sent as columns: their rows as sent, taken together (`output_rows`), not
                # each state's `output()`
                sent = getattr(self.built, "output_rows", None)
                rows = sent(groups) if sent is not None and self.built_rows is None else None
                made = {key: (i, st, None if rows is None else rows[j]) for j, ((key, i), st)
                        in enumerate(zip(wanted, many(groups), strict=True))}
        for key, changes in per_key.items():
            st = states.get(key)
            m = made.pop(key, None) if made else None
            if st is not None:
                before = st.size()
                excess = _excess(st)
            elif m is not None or (unbuilt and (i := unbuilt.pop(key, -1)) >= 0):
                assert self.built is not None
                row = None
                if m is not None:
                    i, st, row = m
                else:
                    st = self.built.state(i)
                states[key] = st
                if row is not None:  # sent as columns, its row taken with the batch's
                    emitted[key] = [(row, 1)]
                elif self.built_rows is None:  # sent as columns: the state gives the row
                    emitted[key] = st.output()[0]
                else:
                    emitted[key] = [(self.built_rows[i], 1)]
                before = st.size()
                excess = 0  # counted (in `built`'s bytes) until now
                # the arrays counted the group's records their way (records_of)
                self.state_records += before - self.built.records_of(i)
                self.built_records -= self.built.records_of(i)
                if not unbuilt and not made:
                    self.built = None  # every state is made: the arrays can go
                    self.built_rows = []
                    self.built_records = 0
            else:
                st = states[key] = self.new_state(key)
                before = excess = 0
            if absorb:
                for other, sign in changes:
                    touched += st.absorb(other, sign)
            elif diff is None:
                touched += st.apply(changes)
            else:
                apply_vals = getattr(st, "apply_vals", None)
                touched += apply_vals(changes, diff) if apply_vals is not None else \
                    st.apply([(v, diff) for v in changes])
            new, read = st.output()
            touched += read
            old = emitted.get(key)
            if old != new:
                if old:
                    if len(old) == 1 and len(new) == 1:
                        (o, m), (n, k) = old[0], new[0]
                        out.append(((key, o), t, -m))
                        out.append(((key, n), t, k))
                    else:
                        _emit_difference(key, old, new, t, out)
                else:
                    for n, k in new:
                        out.append(((key, n), t, k))
            if st.empty():
                del states[key]
                emitted.pop(key, None)
                self.state_records -= before
                self.state_excess -= excess
            else:
                emitted[key] = new
                self.state_records += st.size() - before
                self.state_excess += _excess(st) - excess
        self.records_touched += touched


def _distinct_keys(parts: list[Any]) -> int:
    """How many distinct keys the keyed columns `parts` hold, counted by Arrow (an upper
    bound where parts differ in their columns' types: each part's count, summed)."""
    import pyarrow as pa

    tables = [p.table.select(list(p.key)).rename_columns(
        [f"k{i}" for i in range(len(p.key))]) for p in parts]
    if not parts[0].key:
        return 1
    try:
        keys = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        return int(keys.group_by(keys.column_names, use_threads=False).aggregate([]).num_rows)
    except pa.ArrowException:
        return sum(t.group_by(t.column_names, use_threads=False).aggregate([]).num_rows
                   for t in tables)


def _excess(st: Any) -> int:
    """A state's bytes (`approx_bytes`) beyond its records at APPROX_BYTES_PER_RECORD."""
    approx = getattr(st, "approx_bytes", None)
    return 0 if approx is None else approx() - st.size() * APPROX_BYTES_PER_RECORD


def _emit_difference(
    key: Any,
    old: list[tuple[Any, int]],
    new: list[tuple[Any, int]],
    t: Time,
    out: list[tuple[Any, Time, int]],
) -> None:
    diff: dict[Any, int] = {}
    for o, m in old:
        diff[o] = diff.get(o, 0) - m
    for n, k in new:
        diff[n] = diff.get(n, 0) + k
    for v, d in diff.items():
        if d:
            out.append(((key, v), t, d))


class StateStats:
    """The operator's state seen as an arrangement in `Dataflow.arrangement_stats` and in the
    record budget: it has no batches and nothing to merge."""

    pending: tuple[()] = ()
    merging = None
    readers: tuple[()] = ()

    def __init__(self, op: ReduceTotalOp) -> None:
        self.op = op
        self.name = op.name

    def records(self) -> int:
        return self.op.state_records

    def maintain(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        op = self.op
        n = op.state_records
        # states as Python objects, at a rough size per record, corrected by the states that
        # know their bytes (state_excess: values kept in arrays); the keys still in the arrays
        # of a hydration at the arrays' size
        held = op.built.approx_bytes() if op.built is not None else 0
        return {
            "name": self.name,
            "records": n,
            "batches": 0,
            "bytes": (n - op.built_records) * APPROX_BYTES_PER_RECORD + held + op.state_excess,
            "readers": 0,
        }
