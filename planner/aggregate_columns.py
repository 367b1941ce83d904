"""Aggregate states of every group built from whole Arrow columns (a view's hydration).

`build_groups(plan, table, key)` returns the groups of `table`'s rows keyed by its columns
`key` as a `BuiltGroups`: every group's output computed by whole columns, and each group's
`AggregateState` made only when the group first changes, equal to a new `plan(key)` that
`apply_vals`d the group's rows with diff 1 (the per-row path, `AggregateState._build_rows`,
is the reference: tests/test_columns_kernels.py checks one against the other, state by state;
`build_states` makes them all at once for that). It returns None (the caller then builds from
rows) when the table holds something this module does not decide exactly. The subset:

- group keys: columns of integer, boolean, string, date, float, timestamp or DECIMAL type (NULL
  is a group),
  grouped by a code per column: an integer's offset from the column's minimum; a string
  column of 1- or 2-byte values its bytes (`_fixed_width_codes`); else its dictionary index
  (a float column only without NaN or -0.0, which the row path keys by its own rules:
  Python's dict makes -0.0 and 0.0 one key, keeping the first seen). Then one stable sort of
  the combined codes (radix sorts below 2**32, see `_runs`) and a gather of each argument
  column by it; below 2**16 codes, no permutation: each column's values are moved straight
  to their group by a counting scatter (`engine.counting_sort`); and for a few codes and no
  MIN/MAX over a large table, no sort at all: every sum and count by code in the rows' own
  order (`_build_by_code`);
- aggregates: COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x), COUNT(DISTINCT x), over
  integer columns (sums in int64 where max|x| * rows cannot overflow), float64 columns
  (exact sums per (group, exponent), see `planner.float_sums`; MIN/MAX only without NaN or -0.0,
  which the row path orders and keys by its own rules), DECIMALs of up to 18 digits (SUM and
  AVG: the unscaled values summed as ints, `engine.sources.decimal_unscaled`; MIN and MAX:
  made Decimals where they leave the arrays), dates and timestamps (MIN and MAX: days and
  microseconds, made dates and datetimes where they leave the arrays), strings (MIN and MAX: ranks among the column's
  sorted distinct values, `_string_ranks`); COUNT(DISTINCT x) of any of these (one sort of
  (group, value) pairs, `_distinct_pairs`), SUM and AVG(DISTINCT x) of ints and DECIMALs (the
  same pairs summed and counted); and COUNT(x) of a column of any type, which reads only its validity
  (`_counted_only`).

The Python work at hydration is a constant number of calls per group (its key), never a
call per row; MIN and MAX are one `reduceat` each, the output columns go to Arrow from the
arrays where their values are exactly the per-row ones (`BuiltGroups._array`), and a group's
sorted index of distinct values is built when it first changes.
"""
from __future__ import annotations

import datetime
import decimal
import math
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from engine.canonical import canonical_column
from engine.columnar import parallel
from engine.columns_at import value_kind
from engine.rows_batch import ascending, int_column
from engine.sources import column_values, decimal_unscaled, int_magnitude, rows_of
from engine.unique import unique_ints
from planner.aggregate import (
    _FLOAT_SCALE,
    _FLOAT_SCALE_BITS,
    AggregateState,
    IncrementalAggregates,
    _ExactSum,
    _finish_avg,
    _finish_sum,
    _midnight,
    _value_entry,
)
from planner.scalar import DECIMAL_CONTEXT, INT_RANGE, norm_type
from planner.sorted_counts import SortedCounts

_FUNCS = {"count_star", "count", "sum", "avg", "min", "max"}
# A group with at least this many distinct MIN/MAX values keeps them in arrays
# (planner.sorted_counts: a few NumPy calls to build, worth it past a few hundred values).
ARRAY_INDEX_MIN = 256
# Below this many values a group's distinct values are counted and sorted by Python.
_SMALL_GROUP = 64
# From this many groups at once, `BuiltGroups.states` sorts their MIN/MAX values in one pass.
BULK_STATES = 16
_I64 = (-(1 << 63), (1 << 63) - 1)
# From this many values a float SUM's column is summed by the compiled kernel once numba is
# loaded (below it NumPy's ~15 passes cost less than the call); from `FIRST_COMPILED_FLOAT_SUMS`
# also in a process that has not loaded it, where the kernel's cost includes numba's start
# (about 0.6 s and 125 MB, once): NumPy takes 60-450 ns a value, so about that many values.
COMPILED_FLOAT_SUMS = 100_000
# `_integral` looks at this many first values before a pass over the whole column.
_INTEGRAL_PROBE = 1024
FIRST_COMPILED_FLOAT_SUMS = 2_000_000
# Codes longer than this are first checked for being in order already (`_stable_order`).
SORTED_CHECK = 1024
# From this many codes below 2**16, in a process with numba, `_stable_order` counts them by
# the compiled kernel (engine.counting_sort) instead of NumPy's two-pass radix sort.
COUNTING_SORT = 100_000
# A GROUP BY of at most this many codes (flags, statuses) over `COMPILED_FLOAT_SUMS` rows or
# more, without MIN/MAX, in a process with numba, sums each column in its rows' own order, by
# code (`_build_by_code`): no sort and no gather of any column. The float buckets take
# `BY_CODE_RADIX` * 32 KiB a column.
BY_CODE_RADIX = 256


def build_states(plan: IncrementalAggregates, table: Any, key: tuple[int, ...]
                 ) -> dict[Any, AggregateState] | None:
    """Every group's state at once (the eager form of `build_groups`; tests compare it with
    the per-row states)."""
    built = build_groups(plan, table, key)
    if built is None:
        return None
    return dict(zip(built.keys, built.states(list(range(len(built.keys)))), strict=True))


def build_groups(plan: IncrementalAggregates, table: Any, key: tuple[int, ...]
                 ) -> BuiltGroups | None:
    """The groups of `table`'s rows keyed by its columns `key`, held as arrays (see
    `BuiltGroups`); None for what this module leaves to rows."""
    if any(a.func not in _FUNCS or a.distinct and a.func not in ("count", "sum", "avg")
           for a in plan.aggs):
        return None  # of DISTINCT aggregates, COUNT, SUM and AVG (of ints: below)
    if any(kind == "stat" for kind, *_ in plan.accs):
        return None
    n = table.num_rows
    if not n:
        return BuiltGroups(plan, [], np.zeros(1, dtype=np.int64), {}, {}, {}, {})
    coded = _codes(table, key)
    if coded is None:
        return None
    codes, radix, decoders = coded
    if (not plan.value_args and radix <= BY_CODE_RADIX and n >= COMPILED_FLOAT_SUMS
            and "numba" in sys.modules):
        built = _build_by_code(plan, table, key, codes, radix, decoders)
        if built is not None:
            return built
    # Each argument column once: values in group order, their validity, and their kind (an
    # argument only counted: its validity alone, `_validity_chunks`).
    args = {a for a in plan.value_args} | {x for _, x, _, _ in plan.accs}
    only_counted = _counted_only(plan)
    cols: dict[int, tuple[np.ndarray | None, np.ndarray | None, str]] = {}
    # a MIN, MAX or COUNT(DISTINCT) of strings: their ranks, the sorted values kept
    strings = {x: _string_ranks(table.column(x)) for x in plan.value_args}
    dictionaries = {x: s[2] for x, s in strings.items() if s is not None}
    ranked = {x: (s[0], s[1], STRING) for x, s in strings.items() if s is not None}
    pieces = {x: ([ranked[x][0]], None if ranked[x][1] is None else [ranked[x][1]], STRING)
              if x in ranked else _validity_chunks(table.column(x)) if x in only_counted else
              _numeric_chunks(table.column(x)) for x in args}
    counted = _counting_layout(codes, radix) if all(pieces.values()) else None
    if counted is not None:
        # each column's values moved straight to their group's place (engine.counting_sort):
        # no permutation, and no gather by it
        from engine.counting_sort import counting_scatter

        bounds, firsts = counted
        group_codes = np.flatnonzero(np.diff(bounds))
        starts, keys = bounds[group_codes], _keys(group_codes, decoders)
        key_rows = firsts[group_codes]
        for x, piece in pieces.items():
            chunks, valid_chunks, kind = piece  # type: ignore[misc]
            vals = None if kind == COUNTED else counting_scatter(
                codes, bounds, chunks, np.float64 if kind == "float" else np.int64)
            valid = None if valid_chunks is None else \
                counting_scatter(codes, bounds, valid_chunks, np.bool_)
            cols[x] = (vals, valid, kind)
    else:
        order, starts, keys = _runs(codes, radix, decoders)
        key_rows = starts if order is None else order[starts]
        for x in args:
            c = ranked[x] if x in ranked else _validity(table.column(x)) \
                if x in only_counted else _numeric(table.column(x))
            if c is None:
                return None
            vals, valid, kind = c
            if order is not None:
                vals = None if vals is None else vals[order]
                valid = None if valid is None else valid[order]
            cols[x] = (vals, valid, kind)
    if any(kind in ("date", TIMESTAMP, STRING) and any(x == y and k != "count"
                                                 for k, y, _, _ in plan.accs)
           for x, (_, _, kind) in cols.items()):
        return None  # only COUNT reads a date; the binder makes no SUM of one
    for x in plan.value_args:
        vals, valid, kind = cols[x]
        live = vals if valid is None else vals[valid]
        if kind == TIMESTAMP and len(live) and (
                int(live.min()) < _DATETIME_US[0] or int(live.max()) > _DATETIME_US[1]):
            return None  # no datetime: the rows decide what such a value is
    sizes = np.diff(np.append(starts, n))
    key_table = table.select(list(key)).take(key_rows)
    sums: dict[int, Any] = {}
    distinct_n: dict[int, np.ndarray] = {}
    for i, (kind, x, _, distinct) in enumerate(plan.accs):
        vals, valid, vkind = cols[x]
        if distinct:
            # SUM or AVG(DISTINCT x) of ints or DECIMALs (unscaled): each group's distinct
            # values summed and counted, as the rows feed each value to the sum once
            # (`AggregateState._feed`)
            got = _distinct_sums(vals, valid, vkind, np.append(starts, n)) \
                if vkind in ("int", DECIMAL) else None
            if got is None:
                return None
            sums[i], distinct_n[i] = got
        elif kind == "sum" and vkind in ("int", DECIMAL):
            bound = int_magnitude(vals)
            if bound and bound * n >= 2 ** 63:
                return None
            sums[i] = np.add.reduceat(np.where(valid, vals, 0) if valid is not None else vals,
                                      starts)
        elif kind == "sum" and vkind == "float":
            sums[i] = _float_sums(vals, valid, starts)
            if sums[i] is None:  # the rare fallback: each group's floats added in `state`
                sums[i] = (vals, valid, np.append(starts, n))
    counts = {x: (sizes if valid is None else np.add.reduceat(valid.astype(np.int64), starts))
              for x, (_, valid, _) in cols.items()}
    for x in plan.value_args:
        vals, _, kind = cols[x]
        if kind == "float" and (np.isnan(vals).any() or (np.signbit(vals) & (vals == 0)).any()):
            return None  # NaN and -0.0: the row path orders and keys them by its own rules
    kinds = {x: kind for x, (_, _, kind) in cols.items()}
    values = {x: cols[x] for x in plan.value_args}
    return BuiltGroups(plan, keys, np.append(starts, n), kinds, sums, counts, values,
                       key_table, _scales(table, kinds), dictionaries, distinct_n)


