"""A half join of columns: a stream's rows at one time, as columns, looked up in keyed batches
that hold their rows as columns too (a hydrating delta join).

`join_columns(stream, key, batches, t0, strict)` is `engine.operators.half_join`'s step for one
`ColumnsAt` stream payload at time `t0` whose join function concatenates the two rows: for each
batch whose time passes the half join's test (`s < t0` when `strict`, else `s <= t0`) the pairs
of rows with equal keys, as one Arrow table of the stream row's columns then the batch row's,
at the stream's time with the product of the two diffs. Invariant: the rows of the returned
payloads are exactly the multiset the row path produces from the same updates (`f(d, w)` for
every matching pair, diff `r * q`); where that cannot be decided on columns it returns None and
the caller takes the row path. The subset: batches that are `KeyedRowsBatch`es holding a table
(engine.rows_batch), and key columns of one kind on both sides: integers, strings or dates,
without NULL (Python's `None == None` would match what SQL's join never does: the planner
filters NULL keys out before, and a NULL here is left to the rows).

`join_tables(new, others, new_is_left)` is the same for a binary join (`engine.operators.join`):
two batches holding tables, or one such batch and a *set of keys*: a small batch whose every
row is its one-column key, at one time with one diff (an IN subquery's or a decorrelated
LATERAL's outer keys, arranged from a reduce's output). Each matched row then pairs with
exactly one key row, equal to its own key column, so the output is the matched rows with
that column once more, and no row of the table is made a Python tuple.

Why: at hydration every input of a delta join changes at once, and its first path joins every
row of one input with the others; probed row by row that is most of a many-way view's
hydration. On columns it is a sort and a search per key column (one integer key) or Arrow's
hash join (any other key), and the output stays columns for the next step.
"""

from __future__ import annotations

import datetime
import sys
from typing import Any

import numpy as np

from engine.columns_at import ColumnsAt, exact_array, keyed_columns_split, value_kind
from engine.lattice import join
from engine.rows_batch import KeyedRowsBatch, ascending, int_column

# A cross join on columns (`_with_few_rows`) takes the other side's rows as constants when
# it has at most this many: a scalar subquery's one value, not a second table.
CROSS_ROWS = 8
# A batch of rows joins a batch of columns as a table (`_rows_as_table`) from this many rows,
# and from a `TABLE_PER_ROW`th of the table's rows (Q21's 19,175 distinct keys against
# 1.2M lineitem rows: 24 ms as tables, 150 ms by rows; one written row against them, a
# pass over the table's key column for a single probe).
ROWS_AS_TABLE = 4096
TABLE_PER_ROW = 64
# More output pairs than this are left to the row path, which charges the run's budget as it
# goes (engine.budget): a runaway join fails there before it fills memory.
MAX_PAIRS = 20_000_000
# An int key whose right side's values span at most this many times the keys of both sides
# is matched by counting per value (`_ranges_dense`), not by binary search.
DENSE_SPAN = 4


def join_columns(stream: ColumnsAt, key: tuple[int, ...], batches: list[Any], t0: int,
                 strict: bool) -> tuple[list[ColumnsAt], ColumnsAt | None, list[Any]] | None:
    """The half join of `stream` with the batches that hold columns (see the module doc),
    and what is left to the row path: the stream rows whose key is among the other batches'
    keys (a semi-join on columns: at hydration those are small, a reduce's output say) with
    those batches. None when even that cannot be decided on columns (then all by rows)."""
    import pyarrow as pa

    chosen, others = [], []
    for b in batches:
        if not b.records:
            continue
        if b.__class__ is not KeyedRowsBatch or b.table is None:
            others.append(b)
            continue
        s = b.time[0]
        if s < t0 or (not strict and s == t0):
            chosen.append(b)
    out = []
    left = stream.table
    for b in chosen:
        pairs = _matches(left, key, b.table, b.key)
        if pairs is None:
            return None
        i, j = pairs
        if not len(i):
            continue
        lt, rt = left.take(pa.array(i)), b.table.take(pa.array(j))
        cols = lt.columns + rt.columns
        out.append(ColumnsAt(pa.table(cols, names=[f"c{n}" for n in range(len(cols))]),
                             stream.time, stream.diff * b.diff))
    if not others:
        return out, None, []
    rest = _semi_join(stream, key, others)
    if rest is None:
        if out:
            return None  # the rows of every batch, rather than columns for some
        rest = stream
    return out, rest, others


