"""Aggregate states of every group built from whole Arrow columns (a view's hydration).

`build_states(plan, table, key)` returns, for the rows of `table` keyed by its columns `key`,
`{key tuple: AggregateState}`, each state equal to a new `plan(key)` that `apply_vals`d its
group's rows with diff 1 (the per-row path, `AggregateState._build_rows`, is the reference:
tests/test_aggregate_columns.py checks one against the other, state by state). It returns None
(the caller then builds from rows) when the table holds something this module does not decide
exactly. The subset:

- group keys: columns of integer, boolean, string or date type (NULL is a group), grouped by
  dictionary-encoding each column and one stable sort of the combined codes; float keys are
  left to rows (Python's dict makes -0.0 and 0.0 one key, keeping the first seen);
- aggregates: COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x) without DISTINCT, over
  integer columns (sums in int64 where max|x| * rows cannot overflow), float64 columns
  (exact sums as `_ExactSum.add_floats`; MIN/MAX only without NaN or -0.0, which the row path
  orders and keys by its own rules) and dates (COUNT, MIN, MAX).

Per group the Python work is a constant number of calls (slices, a dict and a sorted index
of the group's distinct MIN/MAX values), never a call per row.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

import numpy as np

from engine.columns_at import value_kind
from engine.sources import column_values
from planner.aggregate import AggregateState, IncrementalAggregates, _midnight
from planner.sorted_counts import SortedCounts

_FUNCS = {"count_star", "count", "sum", "avg", "min", "max"}
# A group with at least this many distinct MIN/MAX values keeps them in arrays
# (planner.sorted_counts: a few NumPy calls to build, worth it past a few hundred values).
ARRAY_INDEX_MIN = 256


def build_states(plan: IncrementalAggregates, table: Any, key: tuple[int, ...]
                 ) -> dict[Any, AggregateState] | None:
    if any(a.func not in _FUNCS or a.distinct for a in plan.aggs):
        return None
    if any(kind == "stat" for kind, *_ in plan.accs):
        return None
    n = table.num_rows
    if not n:
        return {}
    grouping = _group(table, key)
    if grouping is None:
        return None
    order, starts, keys = grouping
    sizes = np.diff(np.append(starts, n))
    # Each argument column once: values in group order, their validity, and their kind.
    args = {a for a in plan.value_args} | {x for _, x, _, _ in plan.accs}
    cols: dict[int, tuple[np.ndarray, np.ndarray | None, str]] = {}
    for x in args:
        c = _numeric(table.column(x))
        if c is None:
            return None
        vals, valid, kind = c
        if kind == "date" and any(x == y and k != "count" for k, y, _, _ in plan.accs):
            return None  # only COUNT reads a date; the binder makes no SUM of one
        cols[x] = (vals[order], None if valid is None else valid[order], kind)
    sums: dict[int, Any] = {}
    for i, (kind, x, _, _) in enumerate(plan.accs):
        vals, valid, vkind = cols[x]
        if kind == "sum" and vkind == "int":
            bound = int(np.abs(vals).max()) if len(vals) else 0
            if bound and bound * n >= 2 ** 63:
                return None
            sums[i] = np.add.reduceat(np.where(valid, vals, 0) if valid is not None else vals,
                                      starts).tolist()
        elif kind == "sum" and vkind == "float":
            sums[i] = _float_sums(vals, valid, starts)
    counts = {x: (sizes if valid is None else np.add.reduceat(valid.astype(np.int64), starts))
              for x, (_, valid, _) in cols.items()}
    distinct = {}
    for x in plan.value_args:
        d = _distinct_values(cols[x], starts, n)
        if d is None:
            return None
        distinct[x] = d
    states: dict[Any, AggregateState] = {}
    ends = np.append(starts[1:], n).tolist()
    sizes_l = sizes.tolist()
    counts_l = {x: c.tolist() for x, c in counts.items()}
    for g, (a, b) in enumerate(zip(starts.tolist(), ends, strict=True)):
        st = AggregateState(plan)
        st.rows = sizes_l[g]
        for x, (uniq, ucount, bounds, nulls) in distinct.items():
            lo, hi = bounds[g], bounds[g + 1]
            if hi - lo >= ARRAY_INDEX_MIN and x in st.index:
                # many distinct values: kept in arrays (planner.sorted_counts)
                base = uniq[lo:hi]
                sc = SortedCounts(base.astype(np.int64) if cols[x][2] == "date" else base,
                                  ucount[lo:hi], cols[x][2], nulls[g])
                st.values[x] = sc  # type: ignore[assignment]
                st.index[x] = sc.index  # type: ignore[assignment]
                continue
            present = uniq[lo:hi].tolist()
            values = st.values[x]
            values.update(zip(present, ucount[lo:hi].tolist(), strict=True))
            nn = nulls[g]
            if nn:
                values[None] = nn
            idx = st.index.get(x)
            if idx is None:
                continue
            if cols[x][2] == "date":
                # dates: _value_entry(v) is (4, v's midnight, 0, v), in v's order
                idx.update([(4, _midnight(v), 0, v) for v in present])
            else:
                # numbers without NaN: _value_entry(v) is (2, v, 0, v), in v's order
                idx.update(list(zip(repeat(2), present, repeat(0), present)))
        for i in plan.direct:
            kind, x, _, _ = plan.accs[i]
            acc = st.accs[i]
            if kind == "count":
                acc[0] = counts_l[x][g]
                continue
            vals, valid, vkind = cols[x]
            if vkind == "int":
                acc.n = counts_l[x][g]
                acc.exact = sums[i][g]
            elif sums[i] is not None:
                acc.n, acc.n_float, acc.scaled, acc.nan, acc.pinf, acc.ninf = sums[i][g]
            else:
                part = vals[a:b] if valid is None else vals[a:b][valid[a:b]]
                if not acc.add_floats(part):
                    acc.__init__()  # type: ignore[misc]
                    for v in part.tolist():
                        acc.add(v, 1)
        states[keys[g]] = st
    return states


def _float_sums(vals: np.ndarray, valid: np.ndarray | None, starts: np.ndarray
                ) -> list[tuple[int, int, int, int, int, int]] | None:
    """Per group, `_ExactSum`'s (n, n_float, scaled, nan, pinf, ninf) over the group's
    non-NULL floats, exactly as `add` of each value computes them: `scaled` is the exact sum
    times 2**1074. Each finite value is M * 2**E with an integer |M| < 2**53 (`frexp`); the
    M of one group and one exponent are summed in int64 halves (exact for 2**36 values), so
    the Python work is a shift and an add per (group, exponent), not per value. None if a
    sum would not be an integer at that scale (it always is: kept as a guard)."""
    from planner.aggregate import _FLOAT_SCALE_BITS

    groups = len(starts)
    present = np.ones(len(vals), dtype=bool) if valid is None else valid
    finite = np.isfinite(vals) & present
    n = np.add.reduceat(present.astype(np.int64), starts).tolist()
    nan = np.add.reduceat((np.isnan(vals) & present).astype(np.int64), starts).tolist()
    pinf = np.add.reduceat((vals == np.inf) & present, starts, dtype=np.int64).tolist()
    ninf = np.add.reduceat((vals == -np.inf) & present, starts, dtype=np.int64).tolist()
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
            keys = nonzero.tolist()
            high = high_f[nonzero].astype(np.int64).tolist()
            low = low_f[nonzero].astype(np.int64).tolist()
        else:
            order = np.argsort(bucket, kind="stable")
            b, mant = bucket[order], mant[order]
            first = np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))
            keys = b[first].tolist()
            high = np.add.reduceat(mant >> 26, first).tolist()  # |M >> 26| < 2**27
            low = np.add.reduceat(mant & ((1 << 26) - 1), first).tolist()
        for key, hi_sum, lo_sum in zip(keys, high, low, strict=True):
            g, k = divmod(key, span)
            total = (hi_sum << 26) + lo_sum
            up = k + lo_e + _FLOAT_SCALE_BITS
            if up >= 0:
                scaled[g] += total << up
            elif total % (1 << -up):
                return None
            else:
                scaled[g] += total >> -up
    return [(n[g], n[g], scaled[g], nan[g], pinf[g], ninf[g]) for g in range(groups)]


def _group(table: Any, key: tuple[int, ...]
           ) -> tuple[np.ndarray, np.ndarray, list[tuple[Any, ...]]] | None:
    """The rows' order grouped by key (stable), each group's first position in it, and each
    group's key tuple; None for a key type left to rows."""
    import pyarrow.compute as pc

    n = table.num_rows
    codes = np.zeros(n, dtype=np.int64)
    dicts: list[list[Any]] = []
    radix = 1
    for i in key:
        col = table.column(i)
        if value_kind(col.type) not in ("int", "bool", "str", "date"):
            return None
        enc = pc.dictionary_encode(col.combine_chunks(), null_encoding="encode")
        size = len(enc.dictionary)
        radix *= max(size, 1)
        if radix >= 2 ** 62:
            return None
        codes = codes * size + enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        dicts.append(column_values(enc.dictionary))
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_codes[1:] != sorted_codes[:-1])))
    group_codes = sorted_codes[starts]
    # each group's key: its code split back into one dictionary index per column
    columns = []
    for d in reversed(dicts):
        group_codes, j = np.divmod(group_codes, len(d))
        columns.append(list(map(d.__getitem__, j.tolist())))
    keys = list(zip(*reversed(columns), strict=True)) if columns else [()] * len(starts)
    return order, starts, keys


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
    else:
        return None
    valid = None
    if col.null_count:
        valid = pc.is_valid(col).to_numpy()
    vals = pc.fill_null(col.cast(dtype), 0).to_numpy()
    if kind == "date":
        vals = vals.astype(np.int64)  # days since 1970-01-01
    return vals, valid, kind