def _scales(table: Any, kinds: dict[int, str]) -> dict[int, int]:
    """The scale of each DECIMAL argument (its sums are of the unscaled values)."""
    return {x: table.column(x).type.scale for x, kind in kinds.items() if kind == DECIMAL}



def _build_by_code(plan: IncrementalAggregates, table: Any, key: tuple[int, ...],
                   codes: np.ndarray, radix: int, decoders: list[Any]) -> BuiltGroups | None:
    """`build_groups` for few group codes and no MIN/MAX (see `BY_CODE_RADIX`): every sum
    and count is taken per code in one pass over the rows in their own order, so no column
    is sorted or gathered. The same `BuiltGroups` as by runs (groups in ascending code), its
    bounds only the cumulative sizes; None where the runs path must decide (an int SUM whose
    float64 bincount could round)."""
    from planner.float_sums import group_sums_by_code

    n = len(codes)
    by_code = np.bincount(codes, minlength=radix)
    group_codes = np.flatnonzero(by_code)
    sizes = by_code[group_codes]
    args = {x for _, x, _, _ in plan.accs}
    only_counted = _counted_only(plan)
    cols: dict[int, tuple[np.ndarray | None, np.ndarray | None, str]] = {}
    for x in args:
        c = _validity(table.column(x)) if x in only_counted else _numeric(table.column(x))
        if c is None:
            return None
        if c[2] == "date" and any(x == y and k != "count" for k, y, _, _ in plan.accs):
            return None
        cols[x] = c
    sums: dict[int, Any] = {}
    # the float sums, each a compiled pass or two over every row, half of them on a second
    # core (the kernels let go of the GIL)
    floats = [i for i, (kind, x, _, _) in enumerate(plan.accs)
              if kind == "sum" and cols[x][2] == "float"]

    def float_sums(slots: list[int]) -> list[Any]:
        return [group_sums_by_code(cols[plan.accs[i][1]][0], cols[plan.accs[i][1]][1], codes,
                                   radix) for i in slots]

    half = len(floats) // 2
    first, second = parallel.both(lambda: float_sums(floats[half:]),
                                  lambda: float_sums(floats[:half])) if half else (
        float_sums(floats), [])
    summed = dict(zip(floats[half:] + floats[:half], first + second, strict=True))
    for i, (kind, x, _, _) in enumerate(plan.accs):
        vals, valid, vkind = cols[x]
        if kind != "sum":
            continue
        if vkind in ("int", DECIMAL):
            bound = int_magnitude(vals)
            if bound * n >= 2 ** 53:
                return None  # bincount adds in float64: exact only below 2**53
            weights = vals if valid is None else np.where(valid, vals, 0)
            sums[i] = np.bincount(codes, weights=weights, minlength=radix)[group_codes] \
                .astype(np.int64)
        elif vkind == "float":
            cn, nan, pinf, ninf, ints, scaled = summed[i]
            sums[i] = FloatSums(cn[group_codes], *(c[group_codes] if c.any() else None
                                                   for c in (nan, pinf, ninf)),
                                None if ints is None else ints[group_codes],
                                None if scaled is None else
                                [scaled[c] for c in group_codes.tolist()])
    counts = {x: (sizes if valid is None else
                  np.bincount(codes, weights=valid, minlength=radix)[group_codes]
                  .astype(np.int64))
              for x, (_, valid, _) in cols.items()}
    # each group's first row, for its key columns: groups nearly always show up early
    head = codes[:1 << 16]
    found, at = np.unique(head, return_index=True)
    first_of = dict(zip(found.tolist(), at.tolist(), strict=True))
    firsts = np.array([first_of[c] if c in first_of else int(np.argmax(codes == c))
                       for c in group_codes.tolist()], dtype=np.int64)
    key_table = table.select(list(key)).take(firsts)
    bounds = np.zeros(len(group_codes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    kinds = {x: kind for x, (_, _, kind) in cols.items()}
    return BuiltGroups(plan, _keys(group_codes, decoders), bounds, kinds, sums, counts, {},
                       key_table, _scales(table, kinds))


class BuiltGroups:
    """Every group's aggregate state, held as arrays (the engine's `BuiltStates`): `keys`,
    `rows()` for all groups at once, and `state(g)`, group `g`'s `AggregateState`, made
    only when the group first changes (a MIN/MAX argument's distinct values are sorted then,
    for that group only). Invariant: `state(g)` equals a new state that `apply_vals`d the
    group's rows with diff 1, and `[(rows()[g], 1)]` equals its `output()[0]` (tests compare both
    with the per-row states). `records_of(g)` counts group g's values as held here (each row's,
    not each distinct value's), `records()` all groups'."""

    __slots__ = ("plan", "keys", "bounds", "kinds", "sums", "counts", "values", "held",
                 "key_table", "out", "scales", "dictionaries", "distinct_n")

    def __init__(self, plan: IncrementalAggregates, keys: list[Any], bounds: np.ndarray,
                 kinds: dict[int, str], sums: dict[int, Any], counts: dict[int, np.ndarray],
                 values: dict[int, tuple[np.ndarray, np.ndarray | None, str]],
                 key_table: Any = None,
                 scales: dict[int, int] | None = None,
                 dictionaries: dict[int, Any] | None = None,
                 distinct_n: dict[int, np.ndarray] | None = None) -> None:
        self.plan, self.keys, self.bounds, self.kinds = plan, keys, bounds, kinds
        self.sums, self.counts, self.values = sums, counts, values
        for i, sm in sums.items():
            # a float SUM's count of values is its column's count (equal arrays: one is kept)
            c = counts.get(plan.accs[i][1])
            if isinstance(sm, FloatSums) and c is not None and c is not sm.n \
                    and np.array_equal(c, sm.n):
                sm.n = c
        self.held: np.ndarray | None = None
        # the key columns of each group's first row, in `keys` order, until `columns()`
        self.key_table = key_table
        # the aggregates' columns of `columns()` (each group's output row, as sent), kept for
        # `output_rows`
        self.out: Any = None
        # a DECIMAL argument's scale: its sums are of the unscaled values (`_decimal`)
        self.scales = scales or {}
        # a STRING argument's distinct values, sorted: its values are their ranks
        self.dictionaries = dictionaries or {}
        # a DISTINCT accumulator's count of distinct values per group (its sums are theirs)
        self.distinct_n = distinct_n or {}

    def states(self, gs: list[int]) -> list[AggregateState]:
        """`state(g)` for each of the distinct groups `gs`. From `BULK_STATES` groups, in a
        process with numba, the large groups' MIN/MAX values without NULLs are sorted in place
        and their distinct values counted together (`planner.group_parts.sort_parts`: one
        compiled pass over all of them) instead of `_distinct`'s NumPy calls per group: a
        10,000-row batch into a MIN/MAX view by supplier makes thousands of states."""
        if len(gs) < BULK_STATES or "numba" not in sys.modules or not self.values:
            return [self.state(g) for g in gs]
        from planner.group_parts import sort_parts

        groups = np.asarray(gs, dtype=np.int64)
        large = groups[self.bounds[groups + 1] - self.bounds[groups] >= _SMALL_GROUP]
        position = {int(g): k for k, g in enumerate(large.tolist())}
        done: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        for x, (vals, valid, _) in self.values.items():
            if valid is None and vals.flags.writeable and len(large):
                done[x] = sort_parts(vals, self.bounds, large)
        return [self.state(g, done, position.get(g, -1)) for g in gs]

    def state(self, g: int, done: dict[int, Any] | None = None, k: int = -1) -> AggregateState:
        """Group `g`'s state; `done` and `k` as `states` gives them: for the columns in `done`,
        the group's part is sorted and its distinct values and counts are at position `k`."""
        plan = self.plan
        st = AggregateState(plan)
        a, b = int(self.bounds[g]), int(self.bounds[g + 1])
        st.rows = b - a
        for x, (vals, valid, kind) in self.values.items():
            part = vals[a:b]
            nulls = 0
            if valid is not None:
                part = part[valid[a:b]]
                nulls = b - a - len(part)
            values = st.values[x]
            idx = st.index.get(x)
            # what makes the values Python's: a STRING's sorted values, a DECIMAL's scale
            strings = self.dictionaries.get(x) if kind == STRING else self.scales.get(x)
            sorted_part = done.get(x) if done is not None and k >= 0 else None
            if sorted_part is not None and not sorted_part[3][k]:
                uniq_all, counts_all, offsets, _, whole = sorted_part
                if whole[k]:
                    uniq, ucount = part, None  # as `_distinct`: the sorted part itself
                else:
                    # views, never written (planner.sorted_counts): the arrays hold only the
                    # parts with a repeated value, each its group's (`group_parts`)
                    lo, hi = offsets[k], offsets[k + 1]
                    uniq, ucount = uniq_all[lo:hi], counts_all[lo:hi]
                _distinct_values(st, x, uniq, ucount, kind, nulls, idx, strings)
                continue
            if len(part) < _SMALL_GROUP:
                # a few values: Python's Counter and sort cost less than NumPy's calls
                counted = Counter(_python_values(part, kind, strings))
                values.update(counted)
                present = sorted(counted)
                if nulls:
                    values[None] = nulls
                if idx is not None:
                    _index_present(idx, present, kind)
            else:
                uniq, ucount = _distinct(part)
                _distinct_values(st, x, uniq, ucount, kind, nulls, idx, strings)
        for i in plan.direct:
            kind, x, _, _ = plan.accs[i]
            acc = st.accs[i]
            if kind == "count":
                acc[0] = int(self.counts[x][g])
                continue
            s = self.sums[i]
            if self.kinds[x] == "int":
                acc.n = int(self.counts[x][g])
                acc.exact = int(s[g])
            elif self.kinds[x] == DECIMAL:
                # the rows' exact sum: a Decimal at the column's scale once a value was added
                acc.n = int(self.counts[x][g])
                acc.exact = _decimal(int(s[g]), self.scales[x]) if acc.n else 0
            elif isinstance(s, FloatSums):
                acc.n, acc.n_float, acc.scaled, acc.nan, acc.pinf, acc.ninf = s.fields(g)
            else:
                vals, valid, bounds = s
                part = vals[bounds[g]:bounds[g + 1]]
                if valid is not None:
                    part = part[valid[bounds[g]:bounds[g + 1]]]
                if not acc.add_floats(part):
                    acc.__init__()  # type: ignore[misc]
                    for v in part.tolist():
                        acc.add(v, 1)
        for i, n in self.distinct_n.items():
            acc = st.accs[i]
            acc.n = int(n[g])
            x = plan.accs[i][1]
            total = int(self.sums[i][g])
            # (a DECIMAL's sum: a Decimal at the column's scale once a value was added)
            acc.exact = _decimal(total, self.scales[x]) if self.kinds[x] == DECIMAL and acc.n \
                else total
        return st

    def _held(self) -> np.ndarray:
        """Per group, its records as held here (see `records_of`), computed once."""
        if self.held is not None:
            return self.held
        plan = self.plan
        held = np.ones(len(self.keys), dtype=np.int64)
        for x, (_, valid, _) in self.values.items():
            present = self.counts[x]
            held += present
            if valid is not None:
                held += (np.diff(self.bounds) - present) > 0
            if x in plan.indexed_args:
                held += present
        self.held = held
        return held

    def approx_bytes(self) -> int:
        """The arrays' bytes (the output columns kept for `output_rows` too), and the keys and
        Python sums at a rough 64 bytes an object."""
        keys = self.keys
        total = self.bounds.nbytes + (2 * keys.values.nbytes if isinstance(keys, IntKeys)
                                      else 64 * 2 * len(keys))
        for vals, valid, _ in self.values.values():
            total += vals.nbytes + (valid.nbytes if valid is not None else 0)
        for c in (*self.counts.values(), *self.distinct_n.values()):
            total += c.nbytes
        if self.out is not None:
            total += self.out.nbytes
        for strings in self.dictionaries.values():
            total += strings.nbytes
        for s in self.sums.values():
            if isinstance(s, np.ndarray):
                total += s.nbytes
            elif isinstance(s, FloatSums):
                total += s.n.nbytes * 4 + (s.ints.nbytes if s.ints is not None else
                                           64 * len(s.scaled or ()))
        return total

    def records_of(self, g: int) -> int:
        return int(self._held()[g]) if self.values else 1

    def records(self) -> int:
        return int(self._held().sum()) if self.values else len(self.keys)

    def rows(self) -> tuple[list[Any], int]:
        """Every group's output row (a group's output is that row with diff 1: no group is
        empty), and the records read, by whole columns: one list per aggregate, zipped."""
        groups = len(self.keys)
        if not groups:
            return [], 0
        columns, read = self._aggregate_columns()
        rows = list(zip(*columns, strict=True)) if columns else [()] * groups
        return rows, read

    def columns(self) -> tuple[Any, int, int] | None:
        """`rows()` as an Arrow table whose rows are each group's key then its output row,
        in `keys` order (the reduce's `(key, row)` pairs, engine.columns_at.PairColumnsAt),
        with the key's width and the records read; None when an aggregate's values do not
        convert to Arrow and back exactly (mixed Python types, an int past int64): then
        `rows()`. Called once: the key columns are dropped."""
        import pyarrow as pa

        keys, self.key_table = self.key_table, None
        if keys is None or not self.keys:
            return None
        arrays = []
        read = 0
        for a, slot in zip(self.plan.aggs, self.plan.slots, strict=True):
            read += self._read(a)
            array = self._array(a, slot)
            if array is not None:
                arrays.append(array)
                continue
            col = self._column(a, slot)
            kinds = set(map(type, col)) - {type(None)}
            if len(kinds) > 1 or not kinds <= {int, float, datetime.date}:
                return None  # e.g. a bool, a Decimal or ints beside floats: as rows
            try:
                arrays.append(pa.array(col))
            except (OverflowError, pa.ArrowInvalid):
                return None
        table = pa.table([*keys.columns, *arrays],
                         names=[f"c{i}" for i in range(keys.num_columns + len(arrays))])
        self.out = table.select(list(range(keys.num_columns, table.num_columns)))
        return table, keys.num_columns, read

    def output_rows(self, gs: list[int]) -> list[tuple[Any, ...]] | None:
        """The output rows `columns()` gave groups `gs` (what the reduce sent for them: its
        rows, as the engine reads them, `engine.sources.rows_of`), or None before
        `columns()`. They equal the groups' `state(g).output()` rows (tests compare them): the
        reduce takes them as a made state's previous output, a NumPy `take` and one
        conversion for a batch's groups where `output()` cost a Python call per group."""
        import pyarrow as pa

        out = self.out
        if out is None:
            return None
        if not out.num_columns:  # no aggregate (a DISTINCT): every group's row is ()
            return [()] * len(gs)
        taken = out.take(pa.array(gs, pa.int64()))
        return list(rows_of(taken, taken.num_columns))

    def _aggregate_columns(self) -> tuple[list[list[Any]], int]:
        """Each aggregate's value in every group (what `rows()` zips), and the records
        read."""
        pairs = list(zip(self.plan.aggs, self.plan.slots, strict=True))
        return ([self._column(a, slot) for a, slot in pairs],
                sum(self._read(a) for a, _ in pairs))

    def _read(self, a: Any) -> int:
        """The records aggregate `a`'s column reads: one per group (COUNT(*) reads none, nor
        does COUNT(DISTINCT x): the size of its value map, as `AggregateState.output`)."""
        return 0 if a.func == "count_star" or a.func == "count" and a.distinct else len(self.keys)

    def _column(self, a: Any, slot: int) -> list[Any]:
        """Aggregate `a`'s value in every group."""
        f = a.func
        if f == "count_star":
            return np.diff(self.bounds).tolist()
        if f == "count" and a.distinct:
            return self._distinct_counts(a.arg).tolist()
        if f in ("min", "max") and (a.arg in self.dictionaries or self.kinds[a.arg] == DECIMAL):
            return self._array(a, slot).to_pylist()  # type: ignore[no-any-return]
        if f in ("min", "max"):
            assert a.arg is not None
            found, has = self._extremes(a.arg, f)
            out = found.tolist()
            if not has.all():
                out = [v if h else None for v, h in zip(out, has.tolist(), strict=True)]
            return out
        n = self._count(slot)
        if f == "count":
            return n.tolist()
        totals = self._totals(slot)
        has = n > 0
        present = has.tolist()
        if f == "sum" and self._in_range(a, slot, has):
            # `_finish_sum` of each total is the total itself: a float, or an int within
            # the SUM's type (checked over all groups at once)
            col = totals if all(present) else [
                t if p else None for t, p in zip(totals, present, strict=True)]
        elif f == "sum":
            col = [_finish_sum(a, t) if p else None
                   for t, p in zip(totals, present, strict=True)]
        else:  # avg
            col = [_finish_avg(a, t, c) if c else None
                   for t, c in zip(totals, n.tolist(), strict=True)]
        return canonical_column(col)

    def _array(self, a: Any, slot: int) -> Any:
        """`pa.array(self._column(a, slot))` made from the arrays themselves (no Python
        object per group), where their values are exactly those: counts; MIN and MAX; SUM
        of ints within the SUM's type, and AVG of ints below 2**53 (int / int then rounds
        as float / float); SUM and AVG of floats summed as int64 (`FloatSums.ints`) in
        groups without NaN, infinities or NULL only; SUM of DECIMALs of 18 digits at most
        (and a COUNT(DISTINCT x); MIN and MAX of strings made from their ranks). None
        elsewhere."""
        import pyarrow as pa
        import pyarrow.compute as pc

        f = a.func
        if f == "count_star":
            return pa.array(np.diff(self.bounds))
        if f == "count" and a.distinct:
            return pa.array(self._distinct_counts(a.arg))
        if f in ("min", "max"):
            found, has = self._extremes(a.arg, f)
            if self.kinds[a.arg] == DECIMAL:
                return _decimals(np.where(has, found, 0), self.scales[a.arg], has)
            strings = self.dictionaries.get(a.arg)
            if strings is None:
                return pa.array(found, mask=None if has.all() else ~has)
            if not len(strings):  # NULLs only
                return pa.nulls(len(found), strings.type)
            # the ranks found made strings; a group without a value NULL
            taken = strings.take(np.where(has, found, 0))
            return taken if has.all() else pc.if_else(pa.array(has), taken,
                                                      pa.scalar(None, strings.type))
        x = self.plan.accs[slot][1]
        n = self._count(slot)
        if f == "count":
            return pa.array(n)
        s, kind = self.sums[slot], self.kinds[x]
        has = n > 0
        if kind == "int" and isinstance(s, np.ndarray):
            mask = None if has.all() else ~has
            if f == "sum" and self._in_range(a, slot, has):
                return pa.array(s, mask=mask)
            if f == "avg" and int_magnitude(s) <= 2 ** 53:
                return pa.array(s / np.where(has, n, 1), mask=mask)
            return None
        if kind == DECIMAL and f == "sum" and isinstance(s, np.ndarray) and \
                self.scales[x] <= 18 and not ((s >= 10 ** 18) | (s <= -10 ** 18)).any():
            # each total at the column's scale, as `_totals` makes it a Decimal (18 digits
            # at most: an int64 each)
            return _decimals(np.where(has, s, 0), self.scales[x], has)
        if kind == "float" and isinstance(s, FloatSums) and s.ints is not None and \
                not s.special().any():
            totals = s.ints.astype(np.float64)  # FloatSums.totals, its special groups none
            return pa.array(totals if f == "sum" else totals / n)
        return None

    def _extremes(self, x: int, f: str) -> tuple[np.ndarray, np.ndarray]:
        """MIN or MAX of `x` per group, by one `reduceat` (NULLs as the other extreme; dates
        as datetime64[D]), and which groups have a value (the others' MIN or MAX is NULL).
        There is no NaN or -0.0, so the maximum is the one value tied for it."""
        vals, valid, kind = self.values[x]
        if kind == "float":
            fill: Any = np.inf if f == "min" else -np.inf
        else:
            fill = _I64[1] if f == "min" else _I64[0]
        if valid is not None:
            vals = np.where(valid, vals, fill)
        found = (np.minimum if f == "min" else np.maximum).reduceat(vals, self.bounds[:-1])
        if kind == TIMESTAMP:
            found = found.astype("datetime64[us]")
        return (found.astype("datetime64[D]") if kind == "date" else found,
                self.counts[x] > 0)

    def _distinct_counts(self, x: int) -> np.ndarray:
        """COUNT(DISTINCT x) per group: how many distinct values (NULL not one) each group's
        part holds (`_distinct_pairs`)."""
        groups, _ = _distinct_pairs(*self.values[x], self.bounds)
        return np.bincount(groups, minlength=len(self.keys)).astype(np.int64)

    def _count(self, slot: int) -> np.ndarray:
        """Accumulator `slot`'s count of values per group: of its distinct values for a
        DISTINCT one."""
        n = self.distinct_n.get(slot)
        return self.counts[self.plan.accs[slot][1]] if n is None else n

    def _in_range(self, a: Any, i: int, has: np.ndarray) -> bool:
        """Whether `_finish_sum(a, total)` is the total itself for every group with a value:
        float totals, or int64 sums within the range of the SUM's integer type."""
        kind = self.kinds[self.plan.accs[i][1]]
        if kind == "float":
            return True
        t = norm_type(a.type)
        if kind != "int" or t not in INT_RANGE:
            return kind == "int"
        sums = self.sums[i][has]
        return not len(sums) or (INT_RANGE[t][0] <= int(sums.min())
                                 and int(sums.max()) <= INT_RANGE[t][1])

    def _totals(self, i: int) -> list[Any]:
        """Accumulator `i`'s `_ExactSum.total()` per group."""
        s = self.sums[i]
        x = self.plan.accs[i][1]
        if self.kinds[x] == "int":
            return s.tolist()
        if self.kinds[x] == DECIMAL:  # (a group without a value has no total read)
            return [_decimal(t, self.scales[x]) for t in s.tolist()]
        if not isinstance(s, FloatSums):
            return [self.state(g).accs[i].total() for g in range(len(self.keys))]
        return s.totals()


class FloatSums:
    """Per group, `_ExactSum`'s fields over the group's non-NULL floats (every one a float, so
    n_float is n), as arrays: the counts of values, NaNs and infinities, and the exact sum of
    the finite values either as int64 integers (`ints`: integer-valued doubles) or scaled by
    2**1074 as Python ints (`scaled`). `fields(g)` is what `add` of each value would leave in
    an `_ExactSum`, `totals()` every group's `total()`. A count of NaNs or of an infinity
    that is 0 in every group (as in nearly every column) is held as None, not as an array of
    zeros (three int64 per group: 36 MB for 1.5M groups)."""

    __slots__ = ("n", "nan", "pinf", "ninf", "ints", "scaled")

    def __init__(self, n: np.ndarray, nan: np.ndarray | None, pinf: np.ndarray | None,
                 ninf: np.ndarray | None, ints: np.ndarray | None,
                 scaled: list[int] | None) -> None:
        self.n = n
        self.nan, self.pinf, self.ninf = (None if c is None or not c.any() else c
                                          for c in (nan, pinf, ninf))
        self.ints, self.scaled = ints, scaled

    def fields(self, g: int) -> tuple[int, int, int, int, int, int]:
        n = int(self.n[g])
        scaled = int(self.ints[g]) << _FLOAT_SCALE_BITS if self.ints is not None else \
            self.scaled[g]  # type: ignore[index]
        nan, pinf, ninf = (0 if c is None else int(c[g]) for c in (self.nan, self.pinf, self.ninf))
        return n, n, scaled, nan, pinf, ninf

    def special(self) -> np.ndarray:
        """Whether each group's total is not its finite sum: a NaN or an infinity among its
        values, or no value at all."""
        out = self.n == 0
        for c in (self.nan, self.pinf, self.ninf):
            if c is not None:
                out |= c > 0
        return out

    def totals(self) -> list[Any]:
        """`_ExactSum.total()` of every group: the exact sum rounded once to a double (an
        int64's conversion, or a Python int's true division by 2**1074: both correctly
        rounded), with NaN and the infinities as IEEE addition gives them."""
        groups = len(self.n)
        out: list[Any]
        if self.ints is not None:
            out = self.ints.astype(np.float64).tolist()
        else:
            try:
                out = (np.array(self.scaled, dtype=object) / _FLOAT_SCALE).tolist()
            except OverflowError:  # beyond DOUBLE's range somewhere: group by group
                acc = _ExactSum()
                out = []
                for g in range(groups):
                    acc.n, acc.n_float, acc.scaled, acc.nan, acc.pinf, acc.ninf = self.fields(g)
                    out.append(acc.total())
                return out
        special = np.flatnonzero(self.special())
        acc = _ExactSum()
        for g in special.tolist():
            acc.n, acc.n_float, acc.scaled, acc.nan, acc.pinf, acc.ninf = self.fields(g)
            out[g] = acc.total()
        return out


def _float_sums(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray
                ) -> FloatSums | None:
    """Per group, `_ExactSum`'s fields over the group's non-NULL floats: by the compiled
    kernel where it pays (see `COMPILED_FLOAT_SUMS`), else by NumPy (the two are equal).
    In a process without numba, integer-valued doubles (quantities, counts) take NumPy's
    int64 sums: loading numba for them would cost more than it saves."""
    loaded = "numba" in sys.modules
    if len(vals) < (COMPILED_FLOAT_SUMS if loaded else FIRST_COMPILED_FLOAT_SUMS):
        return _float_sums_reference(vals, valid, starts)
    if loaded:
        # the kernel's first pass finds integers itself (and sums them as int64): one pass,
        # where `_integral` takes five
        return _float_sums_compiled(vals, valid, starts)
    whole = _integral(vals, valid)
    if whole is not None:
        return _int_float_sums(vals, valid, starts, whole)
    return _float_sums_compiled(vals, valid, starts)


def _integral(vals: np.ndarray, valid: np.ndarray | None) -> np.ndarray | None:
    """The values with every NaN, infinity and NULL as 0.0 when they are all integers and
    max|x| * n stays far inside int64 (so their int64 sums are exact), else None."""
    head = vals[:_INTEGRAL_PROBE]
    counted = np.isfinite(head) if valid is None else np.isfinite(head) & valid[:len(head)]
    if not (head == np.trunc(head))[counted].all():
        return None  # prices and the like: known from their first values, not a full pass
    finite = np.isfinite(vals) if valid is None else np.isfinite(vals) & valid
    whole = np.where(finite, vals, 0.0)
    top = float(np.abs(whole).max()) if len(whole) else 0.0
    if top * len(vals) < 2.0 ** 62 and bool((whole == np.trunc(whole)).all()):
        return whole
    return None


def _counts(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per group: its non-NULL values, NaNs, +inf and -inf (NULLs where `valid` is False;
    no pass per kind when no value is a NaN or an infinity: one test of all of them)."""
    if valid is None:
        n = np.diff(np.append(starts, len(vals)))
    else:
        n = np.add.reduceat(valid.astype(np.int64), starts)
    if np.isfinite(vals).all():
        return n, np.zeros(len(starts), dtype=np.int64), np.zeros(len(starts), dtype=np.int64), \
            np.zeros(len(starts), dtype=np.int64)
    present = np.ones(len(vals), dtype=bool) if valid is None else valid
    return (n, np.add.reduceat((np.isnan(vals) & present).astype(np.int64), starts),
            np.add.reduceat((vals == np.inf) & present, starts, dtype=np.int64),
            np.add.reduceat((vals == -np.inf) & present, starts, dtype=np.int64))


def _int_float_sums(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray,
                    whole: np.ndarray) -> FloatSums:
    """`FloatSums` of integer values (`whole`, from `_integral`): int64 sums are exact."""
    return FloatSums(*_counts(vals, valid, starts),
                     np.add.reduceat(whole.astype(np.int64), starts), None)


def _float_sums_compiled(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray
                         ) -> FloatSums:
    """`_float_sums_reference` by compiled passes (`planner.float_sums`; imported here, so a
    process imports numba only when a column is large enough to use it)."""
    from planner.float_sums import group_sums

    return FloatSums(*group_sums(vals, valid, starts))


def _float_sums_reference(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray
                          ) -> FloatSums | None:
    """The slow, obviously correct twin of `_float_sums_compiled` (tests compare the two),
    and `_float_sums` on small columns. Per group, `_ExactSum`'s (n, n_float, scaled, nan,
    pinf, ninf) over the group's non-NULL floats, exactly as `add` of each value computes
    them: `scaled` is the exact sum times 2**1074 (see `FloatSums`). Integer values whose sum
    stays far inside int64 are summed as int64. Else each finite value is M * 2**E with an
    integer |M| < 2**53 (`frexp`); the M of one group and one exponent are summed in int64
    halves (exact for 2**36 values), then shifted and added per group as Python ints in
    object arrays (C loops). None if a sum would not be an integer at that scale (it always
    is: kept as a guard). Precondition (both): `starts` ascend strictly from 0 and every group
    is non-empty (`reduceat` would read a neighbour's value for an empty one)."""
    groups = len(starts)
    whole = _integral(vals, valid)
    if whole is not None:  # quantities, counts stored as DOUBLE
        return _int_float_sums(vals, valid, starts, whole)
    present = np.ones(len(vals), dtype=bool) if valid is None else valid
    finite = np.isfinite(vals) & present
    n, nan, pinf, ninf = _counts(vals, valid, starts)
    scaled = [0] * groups
    group = np.repeat(np.arange(groups), np.diff(np.append(starts, len(vals))))
    keep = finite & (vals != 0)
    if keep.any():
        m, e = np.frexp(vals[keep])
        mant = (m * 2.0 ** 53).astype(np.int64)  # exact: m has 53 significant bits
        exp = e.astype(np.int64) - 53
        lo_e = int(exp.min())
        span = int(exp.max()) - lo_e + 1
        bucket = group[keep] * span + (exp - lo_e)
        if groups * span <= 4 * len(bucket) and len(bucket) < 2 ** 26:
            # One pass, no sort: bincount sums in float64, exact here because every partial
            # sum is an integer below 2**26 * 2**27 = 2**53.
            high_f = np.bincount(bucket, weights=mant >> 26, minlength=groups * span)
            low_f = np.bincount(bucket, weights=mant & ((1 << 26) - 1), minlength=groups * span)
            nonzero = np.flatnonzero(np.bincount(bucket, minlength=groups * span))
            keys = nonzero
            high = high_f[nonzero].astype(np.int64)
            low = low_f[nonzero].astype(np.int64)
        else:
            order = np.argsort(bucket, kind="stable")
            b, mant = bucket[order], mant[order]
            first = np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))
            keys = b[first]
            high = np.add.reduceat(mant >> 26, first)  # |M >> 26| < 2**27
            low = np.add.reduceat(mant & ((1 << 26) - 1), first)
        # Each (group, exponent)'s total scaled by 2**1074, summed per group: Python ints
        # (they pass 64 bits), in object arrays so the loop over the pairs runs in C. `keys`
        # ascend, so each group's pairs are adjacent.
        g_of, k_of = np.divmod(keys, span)
        up = k_of + (lo_e + _FLOAT_SCALE_BITS)
        total = (high.astype(object) << 26) + low.astype(object)
        shift = up.astype(object)
        below = np.flatnonzero(up < 0)  # subnormals' mantissas: an exact right shift
        for i in below.tolist():
            t, u = total[i], -int(up[i])
            if t % (1 << u):
                return None  # not an integer at this scale (never, for doubles): a guard
            total[i], shift[i] = t >> u, 0
        total = total << shift
        firsts = np.flatnonzero(np.concatenate(([True], g_of[1:] != g_of[:-1])))
        per_group = np.zeros(groups, dtype=object)
        per_group[g_of[firsts]] = np.add.reduceat(total, firsts)
        scaled = per_group.tolist()
    return FloatSums(n, nan, pinf, ninf, None, scaled)


def _group(table: Any, key: tuple[int, ...]
           ) -> tuple[np.ndarray | None, np.ndarray, Sequence[tuple[Any, ...]]] | None:
    """The rows' order grouped by key (stable; None when the rows are in that order
    already), each group's first position in it, and each group's key tuple; None for a key
    type left to rows."""
    coded = _codes(table, key)
    return None if coded is None else _runs(*coded)


# A key column's decoder: its codes' size, its minimum (ints) or dictionary values (else), and
# the key columns it covers (more than one for a prefix of the key compacted by `_codes`,
# whose values are then tuples of that many).
_Decoder = tuple[int, int, "list[Any] | None", int]


def _codes(table: Any, key: tuple[int, ...]) -> tuple[np.ndarray, int, list[_Decoder]] | None:
    """Each row's group code (int64, below the returned radix) and the columns' decoders;
    None for a key type left to rows. Each key column becomes an integer code: an integer
    column without NULL spanning less than 2**32 its offset from its minimum (no hashing),
    any other column its dictionary index; the codes of several columns combine by mixed
    radix."""
    n = table.num_rows
    codes = np.zeros(n, dtype=np.int64)  # no key column: one group
    decoders: list[_Decoder] = []
    radix = 1
    for i in key:
        col = table.column(i)
        kind = value_kind(col.type)
        if kind not in ("int", "bool", "str", "date", "float", "timestamp") and not \
                _is_decimal(col.type):
            return None  # (a timestamp or DECIMAL key: its dictionary, values as the rows')
        if kind == "float" and _float_key_differs(col):
            return None
        if (kind == "str" and decoders and codes.flags.owndata and codes.flags.writeable
                and _compiled_codes(n)):
            # a large flag after other key columns: its codes go straight onto theirs, in
            # place (`planner.byte_codes`), where a column of them would be fresh pages
            from planner.byte_codes import byte_codes_onto

            onto = byte_codes_onto(col, codes, radix)
            if onto is not None:
                size = max(len(onto), 1)
                radix *= size
                decoders.append((size, 0, onto, 1))
                continue
        offsets = _offset_codes(col) if kind == "int" else None
        ints = int_column(col) if kind == "int" and offsets is None else None
        lo = int(ints.min()) if ints is not None and n else 0
        values: list[Any] | None = None
        if offsets is not None:
            part, lo, size = offsets
        elif ints is not None and n and int(ints.max()) - lo < 1 << 32:
            size = int(ints.max()) - lo + 1
            part = ints - lo if lo else ints
        else:
            part, values = _dictionary(col)
            size, lo = len(values), 0
        size = max(size, 1)
        if radix * size >= 2 ** 62:
            # the mixed radix would overflow (ids, names and dates together): the codes so far
            # become the ranks of their distinct values (a sort), decoded to the key prefixes
            distinct, codes = np.unique(codes, return_inverse=True)
            width = sum(d[3] for d in decoders)
            decoders = [(len(distinct), 0, list(_keys(distinct, decoders)), width)]
            radix = len(distinct)
            if radix * size >= 2 ** 62:
                return None
        radix *= size
        if not decoders:
            codes = part
        elif codes.flags.owndata and codes.flags.writeable:
            # the codes so far are this loop's own array: combined in place, no new column
            # (each is the column's length in fresh pages, see `planner.byte_codes`)
            codes *= size
            codes += part
        else:
            codes = codes * size + part
        decoders.append((size, lo, values, 1))
    return codes, radix, decoders


def _offset_codes(col: Any) -> tuple[np.ndarray, int, int] | None:
    """An integer key column without NULL spanning less than 2**32: each row's offset from
    the column's minimum (int64, a new array of this module's own), the minimum and the span;
    None for any other column. Each chunk is subtracted straight into the result: no int64 copy
    of the column first (`int_column`), which on a large table is the column's length in fresh
    pages (see `planner.byte_codes`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_integer(col.type) or col.null_count or not len(col):
        return None
    bounds = pc.min_max(col)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if hi >= 2 ** 63 or hi - lo >= 1 << 32:
        return None
    out = np.empty(len(col), dtype=np.int64)
    at = 0
    for chunk in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]):
        m = len(chunk)
        if m:
            # int64 arithmetic whatever the column's width (a uint64 column is below 2**63)
            np.subtract(chunk.to_numpy(), lo, out=out[at:at + m], dtype=np.int64,
                        casting="unsafe")
        at += m
    return out, lo, hi - lo + 1


def _float_key_differs(col: Any) -> bool:
    """Whether a float key column holds NaN or -0.0, which the row path keys by its own
    rules (-0.0 and 0.0 are one key of Python's dict, kept as the first seen). Without them
    Arrow's dictionary and the dict group alike."""
    import pyarrow.compute as pc

    if col.null_count == len(col):
        return False
    vals = pc.fill_null(col, 1.0).to_numpy() if col.null_count else col.to_numpy()
    return bool(np.isnan(vals).any() or (np.signbit(vals) & (vals == 0)).any())


def _runs(codes: np.ndarray, radix: int, decoders: list[_Decoder]
          ) -> tuple[np.ndarray | None, np.ndarray, Sequence[tuple[Any, ...]]]:
    """`_group` from the codes: codes below 2**16 sort by one radix sort (NumPy's stable sort
    of uint16, or the compiled counting sort), below 2**32 by two (low half, then high half:
    an LSD radix sort), wider ones by a comparison sort."""
    n = len(codes)
    order = _stable_order(codes, radix)
    if radix <= n:
        # dense codes: the groups and their sizes by counting, not by a gather of the codes
        sizes = np.bincount(codes, minlength=radix)
        group_codes = np.flatnonzero(sizes)
        starts = np.zeros(len(group_codes), dtype=np.int64)
        np.cumsum(sizes[group_codes][:-1], out=starts[1:])
    else:
        sorted_codes = codes if order is None else codes[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_codes[1:] != sorted_codes[:-1])))
        group_codes = sorted_codes[starts]
    return order, starts, _keys(group_codes, decoders)