def _semi_join(stream: ColumnsAt, key: tuple[int, ...], batches: list[Any]) -> ColumnsAt | None:
    """The stream rows whose key is a key of one of `batches` (a superset of those that
    join: times are tested by the row path), for one key column of ints or strings whose
    batch keys are all of that exact class; None otherwise."""
    if len(key) != 1:
        return None
    col = stream.table.column(key[0])
    kind = _kind(col)
    cls = {"int": int, "str": str}.get(kind or "")
    if cls is None:
        return None
    values = []
    for b in batches:
        keys = b.updates.keys()
        if len(keys) > len(stream):
            return None  # as many probes as rows: the row path's lookups are as cheap
        for k in keys:
            if k.__class__ is not tuple or len(k) != 1 or k[0].__class__ is not cls:
                return None  # e.g. 1.0 == 1 by Python's rules: the rows decide
            values.append(k[0])
    mask = _member_mask(col, cls, values)
    if mask is None:
        return None
    return ColumnsAt(stream.table.filter(mask), stream.time, stream.diff, stream.key)


def _member_mask(col: Any, cls: type, values: list[Any]) -> Any:
    """Which values of key column `col` (of `_kind` int, str or date) are among `values`,
    each of exact class `cls`; None for an int column `int_column` refuses."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if cls is int:
        ints = int_column(col)
        if ints is None:
            return None
        # a value outside int64 equals no value of the column
        value_set = pa.array([v for v in values if -(2 ** 63) <= v < 2 ** 63], pa.int64())
        return pc.is_in(pa.array(ints), value_set=value_set)
    return pc.is_in(col, value_set=pa.array(values, col.type))


def join_tables(new: Any, others: list[Any], new_is_left: bool) -> ColumnsAt | None:
    """A binary join's step on columns: `new`'s rows joined with every batch of `others`,
    each output row the left row's columns then the right row's, at the lattice join of the
    two batches' times with the product of their diffs, as one payload; None (the row path)
    unless each pair is two batches holding their rows as tables (`KeyedRowsBatch`) with keys
    in the subset, or one such batch and a set of keys (`_with_key_set`), and the outputs
    share one time and one diff (a hydration: they do)."""
    import pyarrow as pa

    new_table = new.__class__ is KeyedRowsBatch and new.table is not None
    parts, stamp = [], None
    for b in others:
        if not b.records:
            continue
        b_table = b.__class__ is KeyedRowsBatch and b.table is not None
        if new_table and b_table:
            got = _two_tables(new, b, new_is_left)
        elif (new_table or b_table) and not (new if new_table else b).key:
            rows, few = (new, b) if new_table else (b, new)
            crossed = _with_few_rows(rows, few, (rows is new) == new_is_left)
            if crossed is None:
                return None
            cols, (t, r) = crossed
            got = (join(rows.time, t), rows.diff * r), cols
        elif new_table or b_table:
            rows, keys = (new, b) if new_table else (b, new)
            keyed = _with_key_set(rows, keys)
            if keyed is None:
                # a batch of rows (a reduce's output, say): made columns, then as two tables
                other = _rows_as_table(keys, rows.records)
                if other is None:
                    return None
                got = _two_tables(*((new, other) if rows is new else (other, b)), new_is_left)
            else:
                matched, (t, r) = keyed
                # the key set's row is its key, which equals the matched row's key column
                kcol = matched.column(rows.key[0])
                got = (join(rows.time, t), rows.diff * r), (
                    matched.columns + [kcol] if (rows is new) == new_is_left else
                    [kcol] + matched.columns) if matched.num_rows else None
        else:
            return None
        if got is None:
            return None
        at, cols = got
        if cols is None:
            continue  # nothing matched
        if stamp is not None and at != stamp:
            return None
        stamp = at
        parts.append(pa.table(cols, names=[f"c{n}" for n in range(len(cols))]))
    if stamp is None:
        if not new_table:
            return None
        return ColumnsAt(new.table.slice(0, 0), new.time, new.diff)  # nothing joined
    if any(p.schema != parts[0].schema for p in parts):
        return None  # parts made from rows (a decimal's precision, a column of NULLs) differ
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    return ColumnsAt(table, stamp[0], stamp[1])


def _two_tables(new: Any, b: Any, new_is_left: bool
                ) -> tuple[tuple[Any, int], list[Any] | None] | None:
    """The join of two batches holding tables (`.table`, `.key`, `.time`, `.diff`): the
    output's (time, diff) and its columns, left's then right's (None: no pair matched); None
    when a key column is outside `_matches`' subset."""
    import pyarrow as pa

    left, right = (new, b) if new_is_left else (b, new)
    pairs = _matches(left.table, left.key, right.table, right.key)
    if pairs is None:
        return None
    i, j = pairs
    at = (join(new.time, b.time), new.diff * b.diff)
    if not len(i):
        return at, None
    return at, left.table.take(pa.array(i)).columns + right.table.take(pa.array(j)).columns


