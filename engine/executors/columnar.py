"""The columnar executor: arrangements are sorted int64 runs and their bulk work is compiled.

Behind the same executor boundary as `InProcessExecutor` (which stays the reference tactic):
payloads between operators are still Python lists of `(data, time, diff)` (maps, filters and
user functions see rows), but every batch an arrangement seals is a `columnar.layout.Run`:
keys and values encoded to row ids by one `RowInterner` per executor, times packed
(`columnar.times`). On those runs:

- sealing sorts and consolidates in a kernel; merging advances times by the compaction frontier
  and consolidates in one compiled pass (`kernels.merge`);
- join finds the keys of a new run in every run of the other trace in one call
  (`kernels.join_fused`) and builds the matched columns, output times and diffs there; only
  the pairs found are decoded and passed to the join's function (a projection of key and
  values moves ids instead);
- reduce with logic that depends only on a key's total count (distinct, count, threshold: the
  logic has a `counting` attribute that yields at most one output per total) runs the compiled
  interesting-times kernel; any other logic (sum, min, max, top-k, the planner's aggregates) is
  handed the decoded histories and runs the per-record `engine.kernels.reduce_key`;
- a search for a round's keys in a run of millions of records is the costly part of both: a
  large run searched for few keys gets a key filter (`kernels.key_filter`, a blocked Bloom
  filter built on first use) so that the absent keys are not searched, and many keys are
  searched in lockstep (`kernels._lower_bounds`) so that their cache misses overlap.

Selected with `Dataflow(executor=ColumnarExecutor())`, or for every dataflow that does not
name one with `DIFFSQL_COLUMNAR=1` in the environment. Large merges are fueled as in
`engine.trace`: each step merges as many key ranges as the fuel it is sent pays for. Large
reduce rounds, merge steps and sorts run as two halves by key range on two cores
(`columnar.parallel`). Limits of this first step: a time's coordinates must fit the packing
(`times.field_bits`); interned row ids are never retired.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from engine import kernels as record_kernels
from engine import reducers
from engine import trace as trace_module
from engine.columnar import kernels as K
from engine.columnar import parallel, updates
from engine.columnar.interning import (
    DIRECT_LIMIT,
    INTERNED_BASE,
    PAIR_BASE,
    PAIR_BITS,
    RowInterner,
    pair_ids,
)
from engine.columnar.layout import Run
from engine.columnar.times import field_bits, pack, pack_frontier, unpack
from engine.columnar.updates import UpdateColumns, retime
from engine.columns_at import PairColumnsAt
from engine.executors.inprocess import InProcessExecutor, Updates
from engine.fields import ArrangedFields, Fields, JoinFields
from engine.lattice import Antichain, Time
from engine.sources import rows_of, updates_of
from engine.trace import consolidate_entries
from engine.unique import unique_ints

I64 = np.int64
_EMPTY = np.zeros(0, I64)
# A compiled reduce's round with too few seeds (new updates and pending pairs) to be split over
# two cores (`parallel.MIN_KEYS`) is one call, `kernels.reduce_whole`; False makes it the
# steps that a larger round takes (for `bench/paired.py`).
WHOLE_ROUND = True
PAIR_LIMIT = 1 << PAIR_BITS
# The most records one fueled merge step merges, however much fuel it is sent: a step's pause
# stays bounded, and a merge finished at once (sent None) still runs its slices on two cores.
SLICE = 1 << 20


def _arrays(run: Run) -> K.Arrays:
    return (run.keys, run.vals, run.times, run.diffs)


class ColumnarExecutor(InProcessExecutor):
    """`InProcessExecutor` with columnar batches and compiled kernels (see the module docstring)."""

    name = "columnar"
    # See `Trace.fold`: a merge of a few thousand records is a few microseconds here.
    fold_records = 1024
    # See `Trace.ratio`: a batch merges with its predecessor from a quarter of its size, not
    # half. Every record is rewritten about as often (a level's run four times as often, over
    # half as many levels), but a spine holds about half as many runs, and a reduce round or
    # a join searches every one. `bench/paired.py`, total time at 4 over total time at 2:
    # 0.973 over 300 batches of 100 at config a (median batch 0.925), 0.955 at config b batch
    # 100, 0.999 and 1.009 at batch 1 (a, b); shorter windows at config a swing from 0.79 to
    # 1.36 with where the largest merge falls. At 8 the largest merges made config a's batch
    # 100 1.2 times slower than at 4.
    merge_ratio = 4

    def __init__(self) -> None:
        self.rows = RowInterner()
        self.unit = self.rows.encode(())
        self._time_memo: dict[int, dict[int, Time]] = {d: {} for d in range(1, 8)}
        self._frontier_memo: dict[tuple[int, tuple[Time, ...]], np.ndarray] = {}
        self._empties: dict[int, UpdateColumns] = {}
        # Each scope depth's least frontier: the `since` of every run made here (shared:
        # antichains are not changed in place once handed out).
        self._origins = {d: Antichain([(0,) * d]) for d in range(1, 8)}
        K.warm_up()
        updates.warm_up()
        parallel.start()

    def _encode(self, rows: list[Any]) -> np.ndarray:
        # Integer rows are their own ids: one NumPy conversion instead of a call per row.
        if all(type(r) is int for r in rows):
            try:
                a = np.array(rows, dtype=I64)
            except OverflowError:
                a = None
            if a is not None and K.within(a, -DIRECT_LIMIT, DIRECT_LIMIT):
                return a
        return self.rows.encode_many(rows)

    # -- encoding ------------------------------------------------------------------------------
    def _pack_times(self, times: list[Time], dims: int) -> np.ndarray:
        # Updates share few distinct times: pack each once.
        cache: dict[Time, int] = {}
        out = np.empty(len(times), I64)
        for i, t in enumerate(times):
            p = cache.get(t)
            if p is None:
                p = cache[t] = pack(t, dims)
            out[i] = p
        return out

    def _unpack_times(self, packed: np.ndarray, dims: int) -> list[Time]:
        # Few distinct times are live at once; a small memo beats `np.unique` on the short
        # arrays of a loop round. Packed ints of different `dims` never share a memo.
        memo = self._time_memo[dims]
        if len(memo) > 65536:
            memo.clear()
        out = []
        for p in packed.tolist():
            t = memo.get(p)
            if t is None:
                t = memo[p] = unpack(p, dims)
            out.append(t)
        return out

    # -- payloads: UpdateColumns between operators ----------------------------------------------
    def _columns(self, payload: Any) -> UpdateColumns | None:
        """`payload` as columns (lists from a caller that builds them are encoded); None for an
        empty list, whose time length is unknown."""
        if isinstance(payload, UpdateColumns):
            return payload
        if not payload:
            return None
        dims = len(payload[0][1])
        return UpdateColumns(
            self._encode([d for d, _, _ in payload]),
            self._pack_times([t for _, t, _ in payload], dims),
            np.array([r for _, _, r in payload], dtype=I64),
            dims,
        )

    def from_updates(self, updates: Updates) -> Any:
        cols = self._columns(updates)
        return updates if cols is None else cols

    def from_rows(self, rows: list[Any], time: Time, diff: int) -> Any:
        # One encoding pass over the rows (pairs of small ints at C speed), no tuple per update.
        n = len(rows)
        dims = len(time)
        return UpdateColumns(
            self._encode(rows), np.full(n, pack(time, dims), I64), np.full(n, diff, I64), dims
        )

    def from_columns(self, table: Any, time: Time, diff: int) -> Any:
        # This executor's layout is its own (interned rows), not the in-process columns form.
        data = _pair_ids(table)
        if data is None:
            return self.from_rows(list(rows_of(table, table.num_columns)), time, diff)
        dims = len(time)
        n = data.shape[0]
        return UpdateColumns(data, np.full(n, pack(time, dims), I64), np.full(n, diff, I64), dims)

    def from_pair_columns(self, table: Any, time: Time, diff: int, split: int) -> Any:
        # A reduce's first output as this executor's layout: its `(key, row)` pairs interned
        # (the in-process columns form would reach operators that read only this one).
        return self.from_updates(PairColumnsAt(table, time, diff, split).updates())

    def read(self, source: Any, time: Time) -> Any:
        return self.from_updates(updates_of(source, time))

    def collect(self, payload: Any) -> Updates:
        if not isinstance(payload, UpdateColumns):
            return payload  # type: ignore[no-any-return]
        return list(
            zip(
                self.rows.decode_many(payload.data),
                self._unpack_times(payload.times, payload.dims),
                payload.diffs.tolist(),
                strict=True,
            )
        )

    def is_empty(self, payload: Any) -> bool:
        return len(payload) == 0

    def apply(self, logic: Callable[[Updates], Updates], payload: Any) -> Any:
        u = self._columns(payload)
        if u is None:
            return payload
        retime_by = getattr(logic, "retime", None)
        if retime_by is not None:
            return retime(u, u.dims + retime_by[0], retime_by[1])
        if getattr(logic, "negates", False):
            return u.negate()
        f = getattr(logic, "map_f", None)
        if isinstance(f, Fields):
            data = self._project(u.data, f.index)
            if data is not None:
                return UpdateColumns(data, u.times, u.diffs, u.dims)
        if f is not None:
            return UpdateColumns(self._encode([f(d) for d in self.rows.decode_many(u.data)]), u.times, u.diffs, u.dims)
        p = getattr(logic, "filter_p", None)
        if p is not None:
            keep = np.fromiter((bool(p(d)) for d in self.rows.decode_many(u.data)), dtype=np.bool_, count=len(u))
            return u.take(keep)
        f = getattr(logic, "flat_f", None)
        if f is not None:
            out: list[Any] = []
            index: list[int] = []
            for i, d in enumerate(self.rows.decode_many(u.data)):
                for y in f(d):
                    out.append(y)
                    index.append(i)
            ix = np.array(index, dtype=I64)
            return UpdateColumns(self._encode(out), u.times[ix], u.diffs[ix], u.dims)
        # Any other logic sees the updates as Python tuples.
        out_updates = logic(self.collect(u))
        cols = self._columns(out_updates)
        if cols is None:
            z = np.zeros(0, I64)
            return UpdateColumns(z, z, z, u.dims)
        return cols

    def consolidate(self, payload: Any) -> Any:
        u = self._columns(payload)
        if u is None:
            return payload
        d, _, t, r = K.consolidate(u.data, np.zeros(len(u), I64), u.times, u.diffs)
        return UpdateColumns(d, t, r, u.dims)

    def lower(self, payload: Any) -> Antichain:
        u = self._columns(payload)
        if u is None or len(u) == 0:
            return Antichain()
        mins = u.minimal if u.minimal is not None else K.minimal_times(u.times, u.dims, field_bits(u.dims))
        out = Antichain()
        out.elements = self._unpack_times(mins, u.dims)
        return out

    def split(self, payloads: list[Any], frontier: Antichain) -> tuple[Any, Any]:
        """Updates at complete times (not beyond `frontier`), and the rest."""
        cols = [c for c in (self._columns(p) for p in payloads) if c is not None]
        if not cols:
            return [], []
        dims = cols[0].dims
        empty = self._empty(dims)
        if not frontier.elements:
            return UpdateColumns.concat(cols, dims), empty
        # Usually everything is complete (or nothing is): counted, no copies then.
        packed = self._packed_frontier(frontier, dims)
        bits = field_bits(dims)
        if len(cols) > 1:
            # Each payload alone: in a loop an arrangement's buffer (a pass ago beyond the
            # frontier) is usually all complete now and the new payloads all beyond it, so
            # each goes whole to its side, without copying them together and apart again.
            ready: list[UpdateColumns] = []
            rest: list[UpdateColumns] = []
            for c in cols:
                n = K.count_beyond(c.times, packed, dims, bits)
                if n == 0:
                    ready.append(c)
                elif n == len(c):
                    rest.append(c)
                else:
                    break
            else:
                return UpdateColumns.concat(ready, dims), UpdateColumns.concat(rest, dims)
        u = UpdateColumns.concat(cols, dims)
        n_beyond = K.count_beyond(u.times, packed, dims, bits)
        if n_beyond == 0:
            return u, empty
        if n_beyond == len(u):
            return empty, u
        # The rest keeps its minimal times, which the caller asks for next (`lower`).
        _, ready, rest, mins = K.split_beyond(u.data, u.times, u.diffs, packed, dims, bits)
        return UpdateColumns(*ready, dims), UpdateColumns(*rest, dims, mins)

    def _empty(self, dims: int) -> UpdateColumns:
        """No updates (one per `dims`, shared: payloads are immutable)."""
        e = self._empties.get(dims)
        if e is None:
            e = self._empties[dims] = UpdateColumns.concat([], dims)
        return e

    # -- accumulations (engine.operators.capture) -----------------------------------------------
    def accumulate(self, acc: list[tuple[np.ndarray, np.ndarray]] | None,
                   payload: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        """Add `payload`'s diffs to `acc`: consolidated `(ids, counts)` runs, each at most half
        the size of the one before it (a new run merges with its predecessors until that holds),
        so adding n updates costs O(n log n) over any number of calls, never O(contents)."""
        u = self._columns(payload)
        runs = [] if acc is None else acc
        if u is None or len(u) == 0:
            return runs
        zeros = np.zeros(len(u), I64)
        ids, _, _, counts = K.consolidate(u.data, zeros, zeros, u.diffs)
        while runs and len(runs[-1][0]) <= 2 * len(ids):
            prev_ids, prev_counts = runs.pop()
            both = np.concatenate([prev_ids, ids])
            zeros = np.zeros(len(both), I64)
            ids, _, _, counts = K.consolidate(both, zeros, zeros,
                                              np.concatenate([prev_counts, counts]))
        if len(ids):
            runs.append((ids, counts))
        return runs

    def accumulated(self, acc: list[tuple[np.ndarray, np.ndarray]] | None) -> dict[Any, int]:
        """The rows of `acc` with their non-zero counts."""
        if not acc:
            return {}
        ids = np.concatenate([i for i, _ in acc])
        zeros = np.zeros(len(ids), I64)
        ids, _, _, counts = K.consolidate(ids, zeros, zeros, np.concatenate([c for _, c in acc]))
        return dict(zip(self.rows.decode_many(ids), counts.tolist(), strict=True))

    def _packed_frontier(self, frontier: Antichain, dims: int) -> np.ndarray:
        key = (dims, tuple(frontier.elements))
        p = self._frontier_memo.get(key)
        if p is None:
            if len(self._frontier_memo) > 4096:
                self._frontier_memo.clear()
            p = self._frontier_memo[key] = pack_frontier(frontier.elements, dims)
        return p

    def _pairs(self, keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """The ids of the rows `(key, val)`: packed in bulk when both are small integers."""
        if keys.shape[0] and K.within(keys, 0, PAIR_LIMIT) and K.within(vals, 0, PAIR_LIMIT):
            return pair_ids(keys, vals)
        dec = self.rows.decode_many
        return self.rows.encode_many(list(zip(dec(keys), dec(vals), strict=True)))

    def _project(self, data: np.ndarray, index: tuple[int, ...]) -> np.ndarray | None:
        """`Fields(*index)` on rows that are all packed pairs, by moving bits; None otherwise."""
        if not data.shape[0] or any(i not in (0, 1) for i in index) or len(index) > 2:
            return None
        out, ok = K.pair_fields(data, index[0], index[1] if len(index) == 2 else -1,
                                PAIR_BASE, INTERNED_BASE, PAIR_BITS)
        return out if ok else None

    def _halves(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Key and value ids of rows `(key, val)`: split in bulk when every row is a packed pair."""
        if data.shape[0]:
            a, b, ok = K.pair_halves(data, PAIR_BASE, INTERNED_BASE, PAIR_BITS)
            if ok:
                return a, b
        rows = self.rows.decode_many(data)
        return self._encode([d[0] for d in rows]), self._encode([d[1] for d in rows])

    # -- batches -------------------------------------------------------------------------------
    def seal(self, ready: Any, by_self: bool, lower: Antichain, upper: Antichain, dims: int) -> Run:
        u = self._columns(ready)
        if u is None:
            z = np.zeros(0, I64)
            u = UpdateColumns(z, z, z, dims)
        if by_self:
            keys, vals = u.data, np.full(len(u), self.unit, I64)
        else:
            keys, vals = self._halves(u.data)
        since = self._origins[dims]
        return Run.from_arrays(keys, vals, u.times, u.diffs, dims, lower=lower, upper=upper, since=since)

    def merge(self, older: Run, newer: Run, frontier: Antichain) -> Run:
        since = older.since.join(newer.since)
        since = since.join(frontier) if frontier.elements else since
        dims = older.dims
        k, v, t, d = K.merge(_arrays(older), _arrays(newer), self._packed_frontier(since, dims), dims)
        return Run(k, v, t, d, dims, older.lower, newer.upper, since, max(older.seq, newer.seq))

    def merge_many(self, runs: list[Run], frontier: Antichain) -> Run:
        """Consecutive runs merged in one call (`Trace`'s small tail)."""
        since = runs[0].since
        for r in runs[1:]:
            since = since.join(r.since)
        since = since.join(frontier) if frontier.elements else since
        dims = runs[0].dims
        k, v, t, d = K.merge_many(runs, self._packed_frontier(since, dims), dims)
        return Run(k, v, t, d, dims, runs[0].lower, runs[-1].upper, since, max(r.seq for r in runs))

    def merge_steps(
        self, older: Run, newer: Run, frontier: Antichain, chunk: int | None = None
    ) -> Generator[int, int | None, Run]:
        """`merge` spread over steps (the trace's fuel, see `Trace._work`). The runs are cut
        at key bounds about `chunk` records of either run apart; each step merges as many
        whole ranges as the fuel it is sent pays for (at least one range, at most `SLICE`
        records; all of it in `SLICE`s when sent None), on two cores when that is large, and
        writes them in place into the one output (the merge holds its inputs and one output;
        pieces made apart and copied in cost twice the merge in first-touch page faults)."""
        chunk = chunk or trace_module.MERGE_CHUNK
        since = older.since.join(newer.since)
        since = since.join(frontier) if frontier.elements else since
        dims = older.dims
        pf = pack_frontier(since.elements, dims)
        # The bounds include both runs' first keys: no key lies below the first.
        bounds = unique_ints(np.concatenate((older.keys[::chunk], newer.keys[::chunk])))
        ia = np.append(np.searchsorted(older.keys, bounds), older.records)
        ib = np.append(np.searchsorted(newer.keys, bounds), newer.records)
        done_before = ia + ib  # records in the ranges before each bound
        a, b = _arrays(older), _arrays(newer)
        out = tuple(np.empty(older.records + newer.records, I64) for _ in range(4))
        w = 0

        def merged(j: int, e: int, at: int) -> int:
            """The ranges of bounds `j` to `e` merged into `out` from `at`; returns the end."""
            return K.merge_into(
                tuple(x[ia[j] : ia[e]] for x in a), tuple(x[ib[j] : ib[e]] for x in b),  # type: ignore[arg-type]
                pf, dims, out, at,
            )

        fuel = yield 0
        j, n_ranges = 0, len(bounds)
        while j < n_ranges:
            want = SLICE if fuel is None else min(SLICE, max(1, fuel))
            e = int(np.searchsorted(done_before, done_before[j] + want, "left"))
            e = min(n_ranges, max(j + 1, e))
            if e - j >= 2 and done_before[e] - done_before[j] >= 2 * parallel.MIN_SORTED:
                # Two cores: the second half is written after all the room the first could
                # need, and moved down when compaction left a gap.
                middle = (j + e) // 2
                gap_at = w + int(done_before[middle] - done_before[j])
                end1, end2 = parallel.both(
                    lambda: merged(j, middle, w), lambda: merged(middle, e, gap_at)  # noqa: B023
                )
                if end1 < gap_at:
                    for o in out:
                        o[end1 : end1 + end2 - gap_at] = o[gap_at:end2]
                w = end1 + end2 - gap_at
            else:
                w = merged(j, e, w)
            fuel = yield max(1, int(done_before[e] - done_before[j]))
            j = e
        k, v, t, d = K.trimmed(*out, w)
        return Run(k, v, t, d, dims, older.lower, newer.upper, since, max(older.seq, newer.seq))

    def unarrange(self, batch: Run, f: Callable[[Any, Any], Any] | None) -> UpdateColumns:
        if f is None:
            data = self._pairs(batch.keys, batch.vals)
        elif isinstance(f, ArrangedFields) and len(f.sources) <= 2:
            # Key and value ids move; a pair is packed in bulk when both are small.
            picked = [batch.keys if s == "key" else batch.vals for s in f.sources]
            data = picked[0] if len(picked) == 1 else self._pairs(picked[0], picked[1])
        else:
            ks = self.rows.decode_many(batch.keys)
            vs = self.rows.decode_many(batch.vals)
            data = self._encode([f(k, v) for k, v in zip(ks, vs, strict=True)])
        return UpdateColumns(data, batch.times, batch.diffs, batch.dims)

    # -- join ----------------------------------------------------------------------------------
    def join(
        self, new: Run, others: list[Run], f: Callable[[Any, Any, Any], Any], new_is_left: bool,
        budget: Any = None,
    ) -> UpdateColumns:
        runs = [o for o in others if o.records] if new.records else []
        # One compiled call finds the pairs in every run and makes their columns.
        cols = list(K.join_fused(_arrays(new), runs, new.dims)) if runs else []
        if not cols or not cols[0].shape[0]:
            z = np.zeros(0, I64)
            return UpdateColumns(z, z, z, new.dims)
        if budget is not None:
            budget.charge(int(cols[0].shape[0]))
        if isinstance(f, JoinFields) and len(f.sources) <= 2:
            # A projection of key and values: ids move, nothing is decoded (when the output
            # rows are ids themselves or packable pairs).
            left, right = (cols[1], cols[2]) if new_is_left else (cols[2], cols[1])
            picked = [{"key": cols[0], "left": left, "right": right}[s] for s in f.sources]
            if len(picked) == 1:
                return UpdateColumns(picked[0], cols[3], cols[4], new.dims)
            if K.within(picked[0], 0, PAIR_LIMIT) and K.within(picked[1], 0, PAIR_LIMIT):
                data = pair_ids(picked[0], picked[1])
                return UpdateColumns(data, cols[3], cols[4], new.dims)
        # Only the matched pairs are decoded, for the join's function; times and diffs stay
        # columns.
        dec = self.rows.decode_many
        ks, nv, ov = dec(cols[0]), dec(cols[1]), dec(cols[2])
        if new_is_left:
            data = [f(k, a, b) for k, a, b in zip(ks, nv, ov, strict=True)]
        else:
            data = [f(k, b, a) for k, a, b in zip(ks, nv, ov, strict=True)]
        return UpdateColumns(self._encode(data), cols[3], cols[4], new.dims)

    # -- reduce --------------------------------------------------------------------------------
    def _counting(self, logic: Any) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
        counting = getattr(logic, "counting", None)
        if counting is None:
            return None
        enc = self.rows.encode

        def wanted(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            uniq, inv = np.unique(totals, return_inverse=True)
            vs = np.zeros(uniq.shape[0], I64)
            ms = np.zeros(uniq.shape[0], I64)
            for i, n in enumerate(uniq.tolist()):
                outs = [(v, m) for v, m in (counting(n) if n else ()) if m]
                if len(outs) > 1:
                    raise _NotCounting
                if outs:
                    vs[i], ms[i] = enc(outs[0][0]), outs[0][1]
            return vs[inv], ms[inv]

        return wanted

    def reduce_round(
        self,
        new: list[Run],
        pending: Any,
        inputs: list[Run],
        outputs: list[Run],
        lower: Antichain,
        upper: Antichain,
        logic: Any,
        dims: int,
    ) -> tuple[Run | None, PackedPending]:
        """As `InProcessExecutor.reduce_round`, with keys as row ids and `pending` a
        `PackedPending` (an empty dict before the first round)."""
        bits = field_bits(dims)
        pupper = self._packed_frontier(upper, dims)
        mode = _COMPILED.get(id(logic))
        packed = isinstance(pending, PackedPending)
        pend_k = pending.keys if packed else _EMPTY
        pend_t = pending.times if packed else _EMPTY
        seeds = sum(r.records for r in new) + pend_k.shape[0]
        if WHOLE_ROUND and mode is not None and seeds < parallel.MIN_KEYS:
            # A round too small to split over two cores (a loop round of a few updates): the
            # pending pairs, the seeds and the reduce in one compiled call.
            corr, pk, pt, mins = K.reduce_whole(
                new, pend_k, pend_t, inputs, outputs, pupper, mode, self.unit, dims,
                _key_filters(inputs, seeds), _key_filters(outputs, seeds),
            )
            left = PackedPending(pk, pt, dims, mins)
            if corr[0].shape[0] == 0:
                return None, left
            return self._corrections_run(corr, mode, dims, lower, upper), left
        keys, times, left_k, left_t = K.round_seeds(new, pend_k, pend_t, pupper, dims)
        if keys.shape[0] == 0:
            return None, PackedPending(left_k, left_t, dims)
        since = self._origins[dims]
        if mode is not None:
            # distinct and count: the whole round is one compiled call, no Python per key; a
            # round of many keys is two calls on two cores, one per half of the keys.
            n_keys = keys.shape[0]
            in_f = _key_filters(inputs, n_keys)
            out_f = _key_filters(outputs, n_keys)

            def part(lo: int, hi: int, left_lo: int, left_hi: int) -> tuple[K.Arrays, np.ndarray, np.ndarray, np.ndarray]:
                corr, pk, pt = K.reduce_fused(
                    keys[lo:hi], times[lo:hi], inputs, outputs, left_k[left_lo:left_hi],
                    left_t[left_lo:left_hi], pupper, mode, self.unit, dims, in_f, out_f,
                )
                # Each half's minimal pending times on its own core: the antichain of all of
                # them is the minimal elements of the two halves' antichains.
                return corr, pk, pt, K.minimal_times(pt, dims, bits)

            n, n_left = keys.shape[0], left_k.shape[0]
            cut = parallel.key_cut(keys)
            if cut:
                left_cut = int(np.searchsorted(left_k, keys[cut], "left"))
                (c1, pk1, pt1, m1), (c2, pk2, pt2, m2) = parallel.both(
                    lambda: part(0, cut, 0, left_cut), lambda: part(cut, n, left_cut, n_left)
                )
                corr = tuple(np.concatenate(pair) for pair in zip(c1, c2, strict=True))  # type: ignore[assignment]
                pk, pt = np.concatenate((pk1, pk2)), np.concatenate((pt1, pt2))
                mins = K.minimal_times(np.concatenate((m1, m2)), dims, bits)
            else:
                corr, pk, pt, mins = part(0, n, 0, n_left)
            left = PackedPending(pk, pt, dims, mins)
            if corr[0].shape[0] == 0:
                return None, left
            return self._corrections_run(corr, mode, dims, lower, upper), left
        qkeys, seed_off, times = K.seed_csr(keys, times)
        in_off, ins = K.gather_runs(qkeys, inputs)
        out_off, outs = K.gather_runs(qkeys, outputs)
        corr: K.Arrays | None = None
        extra_k: list[np.ndarray] = [left_k]
        extra_t: list[np.ndarray] = [left_t]
        wanted = self._counting(logic)
        if wanted is not None:
            try:
                (ck, cv, ct, cd), d_off, d_t = K.reduce_counting(
                    in_off, ins, out_off, outs, seed_off, times,
                    pack_frontier(upper.elements, dims), wanted, dims,
                )
            except _NotCounting:
                pass
            else:
                corr = (qkeys[ck], cv, ct, cd)
                extra_k.append(np.repeat(qkeys, np.diff(d_off)))
                extra_t.append(d_t)
        if corr is None:
            corr = self._reduce_records(
                qkeys, seed_off, times, in_off, ins, out_off, outs, lower, upper, logic, dims, extra_k, extra_t
            )
        left = PackedPending(*K.union_pairs(list(zip(extra_k, extra_t, strict=True))), dims)
        if corr[0].shape[0] == 0:
            return None, left
        return Run.from_arrays(*corr, dims, lower=lower, upper=upper, since=since), left

    def _corrections_run(self, corr: K.Arrays, mode: int, dims: int, lower: Antichain,
                         upper: Antichain) -> Run:
        """The compiled reduce's corrections as a run. A distinct's are one already: keys in
        order, each key's interesting times distinct and in order, one value (the unit),
        no zero diff; a count's values are not in order, so they are sorted."""
        since = self._origins[dims]
        if mode == K.DISTINCT:
            return Run(*corr, dims, lower, upper, since)
        return Run.from_arrays(*corr, dims, lower=lower, upper=upper, since=since)

    def _reduce_records(
        self,
        qkeys: np.ndarray,
        seed_off: np.ndarray,
        seed_t: np.ndarray,
        in_off: np.ndarray,
        ins: K.Arrays,
        out_off: np.ndarray,
        outs: K.Arrays,
        lower: Antichain,
        upper: Antichain,
        logic: Any,
        dims: int,
        left_k: list[np.ndarray],
        left_t: list[np.ndarray],
    ) -> K.Arrays:
        """The reference tactic for logic that is not compiled: decode, `reduce_key`, encode."""
        dec = self.rows.decode_many
        in_v, out_v = dec(ins[1]), dec(outs[1])
        in_t, out_t = self._unpack_times(ins[2], dims), self._unpack_times(outs[2], dims)
        in_d, out_d = ins[3].tolist(), outs[3].tolist()
        compact = lower if lower.elements else None
        enc = self.rows.encode
        rk: list[int] = []
        rv: list[int] = []
        rt: list[int] = []
        rd: list[int] = []
        for i, key_id in enumerate(qkeys.tolist()):
            a, b = int(in_off[i]), int(in_off[i + 1])
            c, e = int(out_off[i]), int(out_off[i + 1])
            hist = list(zip(in_v[a:b], in_t[a:b], in_d[a:b], strict=True))
            ohist = list(zip(out_v[c:e], out_t[c:e], out_d[c:e], strict=True))
            if compact is not None and (len(hist) > 4 or len(ohist) > 4):
                hist = consolidate_entries(hist, compact)
                ohist = consolidate_entries(ohist, compact)
            seeds = {unpack(p, dims) for p in seed_t[seed_off[i] : seed_off[i + 1]].tolist()}
            key = self.rows.decode(key_id)
            emitted, deferred = record_kernels.reduce_key(key, hist, ohist, seeds, upper, logic)
            for v, t, r in emitted:
                rk.append(key_id)
                rv.append(enc(v))
                rt.append(pack(t, dims))
                rd.append(r)
            if deferred:
                left_k.append(np.full(len(deferred), key_id, I64))
                left_t.append(np.array([pack(t, dims) for t in deferred], I64))
        return (np.array(rk, I64), np.array(rv, I64), np.array(rt, I64), np.array(rd, I64))


def _key_filters(runs: list[Run], n_keys: int) -> list[np.ndarray] | None:
    """Each run's key filter where a reduce round of `n_keys` keys searches it (a large run
    with many records per key: most of the keys are absent from most such runs), else none (a
    round of many keys is merged with the run, in order, and building a filter would cost
    a pass over the run); None when no run has one (a small loop's spines: its run tables
    then skip the filters, without a call per run)."""
    least = max(K.SEARCH_MIN, K.SEARCH_SPARSE * n_keys)
    if all(r.records < least for r in runs):
        return None
    return [r.key_filter() if r.records >= least else K.NO_FILTER for r in runs]


def _pair_ids(table: Any) -> np.ndarray | None:
    """The row ids of an Arrow table of two integer columns without NULLs whose values are all
    in the pair range (rows `(a, b)` of exact ints: `RowInterner.encode` packs them), computed
    on the columns; None for any other table."""
    import pyarrow as pa

    if table.num_columns != 2 or not table.num_rows:
        return None
    halves = []
    for i in range(2):
        col = table.column(i)
        if not pa.types.is_integer(col.type) or col.null_count:
            return None
        a = np.ascontiguousarray(col.to_numpy(), dtype=I64)
        if not K.within(a, 0, PAIR_LIMIT):
            return None
        halves.append(a)
    return pair_ids(halves[0], halves[1])


# The reducers whose logic the compiled reduce (`kernels.reduce_fused`, `reduce_whole`) evaluates
# itself.
_COMPILED = {id(reducers.distinct): K.DISTINCT, id(reducers.count): K.COUNT}


class PackedPending:
    """A reduce's pending `(key id, time)` pairs as packed arrays, distinct.

    `ReduceOp` reads only its truth value and `values()`, the times at which it must hold
    capabilities: here one set of the distinct times (few), not one set per key."""

    __slots__ = ("keys", "times", "dims", "minimal")

    def __init__(self, keys: np.ndarray, times: np.ndarray, dims: int,
                 minimal: np.ndarray | None = None) -> None:
        self.keys = keys
        self.times = times
        self.dims = dims
        # The minimal elements of `times` (packed), where the kernel that made them found them.
        self.minimal = minimal

    def __bool__(self) -> bool:
        return bool(self.keys.shape[0])

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def values(self) -> list[set[Time]]:
        if not self.keys.shape[0]:
            return []
        return [{unpack(p, self.dims) for p in unique_ints(self.times).tolist()}]

    def lower(self) -> Antichain:
        """The antichain of the pending times, found in a kernel (hundreds of distinct times are
        pending when many epochs are in flight; inserting each into an Antichain is quadratic)."""
        if not self.keys.shape[0]:
            return Antichain()
        mins = self.minimal
        if mins is None:
            mins = K.minimal_times(self.times, self.dims, field_bits(self.dims))
        out = Antichain()
        out.elements = [unpack(p, self.dims) for p in mins.tolist()]
        return out


class _NotCounting(Exception):
    """The logic's `counting` gave more than one output for a total: use the general path."""