def _keys(group_codes: np.ndarray, decoders: list[_Decoder]) -> Sequence[tuple[Any, ...]]:
    """Each group's key tuple from its code (ascending codes: ascending keys for one int
    column, kept as an `IntKeys` array)."""
    if len(decoders) == 1 and decoders[0][2] is None:
        # one int column by offsets: the groups are in ascending key order, kept as an array
        return IntKeys(group_codes + decoders[0][1])
    # each group's key: its code split back into one code per decoder, last decoder first
    columns: list[list[Any]] = []
    for size, lo, values, width in reversed(decoders):
        group_codes, j = np.divmod(group_codes, size)
        if values is None:
            columns.append((j + lo).tolist())
        elif width == 1:
            columns.append(list(map(values.__getitem__, j.tolist())))
        else:  # a compacted prefix: its tuples split into their columns
            prefixes = list(map(values.__getitem__, j.tolist()))
            columns.extend(reversed([[p[c] for p in prefixes] for c in range(width)]))
    return list(zip(*reversed(columns), strict=True)) if columns else [()] * len(group_codes)


def _dictionary(col: Any) -> tuple[np.ndarray, list[Any]]:
    """A column's distinct values (as `column_values` gives them; NULL, when there is one, as
    None and last) and each row's index into them, as int64. Chunk by chunk, the
    dictionaries then unified (`_encoded`): no copy of the whole column into one chunk first."""
    import pyarrow.compute as pc

    fixed = _fixed_width_codes(col)
    if fixed is not None:
        return fixed
    dictionary, indices = _encoded(col)
    values = column_values(dictionary)
    if col.null_count:
        indices = pc.fill_null(indices, len(values))
        values.append(None)
    return indices.to_numpy().astype(np.int64), values