def _with_few_rows(rows: Any, few: Any, rows_left: bool) -> tuple[list[Any], tuple[Any, int]] | None:
    """A cross join (the empty key) of the table of `rows` with `few`, a batch of at most
    `CROSS_ROWS` rows all at one time with one diff (an uncorrelated scalar subquery's one
    value): the output's columns, the table's once per row of `few` beside that row's
    values repeated, and `few`'s (time, diff). None when `few` is not such a batch or a
    value does not convert to Arrow exactly (`exact_array`)."""
    import pyarrow as pa

    updates = getattr(few, "updates", None)
    if updates is None or few.records > CROSS_ROWS or set(updates) != {()}:
        return None
    entries = updates[()]
    if len({(t, r) for _, t, r in entries}) != 1:
        return None
    if len({len(row) for row, _, _ in entries}) != 1:
        return None
    # each column of `few` as one array (its rows' values of one type), so that every part
    # below has one schema
    consts = [exact_array(col) for col in zip(*(row for row, _, _ in entries), strict=True)]
    if any(c is None for c in consts):
        return None
    n = rows.table.num_rows
    tables = []
    for i in range(len(entries)):
        repeated = [c.take(np.full(n, i, dtype=np.int64)) for c in consts]
        cols = rows.table.columns + repeated if rows_left else repeated + rows.table.columns
        tables.append(pa.table(cols, names=[f"c{i}" for i in range(len(cols))]))
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    _, t, r = entries[0]
    return table.columns, (t, r)