def _distinct_values(col: tuple[np.ndarray, np.ndarray | None, str], starts: np.ndarray,
                     n: int) -> tuple[np.ndarray, np.ndarray, list[int], list[int]] | None:
    """Per group, the distinct non-NULL values in ascending order with their counts: arrays of
    all groups' (value, count) one after another, each group's bounds in them, and each
    group's NULL count. None for floats holding a NaN or -0.0."""
    vals, valid, kind = col
    if kind == "float" and (np.isnan(vals).any() or (np.signbit(vals) & (vals == 0)).any()):
        return None
    group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    nulls = [0] * len(starts)
    if valid is not None:
        nulls = np.bincount(group[~valid], minlength=len(starts)).tolist()
        vals, group = vals[valid], group[valid]
    lo = int(vals.min()) if len(vals) and kind != "float" else 0
    span = int(vals.max()) - lo + 1 if len(vals) and kind != "float" else 0
    if span and span * len(starts) < 2 ** 62:
        # integers: (group, value) as one int64, so one sort finds the distinct pairs
        combined, ucount = np.unique(group * span + (vals - lo), return_counts=True)
        ugroup, offset = np.divmod(combined, span)
        uniq = offset + lo
    else:
        # what np.lexsort((vals, group)) gives, in about half its time: stable sorts compose
        order = np.argsort(vals, kind="stable")
        order = order[np.argsort(group[order], kind="stable")]
        v, g = vals[order], group[order]
        new = np.concatenate(([True], (v[1:] != v[:-1]) | (g[1:] != g[:-1]))) if len(v) else \
            np.zeros(0, dtype=bool)
        first = np.flatnonzero(new)
        uniq = v[first]
        ucount = np.diff(np.append(first, len(v)))
        ugroup = g[first]
    if kind == "date":
        uniq = uniq.astype("datetime64[D]")  # `tolist` gives datetime.date objects
    bounds = np.searchsorted(ugroup, np.arange(len(starts) + 1)).tolist()
    return uniq, ucount, bounds, nulls