def _encoded(col: Any) -> tuple[Any, Any]:
    """`pc.dictionary_encode(col)` as one dictionary of the column's distinct values (Arrow
    arrays, NULL none of them) and each row's index into it (NULL where the row is). A
    chunked column is encoded chunk by chunk with one hash table, and Arrow gives every
    chunk the same whole dictionary: it is taken as it is, and only chunks that hold
    dictionaries of their own are unified (which rehashes every chunk's: for 500,000 distinct
    strings in 62 chunks, 2.1 s against the encoding's 0.1-0.3 s)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(col)
    if not isinstance(enc, pa.ChunkedArray):
        return enc.dictionary, enc.indices
    if not enc.num_chunks:
        return pa.array([], col.type), pa.chunked_array([], pa.int32())
    first = enc.chunk(0).dictionary
    if not _one_dictionary(first, [c.dictionary for c in enc.chunks]):
        enc = enc.unify_dictionaries()
        first = enc.chunk(0).dictionary
    return first, pa.chunked_array([c.indices for c in enc.chunks], pa.int32())


def _one_dictionary(first: Any, dictionaries: list[Any]) -> bool:
    """Whether every one of `dictionaries` is `first` itself: the same length and buffers."""
    own = [b.address if b is not None else 0 for b in first.buffers()]
    return all(len(d) == len(first) and d.offset == first.offset and
               [b.address if b is not None else 0 for b in d.buffers()] == own
               for d in dictionaries)


def _fixed_width_codes(col: Any) -> tuple[np.ndarray, list[Any]] | None:
    """`_dictionary` of a string column without NULL whose every value is 1 or 2 bytes long
    (flags and status codes: l_returnflag, o_orderstatus), read from its buffers; None for any
    other column. A large column takes the compiled passes (`planner.byte_codes`, where
    `COMPILED_FLOAT_SUMS` rows would take the float sums' kernels), others
    `_fixed_width_codes_reference`: the two are equal."""
    if _compiled_codes(len(col)):
        from planner.byte_codes import byte_codes

        return byte_codes(col)
    return _fixed_width_codes_reference(col)


def byte_values(counts: np.ndarray, width: int) -> tuple[list[Any], np.ndarray] | None:
    """From the counts of a 1- or 2-byte string column's values by their number (their bytes,
    big-endian): the distinct values in byte order, and each number's index among them; None
    when one is not UTF-8 (one of two bytes of a longer character: Arrow's encoding decides)."""
    present = np.flatnonzero(counts)
    try:
        values: list[Any] = [int(v).to_bytes(width, "big").decode("utf-8")
                             for v in present.tolist()]
    except UnicodeDecodeError:
        return None
    dense = np.zeros(len(counts), dtype=np.int64)
    dense[present] = np.arange(len(present))
    return values, dense


def _compiled_codes(n: int) -> bool:
    """Whether a key column of `n` rows takes the compiled `planner.byte_codes`: as many as a
    float sum takes the compiled kernels for (more while numba is not loaded)."""
    return n >= (COMPILED_FLOAT_SUMS if "numba" in sys.modules else FIRST_COMPILED_FLOAT_SUMS)


def _fixed_width_codes_reference(col: Any) -> tuple[np.ndarray, list[Any]] | None:
    """`_fixed_width_codes` by NumPy: each value's bytes are its number below 256**width,
    counted in a table of that size, so the distinct values come out in byte order, which is
    their code points' order. About 6x Arrow's hash encoding."""
    import pyarrow as pa

    t = col.type
    if col.null_count or not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None
    offset_type = np.int64 if pa.types.is_large_string(t) else np.int32
    width = None
    raws = []
    # Chunk by chunk: NumPy's bincount of uint8 or uint16 is 5x slower than of intp, and a
    # cast of the whole column first costs a large new array's page faults; its gather is the
    # other way round (small indices are 4x faster).
    counts = np.zeros(0, dtype=np.int64)
    for chunk in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]):
        if not len(chunk):
            continue
        _, offsets_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=offset_type, count=len(chunk) + 1,
                                offset=chunk.offset * np.dtype(offset_type).itemsize)
        w = int(offsets[1] - offsets[0])
        if w not in (1, 2) or w != (width or w) or \
                int(offsets[-1] - offsets[0]) != w * len(chunk) or \
                not (np.diff(offsets) == w).all():
            return None
        if width is None:
            width = w
            counts = np.zeros(256 ** w, dtype=np.int64)
        data = np.frombuffer(data_buf, dtype=np.uint8, count=w * len(chunk),
                             offset=int(offsets[0]))
        raw = data if w == 1 else data[0::2].astype(np.uint16) << 8 | data[1::2]
        counts += np.bincount(raw.astype(np.intp), minlength=len(counts))
        raws.append(raw)
    if width is None:
        return None
    decoded = byte_values(counts, width)
    if decoded is None:
        return None
    values, dense = decoded
    codes = np.empty(len(col), dtype=np.int64)
    at = 0
    for raw in raws:
        codes[at:at + len(raw)] = dense[raw]
        at += len(raw)
    return codes, values