def _rows_as_table(b: Any, table_rows: int) -> ColumnsAt | None:
    """A batch of rows at one time, all insertions or all retractions, whose keys are
    columns of its rows (an arrangement's), as keyed columns (`keyed_columns_split`, which
    checks that every row converts exactly and every key is its row's columns), when it
    holds at least `ROWS_AS_TABLE` rows and a `TABLE_PER_ROW`th of the `table_rows` it
    joins with; None otherwise. Why the sizes: matching a table's key column costs a pass
    over it (a sort unless it is in order), while the row path probes once per row, so a
    write's few rows against a hydrated table of millions stay rows."""
    updates = getattr(b, "updates", None)
    if updates is None or b.records < max(ROWS_AS_TABLE, table_rows // TABLE_PER_ROW):
        return None
    split = keyed_columns_split([((k, v), t, r) for k, es in updates.items() for v, t, r in es])
    if split is None or (split[0] is None) == (split[1] is None):
        return None
    return split[0] or split[1]


def _with_key_set(new: Any, b: Any) -> tuple[Any, tuple[Any, int]] | None:
    """The rows of `new`'s table whose key is a key of `b`, when `b` is a set of keys: every
    row of `b` is its one-column key (what an IN subquery, EXISTS or a decorrelated outer
    key set arranges), all at one time with one diff, and every key is of the exact Python
    class of `new`'s key column (ints, strings or dates: by Python's rules 1.0 == 1, so
    anything else is left to the rows). Then each matched row pairs with exactly one row of
    `b`, equal to the matched row's key. Returns those rows and b's (time, diff); None when
    `b` is not such a set."""

    if len(new.key) != 1 or b.records > new.records or not hasattr(b, "updates"):
        return None  # as many probes as rows: the row path's lookups are as cheap
    col = new.table.column(new.key[0])
    kind = _kind(col)
    cls = {"int": int, "str": str, "date": datetime.date}.get(kind or "")
    if cls is None:
        return None
    stamp = None
    values = []
    for k, entries in b.updates.items():
        if k.__class__ is not tuple or len(k) != 1 or k[0].__class__ is not cls:
            return None
        for row, t, r in entries:
            if row != k or row[0].__class__ is not cls or (stamp is not None and
                                                           (t, r) != stamp):
                return None
            stamp = (t, r)
        values.append(k[0])
    if stamp is None:
        return None
    mask = _member_mask(col, cls, values)
    if mask is None:
        return None
    return new.table.filter(mask), stamp


def _kind(col: Any) -> str | None:
    """A key column's kind if the subset joins it (int, str, date, no NULL), else None."""
    kind = value_kind(col.type)
    return kind if not col.null_count and kind in ("int", "str", "date") else None


def _matches(left: Any, lkey: tuple[int, ...], right: Any, rkey: tuple[int, ...]
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """Row numbers (i, j) of every pair with left's columns `lkey` equal to right's `rkey`;
    None when a key column is outside the subset."""
    import pyarrow as pa

    if not lkey:  # a cross join: every pair
        n, m = left.num_rows, right.num_rows
        if n * m > MAX_PAIRS:
            return None
        return np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    lcols = [left.column(k) for k in lkey]
    rcols = [right.column(k) for k in rkey]
    kinds = []
    for a, b in zip(lcols, rcols, strict=True):
        ka, kb = _kind(a), _kind(b)
        if ka is None or ka != kb:
            return None
        kinds.append(ka)
    if kinds == ["int"]:
        la, ra = int_column(lcols[0]), int_column(rcols[0])
        if la is None or ra is None:
            return None
        return _sorted_matches(la, ra)
    # Any other key: Arrow's hash join of the key columns and the row numbers.
    common = [pa.int64() if k == "int" else pa.string() if k == "str" else pa.date32()
              for k in kinds]
    names = [f"k{n}" for n in range(len(kinds))]
    lt = pa.table([c.cast(t) for c, t in zip(lcols, common, strict=True)]
                  + [pa.array(np.arange(left.num_rows))], names=names + ["__i"])
    rt = pa.table([c.cast(t) for c, t in zip(rcols, common, strict=True)]
                  + [pa.array(np.arange(right.num_rows))], names=names + ["__j"])
    joined = lt.join(rt, keys=names, join_type="inner", use_threads=False)
    if joined.num_rows > MAX_PAIRS:
        return None
    return (joined.column("__i").to_numpy(), joined.column("__j").to_numpy())


def _sorted_matches(left: np.ndarray, right: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """Pairs of equal int64 keys: the right side in key order, and each left key's range of
    it, by counting when the right keys are dense (a table's ids: a gather per left key,
    `_ranges_dense`) or else by binary search. The pairs come by left row, then in that
    order."""
    order = np.arange(len(right)) if ascending(right) else _stable_order(right)
    ranges = _ranges_dense(left, right)
    if ranges is None:
        s = right[order]
        lo = np.searchsorted(s, left, "left")
        counts = np.searchsorted(s, left, "right") - lo
    else:
        lo, counts = ranges
    total = int(counts.sum())
    if total > MAX_PAIRS:
        return None
    i = np.repeat(np.arange(len(left)), counts)
    # each left row's range of the sorted right side, back to back
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    j = order[starts + np.arange(total)]
    return i, j


def _ranges_dense(left: np.ndarray, right: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """For each left key, the first position of its equal keys in `right` sorted and how many
    there are, by a count per value of right's range: None when that range spans more than
    `DENSE_SPAN` times the keys of both sides (then a binary search costs less memory)."""
    if not len(right):
        return None
    low, high = int(right.min()), int(right.max())
    span = high - low + 1
    if span > DENSE_SPAN * (len(left) + len(right)):
        return None
    per_value = np.bincount(right - low, minlength=span)
    first = np.cumsum(per_value) - per_value
    inside = (left >= low) & (left <= high)
    at = np.where(inside, left - low, 0) if not inside.all() else left - low
    counts = per_value[at]
    if not inside.all():
        counts = np.where(inside, counts, 0)
    return first[at], counts


def _stable_order(values: np.ndarray) -> np.ndarray:
    """The stable sorting permutation of int64 `values`: by counting for dense ids in a process
    with numba loaded (`engine.counting_sort`), else NumPy's stable sort."""
    if "numba" in sys.modules:
        from engine.counting_sort import dense_order

        order = dense_order(values)
        if order is not None:
            return order
    return np.argsort(values, kind="stable")