def _distinct_values(st: AggregateState, x: int, uniq: np.ndarray, ucount: np.ndarray | None,
                     kind: str, nulls: int, idx: Any, strings: Any = None) -> None:
    """Put a group's distinct values `uniq` of MIN/MAX or COUNT(DISTINCT) argument `x`
    (ascending, their counts `ucount`, None: each once; a STRING's ranks into `strings`) and
    its `nulls` into state `st` (`BuiltGroups.state`)."""
    if len(uniq) >= ARRAY_INDEX_MIN and idx is not None and kind not in (TIMESTAMP, STRING):
        # many distinct values: kept in arrays (planner.sorted_counts; a DECIMAL's unscaled,
        # at its scale `strings`)
        sc = SortedCounts(uniq, ucount, kind, nulls, strings if kind == DECIMAL else 0)
        st.values[x] = sc  # type: ignore[assignment]
        st.index[x] = sc.index  # type: ignore[assignment]
        return
    values = st.values[x]
    present = _python_values(uniq, kind, strings)
    values.update(dict.fromkeys(present, 1) if ucount is None
                  else zip(present, ucount.tolist(), strict=True))
    if nulls:
        values[None] = nulls
    if idx is not None:
        _index_present(idx, present, kind)


def _python_values(vals: np.ndarray, kind: str, strings: Any = None) -> list[Any]:
    """An argument's values (of one group) as the rows hold them: dates and datetimes made
    from their days and microseconds, strings from their ranks into `strings`, Decimals from
    their unscaled values at the scale `strings`."""
    if kind == STRING:
        return strings.take(vals).to_pylist()  # type: ignore[no-any-return]
    if kind == DECIMAL:
        return [_decimal(v, strings) for v in vals.tolist()]
    if kind == "date":
        return vals.astype("datetime64[D]").tolist()  # type: ignore[no-any-return]
    if kind == TIMESTAMP:
        return vals.astype("datetime64[us]").tolist()  # type: ignore[no-any-return]
    return vals.tolist()  # type: ignore[no-any-return]


def _index_present(idx: Any, present: list[Any], kind: str) -> None:
    """Add a group's distinct values `present` (ascending) to its MIN/MAX index `idx`."""
    if kind == TIMESTAMP:
        idx.update([_value_entry(v) for v in present])  # (4, v, 1, v): a datetime's
        return
    if kind == STRING:
        idx.update([(3, v, 0, v) for v in present])  # _value_entry(v) of a str, in v's order
        return
    if kind == "date":
        # dates: _value_entry(v) is (4, v's midnight, 0, v), in v's order
        idx.update([(4, _midnight(v), 0, v) for v in present])
    else:
        # numbers without NaN (Decimals too): _value_entry(v) is (2, v, 0, v), in v's order
        idx.update(list(zip(repeat(2), present, repeat(0), present)))


def _distinct_pairs(vals: np.ndarray, valid: np.ndarray | None, kind: str, bounds: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each group's distinct values (NULL not one) as `(group, value)` pairs, in group then
    value order, by one sort of the pairs made one int64 each. Floats, and ints whose span
    times the groups reaches 2**62, are ranked first (there is no NaN or -0.0: `build_groups`
    leaves those to the rows) and their values taken back by rank."""
    groups = len(bounds) - 1
    owner = np.repeat(np.arange(groups, dtype=np.int64), np.diff(bounds))
    if valid is not None:
        vals, owner = vals[valid], owner[valid]
    if not len(vals):
        return owner, vals
    uniq = None
    if kind != "float":
        lo, hi = int(vals.min()), int(vals.max())
    if kind == "float" or (hi - lo + 1) * groups >= 1 << 62:
        # ranks below the row count: (rows * groups) stays below 2**62
        uniq, ranks = np.unique(vals, return_inverse=True)
        vals, lo, hi = ranks.astype(np.int64), 0, len(uniq) - 1
    span = hi - lo + 1
    pairs = unique_ints(owner * span + (vals - lo))
    found = pairs % span + lo
    return pairs // span, found if uniq is None else uniq[found]


def _distinct_sums(vals: np.ndarray, valid: np.ndarray | None, kind: str, bounds: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per group, the sum and the count of its distinct int values (a DECIMAL's unscaled; NULL
    not one), or None when a sum could pass int64 (the rows add Python ints)."""
    owner, found = _distinct_pairs(vals, valid, kind, bounds)
    n = np.bincount(owner, minlength=len(bounds) - 1).astype(np.int64)
    sums = np.zeros(len(n), np.int64)
    if len(found):
        if int_magnitude(found) * int(n.max()) >= 2 ** 63:
            return None
        has = n > 0
        sums[has] = np.add.reduceat(found, (np.cumsum(n) - n)[has])
    return sums, n


def _distinct(part: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """`np.unique(part, return_counts=True)` in a few NumPy calls (np.unique's own cost a
    third of making a MIN/MAX group's state on its first change), with None for the counts
    when every value is distinct; a float part holding NaN, which np.unique folds into one
    value, goes to np.unique itself. A writable `part` is sorted in place, and when its values
    are distinct it is the values returned: no copy (the caller's part is a group's own slice,
    whose order nothing else reads)."""
    if not len(part) or part.dtype.kind == "f" and np.isnan(part).any():
        return np.unique(part, return_counts=True)
    if part.flags.writeable:
        part.sort()
        s = part
    else:
        s = np.sort(part)
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    if len(starts) == len(s):
        return s, None
    return s[starts], np.diff(np.append(starts, len(s)))


class IntKeys(Sequence[tuple[int]]):
    """The groups' keys `(v,)` of one int key column, distinct and ascending, as an int64
    array instead of a tuple and an int object per group (a GROUP BY of millions of ids).
    `unbuilt()` gives the positions a reduce has not made a state for yet."""

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [(v,) for v in self.values[i].tolist()]
        return (int(self.values[i]),)

    def __iter__(self) -> Iterator[tuple[int]]:
        return ((v,) for v in self.values.tolist())

    def unbuilt(self) -> UnbuiltIntKeys:
        return UnbuiltIntKeys(self.values)


class UnbuiltIntKeys:
    """The positions of `IntKeys` whose state is not made yet: `key in`, `pop(key[, default])`
    and `len` answer as the dict `{key: position}` of them would (by Python's equality:
    `(1.0,)` and `(True,)` find `(1,)`), with a flag per group instead of a dict entry."""

    __slots__ = ("values", "taken", "left")

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.taken = np.zeros(len(values), dtype=bool)
        self.left = len(values)

    def __len__(self) -> int:
        return self.left

    def _find(self, key: Any) -> int:
        if key.__class__ is not tuple or len(key) != 1:
            return -1
        v = key[0]
        if v.__class__ is not int:
            if not (v.__class__ is bool or (v.__class__ is float and math.isfinite(v)
                                              and v.is_integer())):
                return -1
            v = int(v)
        if not _I64[0] <= v <= _I64[1]:
            return -1
        values = self.values
        i = int(np.searchsorted(values, v))
        if i == len(values) or values[i] != v or self.taken[i]:
            return -1
        return i

    def __contains__(self, key: Any) -> bool:
        return self._find(key) >= 0

    def pop(self, key: Any, *default: int) -> int:
        i = self._find(key)
        if i < 0:
            if default:
                return default[0]
            raise KeyError(key)
        self.taken[i] = True
        self.left -= 1
        return i


def _counting_layout(codes: np.ndarray, radix: int) -> tuple[np.ndarray, np.ndarray] | None:
    """`engine.counting_sort.counting_bounds` of the codes where `_stable_order` would sort
    them by counting (they are not in order already); None where it would not."""
    n = len(codes)
    if not (radix <= 1 << 16 and n >= COUNTING_SORT and "numba" in sys.modules):
        return None
    if n > SORTED_CHECK and ascending(codes):
        return None
    from engine.counting_sort import counting_bounds

    return counting_bounds(codes, radix)


def _stable_order(codes: np.ndarray, radix: int) -> np.ndarray | None:
    """The stable sorting permutation of non-negative `codes` below `radix`; None when it is
    the identity (found for long codes only)."""
    if len(codes) > SORTED_CHECK and ascending(codes):
        return None  # no pass of sorting, and no gather of any column by it
    if radix <= 1 << 16 and len(codes) >= COUNTING_SORT and "numba" in sys.modules:
        from engine.counting_sort import counting_order

        return counting_order(codes, radix)
    # NumPy's stable sort of 16-bit integers is a radix sort: about 10x a comparison sort
    if radix <= 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    if radix <= 1 << 32:
        low = np.argsort((codes & 0xFFFF).astype(np.uint16), kind="stable")
        high = np.argsort((codes[low] >> 16).astype(np.uint16), kind="stable")
        return low[high]
    return np.argsort(codes, kind="stable")


# The kind of an argument only counted (`_counted_only`): its validity is read, its values never.
COUNTED = "counted"
# The kind of a DECIMAL argument of at most 18 digits (SUM and AVG only): its unscaled values
# as int64 (`engine.sources.decimal_unscaled`), summed exactly as ints, made Decimals at its
# scale (`_decimal`).
DECIMAL = "decimal"


# The kind of a TIMESTAMP argument (MIN and MAX only): microseconds since 1970 as int64, made
# datetimes where they leave the arrays; its states keep their values as the rows do (a dict
# and a sorted index of datetimes: `planner.sorted_counts` holds numbers and dates only).
TIMESTAMP = "timestamp"
# Python's datetime range in microseconds since 1970: a value past it is no datetime.
_DATETIME_US = ((datetime.datetime.min - datetime.datetime(1970, 1, 1)) // datetime.timedelta(
    microseconds=1), (datetime.datetime.max - datetime.datetime(1970, 1, 1)) //
    datetime.timedelta(microseconds=1))


# The kind of a VARCHAR argument (MIN, MAX and COUNT(DISTINCT)): each value's rank among the
# column's distinct values in their order (`_string_ranks`), made strings where they leave the
# arrays (from the sorted distinct values, an Arrow array: `BuiltGroups.dictionaries`); its
# states keep their values as the rows do (`planner.sorted_counts` holds numbers and dates).
STRING = "str"


def _string_ranks(col: Any) -> tuple[np.ndarray, np.ndarray | None, Any] | None:
    """A string column's values as their ranks among its distinct values (int64; NULLs as 0),
    its validity (None: no NULL), and the distinct values sorted (an Arrow array: rank r is
    its r-th value); None for other types. Arrow orders strings by their UTF-8 bytes, which
    is their code points' order, Python's: the ranks order as the rows' strings do."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None
    dictionary, indices = _encoded(col)
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False) if col.null_count else None
    if not len(dictionary):  # NULLs only
        return np.zeros(len(col), np.int64), valid, dictionary
    order = pc.sort_indices(dictionary)
    rank = np.empty(len(dictionary), np.int64)
    rank[order.to_numpy()] = np.arange(len(dictionary), dtype=np.int64)
    codes = (pc.fill_null(indices, 0) if valid is not None else indices).to_numpy()
    return rank[codes], valid, dictionary.take(order)


def _is_decimal(t: Any) -> bool:
    """A DECIMAL column as the engine reads it (decimal128: every value of the column at its
    one scale, so equal values are equal Decimals with one representation)."""
    import pyarrow as pa

    return bool(pa.types.is_decimal128(t))


def _is_timestamp(t: Any) -> bool:
    """A TIMESTAMP column as the engine reads it: Arrow microseconds without a time zone."""
    import pyarrow as pa

    return bool(pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None)


def _decimal(unscaled: int, scale: int) -> decimal.Decimal:
    """The Decimal of `unscaled` * 10**-scale, at that exponent: what adding the column's
    values (each at the column's scale) as Decimals gives, digit for digit."""
    return decimal.Decimal(unscaled).scaleb(-scale, DECIMAL_CONTEXT)


def _decimals(unscaled: np.ndarray, scale: int, valid: np.ndarray) -> Any:
    """A decimal128(18, scale) Arrow array of the int64 `unscaled` values (NULL where not
    `valid`): each value's 16 bytes are its low word and the sign-extending high word."""
    import pyarrow as pa
    import pyarrow.compute as pc

    words = np.empty((len(unscaled), 2), np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    out = pa.Array.from_buffers(pa.decimal128(18, scale), len(unscaled),
                                [None, pa.py_buffer(words)])
    return out if valid.all() else pc.if_else(pa.array(valid), out,
                                              pa.scalar(None, out.type))


def _counted_only(plan: IncrementalAggregates) -> set[int]:
    """The arguments that only COUNT reads (no SUM, AVG, MIN or MAX of them): of any type,
    as only whether each value is NULL matters."""
    others = {x for kind, x, _, _ in plan.accs if kind != "count"}
    others |= {y for _, _, y, _ in plan.accs if y is not None}
    return {x for kind, x, _, _ in plan.accs if kind == "count"} - others - set(plan.value_args)


def _validity_chunks(col: Any) -> tuple[list[np.ndarray], list[np.ndarray] | None, str]:
    """`_numeric_chunks` of an argument only counted: no values, each chunk's validity (None:
    no NULL in the column), and the kind `COUNTED`; for a column of any type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not col.null_count:
        return [], None, COUNTED
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    return [], [pc.is_valid(c).to_numpy(zero_copy_only=False) for c in chunks], COUNTED


def _validity(col: Any) -> tuple[None, np.ndarray | None, str]:
    """`_numeric` of an argument only counted: no values, its validity (None: no NULL), and
    the kind `COUNTED`; for a column of any type."""
    import pyarrow.compute as pc

    valid = pc.is_valid(col).to_numpy(zero_copy_only=False) if col.null_count else None
    return None, valid, COUNTED


def _numeric_chunks(col: Any) -> tuple[list[np.ndarray], list[np.ndarray] | None, str] | None:
    """`_numeric` chunk by chunk, as Arrow holds the column (no copy into one array): each
    chunk's values (NULLs as 0; ints of their own width, dates as int32 days), each chunk's
    validity (None: no NULL in the column), and the kind; None for other types and uint64."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if pa.types.is_integer(t) and not pa.types.is_uint64(t):
        kind = "int"
    elif pa.types.is_float64(t):
        kind = "float"
    elif pa.types.is_date32(t):
        kind = "date"
    elif pa.types.is_decimal128(t) and t.precision <= 18:
        kind = DECIMAL
    elif _is_timestamp(t):
        kind = TIMESTAMP
    else:
        return None
    vals: list[np.ndarray] = []
    valid: list[np.ndarray] | None = [] if col.null_count else None
    for chunk in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]):
        if kind == DECIMAL:
            unscaled = decimal_unscaled(chunk)
            if unscaled is None:
                return None
            vals.append(unscaled)
            if valid is not None:
                valid.append(pc.is_valid(chunk).to_numpy(zero_copy_only=False))
            continue
        if kind == "date":
            chunk = chunk.cast(pa.int32())  # days since 1970-01-01, the same buffer
        elif kind == TIMESTAMP:
            chunk = chunk.cast(pa.int64())  # microseconds since 1970-01-01, the same buffer
        if valid is not None:
            valid.append(pc.is_valid(chunk).to_numpy(zero_copy_only=False))
            if chunk.null_count:
                chunk = pc.fill_null(chunk, 0)
        vals.append(chunk.to_numpy())
    return vals, valid, kind


def _numpy_of(col: Any) -> np.ndarray:
    """A primitive column without NULLs as one NumPy array: each chunk's values without a copy,
    joined by NumPy. `ChunkedArray.to_numpy` joins them in Arrow's own default pool (mimalloc
    in the wheels), which `columnar.memory.arrow_system_pool` cannot change once PyArrow is
    loaded: its fresh pages cost Q1's hydration a fault per large folio, 137 MB of them."""
    import pyarrow as pa

    if not isinstance(col, pa.ChunkedArray):
        return col.to_numpy()
    if col.num_chunks == 1:
        return col.chunk(0).to_numpy()
    if col.num_chunks == 0:
        return np.zeros(0, col.type.to_pandas_dtype())
    return np.concatenate([c.to_numpy() for c in col.chunks])


def _numeric(col: Any) -> tuple[np.ndarray, np.ndarray | None, str] | None:
    """A column's values as int64 or float64 (NULLs as 0), its validity (None: no NULL), and
    its kind; None for other types (and uint64 values past int64)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t) and len(col) > col.null_count and \
                pc.max(col).as_py() >= 2 ** 63:
            return None
        kind, dtype = "int", pa.int64()
    elif pa.types.is_float64(t):
        kind, dtype = "float", pa.float64()
    elif pa.types.is_date32(t):
        kind, dtype = "date", pa.int32()
    elif _is_timestamp(t):
        kind, dtype = TIMESTAMP, pa.int64()  # microseconds since 1970-01-01
    elif pa.types.is_decimal128(t) and t.precision <= 18:
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        parts = [decimal_unscaled(c) for c in chunks]
        if any(p is None for p in parts):
            return None
        valid = pc.is_valid(col).to_numpy() if col.null_count else None
        return (np.concatenate(parts) if parts else np.zeros(0, np.int64)), valid, DECIMAL
    else:
        return None
    valid = None
    if col.null_count:
        valid = pc.is_valid(col).to_numpy()
    cast = col.cast(dtype) if col.type != dtype else col
    # fill_null copies every chunk even without a NULL: one copy (to_numpy's) is enough then
    vals = _numpy_of(pc.fill_null(cast, 0) if valid is not None else cast)
    if kind == "date":
        vals = vals.astype(np.int64)  # days since 1970-01-01
    return vals, valid, kind


